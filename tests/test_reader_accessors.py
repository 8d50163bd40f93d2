"""The reader's small public accessors: stream_slice, window_table, read_positions."""

from __future__ import annotations

import numpy as np
import pytest

from hyperframes import SensorKind, StreamInfo
from hyperframes import reader as reader_module
from hyperframes.format.layout import HEADER_SIZE, WINDOW_DTYPE, Header
from hyperframes.reader import HyperframeReader
from hyperframes.writer import HyperframeWriter, default_codec

from conftest import T0, WINDOW_NS, small_frames


def test_stream_slice_is_each_streams_rows_of_the_index(write_file) -> None:
    frames = [f for f in small_frames() if f[0] != 1]  # stream 1 (lidar) delivers nothing
    path, _ = write_file(frames=frames)
    with HyperframeReader(path) as r:
        sid = r.index["stream_id"]
        for s in r.streams.values():
            rows = np.flatnonzero(sid == s.id)
            lo, hi = r.stream_slice(s.id)
            assert r.stream_slice(s.name) == (lo, hi)
            assert isinstance(lo, int) and isinstance(hi, int)
            if len(rows):
                assert (lo, hi) == (int(rows[0]), int(rows[-1]) + 1)
            else:
                assert lo == hi
            assert hi - lo == sum(1 for f in frames if f[0] == s.id)
            assert np.array_equal(r.index["timestamp_ns"][lo:hi], r.timestamps(s.id))
        with pytest.raises(KeyError, match="no stream"):
            r.stream_slice("nope")
        with pytest.raises(KeyError, match="no stream"):
            r.stream_slice(9)


def test_window_table_is_the_files_table(write_file) -> None:
    path, frames = write_file()
    raw = path.read_bytes()
    h = Header.decode(raw[:HEADER_SIZE])[0]
    on_disk = np.frombuffer(raw[h.windows_offset : h.windows_offset + h.windows_size], WINDOW_DTYPE)
    with HyperframeReader(path) as r:
        table = r.window_table
        assert table.dtype == WINDOW_DTYPE and len(table) == r.window_count() == len(on_disk)
        assert np.array_equal(table, on_disk)
        assert np.array_equal(table["window_id"], r.window_ids)
        assert int(table["frame_count"].sum()) == len(frames) + len(r.quarantine())
        assert not table.flags.writeable
        for i, row in enumerate(table):  # every frame of a window lies in its block's payloads
            start = int(row["payload_offset"])
            end = start + int(row["payload_size"])
            offsets = r.index["offset"][r.window_entries(i)]
            assert np.all((offsets >= start) & (offsets < end))


def test_read_positions_gives_the_frames_in_the_order_asked(write_file, monkeypatch) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        n = r.frame_count
        rng = np.random.default_rng(5)
        positions = [int(p) for p in rng.permutation(n)[:40]] + [3, 3, n - 1, 0]
        got = r.read_positions(positions)
        assert len(got) == len(positions)
        for p, f in zip(positions, got, strict=True):
            want = r.frame_at(p)
            assert (f.stream_id, f.timestamp_ns, f.stream_index, f.flags) == (
                want.stream_id, want.timestamp_ns, want.stream_index, want.flags,
            )  # fmt: skip
            assert f.tobytes() == want.tobytes()
            assert f.data.ctypes.data % 64 == 0
        as_array = r.read_positions(np.array(positions[:10], np.uint32))
        assert [f.timestamp_ns for f in as_array] == [f.timestamp_ns for f in got[:10]]
        assert r.read_positions([]) == [] and r.read_positions(np.empty(0, np.int64)) == []

        calls = []
        real = reader_module.pread_into_aligned

        def counting(fd: int, size: int, offset: int) -> np.ndarray:
            calls.append((size, offset))
            return real(fd, size, offset)

        monkeypatch.setattr(reader_module, "pread_into_aligned", counting)
        window = r.window_entries(2)
        frames = r.read_positions(window[::-1])  # one block, asked backwards: one read
        assert len(calls) == 1 and len(frames) == len(window)
        assert [f.timestamp_ns for f in frames] == r.index["timestamp_ns"][window[::-1]].tolist()

        for bad in ([n], [-1], [0, n + 7]):
            with pytest.raises(IndexError, match="out of range"):
                r.read_positions(bad)
        for wrong in ([0.5], [True, False], [[0, 1]]):
            with pytest.raises(TypeError, match="integers"):
                r.read_positions(wrong)  # type: ignore[arg-type]


def test_raw_nv12_is_a_known_byte_encoding(tmp_path) -> None:
    width, height = 8, 6
    s = StreamInfo(4, "cam_nv12", SensorKind.CAMERA, "raw-nv12",
                   extra={"width": width, "height": height})  # fmt: skip
    assert (s.dtype, s.shape, s.itemsize, s.precompressed) == ("|u1", None, 1, False)
    assert default_codec(s).name == "lz4" and not default_codec(s).shuffle
    picture = np.arange(width * height * 3 // 2, dtype=np.uint8)
    with HyperframeWriter(tmp_path / "nv12.hf", [s], WINDOW_NS, threads=1) as w:
        w.append(4, T0 + 1, picture)
    with HyperframeReader(tmp_path / "nv12.hf") as r:
        assert r.stream("cam_nv12").dtype == "|u1"
        arr = r.read("cam_nv12", T0 + 1).array()
        assert arr.dtype == np.uint8 and np.array_equal(arr, picture)
