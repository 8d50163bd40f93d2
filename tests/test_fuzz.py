"""Hostile files: mutated headers, index entries and tables give typed errors only."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperframes import (
    ChecksumError,
    CorruptFileError,
    HyperframesError,
    NotFinalizedError,
    UnsupportedVersionError,
)
from hyperframes._crc import crc32c
from hyperframes.layout import HEADER_SIZE, Header
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from hyperframes.writer import HyperframeWriter

    from conftest import WINDOW_NS, small_frames, small_streams

    path = tmp_path_factory.mktemp("fuzz") / "s.hf"
    with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
        for sid, t, p in small_frames(0.3):
            w.append(sid, t, p)
    return path.read_bytes()


def _reseal(raw: bytearray) -> None:
    """Recompute the header CRC so that mutations reach the deeper checks."""
    struct.pack_into("<I", raw, 508, crc32c(bytes(raw[:508])))


def _reseal_index(raw: bytearray) -> None:
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
    index = bytes(raw[h.index_offset : h.index_offset + h.index_size])
    struct.pack_into("<I", raw, 120, crc32c(index))
    _reseal(raw)


def _read_everything(path: Path) -> None:
    with HyperframeReader(path) as r:
        for i in range(r.window_count()):
            r.get_window(i)
        for s in r.streams:
            for t in r.timestamps(s)[:3]:
                r.read(s, int(t))


def _expect_typed(path: Path) -> None:
    with contextlib.suppress(HyperframesError):
        _read_everything(path)
    result = verify_file(path)  # never raises
    assert isinstance(result.ok, bool)


_settings = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_settings
@given(st.integers(0, 135), st.integers(0, 255), st.booleans())
def test_mutated_header_gives_typed_errors(tmp_path: Path, sample: bytes, pos: int, val: int,
                                           reseal: bool) -> None:
    raw = bytearray(sample)
    raw[pos] = val
    if reseal:
        _reseal(raw)
    path = tmp_path / "m.hf"
    path.write_bytes(bytes(raw))
    _expect_typed(path)


@_settings
@given(st.data())
def test_mutated_index_entries_give_typed_errors(tmp_path: Path, sample: bytes,
                                                 data: st.DataObject) -> None:
    raw = bytearray(sample)
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
    entry = data.draw(st.integers(0, h.frame_count - 1))
    field = data.draw(st.sampled_from([(0, "<H"), (2, "<H"), (4, "<I"), (8, "<Q"), (16, "<Q"),
                                       (24, "<I"), (28, "<I")]))
    bits = {"<H": 16, "<I": 32, "<Q": 64}[field[1]]
    value = data.draw(st.one_of(st.integers(0, 2**bits - 1), st.sampled_from([0, 2**bits - 1])))
    struct.pack_into(field[1], raw, h.index_offset + 32 * entry + field[0], value)
    _reseal_index(raw)
    path = tmp_path / "m.hf"
    path.write_bytes(bytes(raw))
    _expect_typed(path)


def test_huge_sizes_are_refused_before_allocating(tmp_path: Path, sample: bytes) -> None:
    raw = bytearray(sample)
    struct.pack_into("<I", raw, 28, 2**32 - 1)  # frame count
    struct.pack_into("<Q", raw, 44, 2**37)  # index size: 128 GiB
    _reseal(raw)
    path = tmp_path / "huge.hf"
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="index"):
        HyperframeReader(path)


def test_lz4_size_prefix_lie_is_refused(tmp_path: Path, sample: bytes) -> None:
    raw = bytearray(sample)
    with HyperframeReader_bytes(tmp_path, raw) as r:
        lidar = int(np.flatnonzero(r.index["stream_id"] == 1)[0])
        e = r.index[lidar]
    struct.pack_into("<I", raw, int(e["offset"]), 2**31)  # claims 2 GiB raw
    path = tmp_path / "lie.hf"
    path.write_bytes(bytes(raw))
    with HyperframeReader(path, verify=False) as r, pytest.raises(CorruptFileError, match="lz4"):
        r.frame_at(lidar)
    with HyperframeReader(path) as r, pytest.raises(ChecksumError):
        r.frame_at(lidar)


def HyperframeReader_bytes(tmp_path: Path, raw: bytearray) -> HyperframeReader:
    path = tmp_path / "orig.hf"
    path.write_bytes(bytes(raw))
    return HyperframeReader(path)


@pytest.mark.parametrize(
    ("mutate", "error", "text"),
    [
        (lambda r: r.__setitem__(slice(0, 4), b"XXXX"), CorruptFileError, "bad magic"),
        (lambda r: struct.pack_into("<H", r, 4, 9), UnsupportedVersionError, "version 9"),
        (lambda r: r.__setitem__(100, r[100] ^ 1), ChecksumError, "header"),
        (lambda r: r.__delitem__(slice(100, None)), CorruptFileError, "shorter than the header"),
    ],
)
def test_specific_header_damage(tmp_path: Path, sample: bytes, mutate, error, text) -> None:
    raw = bytearray(sample)
    mutate(raw)
    path = tmp_path / "d.hf"
    path.write_bytes(bytes(raw))
    with pytest.raises(error, match=text) as exc:
        HyperframeReader(path)
    assert str(path) in str(exc.value)


def test_unfinalized_flag_points_to_recover(tmp_path: Path, sample: bytes) -> None:
    raw = bytearray(sample)
    raw[11] &= 0x7F  # clear bit 31 of the flags
    _reseal(raw)
    path = tmp_path / "u.hf"
    path.write_bytes(bytes(raw))
    with pytest.raises(NotFinalizedError, match=f"hyperframes recover {path}"):
        HyperframeReader(path)


def test_flipped_payload_byte_fails_verify(tmp_path: Path, sample: bytes) -> None:
    raw = bytearray(sample)
    with HyperframeReader_bytes(tmp_path, raw) as r:
        e = r.index[5]
    raw[int(e["offset"]) + int(e["size"]) // 2] ^= 0x10
    path = tmp_path / "p.hf"
    path.write_bytes(bytes(raw))
    result = verify_file(path)
    assert not result.ok and "CRC32C mismatch" in result.problems[0]


def test_unknown_flag_bits_and_reserved_bytes_are_ignored(tmp_path: Path, sample: bytes) -> None:
    raw = bytearray(sample)
    raw[10] |= 0x40  # an unknown header flag bit
    raw[200:300] = b"\x5a" * 100  # reserved area
    _reseal(raw)
    path = tmp_path / "fwd.hf"
    path.write_bytes(bytes(raw))
    _read_everything(path)
    assert verify_file(path).ok
