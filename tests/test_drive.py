"""Drives: many segments read as one recording, cut with slice and joined with cat."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from drive_files import (
    STREAMS,
    T0,
    WINDOW_NS,
    Block,
    frame_key,
    make_run,
    write_segments,
    write_whole,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile import index_entry, reseal

from hyperframes import FileMetadata, FrameFlags, SensorKind, StreamInfo
from hyperframes.drive import find_drives, open_drive
from hyperframes.drive.splice import cat_files, slice_drive
from hyperframes.errors import DriveError, FrameNotFoundError
from hyperframes.format.naming import segment_name
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter, WriteFrame

NAMES = [s.name for s in STREAMS]


def _query(obj: object, *args: object) -> object:
    try:
        return frame_key(obj.read(*args))  # type: ignore[attr-defined]
    except FrameNotFoundError:
        return "none"


def _windows(obj: object, count: int) -> list[object]:
    out: list[object] = []
    for i in range(count):
        hf = obj.get_window(i)  # type: ignore[attr-defined]
        frames = {s: [frame_key(f) for f in fs] for s, fs in hf.frames.items() if fs}
        out.append((hf.window_id, frames, hf.missing))
    return out


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    windows=st.integers(4, 30),
    cuts=st.lists(st.integers(1, 29), max_size=5),
)
def test_drive_equals_one_file(tmp_path_factory: pytest.TempPathFactory, seed: int,
                               windows: int, cuts: list[int]) -> None:  # fmt: skip
    """Every drive query equals the same query on the cat of its segments (and on one file
    written whole); slice holds exactly the frames its range selects; verify accepts both."""
    d = tmp_path_factory.mktemp("drive")
    rng = np.random.default_rng(seed)
    late = [c - 1 for c in cuts] + [c - 2 for c in cuts]  # late frames cross the cuts
    blocks = make_run(windows, rng, late_windows=late)
    if not any(b.frames for b in blocks):
        return
    segs = write_segments(d / "run", blocks, cuts)
    whole = write_whole(d / "whole.hf", blocks)
    cat = cat_files(segs, d / "cat.hf")
    assert verify_file(cat.output).ok
    with open_drive(d / "run", max_open=2) as drive, HyperframeReader(cat.output) as c, \
            HyperframeReader(whole) as w:  # fmt: skip
        assert drive.window_count() == c.window_count() == w.window_count()
        assert _windows(drive, len(drive)) == _windows(c, len(c)) == _windows(w, len(w))
        assert drive.frame_count == c.frame_count
        lo, hi = c.start_ns - WINDOW_NS, c.end_ns + WINDOW_NS
        for name in NAMES:
            assert np.array_equal(drive.timestamps(name), c.timestamps(name))
            for t in rng.integers(lo, hi, 12).tolist():
                for mode in ("nearest", "before", "after"):
                    assert _query(drive, name, t, mode) == _query(c, name, t, mode)
            a, b = sorted(rng.integers(lo, hi, 2).tolist())
            want = [frame_key(f) for f in c.read_range(name, a, b)]
            assert [frame_key(f) for f in drive.read_range(name, a, b)] == want
        a, b = sorted(rng.integers(lo, hi, 2).tolist())
        if not drive._spans.overlapping(a, b):
            return
        out = slice_drive(drive, a, b, d / "slice.hf", streams=["cam", "imu"])
        assert verify_file(out.output).ok
        with HyperframeReader(out.output) as s:
            assert sorted(s.streams[i].name for i in s.streams) == ["cam", "imu"]
            for name in ("cam", "imu"):
                got = [frame_key(s.frame_at(i)) for i in range(*s.stream_slice(name))]
                assert got == [frame_key(f) for f in drive.read_range(name, a, b)]


def test_open_reads_headers_only(tmp_path: Path) -> None:
    blocks = make_run(30, np.random.default_rng(3))
    write_segments(tmp_path, blocks, [5, 10, 15, 20, 25])
    drive = open_drive(tmp_path)
    assert len(drive.segments) == 6 and not drive._readers
    assert all(s._meta is None and s._windows is None for s in drive.segments)
    assert drive.start_ns < drive.end_ns and drive.gaps == []
    drive.read("imu", T0 + 1_234_000_000)
    assert len(drive._readers) == 1  # one segment's index, not six


def test_late_frame_of_previous_segment_is_in_its_window(tmp_path: Path) -> None:
    w0 = (T0 + 1) // WINDOW_NS
    blocks = [
        Block(w0, [WriteFrame(2, w0 * WINDOW_NS + 5, np.zeros(6).tobytes(), 0, 0)]),
        Block(w0 + 1, [
            WriteFrame(2, w0 * WINDOW_NS + 9, np.ones(6).tobytes(), int(FrameFlags.LATE), 1),
            WriteFrame(2, (w0 + 1) * WINDOW_NS + 5, np.ones(6).tobytes(), 0, 2),
        ]),
    ]  # fmt: skip
    write_segments(tmp_path, blocks, [1])
    with open_drive(tmp_path) as drive:
        hf = drive.get_window(0)
        assert [f.stream_index for f in hf[2]] == [0, 1] == [f.stream_index for f in hf["imu"]]
        assert hf[2][1].late and hf[2][1].path.endswith("_000001.hf")
        assert drive.read("imu", w0 * WINDOW_NS + 9).stream_index == 1


def test_damaged_segments_are_named_and_skipped(tmp_path: Path) -> None:
    blocks = make_run(30, np.random.default_rng(4))
    segs = write_segments(tmp_path, blocks, [10, 20])
    raw = bytearray(segs[0].read_bytes())
    raw[100] ^= 0xFF  # header checksum
    segs[0].write_bytes(bytes(raw))
    with HyperframeReader(segs[1]) as r:
        index_at = r.header.index_offset
    raw = bytearray(segs[1].read_bytes())
    raw[index_at + 9] ^= 0xFF  # index checksum, found on first use
    segs[1].write_bytes(bytes(raw))
    with open_drive(tmp_path) as drive:
        assert [d.path for d in drive.damaged] == [segs[0]]
        assert "CRC32C" in drive.damaged[0].what
        f = drive.read("imu", T0 + 2_500_000_000)
        assert f.path == str(segs[2])
        drive.read("imu", T0 + 1_500_000_000)  # segs[1] is opened, fails, is skipped
        assert [d.path for d in drive.damaged] == [segs[0], segs[1]]
        assert "index" in drive.damaged[1].what


def test_a_segment_with_an_entry_outside_its_payloads_is_skipped(tmp_path: Path) -> None:
    """Checksums intact, one index entry pointing past the payloads: a reader leaves that to
    its second read, a drive checks every entry when it opens the segment."""
    segs = write_segments(tmp_path, make_run(30, np.random.default_rng(7)), [10, 20])
    raw = bytearray(segs[1].read_bytes())
    with HyperframeReader(segs[1]) as r:
        beyond = r.header.index_offset + 64
    pos = index_entry(raw, 3)["pos"]
    raw[pos + 16 : pos + 24] = beyond.to_bytes(8, "little")
    reseal(raw)
    segs[1].write_bytes(bytes(raw))
    with open_drive(tmp_path) as drive:
        drive.read("imu", T0 + 1_500_000_000)  # segs[1] is opened, fails, is skipped
        assert [d.path for d in drive.damaged] == [segs[1]]
        assert "index entry 3" in drive.damaged[0].what


def test_two_vehicles_never_mixed_and_tmp_reported(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    write_segments(tmp_path, make_run(20, rng), [10], vehicle="car-7")
    write_segments(tmp_path, make_run(20, rng), [10], vehicle="car-9")
    tmp = tmp_path / (segment_name("car-7", T0 + 3_000_000_000, 2) + ".tmp")
    w = HyperframeWriter(tmp.with_suffix(""), list(STREAMS), WINDOW_NS)
    w.append(2, T0 + 3_000_000_001, np.zeros(6).tobytes())
    w.abort()
    with pytest.raises(DriveError, match=r"2 vehicles: car-7 \(2 segments\), car-9"):
        open_drive(tmp_path)
    drives = find_drives(tmp_path)
    assert [d.vehicle for d in drives] == ["car-7", "car-9"]
    assert drives[0].unfinished == [tmp] and drives[1].unfinished == []
    with open_drive(tmp_path, vehicle="car-9") as d9:
        assert {s.vehicle for s in d9.segments} == {"car-9"}
    with pytest.raises(DriveError, match="cat joins one vehicle"):
        cat_files([drives[0].segments[0].path, drives[1].segments[0].path], tmp_path / "x.hf")
    assert not (tmp_path / "x.hf").exists()


def test_gaps_missing_segments_and_stream_changes(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    blocks = make_run(100, rng)
    kept = blocks[:20] + blocks[60:]  # 4 s without a segment
    write_segments(tmp_path, kept, [20, 50])
    # seq 0, 1 (after the outage), 2; then rename seq 2 -> 4: two segments lost
    last = sorted(tmp_path.iterdir())[-1]
    last.rename(last.with_name(last.name.replace("_000002.hf", "_000004.hf")))
    with open_drive(tmp_path) as drive:
        gaps = drive.gaps
        assert len(gaps) == 1 and gaps[0].missing_segments == 0
        assert gaps[0].duration_ns >= 3_900_000_000
        assert drive.changes() == []
        assert all(set(ids) <= {0, 1, 2} for ids in drive.missing.values())
    extra = StreamInfo(5, "radar", SensorKind.RADAR, "bytes")
    name = segment_name("car-7", T0 + 20_000_000_000, 9)
    with HyperframeWriter(tmp_path / name, [*STREAMS, extra], WINDOW_NS,
                          FileMetadata("car-7", "t", 9, T0)) as w:  # fmt: skip
        w.append(5, T0 + 20_000_000_001, b"r")
    with open_drive(tmp_path) as drive:
        assert [g.missing_segments for g in drive.gaps] == [0, 4]
        (change,) = drive.changes()
        assert (change.stream, change.change, change.segment) == ("radar", "added", 3)
        assert drive.read("radar", T0 + 20_000_000_001).tobytes() == b"r"
        with pytest.raises(DriveError, match="stream table differs"):
            cat_files([s.path for s in drive.segments], tmp_path / "all.hf")


def test_slice_starts_h265_at_the_idr(tmp_path: Path) -> None:
    cam = StreamInfo(3, "front", SensorKind.CAMERA, "h265", rate_hz=10.0)
    names = []
    for seq in range(2):
        path = tmp_path / segment_name("car-7", T0 + seq * 1_000_000_000, seq)
        with HyperframeWriter(path, [cam], WINDOW_NS, FileMetadata("car-7", "t", seq)) as w:
            for i in range(10):
                k = seq * 10 + i
                flags = FrameFlags.KEYFRAME if k % 4 == 0 else 0
                w.append(3, T0 + k * WINDOW_NS + 50, bytes([k]) * 40, flags=int(flags))
        names.append(path)
    out = slice_drive(tmp_path, T0 + 10 * WINDOW_NS + 60, T0 + 14 * WINDOW_NS, tmp_path / "s.hf")
    (ks,) = out.keyframe_starts
    assert (ks.stream, ks.keyframe_ns) == ("front", T0 + 8 * WINDOW_NS + 50)  # in segment 0
    with HyperframeReader(out.output) as r:
        ts = r.timestamps("front").tolist()
        assert ts[0] == ks.keyframe_ns and ts[-1] == T0 + 13 * WINDOW_NS + 50
        assert r.frame_at(0).keyframe and len(ts) == 6
    assert verify_file(out.output).ok


def test_quarantined_frames_travel_with_their_block(tmp_path: Path) -> None:
    w0 = (T0 + 1) // WINDOW_NS
    imu = np.zeros(6).tobytes()
    blocks = [Block(w0 + k, [WriteFrame(2, (w0 + k) * WINDOW_NS + 5, imu, 0, k)]) for k in range(6)]
    blocks[3].frames.append(WriteFrame(0, 5, b"\xff\xd8q\xff\xd9", int(FrameFlags.QUARANTINED), 0))
    segs = write_segments(tmp_path / "run", blocks, [2, 4])
    cat = cat_files(segs, tmp_path / "cat.hf")
    assert (cat.frames, cat.quarantined) == (6, 1)
    with HyperframeReader(cat.output) as r:
        assert r.quarantined_frame(0).tobytes() == b"\xff\xd8q\xff\xd9"
    a, b = (w0 + 3) * WINDOW_NS, (w0 + 4) * WINDOW_NS
    part = slice_drive(tmp_path / "run", a, b, tmp_path / "s.hf", streams=["cam"])
    assert (part.frames, part.quarantined) == (0, 1)
    assert verify_file(cat.output).ok and verify_file(part.output).ok


def test_copy_range_without_copy_file_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperframes.storage.local import copy_range

    src, dst = tmp_path / "a", tmp_path / "b"
    data = np.random.default_rng(0).integers(0, 256, 3_000_000, np.uint8).tobytes()
    src.write_bytes(data)
    for fast in (True, False):
        if not fast:
            monkeypatch.delattr("os.copy_file_range", raising=False)
        fa, fb = os.open(src, os.O_RDONLY), os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        try:
            copy_range(fa, 100, fb, 64, 2_500_000)
            with pytest.raises(EOFError, match="early"):
                copy_range(fa, 2_999_000, fb, 3_000_000, 2000)
        finally:
            os.close(fa)
            os.close(fb)
        assert dst.read_bytes()[64 : 64 + 2_500_000] == data[100:2_500_100]


def test_cat_refuses_overlapping_segments(tmp_path: Path) -> None:
    segs = write_segments(tmp_path / "run", make_run(20, np.random.default_rng(8)), [10])
    with pytest.raises(DriveError, match="segments overlap"):
        cat_files([segs[0], segs[1], segs[0]], tmp_path / "x.hf")
    assert list(tmp_path.iterdir()) == [tmp_path / "run"]
