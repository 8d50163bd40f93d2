"""A large blocked payload is read while it is decoded (issue 19).

``HyperframeReader.frame_at`` reads a blocked payload (LZ4 or ZSTD blocks,
blosc2) of at least ``_STREAM_MIN`` stored bytes run of blocks by run of
blocks, each by the thread that decodes it, and checks the CRC once every
byte is in. These tests hold it to what the plain path gives: the same
frames on one thread and on several, and the same typed errors naming the
file for a damaged payload, a damaged block table and a file cut short
under an open reader.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_hostile import index_entry, reseal

import hyperframes.reader as reader_mod
from hyperframes import (
    ChecksumError,
    CorruptFileError,
    FileMetadata,
    SensorKind,
    StreamInfo,
    _split,
)
from hyperframes._io import scratch
from hyperframes.codecs import CODEC_BLOSC2, CODEC_LZ4_BLOCKS, CODEC_ZSTD_BLOCKS, codec_of
from hyperframes.reader import HyperframeReader
from hyperframes.writer import HyperframeWriter

from conftest import T0, WINDOW_NS


@pytest.fixture(autouse=True)
def split_even_when_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threaded paths are taken whatever the load and the helpers' start time here."""
    monkeypatch.setattr(_split._load, "check", lambda: False)
    monkeypatch.setattr(_split._wake, "pays", lambda rest_ns: True)


_CODECS = {"lz4": CODEC_LZ4_BLOCKS, "zstd": CODEC_ZSTD_BLOCKS, "blosc2-lz4": CODEC_BLOSC2}
_POINTS = 120_000  # a 1.9 MB sweep: 8 blocks of 256 KiB


def _sweep(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)  # rings of 2,000 points seen again, every other point noise
    ring = rng.normal(0, 20, (2000, 4)).astype("<f4")
    sweep = np.tile(ring, (_POINTS // 2000, 1))
    sweep[::2] = rng.normal(0, 20, (_POINTS // 2, 4))  # every codec halves it, or so
    return sweep


def _write(path: Path, codec: str, frames: int = 3) -> list[np.ndarray]:
    s = StreamInfo(0, "lidar", SensorKind.LIDAR, "xyzi-f32", codec=codec, rate_hz=10.0)
    sweeps = [_sweep(i) for i in range(frames)]
    with HyperframeWriter(path, [s], WINDOW_NS, FileMetadata(created_ns=T0)) as w:
        for i, a in enumerate(sweeps):
            w.append(0, T0 + 1 + i * 100_000_000, a.tobytes())
    return sweeps


@pytest.fixture(scope="module", params=sorted(_CODECS))
def recorded(request, tmp_path_factory) -> tuple[Path, str, list[np.ndarray]]:
    codec = request.param
    path = tmp_path_factory.mktemp("streamed") / f"{codec}.hf"
    return path, codec, _write(path, codec)


def test_the_file_takes_the_streamed_path(recorded, monkeypatch) -> None:
    path, codec, sweeps = recorded
    raw = path.read_bytes()
    e = index_entry(raw, 0)
    assert codec_of(e["flags"]) == _CODECS[codec]
    assert e["size"] >= reader_mod._STREAM_MIN
    real = HyperframeReader._decode_streamed
    calls = []

    def counted(self, i, row):  # the real method, its calls counted
        calls.append(i)
        return real(self, i, row)

    monkeypatch.setattr(HyperframeReader, "_decode_streamed", counted)
    with HyperframeReader(path) as r:
        assert np.array_equal(r.frame_at(0).array(), sweeps[0])
    assert calls == [0]


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_streamed_reads_give_the_written_frames(recorded, threads: int, monkeypatch) -> None:
    path, _, sweeps = recorded

    def plain(*args: object, **kwargs: object) -> None:
        raise AssertionError("a sound payload fell back to the plain path")

    monkeypatch.setattr(HyperframeReader, "_decode", plain)
    with HyperframeReader(path, threads=threads) as r:
        for i in (2, 0, 1, 1):  # in any order, a frame again
            scratch(4 << 20)[:] = 0xA5  # no byte of an earlier read left to lean on
            got = r.frame_at(i)
            assert np.array_equal(got.array(), sweeps[i])
            assert got.data.ctypes.data % 64 == 0


def test_streamed_and_plain_paths_agree(recorded, monkeypatch) -> None:
    path, _, _ = recorded
    with HyperframeReader(path) as r:
        streamed = [r.frame_at(i).tobytes() for i in range(3)]
    monkeypatch.setattr(reader_mod, "_STREAM_MIN", 1 << 62)  # every read the plain way
    with HyperframeReader(path) as r:
        assert [r.frame_at(i).tobytes() for i in range(3)] == streamed


def _flip(path: Path, out: Path, at: int) -> Path:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x10
    out.write_bytes(bytes(raw))
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_a_flipped_byte_in_a_late_block_is_a_checksum_error(recorded, tmp_path, threads) -> None:
    path, _, _ = recorded
    e = index_entry(path.read_bytes(), 1)
    bad = _flip(path, tmp_path / "flipped.hf", e["offset"] + e["size"] - 100)
    with HyperframeReader(bad, threads=threads) as r:
        r.frame_at(0)  # an undamaged frame reads
        with pytest.raises(ChecksumError) as exc:
            r.frame_at(1)
    assert str(bad) in str(exc.value) and "frame 1" in str(exc.value)
    with HyperframeReader(bad, threads=threads, verify=False) as r:
        try:  # unchecked: the damaged bytes decode to something, or fail as corrupt
            r.frame_at(1)
        except CorruptFileError as err:
            assert str(bad) in str(err)


def test_a_damaged_block_table_with_a_good_crc_is_a_corrupt_file(recorded, tmp_path) -> None:
    path, _, _ = recorded
    raw = bytearray(path.read_bytes())
    e = index_entry(raw, 1)
    raw[e["offset"] + 8 : e["offset"] + 12] = (1).to_bytes(4, "little")  # block 0: 1 byte
    import struct

    from hyperframes._crc import crc32c

    payload = bytes(raw[e["offset"] : e["offset"] + e["size"]])
    struct.pack_into("<I", raw, e["pos"] + 28, crc32c(payload))  # the entry's CRC agrees
    reseal(raw)
    bad = tmp_path / "table.hf"
    bad.write_bytes(bytes(raw))
    for threads in (1, 2):
        with HyperframeReader(bad, threads=threads) as r, pytest.raises(CorruptFileError) as exc:
            r.frame_at(1)
        assert not isinstance(exc.value, ChecksumError)
        assert str(bad) in str(exc.value) and "frame 1" in str(exc.value)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_file_cut_short_under_an_open_reader(recorded, tmp_path, threads) -> None:
    path, _, _ = recorded
    raw = path.read_bytes()
    e = index_entry(raw, 2)
    cut = tmp_path / "cut.hf"
    cut.write_bytes(raw)
    with HyperframeReader(cut, threads=threads) as r:
        r.index  # noqa: B018 - every entry proven while the file is whole
        os.truncate(cut, e["offset"] + e["size"] // 2)  # someone cuts it mid-payload
        with pytest.raises(CorruptFileError) as exc:
            r.frame_at(2)
    assert str(cut) in str(exc.value) and "frame 2" in str(exc.value)
