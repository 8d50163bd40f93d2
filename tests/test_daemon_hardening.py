"""Issue 10 through the real daemon: restarts, duplicates, late frames at segment edges.

Real ZeroMQ sockets, real files, frames paced in real time with real
timestamps; every file is checked with ``verify`` (which checks the span).
"""

from __future__ import annotations

import asyncio
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_daemon import config_dict, daemon, payload_for, recorded, traffic, wait_for  # noqa: F401

from hyperframes import FrameFlags, StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.publisher import ZmqPublisher
from hyperframes.recorder.leftovers import DAMAGED_DIR
from hyperframes.recorder.metrics import DropReason
from hyperframes.recorder.segments import list_segments, segment_name
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

from mqtt_broker import free_port

MS = 1_000_000
S = 1_000 * MS
STREAMS = [
    {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "xyzi-f32", "topic": "lidar"},
    {"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu"},
]
Plan = list[tuple[float, str, int, int]]  # (send at s, topic, timestamp, seq)


def _cfg(out: Path, **over: Any) -> Any:
    return parse_config(config_dict(out, free_port(), **{"streams": STREAMS, **over}))


def _realtime(now: int, seconds: float, imu_seq0: int = 0) -> Plan:
    """IMU at 100 Hz and lidar at 10 Hz, stamped from ``now``, each sent at its own time."""
    plan: Plan = []
    for i in range(int(seconds * 100)):
        plan.append((i / 100, "imu", now + i * 10 * MS + 1, imu_seq0 + i))
    for i in range(int(seconds * 10)):
        plan.append((i / 10 + 0.004, "lidar", now + i * 100 * MS + 4 * MS, i))
    return sorted(plan)


def _send(endpoint: str, plan: Plan) -> None:
    with ZmqPublisher(endpoint, send_timeout_ms=10_000) as pub:
        t0 = time.monotonic()
        for at, topic, ts, seq in plan:
            delay = t0 + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pub.send(topic, ts, payload_for(topic, seq), seq=seq)


def _record(cfg: Any, plan: Plan, until: Callable[[Recorder], bool] | None = None) -> Recorder:
    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(_send, ep, plan)
            await asyncio.sleep(0.4)  # the last windows close on grace
            if until is not None:
                await wait_for(lambda: until(rec), timeout=30)
        return rec

    return asyncio.run(main())


def _entries(out: Path) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(stream, timestamp) -> flags, of the index and of the quarantine tables, all segments."""
    index: dict[tuple[str, int], int] = {}
    quarantine: dict[tuple[str, int], int] = {}
    for path in list_segments(out, "testcar"):
        assert verify_file(path).ok, verify_file(path).problems
        with HyperframeReader(path) as r:
            for table, into in ((r.index, index), (r.quarantine(), quarantine)):
                for e in table:
                    key = (r.streams[int(e["stream_id"])].name, int(e["timestamp_ns"]))
                    assert key not in into, f"{key} stored twice"
                    into[key] = int(e["flags"])
            ts = r.index["timestamp_ns"]
            assert r.start_ns < int(ts.min()) and int(ts.max()) <= r.end_ns  # inside the span
    return index, quarantine


def test_a_stale_first_frame_does_not_quarantine_the_fresh_run(tmp_path: Path) -> None:
    """Defect 1: the first frame is a 60 s old backlog frame, then real time follows."""
    now = time.time_ns()
    stale = (0.0, "imu", now - 60 * S, 0)
    fresh = _realtime(now + 20 * MS, 1.5, imu_seq0=1)
    rec = _record(_cfg(tmp_path / "out"), [stale, *fresh])
    index, quarantine = _entries(tmp_path / "out")
    assert set(quarantine) == {("imu", now - 60 * S)}
    assert set(index) == {(topic, ts) for _, topic, ts, _ in fresh}
    assert not any(f & (FrameFlags.LATE | FrameFlags.QUARANTINED) for f in index.values())
    assert 28 <= rec.stats.windows_closed <= 33  # 1.5 s of 50 ms windows, not a handful
    assert rec.stats.dropped == 0


@pytest.mark.parametrize("max_jump_s", [10.0, 1.0])
def test_clock_max_jump_s_decides_late_or_quarantined(tmp_path: Path, max_jump_s: float) -> None:
    """A frame stamped 3 s in the past mid-run: late at the default 10 s, quarantined at 1 s."""
    now = time.time_ns()
    fresh = _realtime(now, 1.5)
    old = (1.0, "imu", now + 1 * S - 3 * S + 7, 10_000)
    _record(_cfg(tmp_path / "out", clock_max_jump_s=max_jump_s), sorted([*fresh, old]))
    index, quarantine = _entries(tmp_path / "out")
    key = ("imu", now + 1 * S - 3 * S + 7)
    if max_jump_s == 10.0:
        assert key in index and index[key] & FrameFlags.LATE and not quarantine
    else:
        assert key in quarantine and key not in index
    assert {(t, ts) for _, t, ts, _ in fresh} <= set(index)


def test_a_late_frame_and_a_resend_are_not_counted_as_drops(tmp_path: Path) -> None:
    """Defects 2 and 3: a frame 0.5 s late is no gap; a byte-exact re-send is not stored twice."""
    now = time.time_ns()
    plan = [p for p in _realtime(now, 1.5) if p[1] == "imu" and p[3] != 120]  # 120: a real gap
    late = next(p for p in plan if p[3] == 50)
    plan.remove(late)
    plan.append((late[0] + 0.5, *late[1:]))
    resend = next(p for p in plan if p[3] == 60)
    plan.append((resend[0] + 0.1, *resend[1:]))
    rec = _record(_cfg(tmp_path / "out", streams=STREAMS[1:]), sorted(plan))
    imu = rec.stats.streams[2]
    assert imu.drops == {DropReason.SEQUENCE_GAP: 1, DropReason.DUPLICATE: 1}
    assert rec.stats.dropped == 1 and imu.duplicates == 1
    index, _ = _entries(tmp_path / "out")
    assert len(index) == 149
    assert index[("imu", late[2])] & FrameFlags.LATE


def test_late_frames_at_a_segment_edge_stay_inside_their_file_span(tmp_path: Path) -> None:
    """Defect 4: a frame of the last window before a boundary arrives 0.5 s late."""
    now = time.time_ns()
    plan = _realtime(now, 2.6)
    boundary = math.ceil((now + 600 * MS) / S) * S  # a segment boundary inside the run
    late = max((p for p in plan if p[1] == "imu" and p[2] <= boundary), key=lambda p: p[2])
    plan.remove(late)
    plan.append((late[0] + 0.5, *late[1:]))
    _record(_cfg(tmp_path / "out", segment_seconds=1), sorted(plan))
    files = list_segments(tmp_path / "out", "testcar")
    assert len(files) >= 3
    index, _ = _entries(tmp_path / "out")  # verify, span and uniqueness per file
    assert set(index) == {(topic, ts) for _, topic, ts, _ in plan}
    assert index[("imu", late[2])] & FrameFlags.LATE
    holder = [p for p in files if late[2] in HyperframeReader(p).timestamps("imu")]
    with HyperframeReader(holder[0]) as r:
        assert r.start_ns < late[2] <= r.end_ns
        assert r.start_ns < boundary  # the span was widened back across the boundary


def _crashed_segment(out: Path, seq: int, streams: list[StreamInfo], t0: int) -> Path:
    w = HyperframeWriter(out / segment_name("testcar", t0, seq), streams, 50 * MS)
    for i in range(40):
        w.append(2, t0 + i * 10 * MS + 1, np.full(6, i, "<f8").tobytes())
    w.abort()
    return w.tmp_path


def test_recovery_on_start_finishes_or_moves_aside_every_leftover(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cfg = _cfg(out)
    infos = [s.info for s in cfg.streams]
    t0 = time.time_ns() - 3600 * S
    good = _crashed_segment(out, 0, infos, t0)
    cut = _crashed_segment(out, 1, infos, t0 + 10 * S)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) - 100])  # the last window was cut by the power loss
    junk = out / segment_name("testcar", t0, 2)
    junk = junk.with_name(junk.name + ".tmp")
    junk.write_bytes(b"\0" * 700)
    other = out / (segment_name("othercar", t0, 0) + ".tmp")
    other.write_bytes(b"not ours")

    # recovery runs beside the recording; wait for it (a stop would leave the rest for later)
    rec = _record(cfg, _realtime(time.time_ns(), 0.5), until=lambda r: len(r.recovered) == 3)

    assert sorted(o.result for o in rec.recovered) == ["damaged", "recovered", "recovered"]
    assert (rec.stats.segments_recovered, rec.stats.segments_damaged) == (2, 1)
    assert not good.exists() and not cut.exists() and other.exists()
    finals = list_segments(out, "testcar")
    assert [p.name for p in finals[:2]] == [good.name[:-4], cut.name[:-4]]
    assert all(verify_file(p).ok for p in finals)
    with HyperframeReader(finals[0]) as r, HyperframeReader(finals[1]) as c:
        assert r.frame_count == 40 and 0 < c.frame_count < 40
    damaged = out / DAMAGED_DIR
    assert (damaged / junk.name).read_bytes() == b"\0" * 700
    assert "cannot recover" in (damaged / (junk.name + ".reason.txt")).read_text()
    assert (damaged / (cut.name + ".tail")).stat().st_size > 0
    assert int(finals[-1].name.split("_")[-1][:6]) == 3  # numbering went on after the leftovers
    rec = _record(cfg, _realtime(time.time_ns(), 0.3))  # a restart: 2 went to damaged/, not reused
    assert int(list_segments(out, "testcar")[-1].name.split("_")[-1][:6]) == 4


def test_kill_9_then_restart_recovers_the_segment_itself(daemon: Any, tmp_path: Path) -> None:  # noqa: F811
    proc, ep, out = daemon()
    frames = traffic(2.0)
    with ZmqPublisher(ep, send_timeout_ms=10_000) as pub:
        for topic, ts, payload in frames:
            pub.send(topic, ts, payload)
    time.sleep(1.0)  # windows written and fsynced (fsync_interval_s 0.2)
    proc.kill()
    proc.wait()
    assert len(list(out.glob("*.hf.tmp"))) == 1
    proc, ep, out = daemon()  # the way systemd restarts it
    deadline = time.monotonic() + 20
    while list(out.glob("*.hf.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not list(out.glob("*.tmp")) and not (out / DAMAGED_DIR).exists()
    got = recorded(out)
    assert len(got) > len(frames) // 2  # the durable windows, recovered without a person
    assert all(verify_file(p).ok for p in list_segments(out, "testcar"))
