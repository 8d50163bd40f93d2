"""Round trips through the real writer and reader, on real files."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from hyperframes import (
    CodecSpec,
    FileMetadata,
    FrameFlags,
    FrameNotFoundError,
    NotFinalizedError,
    StreamInfo,
)
from hyperframes.format.codecs import codec_of, decode_frame, encode_frame
from hyperframes.format.layout import HEADER_SIZE, Header
from hyperframes.format.windows import window_of
from hyperframes.reader import HyperframeReader
from hyperframes.writer import HyperframeWriter, WriteFrame

from conftest import T0, WINDOW_NS, lidar_sweep, small_frames, small_streams


def test_every_frame_comes_back_byte_for_byte(write_file) -> None:
    path, frames = write_file()
    with HyperframeReader(path) as r:
        assert r.frame_count == len(frames)
        assert r.metadata == FileMetadata("test-car", "t", 7, T0)
        got = {(f.stream_id, f.timestamp_ns): f.tobytes() for s in r.streams for f in r.frames(s)}
    assert got == {(sid, t): p for sid, t, p in frames}


def test_index_is_sorted_and_payloads_aligned(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        idx = r.index
        key = list(zip(idx["stream_id"].tolist(), idx["timestamp_ns"].tolist(), strict=True))
        assert key == sorted(key)
        assert np.all(idx["offset"] % 64 == 0)
        for i in range(0, r.frame_count, 7):
            assert r.frame_at(i).data.ctypes.data % 64 == 0


def test_header_fields(write_file) -> None:
    path, frames = write_file()
    raw = path.read_bytes()
    h, magic, stored, computed = Header.decode(raw[:HEADER_SIZE])
    assert magic == b"HFRM" and h.version == 1 and h.header_size == 512
    assert h.flags & 1 and h.flags & (1 << 31)
    assert h.frame_count == len(frames) and h.stream_count == 3
    assert h.index_size == 32 * len(frames)
    assert h.index_offset + h.index_size <= len(raw)
    assert h.window_ns == WINDOW_NS
    assert h.start_ns == window_of(frames[0][1], WINDOW_NS) * WINDOW_NS
    assert h.end_ns == (window_of(frames[-1][1], WINDOW_NS) + 1) * WINDOW_NS
    assert stored == computed


def test_codecs_follow_encoding_policy(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        by_stream = {int(e["stream_id"]): int(e["flags"]) for e in r.index}
        assert codec_of(by_stream[0]) == 0  # jpeg: stored as it came
        assert codec_of(by_stream[1]) == 5  # blosc2-lz4: the shuffle is inside its chunks
        assert not by_stream[1] & FrameFlags.SHUFFLED
        assert r.streams[1].codec == "blosc2-lz4" and r.streams[1].shuffle
        assert r.streams[2].codec == "zstd"
        assert all(int(e["flags"]) & FrameFlags.HW_TIMESTAMP for e in r.index)


def test_array_helper_views_with_stream_dtype(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        f = r.read("lidar", T0 + 1_000_000 + 300_000_000, "before")
        arr = f.array()
        assert arr.dtype == np.dtype("<f4") and arr.shape == (500, 4)
        assert np.array_equal(arr, lidar_sweep(f.stream_index))
        with pytest.raises(TypeError, match="not an array"):
            r.read("cam", T0).array()


def test_read_modes_and_tolerance(write_file) -> None:
    path, _ = write_file()
    lidar_t = [T0 + 1_000_001 + k * 100_000_000 for k in range(10)]
    with HyperframeReader(path) as r:
        assert r.read(1, lidar_t[3] + 10).timestamp_ns == lidar_t[3]
        assert r.read(1, lidar_t[3] + 60_000_000).timestamp_ns == lidar_t[4]
        assert r.read(1, lidar_t[3] + 60_000_000, "before").timestamp_ns == lidar_t[3]
        assert r.read(1, lidar_t[3] + 1, "after").timestamp_ns == lidar_t[4]
        assert r.read(1, lidar_t[3], "after").timestamp_ns == lidar_t[3]
        with pytest.raises(FrameNotFoundError) as exc:
            r.read(1, lidar_t[3] + 40_000_000, tolerance_ns=10_000_000)
        assert exc.value.found_ns == lidar_t[3] and str(path) in str(exc.value)
        with pytest.raises(FrameNotFoundError):
            r.read(1, T0, "before")
        with pytest.raises(KeyError, match="no stream named 'radar'"):
            r.read("radar", T0)


def test_read_range_is_inclusive(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        t = [int(x) for x in r.timestamps("imu")]
        got = r.read_range("imu", t[10], t[20])
        assert [f.timestamp_ns for f in got] == t[10:21]
        assert [f.stream_index for f in got] == list(range(10, 21))


def test_windows_hold_the_brief_frame_counts(write_file) -> None:
    path, frames = write_file(frames=small_frames(2.0))
    with HyperframeReader(path) as r:
        assert r.window_count() == 20  # 2 s of 100 ms windows
        counts = []
        for hf in r:
            assert all(
                hf.start_ns < f.timestamp_ns <= hf.end_ns for fs in hf.frames.values() for f in fs
            )
            counts.append(tuple(len(hf[s]) for s in (0, 1, 2)))
        middle = counts[2:-2]
        assert all(c[1] == 1 and c[2] == 20 and c[0] in (3, 4) for c in middle), middle
        assert sum(sum(c) for c in counts) == len(frames)


def test_get_window_uses_one_read_per_block(write_file, monkeypatch) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        calls = []
        real = os.preadv

        def counting(fd: int, bufs: list, offset: int) -> int:
            calls.append(offset)
            return real(fd, bufs, offset)

        monkeypatch.setattr(os, "preadv", counting)
        hf = r.get_window(3)
        assert sum(len(v) for v in hf.frames.values()) == 24
        assert len(calls) == 1


def test_out_of_order_and_late_frames(tmp_path: Path) -> None:
    path = tmp_path / "late.hf"
    with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        w.append(2, T0 + 50, b"a" * 48)
        w.append(2, T0 + 40, b"b" * 48)  # out of order inside a window
        w.append(2, T0 + 150_000_000, b"c" * 48)  # next window: first is written
        w.append(2, T0 + 60, b"d" * 48)  # late: its window is already on disk
    with HyperframeReader(path) as r:
        assert [int(t) for t in r.timestamps(2)] == [T0 + 40, T0 + 50, T0 + 60, T0 + 150_000_000]
        late = r.read(2, T0 + 60)
        assert late.late and late.tobytes() == b"d" * 48
        assert not r.read(2, T0 + 50).late
        hf = r.get_window(0)
        assert [f.tobytes()[:1] for f in hf[2]] == [b"b", b"a", b"d"]


def test_write_window_records_missing_streams_and_rejects_going_back(tmp_path: Path) -> None:
    path = tmp_path / "w.hf"
    with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        w.write_window(5, [WriteFrame(2, 5 * WINDOW_NS + 10, b"x" * 48)], missing=[0, 1])
        with pytest.raises(ValueError, match="must increase"):
            w.write_window(5, [WriteFrame(2, 5 * WINDOW_NS + 20, b"y" * 48)])
        w.write_window(6, [WriteFrame(0, 6 * WINDOW_NS + 1, b"\xff\xd8", FrameFlags.KEYFRAME)])
    with HyperframeReader(path) as r:
        assert r.window_count() == 2
        assert r.missing == {5: (0, 1)}
        assert r.get_window(0).missing == (0, 1)
        f = r.read(0, 6 * WINDOW_NS)
        assert f.keyframe and not f.hardware_timestamp


def test_exception_in_with_leaves_recoverable_tmp_not_final(tmp_path: Path) -> None:
    path = tmp_path / "crash.hf"
    with pytest.raises(RuntimeError), HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        for sid, t, p in small_frames(0.5):
            w.append(sid, t, p)
        raise RuntimeError("sensor exploded")
    assert not path.exists()
    tmp = tmp_path / "crash.hf.tmp"
    assert tmp.exists()
    with pytest.raises(NotFinalizedError, match="hyperframes recover"):
        HyperframeReader(tmp)


def test_refuses_to_overwrite(write_file, tmp_path: Path) -> None:
    path, _ = write_file()
    with pytest.raises(FileExistsError):
        HyperframeWriter(path, small_streams(), WINDOW_NS)
    (tmp_path / "x.hf.tmp").write_bytes(b"left from a crash")
    with pytest.raises(FileExistsError):
        HyperframeWriter(tmp_path / "x.hf", small_streams(), WINDOW_NS)
    assert (tmp_path / "x.hf.tmp").read_bytes() == b"left from a crash"


def test_invalid_appends_are_rejected(tmp_path: Path) -> None:
    with HyperframeWriter(tmp_path / "v.hf", small_streams(), WINDOW_NS) as w:
        with pytest.raises(ValueError, match="unknown stream id 9"):
            w.append(9, T0, b"")
        with pytest.raises(ValueError, match="timestamp"):
            w.append(0, -1, b"")
        with pytest.raises(ValueError, match="bits the writer owns"):
            w.append(0, T0, b"", flags=FrameFlags.SHUFFLED)


def test_jpeg_stream_refuses_a_compressing_codec(tmp_path: Path) -> None:
    streams = small_streams()
    streams[0] = type(streams[0])(0, "cam", "camera", "jpeg", codec="zstd")
    with pytest.raises(ValueError, match="already compressed"):
        HyperframeWriter(tmp_path / "j.hf", streams, WINDOW_NS)


@pytest.mark.parametrize("spec", ["none", "lz4", "lz4hc:9", "zstd:1", "zstd:19"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_codec_round_trips_through_a_file(tmp_path: Path, spec: str, shuffle: bool) -> None:
    codec = CodecSpec.parse(spec, shuffle)
    path = tmp_path / "c.hf"
    sweeps = [np.tile(lidar_sweep(i, 50), (10, 1)) for i in range(5)]  # compressible
    with HyperframeWriter(path, small_streams(), WINDOW_NS, codecs={1: codec}) as w:
        for i, s in enumerate(sweeps):
            w.append(1, T0 + i * WINDOW_NS + 1, s)
    with HyperframeReader(path) as r:
        got = [f.tobytes() for f in r.frames(1)]
        flags = r.index["flags"]
    assert got == [s.tobytes() for s in sweeps]
    if spec != "none":
        assert codec_of(int(flags[0])) == codec.codec_id
    # bytes that do not fill an item survive the codec (the writer refuses them for arrays)
    odd = sweeps[0].tobytes() + b"\x07" * 7
    stored, bits = encode_frame(odd, codec, 4)
    assert bytes(decode_frame(stored, bits, 4, 1 << 20)) == odd


def test_writer_refuses_payloads_that_do_not_fit_the_stream(tmp_path: Path) -> None:
    streams = [*small_streams(), StreamInfo(5, "imu2", "imu", "imu-f64")]
    with HyperframeWriter(tmp_path / "s.hf", streams, WINDOW_NS) as w:
        with pytest.raises(ValueError, match="whole number of 16-byte records"):
            w.append(1, T0 + 1, b"\x00" * 7)
        with pytest.raises(ValueError, match="needs exactly 48"):
            w.append(5, T0 + 1, b"\x00" * 40)
        w.append(5, T0 + 1, b"\x00" * 48)


def test_incompressible_frames_fall_back_to_raw(tmp_path: Path) -> None:
    path = tmp_path / "r.hf"
    noise = np.random.default_rng(1).bytes(4096)
    with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        w.append(1, T0 + 1, noise)
    with HyperframeReader(path) as r:
        assert codec_of(int(r.index["flags"][0])) == 0
        assert r.frame_at(0).tobytes() == noise


def test_readers_and_writers_refuse_pickle(write_file, tmp_path: Path) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r, pytest.raises(TypeError, match="one reader per process"):
        pickle.dumps(r)
    with (
        HyperframeWriter(tmp_path / "p.hf", small_streams(), WINDOW_NS) as w,
        pytest.raises(TypeError),
    ):
        pickle.dumps(w)


def test_receive_times_are_stored(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        aux = r.aux()
        assert np.array_equal(aux["receive_ns"], r.index["timestamp_ns"] + 1000)


def test_empty_file_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "empty.hf"
    with HyperframeWriter(path, small_streams(), WINDOW_NS):
        pass
    with HyperframeReader(path) as r:
        assert r.frame_count == 0 and r.window_count() == 0
        with pytest.raises(FrameNotFoundError):
            r.read(0, T0)


def test_reader_is_safe_across_threads(write_file) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path, frames = write_file()
    expected = {(sid, t): p for sid, t, p in frames}
    with HyperframeReader(path) as r, ThreadPoolExecutor(4) as pool:
        keys = list(expected)[::3]
        got = list(pool.map(lambda k: r.read(k[0], k[1]).tobytes(), keys))
    assert got == [expected[k] for k in keys]


def test_small_frames_held_together_do_not_share_bytes(write_file) -> None:
    path, frames = write_file()
    expected = {(sid, t): p for sid, t, p in frames}
    with HyperframeReader(path) as r:
        held = [r.frame_at(i) for i in range(r.frame_count)]  # many small frames at once
        assert all(f.data.ctypes.data % 64 == 0 for f in held)
        assert {(f.stream_id, f.timestamp_ns): f.tobytes() for f in held} == expected


def test_writer_counts_bytes_per_stream(tmp_path: Path) -> None:
    path = tmp_path / "t.hf"
    sweep = np.tile(lidar_sweep(0, 50), (10, 1))
    with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        w.append(0, T0 + 1, b"\xff\xd8" + b"x" * 98)
        w.append(1, T0 + 2, sweep)
        w.append(1, T0 + WINDOW_NS + 2, sweep)
    with HyperframeReader(path) as r:
        stored = {sid: int(r.index["size"][r.index["stream_id"] == sid].sum()) for sid in (0, 1)}
    assert w.stream_totals[0] == [1, 100, 100]
    assert w.stream_totals[1] == [2, 2 * sweep.nbytes, stored[1]]
    assert stored[1] < sweep.nbytes
    assert w.stream_totals[2] == [0, 0, 0]
