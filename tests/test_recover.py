"""Crash recovery: truncate a .tmp at many offsets, recover, verify."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperframes import RecoveryError
from hyperframes.format.windows import window_of
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

from conftest import T0, WINDOW_NS, small_frames, small_streams


def _crashed_tmp(tmp_path: Path, seconds: float = 1.0) -> tuple[Path, list]:
    """A .tmp as a crash leaves it: every window written, never finalized."""
    frames = small_frames(seconds)
    w = HyperframeWriter(tmp_path / "seg.hf", small_streams(), WINDOW_NS)
    for sid, t, p in frames:
        w.append(sid, t, p)
    w.abort()
    return tmp_path / "seg.hf.tmp", frames


def test_recover_unfinalized_keeps_every_written_window(tmp_path: Path) -> None:
    tmp, frames = _crashed_tmp(tmp_path)
    report = recover(tmp)
    assert report.output == tmp_path / "seg.hf"
    assert report.frames == len(frames) and report.lost_bytes == 0
    assert verify_file(report.output).ok
    with HyperframeReader(report.output) as r:
        got = {(f.stream_id, f.timestamp_ns): f.tobytes() for s in r.streams for f in r.frames(s)}
    assert got == {(sid, t): p for sid, t, p in frames}
    assert tmp.exists()  # the source is left alone


def test_truncation_at_many_offsets(tmp_path: Path) -> None:
    tmp, frames = _crashed_tmp(tmp_path, 0.6)
    data = tmp.read_bytes()
    size = len(data)
    with HyperframeReader(recover(tmp, tmp_path / "full.hf").output) as full:
        table = full.window_table
        block_ends = sorted(
            int(o + s) for o, s in zip(table["payload_offset"], table["payload_size"], strict=True)
        )
    offsets = sorted(
        {
            *range(0, size, max(1, size // 97)),
            *block_ends,
            *(e - 1 for e in block_ends),
            *(e + 1 for e in block_ends),
        }
    )
    recovered_counts = []
    for cut in offsets:
        src = tmp_path / "cut.hf.tmp"
        src.write_bytes(data[:cut])
        out = tmp_path / "cut.hf"
        out.unlink(missing_ok=True)
        complete_blocks = sum(1 for e in block_ends if e <= cut)
        if complete_blocks == 0:
            with pytest.raises(RecoveryError):
                recover(src, out)
            continue
        report = recover(src, out)
        assert report.windows == complete_blocks, cut
        assert verify_file(out).ok
        with HyperframeReader(out) as r:
            assert r.frame_count == report.frames
            ids = {int(w) for w in r.window_ids}
        # every frame of a recovered window is there, none of a lost one
        expected = [f for f in frames if window_of(f[1], WINDOW_NS) in ids]
        assert report.frames == len(expected)
        recovered_counts.append(report.frames)
    assert recovered_counts == sorted(recovered_counts)
    assert recovered_counts[-1] == len(frames)


def test_damaged_payload_stops_recovery_at_that_window(tmp_path: Path) -> None:
    tmp, _ = _crashed_tmp(tmp_path)
    with HyperframeReader(recover(tmp, tmp_path / "ref.hf").output) as ref:
        third = ref.window_table[2]
    raw = bytearray(tmp.read_bytes())
    raw[int(third["payload_offset"]) + 5] ^= 0xFF
    tmp.write_bytes(bytes(raw))
    report = recover(tmp, tmp_path / "dmg.hf")
    assert report.windows == 2
    assert "checksum" in report.stop_reason and report.lost_frames == int(third["frame_count"])


def test_recover_refuses_existing_output_and_garbage(tmp_path: Path) -> None:
    tmp, _ = _crashed_tmp(tmp_path)
    (tmp_path / "seg.hf").write_bytes(b"x")
    with pytest.raises(RecoveryError, match="already exists"):
        recover(tmp)
    junk = tmp_path / "junk.hf.tmp"
    junk.write_bytes(os.urandom(5000))
    with pytest.raises(RecoveryError, match="unreadable"):
        recover(junk)


_CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import small_frames, small_streams, WINDOW_NS
from hyperframes.writer import HyperframeWriter
w = HyperframeWriter({path!r}, small_streams(), WINDOW_NS, fsync_interval_s=0)
for i, (sid, t, p) in enumerate(small_frames(3.0)):
    w.append(sid, t, p)
    if i == 600:
        print("written", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_kill_9_mid_recording_then_recover(tmp_path: Path) -> None:
    path = tmp_path / "killed.hf"
    code = _CHILD.format(tests=str(Path(__file__).parent), path=str(path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "written"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not path.exists()
    report = recover(Path(str(path) + ".tmp"))
    assert report.windows >= 5 and verify_file(report.output).ok
    with HyperframeReader(report.output) as r:
        assert r.start_ns == window_of(T0 + 1, WINDOW_NS) * WINDOW_NS
    shutil.rmtree(tmp_path / "x", ignore_errors=True)
