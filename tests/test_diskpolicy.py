"""Disk policy: the pure decision, and the daemon's sink on a really full filesystem."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import SegmentSink
from hyperframes.recorder.diskpolicy import DiskDecision, decide, free_bytes
from hyperframes.recorder.engine import WindowEngine
from hyperframes.recorder.ingest.common import IngestFrame
from hyperframes.recorder.metrics import DropReason, RecorderStats
from hyperframes.recorder.segments import list_segments, segment_name

MB = 1024 * 1024
T0 = 1_735_689_600_000_000_000


def _segs(n: int, size: int = 10 * MB) -> list[tuple[Path, int]]:
    return [(Path(f"/d/{segment_name('v', T0 + i, i)}"), size) for i in range(n)]


def test_enough_space_does_nothing() -> None:
    assert decide(2000 * MB, 1000 * MB, "stop") == DiskDecision()
    assert decide(2000 * MB, 1000 * MB, "delete-oldest", _segs(3)) == DiskDecision()


def test_stop_policy_stops_and_resumes_with_margin() -> None:
    assert decide(999 * MB, 1000 * MB, "stop", _segs(3)) == DiskDecision(record=False)
    # stopped: the floor plus 10% must be free before recording resumes
    assert not decide(1050 * MB, 1000 * MB, "stop", stopped=True).record
    assert decide(1200 * MB, 1000 * MB, "stop", stopped=True).record


def test_delete_oldest_deletes_just_enough_oldest_first() -> None:
    segs = _segs(5)
    d = decide(975 * MB, 1000 * MB, "delete-oldest", segs)
    assert d.record
    assert d.delete == (segs[0][0], segs[1][0], segs[2][0])


def test_delete_oldest_skips_protected_tmp_and_current() -> None:
    segs = _segs(4)
    protected = (Path("/d/keep_" + segs[0][0].name), 10 * MB)
    tmp = (Path(str(segs[1][0]) + ".tmp"), 10 * MB)
    current = segs[2][0]
    d = decide(
        995 * MB, 1000 * MB, "delete-oldest", [protected, tmp, segs[2], segs[3]],
        protected_glob="keep_*", current=current,
    )  # fmt: skip
    assert d.delete == (segs[3][0],)
    assert d.record


def test_delete_oldest_not_enough_stops() -> None:
    d = decide(100 * MB, 1000 * MB, "delete-oldest", _segs(2))
    assert not d.record
    assert len(d.delete) == 2  # still frees what it can


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown disk policy"):
        decide(0, 1, "panic")


def test_free_bytes_is_statvfs(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    assert abs(free_bytes(tmp_path) - st.f_bavail * st.f_frsize) < 64 * MB


# --- the sink against a real filesystem -----------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB tmpfs (needs root and mount); skips otherwise."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
                       capture_output=True, text=True, check=False)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _config(out: Path, on_full: str, min_free_mb: int, segment_max_mb: int = 2) -> object:
    return parse_config({
        "vehicle_id": "car", "output_dir": str(out), "window_ms": 100,
        "segment_seconds": None, "segment_max_mb": segment_max_mb,
        "disk": {"min_free_mb": min_free_mb, "on_full": on_full},
        "zmq": {"endpoint": "tcp://127.0.0.1:1"},
        "streams": [{"id": 0, "name": "raw", "kind": "other", "encoding": "bytes",
                     "topic": "raw", "codec": "none"}],
    })  # fmt: skip


def _feed(sink: SegmentSink, windows: int, frame_bytes: int = 256 * 1024) -> int:
    engine: WindowEngine[IngestFrame] = WindowEngine([0], window_ns=100_000_000, grace_ns=0)
    payload = memoryview(os.urandom(frame_bytes))
    sent = 0
    for i in range(windows):
        f = IngestFrame(0, T0 + i * 100_000_000 + 1, payload, 2, i, T0)
        sent += 1
        for w in engine.push(f, i):
            sink.write(w)
    for w in engine.flush():
        sink.write(w)
    return sent


def test_stop_policy_on_a_full_filesystem(small_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    # 24 MB filesystem, keep 12 MB free: ~48 frames of 256 KB fit, then recording stops.
    cfg = _config(small_fs, "stop", 12)
    stats = RecorderStats()
    stats.add_stream(0, "raw")
    sink = SegmentSink(cfg, stats, disk_check_s=0)  # type: ignore[arg-type]
    with caplog.at_level(logging.CRITICAL, logger="hyperframes.recorder.daemon"):
        sent = _feed(sink, 120)
    sink.close()
    assert any("DISK FULL" in r.message for r in caplog.records)
    assert not stats.recording
    written = stats.streams[0].frames_written
    dropped = stats.streams[0].drops.get(DropReason.DISK_FULL, 0)
    assert written > 10 and dropped > 10
    assert written + dropped == sent
    assert free_bytes(small_fs) >= 11 * MB
    assert not list(small_fs.glob("*.tmp"))  # the segment was finalized when it stopped
    from hyperframes.reader import HyperframeReader

    assert sum(HyperframeReader(p).frame_count for p in list_segments(small_fs, "car")) == written


def test_delete_oldest_on_a_full_filesystem(small_fs: Path) -> None:
    cfg = _config(small_fs, "delete-oldest", 12)
    stats = RecorderStats()
    stats.add_stream(0, "raw")
    sink = SegmentSink(cfg, stats, disk_check_s=0)  # type: ignore[arg-type]
    sent = _feed(sink, 150)  # ~37 MB through a 24 MB filesystem
    sink.close()
    assert stats.recording
    assert stats.segments_deleted > 0
    assert stats.streams[0].frames_written == sent
    assert not stats.streams[0].drops
    remaining = list_segments(small_fs, "car")
    assert remaining and remaining[-1] == sink.finalized[-1]  # the newest survive
    assert free_bytes(small_fs) >= 10 * MB


def test_stop_policy_without_a_small_fs(tmp_path: Path) -> None:
    """Anywhere: a floor above the real free space stops recording at the first window."""
    free_mb = free_bytes(tmp_path) // MB
    cfg = _config(tmp_path, "stop", int(free_mb) + 1000)
    stats = RecorderStats()
    stats.add_stream(0, "raw")
    sink = SegmentSink(cfg, stats, disk_check_s=0)  # type: ignore[arg-type]
    sent = _feed(sink, 5, 1024)
    sink.close()
    assert not stats.recording
    assert stats.streams[0].drops[DropReason.DISK_FULL] == sent
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("block_kib", "codec"), [(256, 3), (0, 1)])
def test_block_kib_reaches_the_segment_writer(tmp_path: Path, block_kib: int, codec: int) -> None:
    from hyperframes.format.codecs import codec_of
    from hyperframes.reader import HyperframeReader

    cfg = parse_config({
        "vehicle_id": "car", "output_dir": str(tmp_path), "block_kib": block_kib,
        "zmq": {"endpoint": "tcp://127.0.0.1:1"},
        "streams": [{"id": 0, "name": "raw", "kind": "other", "encoding": "bytes",
                     "topic": "raw", "codec": "lz4"}],
    })  # fmt: skip
    stats = RecorderStats()
    stats.add_stream(0, "raw")
    sink = SegmentSink(cfg, stats, disk_check_s=0)
    engine: WindowEngine[IngestFrame] = WindowEngine([0], window_ns=100_000_000, grace_ns=0)
    payload = memoryview(bytes(range(256)) * 4096)  # 1 MiB, compressible
    for i in range(3):
        for w in engine.push(IngestFrame(0, T0 + i * 100_000_000 + 1, payload, 2, i, T0), i):
            sink.write(w)
    for w in engine.flush():
        sink.write(w)
    sink.close()
    (path,) = list_segments(tmp_path, "car")
    with HyperframeReader(path) as r:
        assert {codec_of(int(f)) for f in r.index["flags"]} == {codec}
        assert all(f.data.tobytes() == payload.tobytes() for f in r.frames("raw"))
