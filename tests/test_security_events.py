"""Events under attack from the recorder's own peers (issue 41), driven the way it comes.

A peer here is anyone who may publish: a process on the ZeroMQ endpoint, an
MQTT client the broker lets publish (retained messages included). What they
send must be counted, logged and dropped, never stop the recorder, never grow
its memory or its event log past the stated bounds, and never protect more
than the config allows. The event log survives a power cut in any line and is
owner-writable only under the unit's umask.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from hyperframes.cli.main import main as cli_main
from hyperframes.events import (
    EVENT_LOG_NAME,
    MAX_EVENT_BYTES,
    MAX_LOG_LINE,
    Event,
    SegmentSpan,
    event_stream_info,
    log_line,
    parse_event_body,
    parse_log_line,
    read_event_log,
    read_file_events,
)
from hyperframes.format.streams import FileMetadata
from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.events.log import EventLogWriter
from hyperframes.recorder.ingest.publisher import encode_mqtt_payload
from hyperframes.recorder.ingest.wire import zmq_frames
from hyperframes.recorder.segments import list_segments
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter, WriteFrame

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import MS, T0, mqtt_broker, run, traffic, wait_for  # noqa: F401
from test_events_daemon import endpoint, ev_config, file_events, publish

S = 1_000_000_000
HUGE = b'{"name":"x","pre_s":1' + b"0" * 400 + b"}"  # float() raised OverflowError
DEEP = b'{"name":"x","payload":' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # json: RecursionError
POISONS = (HUGE, DEEP)


def send_raw(ep: str, bodies: tuple[bytes, ...], t0: int = T0 + 50 * MS) -> None:
    """Event messages with these bodies, as a peer would put them on the socket."""
    s: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUSH)
    s.setsockopt(zmq.LINGER, 5000)
    s.connect(ep)
    for i, body in enumerate(bodies):
        s.send_multipart(zmq_frames("events", body, t0 + i * MS, seq=i))
    s.close()


# --- 1. one message stopped the recorder ----------------------------------------------


def test_a_huge_number_or_deep_nesting_over_zmq_is_counted_and_recording_goes_on(
    tmp_path: Path,
) -> None:
    assert len(DEEP) <= MAX_EVENT_BYTES  # inside the size limit: the parser must hold
    cfg = parse_config(ev_config(tmp_path))
    frames = traffic(1.0, ("imu",))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(send_raw, ep, POISONS)
            await asyncio.to_thread(publish, ep, frames, [(T0 + 500 * MS, "fine", {})])
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total)
        return rec

    rec = run(main())
    assert rec.failed is None
    assert rec.stats.events.malformed == {"zmq": 2}
    assert rec.stats.dropped == 0
    assert [e.name for _, e in file_events(tmp_path / "out")] == ["fine"]


def test_a_retained_poison_on_the_broker_does_not_stop_the_recorder_at_any_start(
    tmp_path: Path,
    mqtt_broker: int,  # noqa: F811
) -> None:
    import paho.mqtt.publish as mqtt_publish

    d = ev_config(tmp_path)
    del d["zmq"]
    d["mqtt"] = {"host": "127.0.0.1", "port": mqtt_broker, "client_id": f"poison-{os.getpid()}"}
    d["events"]["topic"] = "vehicle/testcar/events"
    cfg = parse_config(d)
    mqtt_publish.single(  # retained: the broker hands it to every new subscriber
        "vehicle/testcar/events",
        bytes(encode_mqtt_payload(HUGE, T0, seq=0)),
        qos=1,
        retain=True,
        hostname="127.0.0.1",
        port=mqtt_broker,
    )

    async def start(n: int) -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.mqtt is not None
            await asyncio.wait_for(rec.mqtt.connected.wait(), 10)
            imu = [
                {
                    "topic": "imu",
                    "payload": bytes(
                        encode_mqtt_payload(np.full(6, i, "<f8").tobytes(), T0 + i * 5 * MS, seq=i)
                    ),
                    "qos": 1,
                }
                for i in range(1 + 100 * n, 51 + 100 * n)
            ]
            deep = bytes(encode_mqtt_payload(DEEP, T0 + 2 * MS, seq=1000 + n))
            imu.append({"topic": "vehicle/testcar/events", "payload": deep, "qos": 1})
            await asyncio.to_thread(
                mqtt_publish.multiple, imu, hostname="127.0.0.1", port=mqtt_broker
            )
            await wait_for(lambda: rec.stats.frames == 50 and sum(
                rec.stats.events.malformed.values()) == 2)  # fmt: skip
        return rec

    for n in range(2):  # it used to exit 1 at every start
        rec = run(start(n))
        assert rec.failed is None, n
        assert rec.stats.events.malformed == {"mqtt": 2}


# --- 2. and 3. the event log ----------------------------------------------------------


def biggest_event(t_ns: int) -> Event:
    """A valid event whose stored JSON is exactly the largest allowed (its log line too)."""
    base = len(Event(t_ns, "big", source="zmq", clock="host", payload="").to_json())
    body = json.dumps({"name": "big", "payload": "a" * (MAX_EVENT_BYTES - base)}).encode()
    ev = parse_event_body(body, t_ns, clock="host", source="zmq")
    assert len(ev.to_json()) == MAX_EVENT_BYTES
    return ev


def test_a_power_cut_in_a_line_over_64_kib_cuts_that_line_only(tmp_path: Path) -> None:
    w = EventLogWriter(tmp_path, 64 << 20)
    for i in range(3):
        w.append_segment(SegmentSpan(f"s{i}.hf", i * S, (i + 1) * S - 1), lambda: ())
        assert w.append_event(Event(i * S + 1, f"e{i}"), lambda: ())
    assert w.append_event(biggest_event(3 * S), lambda: ())
    line = log_line(biggest_event(4 * S))
    assert 64 * 1024 < len(line) <= MAX_LOG_LINE
    fd = os.open(tmp_path / EVENT_LOG_NAME, os.O_WRONLY | os.O_APPEND)
    try:  # the append a power cut stopped: more than 64 KiB of a line, no newline
        os.write(fd, line[: len(line) - 3])
        os.fsync(fd)
    finally:
        os.close(fd)

    again = EventLogWriter(tmp_path, 64 << 20)
    assert [e.name for e in again.events] == ["e0", "e1", "e2", "big"]
    assert set(again.spans) == {"s0.hf", "s1.hf", "s2.hf"}
    assert (tmp_path / EVENT_LOG_NAME).read_bytes().endswith(b"\n")
    log = read_event_log(tmp_path)
    assert log.bad_lines == 0 and len(log.events) == 4


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_compaction_under_the_units_umask_leaves_the_log_owner_writable(tmp_path: Path) -> None:
    line = len(log_line(Event(0, "e0000")))
    with umask(0o007):  # deploy/hyperframes-recorder.service: UMask=0007
        w = EventLogWriter(tmp_path, 12 * line)
        existing: set[str] = set()
        for i in range(30):
            name = f"seg{i:04d}.hf"
            w.append_segment(SegmentSpan(name, i * S, (i + 1) * S - 1), lambda: existing)
            w.append_event(Event(i * S + S // 2, f"e{i:04d}"), lambda: existing)
            existing.clear()
            existing.add(name)  # the disk policy keeps only the newest
    assert w.compactions >= 1
    mode = stat.S_IMODE((tmp_path / EVENT_LOG_NAME).stat().st_mode)
    assert mode == 0o640, oct(mode)
    assert not [p.name for p in tmp_path.iterdir() if p.name != EVENT_LOG_NAME]  # no .tmp left


def test_a_log_made_group_writable_by_an_older_version_is_made_owner_only(tmp_path: Path) -> None:
    (tmp_path / EVENT_LOG_NAME).write_bytes(log_line(Event(1, "old")))
    (tmp_path / EVENT_LOG_NAME).chmod(0o660)
    EventLogWriter(tmp_path, 1 << 20)
    assert stat.S_IMODE((tmp_path / EVENT_LOG_NAME).stat().st_mode) == 0o640


def poisoned_log(out: Path) -> None:
    """An event log whose lines a hostile or broken writer made: none may stop a reader."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        log_line(Event(T0 + 100 * MS, "good", pre_s=0.1, post_s=0.1)),
        b'{"type":"event","t_ns":1,"name":"x","pre_s":1' + b"0" * 400 + b"}\n",
        b'{"type":"event","t_ns":1,"name":"x","payload":' + b"[" * 30_000 + b"]" * 30_000 + b"}\n",
        b'{"type":"event","t_ns":' + b"9" * 30 + b',"name":"x"}\n',
        b'{"type":"event","t_ns":1,"name":"x","source":' + b"[" * 60 + b"]" * 60 + b"}\n",
        b'{"type":"segment","name":"a.hf","start_ns":1' + b"0" * 400 + b',"end_ns":2}\n',
        b"\xff\xfe\n",
        b'{"type":"event","t_ns":1,"name":"odd\\n"}\n',
        log_line(Event(T0 + 200 * MS, "also_good")),
    ]
    (out / EVENT_LOG_NAME).write_bytes(b"".join(lines))


def test_a_poisoned_log_line_stops_neither_record_nor_events_nor_upload(tmp_path: Path) -> None:
    out = tmp_path / "out"
    poisoned_log(out)
    log = read_event_log(out)
    assert [e.name for e in log.events] == ["good", "also_good"] and log.bad_lines == 7

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["events", str(out), "--json"]) == 0
    assert [row["name"] for row in json.loads(buf.getvalue())] == ["good", "also_good"]

    d = ev_config(tmp_path)
    d["upload"] = {"dest": str(tmp_path / "depot")}
    cfg = parse_config(d)
    frames = traffic(1.0, ("imu",))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames))
        return rec

    rec = run(main())
    assert rec.failed is None and rec.stats.dropped == 0
    from hyperframes.recorder.upload.service import UploadService

    svc = UploadService(cfg, cfg.upload)
    assert svc.run_once() == 0
    assert sorted(p.name for p in (tmp_path / "depot").rglob("*.hf")) == sorted(
        p.name for p in list_segments(out, "testcar")
    )


# --- 4. and 6. bounds -----------------------------------------------------------------


def event_flood(n: int, size: int, t0: int) -> list[tuple[int, str, dict[str, Any]]]:
    return [(t0 + i * MS, "spam", {"payload": "x" * size}) for i in range(n)]


def test_the_event_log_and_the_events_in_memory_stay_within_their_bounds(
    tmp_path: Path,
) -> None:
    cap = 1 << 20
    cfg = parse_config(ev_config(tmp_path, events={
        "log_max_mb": 1, "log_max_events": 100_000,
        "peers": {"per_s": 100_000, "burst": 100_000}}))  # fmt: skip
    frames = traffic(3.0, ("imu",))
    flood = event_flood(3000, 16 * 1024, T0 + 10 * MS)  # 48 MiB of accepted events
    sizes: list[tuple[int, int]] = []

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            task = asyncio.create_task(asyncio.to_thread(publish, ep, frames, flood))
            while not task.done():
                assert rec.sink is not None
                held = rec.sink.events.log.events
                sizes.append((len(held), sum(len(log_line(e)) for e in list(held))))
                await asyncio.sleep(0.05)
            await task
            await wait_for(lambda: rec.stats.frames == len(frames)
                           and rec.stats.events.total == len(flood), timeout=30)  # fmt: skip
        return rec

    rec = run(main())
    ev = rec.stats.events
    assert rec.failed is None and rec.stats.dropped == 0
    assert (tmp_path / "out" / EVENT_LOG_NAME).stat().st_size <= cap
    assert max(b for _, b in sizes) <= cap  # what memory holds is what the log holds
    assert ev.log_full > 0 and ev.log_full + len(read_event_log(tmp_path / "out").events) >= (
        len(flood) - 1
    )  # every event is either logged or counted as refused
    assert ev.written == len(flood)  # and every one is still in its segment


def test_the_events_in_memory_cost_about_their_json_whatever_the_payload(tmp_path: Path) -> None:
    """``[{}, {}, ...]`` is 3 bytes a dict in JSON and ~70 as Python objects: held as text."""
    import tracemalloc

    body = json.dumps({"name": "x", "payload": [{}] * 15_000}).encode()
    raw = parse_event_body(body, 5, clock="host", source="zmq", raw_payload=True)
    parsed = parse_event_body(body, 5, clock="host", source="zmq")
    assert raw.to_json() == parsed.to_json() and log_line(raw) == log_line(parsed)
    assert raw.to_dict() == parsed.to_dict() and parse_log_line(log_line(raw)) == parsed
    cap = 512 << 10
    w = EventLogWriter(tmp_path, cap, max_events=100_000)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    n = 0
    for i in range(12):  # parsed here, held by the log as text
        n += w.append_event(parse_event_body(body, i, clock="host", source="mark",
                                             raw_payload=True), lambda: ())  # fmt: skip
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    logged = (tmp_path / EVENT_LOG_NAME).stat().st_size
    assert 5 < n < 12 and logged <= cap
    assert held < 1.5 * logged, (held, logged)  # parsed, it would be ~24x


def test_a_peer_flood_that_fills_its_half_of_the_log_leaves_room_for_mark(tmp_path: Path) -> None:
    w = EventLogWriter(tmp_path, 64 * 1024, max_events=1000)
    segs = {"s.hf"}
    w.append_segment(SegmentSpan("s.hf", 0, 100 * S), lambda: segs)
    taken = sum(w.append_event(Event(i * MS, "spam", source="zmq", payload="x" * 500),
                               lambda: segs) for i in range(200))  # fmt: skip
    assert 0 < taken < 200 and w.refused == 200 - taken  # the peers' half is full
    for i in range(20):  # the owner's marks and the rules still protect
        assert w.append_event(Event(50 * S + i, "bookmark", source="mark"), lambda: segs)
    assert w.append_event(Event(60 * S, "hard_brake", source="rule"), lambda: segs)
    assert (tmp_path / EVENT_LOG_NAME).stat().st_size <= 64 * 1024


def test_a_peer_flood_is_rate_limited_and_counted(tmp_path: Path) -> None:
    cfg = parse_config(ev_config(tmp_path, events={"peers": {"per_s": 10, "burst": 50}}))
    frames = traffic(1.0, ("imu",))
    flood = event_flood(500, 10, T0 + 10 * MS)

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, flood)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total
                           + rec.stats.events.rate_limited == len(flood))  # fmt: skip
        return rec

    rec = run(main())
    ev = rec.stats.events
    assert 50 <= ev.total <= 80 and ev.rate_limited == len(flood) - ev.total


def test_a_peer_cannot_protect_more_than_the_config_allows(tmp_path: Path) -> None:
    cfg = parse_config(ev_config(tmp_path, events={
        "pre_s": 1, "post_s": 2, "names": {"hard_brake": {"pre_s": 5, "post_s": 3}}}))  # fmt: skip
    assert (cfg.events.peers.max_pre_s, cfg.events.peers.max_post_s) == (5.0, 3.0)
    frames = traffic(1.0, ("imu",))
    day = {"pre_s": 86_400, "post_s": 86_400}

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, [(T0 + 500 * MS, "whole_day", day)])
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total)
            reply = await asyncio.to_thread(mark, tmp_path / "control.sock")
            assert reply["pre_s"] == 86_400  # mark is the owner's, not a peer's
        return rec

    rec = run(main())
    assert rec.stats.events.clamped == 1
    (ev,) = [e for e in read_event_log(tmp_path / "out").events if e.source == "zmq"]
    assert (ev.pre_s, ev.post_s) == (5.0, 3.0)


def mark(sock: Path) -> dict[str, Any]:
    from hyperframes.recorder.events.control import request

    return request(sock, {"op": "mark", "name": "owner", "pre_s": 86_400})


# --- 8. an event stamped in the year 2554 -----------------------------------------------


def test_an_event_from_the_far_future_before_the_first_frame_is_quarantined(
    tmp_path: Path,
) -> None:
    cfg = parse_config(ev_config(tmp_path, segment_seconds=0.5))
    frames = traffic(1.0, ("imu", "lidar"))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(send_raw, ep, (b'{"name":"far"}',), (1 << 64) - 1)
            await wait_for(lambda: rec.intake._unjudged != [])  # before any frame: it waits
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total)
        return rec

    rec = run(main())
    assert rec.stats.events.quarantined == 1
    (ev,) = read_event_log(tmp_path / "out").events
    assert ev.quarantined and ev.t_ns == (1 << 64) - 1
    for path in list_segments(tmp_path / "out", "testcar"):
        with HyperframeReader(path) as r:
            assert r.end_ns < T0 + 10 * S, path.name  # no segment stretched to 2554


# --- the same class in files: event frames --------------------------------------------


def test_an_event_frame_nested_30000_deep_is_skipped_by_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "deep.hf"
    good = Event(T0 + 20 * MS, "good").to_json()
    with HyperframeWriter(path, [event_stream_info()], 100_000_000, FileMetadata()) as w:
        frames = [WriteFrame(0xFFFF, T0 + 10 * MS, DEEP), WriteFrame(0xFFFF, T0 + 20 * MS, good)]
        w.write_window(T0 // 100_000_000, frames)
    assert verify_file(path).ok
    assert [e.name for e in read_file_events(path)] == ["good"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["events", str(path), "--json"]) == 0
    assert [row["name"] for row in json.loads(buf.getvalue())] == ["good"]


# --- every file the recorder and the upload service create ------------------------------


def test_every_file_the_recorder_and_the_uploader_create_is_writable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    """Under the units' umasks (recorder 0007, upload 0027): nothing group- or world-writable.

    The walk covers segments, the event log and its compactions, leftovers
    finished at start and moved to ``damaged/`` with their reasons and tails,
    and what the upload service writes (marks, the destination's copies).
    """
    from test_security import crashed_segment

    from hyperframes.format.naming import segment_name
    from hyperframes.recorder.upload.service import UploadService

    out = tmp_path / "out"
    depot = tmp_path / "depot"
    with umask(0o007):
        out.mkdir()
        torn = crashed_segment(out, 0, T0 - 10 * S)  # a segment a crash cut: finished at start
        with torn.open("ab") as f:
            f.write(os.urandom(3000))  # ... with a torn tail: moved to damaged/
        junk = os.open(
            out / (segment_name("testcar", T0 - 20 * S, 1) + ".tmp"),
            os.O_WRONLY | os.O_CREAT,
            0o644,
        )  # as the writer creates it: unreadable
        os.write(junk, os.urandom(4096))
        os.close(junk)
        peers = {"per_s": 1000, "burst": 1000}
        d = ev_config(tmp_path, segment_seconds=0.5, events={"log_max_mb": 0.004, "peers": peers})
        d["upload"] = {"dest": str(depot)}
        cfg = parse_config(d)
        frames = traffic(3.0, ("imu", "lidar"))
        events = [(T0 + i * 100 * MS, f"e{i}", {"payload": "x" * 200}) for i in range(25)]

        async def main() -> Recorder:
            async with Recorder(cfg) as rec:
                ep = await endpoint(rec)
                await asyncio.to_thread(publish, ep, frames, events)
                await wait_for(lambda: rec.stats.frames == len(frames)
                               and rec.stats.events.total == len(events))  # fmt: skip
            return rec

        rec = run(main())
    assert rec.sink is not None and rec.sink.events.log.compactions >= 1
    assert (out / "damaged").is_dir()
    with umask(0o027):
        assert UploadService(cfg, cfg.upload).run_once() == 0

    made = [p for p in (*out.rglob("*"), *depot.rglob("*")) if not p.is_socket()]
    assert len(made) > 10
    loose = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.lstat().st_mode))
             for p in made if p.lstat().st_mode & 0o022}  # fmt: skip
    assert loose == {}
    assert stat.S_IMODE((out / EVENT_LOG_NAME).stat().st_mode) == 0o640


# --- config: the bounds are validated, names are whole names ------------------------------


@pytest.mark.parametrize(
    ("over", "key", "words"),
    [
        ({"vehicle_id": "x\n"}, "vehicle_id", "must"),
        ({"events": {"peers": {"max_pre_s": 90_000}}}, "events.peers.max_pre_s", "<= 86400"),
        ({"events": {"peers": {"per_s": 0}}}, "events.peers.per_s", "> 0"),
        ({"events": {"peers": {"burst": 0}}}, "events.peers.burst", "1..1000000"),
        ({"events": {"peers": {"rate": 1}}}, "events.peers.rate", "unknown key"),
        ({"events": {"log_max_events": 0}}, "events.log_max_events", "1..10000000"),
        ({"events": {"pre_s": 10**400}}, "events.pre_s", "an integer of"),
        ({"events": {"names": {"odd\n": {}}}}, "events.names.odd", "event name"),
    ],
)
def test_config_bounds_and_names_say_which_key(
    tmp_path: Path, over: dict[str, Any], key: str, words: str
) -> None:
    from hyperframes.recorder.errors import ConfigError

    d = ev_config(tmp_path)
    for k, v in over.items():
        d[k] = {**d[k], **v} if isinstance(v, dict) and isinstance(d.get(k), dict) else v
    with pytest.raises(ConfigError, match=words) as exc:
        parse_config(d)
    assert str(exc.value).startswith(key), str(exc.value)


def test_a_stream_name_with_a_trailing_newline_is_refused() -> None:
    from hyperframes.format.streams import StreamInfo

    with pytest.raises(ValueError, match="name"):
        StreamInfo(1, "imu\n")


def test_the_rate_limited_log_allows_its_lines_per_period_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import time

    from hyperframes.recorder.ingest.common import RateLimitedLog

    log = RateLimitedLog(logging.getLogger("hf.test.ratelimit"), period_s=0.2, lines=3)
    with caplog.at_level(logging.INFO, logger="hf.test.ratelimit"):
        for i in range(10):
            log.log(logging.INFO, ("events", "accepted"), "line %d", i)
        log.warning(("other", "key"), "another key has its own lines")
        time.sleep(0.25)
        log.log(logging.INFO, ("events", "accepted"), "line %d", 10)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["line 0", "line 1", "line 2", "another key has its own lines",
                     "line 10 (+7 more since last report)"]  # fmt: skip
