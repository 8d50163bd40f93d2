"""Codec 5: Blosc2 chunks in blocks (``hyperframes.format.blosc2``), the default for arrays.

Round trips at every thread count and item size, the writer's fallbacks
(frames stored whole, runs c-blosc2 would store as special values, no
python-blosc2), and hostile chunk headers: each field this reader refuses
gives a typed error before c-blosc2 runs (a size field larger than the block
would otherwise let python-blosc2 write past the output buffer).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from hyperframes import CorruptFileError
from hyperframes.format import blosc2 as b2
from hyperframes.format.codecs import (
    CODEC_BLOSC2,
    CODEC_LZ4,
    CODEC_LZ4_BLOCKS,
    CODEC_SHIFT,
    CodecError,
    CodecSpec,
    codec_of,
    decode_aligned,
    decode_frame,
    decoded_size,
    encode_frame,
)
from hyperframes.format.layout import FrameFlags, HeaderFlags
from hyperframes.format.payload_blocks import parse
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter, default_codec

from conftest import T0, WINDOW_NS, small_streams

MAX = 1 << 30
FLAGS = CODEC_BLOSC2 << CODEC_SHIFT


def cloud(points: int, seed: int = 0) -> bytes:
    """A lidar-like xyzi float32 sweep: smooth ranges, quantised, some noise."""
    rng = np.random.default_rng(seed)
    az = np.linspace(0, 2 * np.pi, points, dtype=np.float32)
    r = np.round((12 + 3 * np.sin(az * 7) + rng.normal(0, 0.02, points)) / 0.004) * 0.004
    inten = np.round(rng.uniform(0, 255, points))
    xyzi = np.stack([r * np.cos(az), r * np.sin(az), r * 0.1, inten])
    return xyzi.T.astype("<f4").tobytes()


@pytest.mark.parametrize("spec", ["blosc2-lz4", "blosc2-lz4:1", "blosc2-zstd:3"])
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 300])
@pytest.mark.parametrize("threads", [1, 2])
def test_round_trip(spec: str, itemsize: int, threads: int) -> None:
    raw = cloud(60_000)[: 200_000 + 13]  # 4 blocks of 64 KiB, the last short and odd
    stored, flags = encode_frame(raw, CodecSpec.parse(spec, shuffle=True), itemsize, 1 << 16)
    assert codec_of(flags) == CODEC_BLOSC2 and not flags & FrameFlags.SHUFFLED
    assert len(stored) < len(raw)
    assert decoded_size(stored, flags, MAX) == len(raw)
    out = decode_aligned(stored, flags, itemsize, MAX, threads=threads)
    assert out.tobytes() == raw and out.ctypes.data % 64 == 0


def test_shuffle_inside_the_chunk_pays_on_floats() -> None:
    raw = cloud(120_000)
    plain, _ = encode_frame(raw, CodecSpec("blosc2-lz4"), 4)
    shuffled, _ = encode_frame(raw, CodecSpec("blosc2-lz4", shuffle=True), 4)
    ours, _ = encode_frame(raw, CodecSpec("lz4", shuffle=True), 4)
    assert len(shuffled) < 0.9 * len(plain)
    assert len(shuffled) < 1.02 * len(ours)  # the size of LZ4 + our own shuffle


def test_default_codec_of_arrays_is_blosc2() -> None:
    lidar = small_streams()[1]
    assert default_codec(lidar) == CodecSpec("blosc2-lz4", None, True)
    assert str(default_codec(lidar)) == "blosc2-lz4:5+shuffle"


def test_frames_stored_whole_use_lz4_for_older_readers() -> None:
    raw = cloud(120_000)
    stored, flags = encode_frame(raw, CodecSpec("blosc2-lz4", shuffle=True), 4, block_size=0)
    assert codec_of(flags) == CODEC_LZ4 and flags & FrameFlags.SHUFFLED
    assert decode_frame(stored, flags, 4, MAX).tobytes() == raw


def test_special_value_runs_fall_back_to_lz4_blocks() -> None:
    raw = bytes(8192) + cloud(4000)  # a zero chunk would be a header-only special value
    stored, flags = encode_frame(raw, CodecSpec("blosc2-lz4", shuffle=True), 4, 4096)
    assert codec_of(flags) == CODEC_LZ4_BLOCKS
    assert decode_frame(stored, flags, 4, MAX).tobytes() == raw


def test_without_python_blosc2_the_writer_falls_back_and_the_reader_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = cloud(50_000)
    stored, flags = encode_frame(raw, CodecSpec("blosc2-lz4", shuffle=True), 4)
    monkeypatch.setattr(b2._lazy, "module", None)
    monkeypatch.setattr(b2._lazy, "missing", "No module named 'blosc2'")
    assert not b2.available()
    _, lz4_flags = encode_frame(raw, CodecSpec("blosc2-lz4", shuffle=True), 4)
    assert codec_of(lz4_flags) == CODEC_LZ4_BLOCKS and lz4_flags & FrameFlags.SHUFFLED
    with pytest.raises(CodecError, match=r"needs python-blosc2.*pip install"):
        decode_aligned(stored, flags, 4, MAX)


def _chunk_at(stored: bytes, i: int = 0) -> int:
    return int(parse(stored, 255, 64).offsets[i])


def _stored() -> bytes:
    stored, flags = encode_frame(cloud(40_000), CodecSpec("blosc2-lz4", shuffle=True), 4, 1 << 16)
    assert flags == FLAGS
    return bytes(stored)


# (offset in the chunk header, struct format, value): each a header this reader refuses
HOSTILE = {
    "user-defined compressor": (2, "<B", 0x05 | 6 << 5),
    "blosclz compressor": (2, "<B", 0x05),
    "delta flag": (2, "<B", 0x05 | 0x08 | 1 << 5),
    "no extended header": (2, "<B", 0x01 | 1 << 5),
    "raw size larger than the block": (4, "<i", 1 << 20),
    "raw size smaller than the block": (4, "<i", 100),
    "negative raw size": (4, "<i", -1),
    "stored size off by one": (12, "<i", -1),
    "zero block size": (8, "<i", 0),
    "delta filter": (16, "<B", 3),
    "user filter": (17, "<B", 160),
    "codec byte of another codec": (22, "<B", 5),
    "codec meta": (23, "<B", 1),
    "filter meta": (24, "<B", 1),
    "dictionary": (31, "<B", 0x01),
    "lazy chunk": (31, "<B", 0x08),
    "special value: zeros": (31, "<B", 0x10),
    "special value: uninitialised": (31, "<B", 0x40),
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
@pytest.mark.parametrize("threads", [1, 2])
def test_hostile_chunk_headers_are_refused_before_decoding(what: str, threads: int) -> None:
    stored = bytearray(_stored())
    at, fmt, value = HOSTILE[what]
    base = _chunk_at(bytes(stored), 1)
    if what == "stored size off by one":
        value = struct.unpack_from("<i", stored, base + 12)[0] + 1
    struct.pack_into(fmt, stored, base + at, value)
    with pytest.raises(CodecError, match="blosc2 block 1: blosc2 chunk"):
        decode_aligned(bytes(stored), FLAGS, 4, MAX, threads=threads)


def test_a_chunk_shorter_than_its_header_is_refused() -> None:
    assert b2.header_problem(b"\x05\x01\x25\x04", 100) is not None
    assert "shorter" in str(b2.header_problem(bytes(10), 100))


def test_a_damaged_chunk_body_is_a_typed_error() -> None:
    stored = bytearray(_stored())
    base = _chunk_at(bytes(stored), 0)
    stored[base + 32 : base + 96] = b"\xff" * 64  # block starts and data, header intact
    with pytest.raises(CodecError, match="blosc2"):
        decode_aligned(bytes(stored), FLAGS, 4, MAX)


def test_a_shuffled_flag_on_codec_5_is_refused() -> None:
    with pytest.raises(CodecError, match="SHUFFLED"):
        decode_aligned(_stored(), FLAGS | FrameFlags.SHUFFLED, 4, MAX)


def test_files_with_blosc2_frames_read_verify_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "b.hf"
    sweeps = [cloud(30_000 + 1000 * i, i) for i in range(4)]
    with HyperframeWriter(path, small_streams(), WINDOW_NS, block_size=1 << 16) as w:
        for i, s in enumerate(sweeps):
            w.append(1, T0 + 1 + i * 100_000_000, s)
    with HyperframeReader(path, threads=2) as r:
        assert r.header.flags & HeaderFlags.USES_BLOSC2
        assert [f.data.tobytes() for f in r.frames("lidar")] == sweeps
    assert verify_file(path).ok
    raw = bytearray(path.read_bytes())
    with HyperframeReader(path) as r:
        e = r.index[0]
    struct.pack_into(
        "<i",
        raw,
        int(e["offset"])
        + _chunk_at(bytes(raw[int(e["offset"]) : int(e["offset"]) + int(e["size"])]))
        + 4,
        1 << 20,
    )  # CRC left stale
    path.write_bytes(bytes(raw))
    with HyperframeReader(path, verify=False) as r, pytest.raises(CorruptFileError, match="blosc2"):
        r.read("lidar", T0)
