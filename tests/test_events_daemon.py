"""Events end to end on the real recorder: ZeroMQ, Mosquitto, the control socket, rules, files.

Retention runs on a small tmpfs where the sandbox allows mounting one (root),
else on the data directory with a disk floor above its free space.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
import zmq

from hyperframes.cli.main import main
from hyperframes.events import (
    EVENT_STREAM_ID,
    EVENT_STREAM_NAME,
    Event,
    read_event_log,
    read_file_events,
)
from hyperframes.format.layout import FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.events.control import NoRecorderError, request
from hyperframes.recorder.ingest.publisher import ZmqPublisher, encode_mqtt_payload, event_body
from hyperframes.recorder.ingest.wire import zmq_frames
from hyperframes.recorder.segments import list_segments
from hyperframes.verify import verify_file

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import MS, T0, config_dict, free_port, mqtt_broker, run, traffic, wait_for  # noqa: F401

S = 1_000_000_000


def ev_config(tmp: Path, **over: Any) -> dict[str, Any]:
    d = config_dict(tmp / "out", free_port(), **over)
    d.setdefault("events", {})
    d["events"].setdefault("control_socket", str(tmp / "control.sock"))
    return d


async def endpoint(rec: Recorder) -> str:
    """The recorder's ZMQ endpoint, once it is ready."""
    await rec.ready.wait()
    ep = rec.endpoints["default"]
    assert ep is not None
    return ep


def publish(
    ep: str,
    frames: list[tuple[str, int, bytes]],
    events: list[tuple[int, str, dict[str, Any]]] = (),
) -> None:  # type: ignore[assignment]
    """Frames and events interleaved in time order over one PUSH socket."""
    items: list[tuple[int, int, Any]] = [(ts, 0, (topic, p)) for topic, ts, p in frames]
    items += [(ts, 1, (name, kw)) for ts, name, kw in events]
    items.sort(key=lambda x: (x[0], x[1]))
    with ZmqPublisher(ep, send_timeout_ms=10_000) as pub:
        for ts, kind, item in items:
            if kind == 0:
                pub.send(item[0], ts, item[1])
            else:
                pub.send_event(ts, item[0], **item[1])


def file_events(out: Path) -> list[tuple[str, Any]]:
    """(segment name, event) for every event stored in the segments."""
    return [(p.name, e) for p in list_segments(out, "testcar") for e in read_file_events(p)]


def test_zmq_events_land_in_their_segment_and_the_log(tmp_path: Path) -> None:
    cfg = parse_config(
        ev_config(
            tmp_path,
            segment_seconds=1,
            events={"names": {"hard_brake": {"pre_s": 0.2, "post_s": 0.3}}},
        )
    )
    frames = traffic(3.0, ("imu", "lidar"))
    events = [
        (T0 + 1500 * MS, "hard_brake", {"tags": {"by": "test"}, "payload": {"ax": -7.5}}),
        (T0 + 2200 * MS, "bookmark", {"pre_s": 1.0, "post_s": 0.0, "note": "look"}),
    ]

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total == 2)
        return rec

    rec = run(main())
    assert rec.stats.events.received == {"zmq": 2}
    stored = file_events(tmp_path / "out")
    assert [(seg[-9:], e.name) for seg, e in stored] == [
        ("000001.hf", "hard_brake"),
        ("000002.hf", "bookmark"),
    ]
    hb = stored[0][1]
    assert (hb.t_ns, hb.pre_s, hb.post_s, hb.source, hb.clock) == (
        T0 + 1500 * MS,
        0.2,
        0.3,
        "zmq",
        "hardware",
    )
    assert hb.tags == {"by": "test"} and hb.payload == {"ax": -7.5}
    assert stored[1][1].tags == {"note": "look"} and stored[1][1].pre_s == 1.0
    with HyperframeReader(list_segments(tmp_path / "out", "testcar")[1]) as r:
        info = r.streams[EVENT_STREAM_ID]
        assert (info.name, info.kind, info.encoding) == (EVENT_STREAM_NAME, "event", "json")
        (f,) = list(r.frames(EVENT_STREAM_ID))
        assert f.flags & FrameFlags.HW_TIMESTAMP and not f.late
    log = read_event_log(tmp_path / "out")
    assert [e.name for e in log.events] == ["hard_brake", "bookmark"]
    assert len(log.segments) == 3 and log.bad_lines == 0


def test_malformed_events_are_counted_and_recording_continues(tmp_path: Path) -> None:
    cfg = parse_config(ev_config(tmp_path))
    frames = traffic(1.0, ("imu",))

    def send(ep: str) -> None:
        s: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.connect(ep)
        for i, body in enumerate(
            (
                b"not json",
                b"[1, 2]",
                b'{"name": "a b"}',
                b'{"tags": {}}',
                b'{"name": "x", "pre_s": -1}',
                b'{"name": "x", "colour": 1}',
            )
        ):
            s.send_multipart(zmq_frames("events", body, T0 + 100 * MS, seq=i))
        hdr = zmq_frames("events", b"{}", T0, seq=9)
        s.send_multipart([b"events", b"NOPE" + bytes(hdr[1])[4:], b"{}"])  # bad magic
        s.close()
        publish(ep, frames, [(T0 + 500 * MS, "fine", {})])

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(send, ep)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total)
        return rec

    rec = run(main())
    assert rec.stats.events.malformed == {"zmq": 7}
    assert rec.stats.dropped == 0
    assert [e.name for _, e in file_events(tmp_path / "out")] == ["fine"]


def test_an_event_far_from_the_sensor_clock_is_quarantined_but_logged(tmp_path: Path) -> None:
    cfg = parse_config(ev_config(tmp_path))
    now = time.time_ns()
    frames = traffic(1.5, ("imu", "lidar"), start=now)

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames[: len(frames) // 2])
            await wait_for(
                lambda: rec.engine.clock is not None and rec.engine.clock.anchor_ns is not None
            )
            await asyncio.to_thread(
                publish,
                ep,
                frames[len(frames) // 2 :],
                [(now - 3600 * S, "from_1h_ago", {}), (now + 1000 * MS, "on_time", {})],
            )
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total == 2)
        return rec

    rec = run(main())
    assert rec.stats.events.quarantined == 1
    log = {e.name: e for e in read_event_log(tmp_path / "out").events}
    assert log["from_1h_ago"].quarantined and not log["on_time"].quarantined
    stored = {e.name: e for _, e in file_events(tmp_path / "out")}
    assert "on_time" in stored  # the quarantined one is kept apart from the index
    # the traffic is stamped from now: 1.5 s of it crosses a minute (the 60 s segment grid)
    # in one run of 40, and then it lies in two segments
    quarantined = 0
    for seg in list_segments(tmp_path / "out", "testcar"):
        with HyperframeReader(seg) as r:
            quarantined += int((r.quarantine()["stream_id"] == EVENT_STREAM_ID).sum())
    assert quarantined == 1


@pytest.mark.network
def test_mqtt_events_from_the_broker(tmp_path: Path, mqtt_broker: int) -> None:  # noqa: F811
    d = ev_config(tmp_path)
    del d["zmq"]
    d["mqtt"] = {"host": "127.0.0.1", "port": mqtt_broker, "client_id": f"ev-{os.getpid()}"}
    d["events"]["topic"] = "vehicle/testcar/events"
    cfg = parse_config(d)
    import paho.mqtt.publish as mqtt_publish

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.mqtt is not None
            await asyncio.wait_for(rec.mqtt.connected.wait(), 10)
            body = encode_mqtt_payload(
                event_body("disengage", tags={"by": "planner"}), T0 + 10 * MS, seq=0
            )
            imu = [
                encode_mqtt_payload(np.full(6, i, "<f8").tobytes(), T0 + i * 5 * MS, seq=i)
                for i in range(1, 100)
            ]
            msgs = [{"topic": "vehicle/testcar/events", "payload": bytes(body), "qos": 1}]
            msgs.append({"topic": "vehicle/testcar/events", "payload": b"garbage", "qos": 1})
            msgs += [{"topic": "imu", "payload": bytes(m), "qos": 1} for m in imu]
            await asyncio.to_thread(
                mqtt_publish.multiple, msgs, hostname="127.0.0.1", port=mqtt_broker
            )
            await wait_for(lambda: rec.stats.events.total == 1 and rec.stats.frames == 99)
        return rec

    rec = run(main())
    assert rec.stats.events.received == {"mqtt": 1}
    assert rec.stats.events.malformed == {"mqtt": 1}
    ((_, ev),) = file_events(tmp_path / "out")
    assert (ev.name, ev.source, ev.tags) == ("disengage", "mqtt", {"by": "planner"})


def test_mark_over_the_control_socket(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"
    cfg = parse_config(ev_config(tmp_path))
    with pytest.raises(NoRecorderError, match="no recorder is running"):
        request(sock, {"op": "ping"})
    now = time.time_ns()
    frames = traffic(1.0, ("imu",), start=now)

    async def main() -> tuple[Recorder, list[dict[str, Any]]]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert (sock.stat().st_mode & 0o777) == 0o600
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(publish, ep, frames[:50])
            replies = [
                await asyncio.to_thread(request, sock, r)
                for r in (
                    {"op": "ping"},
                    {
                        "op": "mark",
                        "name": "driver_note",
                        "pre_s": 3,
                        "tags": {"k": "v"},
                        "note": "pothole",
                    },
                    {"op": "mark", "name": "bad name"},
                    {"op": "mark", "name": "x", "post_s": "long"},
                    {"op": "reboot"},
                )
            ]
            await asyncio.to_thread(publish, ep, frames[50:])
            await wait_for(lambda: rec.stats.frames == len(frames))
        return rec, replies

    rec, replies = run(main())
    assert replies[0] == {"ok": True, "vehicle": "testcar"}
    assert replies[1]["ok"] and replies[1]["pre_s"] == 3.0 and replies[1]["post_s"] == 5.0
    assert not replies[2]["ok"] and "'bad name'" in replies[2]["error"]
    assert not replies[3]["ok"] and "post_s" in replies[3]["error"]
    assert not replies[4]["ok"] and "unknown op" in replies[4]["error"]
    assert rec.stats.events.received == {"mark": 1}
    ((_, ev),) = file_events(tmp_path / "out")
    assert ev.name == "driver_note" and ev.tags == {"k": "v", "note": "pothole"}
    assert ev.clock == "host" and ev.t_ns == replies[1]["t_ns"]
    assert not sock.exists()  # removed on shutdown


def test_an_unusable_control_socket_never_stops_recording(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    cfg = parse_config(ev_config(tmp_path, events={"control_socket": str(tmp_path / "file" / "s")}))
    frames = traffic(0.5, ("imu",))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.control is None
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames))
        return rec

    assert run(main()).stats.dropped == 0


def test_rules_threshold_held_and_stale_stream(tmp_path: Path) -> None:
    rules = [
        {"name": "hard_brake", "stream": "imu", "field": 0, "below": -6.0, "for_ms": 100},
        {"name": "lidar_quiet", "stream": "lidar", "stale_ms": 300},
    ]
    cfg = parse_config(ev_config(tmp_path, grace_ms=200, events={"rules": rules}))
    frames = []
    for topic, ts, payload in traffic(2.0, ("imu", "lidar")):
        p = payload
        if topic == "imu":
            a = np.zeros(6, "<f8")
            ms = (ts - T0) / MS
            # a 50 ms dip (too short), then a 150 ms hard brake
            a[0] = -8.0 if 300 <= ms < 350 or 1000 <= ms < 1150 else -1.0
            p = a.tobytes()
        elif ts - T0 > 1200 * MS:
            continue  # lidar unplugged after 1.2 s
        frames.append((topic, ts, p))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.events.total == 2, timeout=10)
        return rec

    rec = run(main())
    assert rec.stats.events.received == {"rule": 2}
    got = {e.name: e for _, e in file_events(tmp_path / "out")}
    hb = got["hard_brake"]
    assert 1000 * MS <= hb.t_ns - T0 <= 1005 * MS  # stamped where the run began
    assert hb.payload["value"] == -8.0 and hb.payload["held_ms"] >= 100
    assert got["lidar_quiet"].tags == {"rule": "stale", "stream": "lidar"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``hyperframes ARGS`` in this process (stdout and stderr captured)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def test_mark_and_events_commands(tmp_path: Path) -> None:
    d = ev_config(tmp_path)
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    cfg = parse_config(d)
    r = subprocess.run([sys.executable, "-m", "hyperframes.cli", "mark", "--config", str(conf),
                        "bookmark"], capture_output=True, text=True, check=False)  # fmt: skip
    assert r.returncode == 2 and "no recorder is running on" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    now = time.time_ns()
    frames = traffic(1.0, ("imu",), start=now)

    async def main() -> list[subprocess.CompletedProcess[str]]:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames[:100])
            runs = [await asyncio.to_thread(cli, "mark", "--config", str(conf), *a) for a in (
                ("pothole", "--pre", "2", "--post", "1", "--tag", "driver=ana", "--note", "big"),
                ("pothole", "--pre", "-1"),
                ("bad name",),
                ("x", "--tag", "novalue"),
            )]  # fmt: skip
            await asyncio.to_thread(publish, ep, frames[100:])
            await wait_for(lambda: rec.stats.frames == len(frames))
        return runs

    ok, neg, bad, tag = run(main())
    assert ok.returncode == 0 and "marked pothole on testcar" in ok.stdout, ok.stderr
    assert "keeps 2 s before and 1 s after" in ok.stdout
    assert neg.returncode == 2 and "pre_s must be between 0 and 86400 s, got -1" in neg.stderr
    assert bad.returncode == 2 and "name 'bad name' must be" in bad.stderr
    assert tag.returncode == 2 and "--tag 'novalue' must be KEY=VALUE" in tag.stderr
    out = tmp_path / "out"
    r = cli("events", str(out))
    assert r.returncode == 0 and "pothole" in r.stdout and "driver=ana" in r.stdout
    (row,) = json.loads(cli("events", str(out), "--json").stdout)
    assert row["name"] == "pothole" and row["tags"] == {"driver": "ana", "note": "big"}
    # one segment, or two when the mark's -2 s..+1 s crossed a minute of the 60 s segment
    # grid (the traffic is stamped from now: 2/2 in one CI run of many)
    n = len(row["segments"])
    assert n in (1, 2) and row["existing"] == row["segments"]
    assert f"{n}/{n} segments on disk" in r.stdout
    # a file alone: its event stream (the segment holding the mark's own time)
    assert any("pothole" in cli("events", str(out / seg)).stdout for seg in row["segments"])
    r = cli("events", str(tmp_path / "nope"))
    assert r.returncode == 2 and "no such file or directory" in r.stderr


def test_late_events_and_events_after_the_last_window(tmp_path: Path) -> None:
    cfg = parse_config(ev_config(tmp_path))
    frames = traffic(2.0, ("imu", "lidar"))

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames))
            await wait_for(lambda: rec.stats.windows_closed >= 35)  # [0, 1.75 s] written
            late = [(T0 + 300 * MS, "late_one", {}), (T0 + 2500 * MS, "after_the_end", {})]
            await asyncio.to_thread(publish, ep, [], late)
            try:
                await wait_for(lambda: rec.stats.events.total == 2)
            except AssertionError:
                raise AssertionError(repr(rec.stats.events)) from None
        return rec

    run(main())
    (seg,) = list_segments(tmp_path / "out", "testcar")
    assert verify_file(seg).ok
    with HyperframeReader(seg) as r:
        got = {Event.from_json(f.tobytes()).name: f for f in r.frames(EVENT_STREAM_ID)}
    assert got["late_one"].late and got["late_one"].timestamp_ns == T0 + 300 * MS
    assert not got["after_the_end"].late  # written in its own window before finalize
    assert got["after_the_end"].timestamp_ns == T0 + 2500 * MS
