"""Retention with events on the real recorder: a small tmpfs that fills, snapshot mode, kill -9.

The disk-filling test needs a real small filesystem: a tmpfs mounted for the
test (root, and a sandbox that allows mounts); it is skipped with the reason
otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from hyperframes.events import read_event_log
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.events.retention import read_span
from hyperframes.recorder.segments import list_segments, parse_segment_name

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import MS, T0, config_dict, free_port, run, wait_for
from test_events_daemon import endpoint, publish

S = 1_000_000_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, mounted for the test."""
    d = tmp_path / "disk"
    d.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(d)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {(r.stderr or r.stdout).strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, check=False)


def big_lidar(seconds: float, points: int = 20_000) -> list[tuple[str, int, bytes]]:
    """Incompressible lidar sweeps at 10 Hz (320 KB each) and IMU at 200 Hz."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(int(seconds * 10)):
        out.append(("lidar", T0 + 1 + i * 100 * MS, rng.random((points, 4), "<f4").tobytes()))
    for i in range(int(seconds * 200)):
        out.append(("imu", T0 + 2 + i * 5 * MS, np.full(6, i, "<f8").tobytes()))
    out.sort(key=lambda f: f[1])
    return out


def spans(out: Path) -> dict[str, tuple[int, int]]:
    log = read_event_log(out)
    return {n: (s.start_ns, s.end_ns) for n, s in log.segments.items()}


def cfg_for(out: Path, tmp: Path, **over: Any) -> dict[str, Any]:
    d = config_dict(out, free_port(), **over)
    d.setdefault("events", {})["control_socket"] = str(tmp / "control.sock")
    return d


def test_a_filling_disk_deletes_unprotected_segments_first(
    small_disk: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = small_disk / "rec"
    cfg = parse_config(cfg_for(out, tmp_path, segment_seconds=600, segment_max_mb=1,
                               disk={"min_free_mb": 4, "on_full": "delete-oldest"}))  # fmt: skip
    frames = big_lidar(8.0)  # ~26 MB through an 8 MB disk
    event_t = T0 + 2 * S
    events = [(event_t, "hard_brake", {"pre_s": 0.3, "post_s": 0.3})]

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events)
            await wait_for(lambda: rec.stats.frames == len(frames), timeout=30)
        return rec

    rec = run(main())
    assert rec.stats.segments_deleted > 5
    assert rec.stats.events.protected_deleted == 0
    assert rec.stats.dropped == 0
    left = {p.name for p in list_segments(out, "testcar")}
    window = (event_t - 300 * MS, event_t + 300 * MS)
    keep = {n for n, (a, b) in spans(out).items() if a <= window[1] and window[0] <= b}
    assert keep and keep <= left  # every protected segment survived
    first_left = min(parse_segment_name(n).seq for n in left - keep)  # type: ignore[union-attr]
    protected_seqs = {parse_segment_name(n).seq for n in keep}  # type: ignore[union-attr]
    assert first_left > max(protected_seqs)  # older unprotected ones went, newer stayed

    # an event that protects everything: the disk still fills, so protected
    # segments go as a last resort, loudly and counted
    out2 = small_disk / "rec2"
    for p in list_segments(out, "testcar"):
        p.unlink()
    raw2 = cfg_for(out2, tmp_path, segment_seconds=600, segment_max_mb=1,
                   disk={"min_free_mb": 4, "on_full": "delete-oldest"})  # fmt: skip
    raw2["events"]["peers"] = {"max_post_s": 3600}  # a peer may ask this much only if allowed
    cfg2 = parse_config(raw2)
    events2 = [(T0 + 100 * MS, "keep_all", {"pre_s": 0, "post_s": 3600})]

    async def main2() -> Recorder:
        async with Recorder(cfg2) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events2)
            await wait_for(lambda: rec.stats.frames == len(frames), timeout=30)
        return rec

    with caplog.at_level(logging.CRITICAL, logger="hyperframes.recorder.daemon"):
        rec2 = run(main2())
    assert rec2.stats.events.protected_deleted > 0
    assert rec2.stats.events.protected_deleted == rec2.stats.segments_deleted
    assert "DELETED PROTECTED SEGMENT" in caplog.text and "keep_all" in caplog.text
    # the event log keeps the event although its segments are gone
    assert [e.name for e in read_event_log(out2).events] == ["keep_all"]


def test_snapshot_mode_keeps_only_event_windows_and_the_buffer(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cfg = parse_config(cfg_for(out, tmp_path, segment_seconds=0.5,
                               disk={"retention": "events", "buffer_s": 1.0, "min_free_mb": 0},
                               events={"pre_s": 0.5, "post_s": 0.5,
                                       "peers": {"max_post_s": 1.0}}))  # fmt: skip
    frames = big_lidar(10.0, points=200)
    events = [(T0 + 2200 * MS, "bookmark", {}), (T0 + 6100 * MS, "disengage", {"post_s": 1.0})]

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events)
            await wait_for(lambda: rec.stats.frames == len(frames), timeout=30)
        return rec

    rec = run(main())
    ev = rec.stats.events
    left = {p.name: p for p in list_segments(out, "testcar")}
    sp = spans(out)
    assert len(sp) == 20  # 10 s in 0.5 s segments, every span logged
    wanted = [(2200 * MS - 500 * MS, 2200 * MS + 500 * MS), (6100 * MS - 500 * MS, 7100 * MS)]
    protected = {n for n, (a, b) in sp.items()
                 if any(a - T0 <= hi and lo <= b - T0 for lo, hi in wanted)}  # fmt: skip
    latest = max(b for _, b in sp.values())
    in_buffer = {n for n, (_, b) in sp.items() if b >= latest - 1 * S - 500 * MS}
    assert protected <= set(left)
    assert set(left) <= protected | in_buffer
    gone = set(sp) - set(left)
    assert len(gone) >= 8 and ev.snapshot_deleted == len(gone)
    assert ev.discarded_ns == sum(sp[n][1] - sp[n][0] for n in gone)
    assert ev.discarded_bytes > 0


def _start(conf: Path, tmp: Path) -> subprocess.Popen[bytes]:
    notify = tmp / "n.sock"
    notify.unlink(missing_ok=True)
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(str(notify))
    ns.settimeout(20)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframes.cli", "record", "--config", str(conf)],
        env=dict(os.environ, NOTIFY_SOCKET=str(notify)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        while "READY=1" not in ns.recv(4096).decode():
            pass
    finally:
        ns.close()
    return proc


@pytest.mark.slow
def test_kill_9_inside_a_post_window_is_honoured_after_restart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    port = free_port()
    d = cfg_for(out, tmp_path, segment_seconds=0.5, fsync_interval_s=0.1,
                disk={"retention": "events", "buffer_s": 1.0, "min_free_mb": 0},
                events={"pre_s": 0.5, "post_s": 0.5, "peers": {"max_post_s": 3.0}})  # fmt: skip
    d["zmq"]["endpoint"] = f"tcp://127.0.0.1:{port}"
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    ep = f"tcp://127.0.0.1:{port}"
    frames = big_lidar(8.0, points=200)
    event_t = T0 + 2 * S  # keep [1.5 s, 5 s]: the post window runs past the crash at ~3 s
    first = [f for f in frames if f[1] < T0 + 3 * S]
    rest = [f for f in frames if f[1] >= T0 + 3 * S]
    proc = _start(conf, tmp_path)
    try:
        publish(ep, first, [(event_t, "long_event", {"post_s": 3.0})])
        deadline = time.monotonic() + 10
        while not any(
            s.end_ns >= event_t + 500 * MS for s in read_event_log(out).segments.values()
        ):
            assert time.monotonic() < deadline, "segments after the event never finalized"
            time.sleep(0.05)
        assert any(e.name == "long_event" for e in read_event_log(out).events)
        time.sleep(0.3)  # the open segment's windows fsynced (fsync_interval_s 0.1)
        proc.kill()
        proc.wait()
        logs = proc.stdout.read().decode() if proc.stdout else ""
        assert list(out.glob("*.hf.tmp")), sorted(p.name for p in out.iterdir())  # cut short
        proc = _start(conf, tmp_path)  # recovers the .tmp, reloads the event log
        publish(ep, rest)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        logs += proc.stdout.read().decode() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = list_segments(out, "testcar")
    covered = [read_span(p) for p in left]
    lo, hi = event_t - 500 * MS, event_t + 3 * S
    # every instant of the event's window is still on disk, across the crash
    t = lo
    while t <= hi:
        assert any(s is not None and s.start_ns <= t <= s.end_ns for s in covered), (
            (t - T0) / 1e9,
            [(s.start_ns - T0, s.end_ns - T0) for s in covered if s],
            logs,
        )
        t += 100 * MS
    # and what lies outside it and outside the buffer is gone
    for s in covered:
        assert s is not None
        assert s.end_ns >= lo and (s.start_ns <= hi or s.end_ns >= T0 + 8 * S - 2000 * MS), s
    gone = set(read_event_log(out).segments) - {p.name for p in left}
    assert gone  # snapshot mode deleted the segments before the window
