"""Hostile files: mutated headers, index entries, tables, block records, payload codec
headers and metadata give typed errors only; recovery's output always verifies.

Seeded and bounded (a few seconds). ``bench/fuzz_campaign.py`` runs the same
classes, and more, for tens of thousands of files by hand.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_hostile import (
    block_positions,
    entry_positions,
    header,
    meta_text,
    put_meta,
    read_everything,
    reseal,
)

from hyperframes import (
    ChecksumError,
    CorruptFileError,
    HyperframesError,
    NotFinalizedError,
    UnsupportedVersionError,
)
from hyperframes.format.codecs import CODEC_BLOSC2, CODEC_LZ4_BLOCKS, CodecSpec, codec_of
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import HEADER_SIZE, Header
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
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
    read_everything(path)
    with HyperframeReader(path) as r:
        for s in r.streams:
            for t in r.timestamps(s)[:3]:
                r.read(s, int(t))


def _expect_typed(path: Path) -> None:
    """Only typed errors; and a file verify accepts must read completely."""
    read_ok = True
    try:
        _read_everything(path)
    except HyperframesError:
        read_ok = False
    result = verify_file(path)  # never raises
    assert read_ok or not result.ok, result.problems  # verify is the strictest reader


def _expect_recovery_verifies(path: Path, out: Path) -> None:
    """Recovery refuses with a typed error or writes a file that verify accepts."""
    out.unlink(missing_ok=True)
    try:
        recover(path, out)
    except HyperframesError:
        assert not out.exists()
        return
    assert verify_file(out).ok
    _read_everything(out)


_settings = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
_new_settings = settings(
    _settings,
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)


@_settings
@given(st.integers(0, 135), st.integers(0, 255), st.booleans())
def test_mutated_header_gives_typed_errors(
    tmp_path: Path, sample: bytes, pos: int, val: int, reseal: bool
) -> None:
    raw = bytearray(sample)
    raw[pos] = val
    if reseal:
        _reseal(raw)
    path = tmp_path / "m.hf"
    path.write_bytes(bytes(raw))
    _expect_typed(path)


@_settings
@given(st.data())
def test_mutated_index_entries_give_typed_errors(
    tmp_path: Path, sample: bytes, data: st.DataObject
) -> None:
    raw = bytearray(sample)
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
    entry = data.draw(st.integers(0, h.frame_count - 1))
    field = data.draw(
        st.sampled_from(
            [(0, "<H"), (2, "<H"), (4, "<I"), (8, "<Q"), (16, "<Q"), (24, "<I"), (28, "<I")]
        )
    )
    bits = {"<H": 16, "<I": 32, "<Q": 64}[field[1]]
    value = data.draw(st.one_of(st.integers(0, 2**bits - 1), st.sampled_from([0, 2**bits - 1])))
    struct.pack_into(field[1], raw, h.index_offset + 32 * entry + field[0], value)
    _reseal_index(raw)
    path = tmp_path / "m.hf"
    path.write_bytes(bytes(raw))
    _expect_typed(path)


@pytest.fixture(scope="module")
def blocked(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A finalized file whose lidar frames (24 KB) are stored in 4 KiB blocks (codec 3)."""
    from hyperframes.writer import HyperframeWriter

    from conftest import WINDOW_NS, lidar_sweep, small_frames, small_streams

    path = tmp_path_factory.mktemp("fuzz") / "b.hf"
    lz4 = {1: CodecSpec("lz4", None, True)}
    with HyperframeWriter(path, small_streams(), WINDOW_NS, block_size=4096, codecs=lz4) as w:
        for i, (sid, t, p) in enumerate(small_frames(0.3)):
            w.append(sid, t, lidar_sweep(i, 1500).tobytes() if sid == 1 else p)
    with HyperframeReader(path) as r:
        assert CODEC_LZ4_BLOCKS in {codec_of(int(f)) for f in r.index["flags"]}
    return path.read_bytes()


@pytest.fixture(scope="module")
def blosc2_blocked(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A finalized file whose lidar frames are Blosc2 chunks of 4 KiB blocks (codec 5)."""
    from hyperframes.writer import HyperframeWriter

    from conftest import WINDOW_NS, lidar_sweep, small_frames, small_streams

    path = tmp_path_factory.mktemp("fuzz") / "b2.hf"
    spec = {1: CodecSpec("blosc2-lz4", 9, True)}
    with HyperframeWriter(path, small_streams(), WINDOW_NS, block_size=4096, codecs=spec) as w:
        for i, (sid, t, p) in enumerate(small_frames(0.3)):
            sweep = np.round(lidar_sweep(i, 1500), 0)  # coarse: every 4 KiB chunk compresses
            w.append(sid, t, sweep.tobytes() if sid == 1 else p)
    with HyperframeReader(path) as r:
        assert {codec_of(int(f)) for f in r.index["flags"][r.index["stream_id"] == 1]} == {
            CODEC_BLOSC2
        }
    return path.read_bytes()


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from hyperframes.writer import HyperframeWriter

    from conftest import WINDOW_NS, small_frames, small_streams

    path = tmp_path_factory.mktemp("fuzz") / "c.hf"
    w = HyperframeWriter(path, small_streams(), WINDOW_NS, threads=1)
    for sid, t, p in small_frames(0.3):
        w.append(sid, t, p)
    w.abort()
    return Path(str(path) + ".tmp").read_bytes()


_DTYPES = [
    "S",
    "V",
    "(0,)f4",
    "O",
    "i4,O",
    "U0",
    ">f8",
    "<f2",
    "(3,)u1",
    "i4,f4",
    "M8[ns]",
    "c16",
    "x" * 300,
    7,
    None,
    ["<f4"],
]
_SHAPES = [
    [],
    [0],
    [-1, -1],
    [2**40, 2**40],
    [-5],
    ["a"],
    [1.5],
    [True],
    [[2]],
    [6],
    [-1, 4],
    [-1, 3],
    [1] * 40,
    {"a": 1},
    "6",
    None,
]
_NUMBERS = [0, -1, 1.5, "100", True, None, 2**64, 2**63, 1e300, 10**30, [1], {"x": 1}]
_TOKENS = ["1e400", "-1e400", "Infinity", "NaN", "9" * 4000, "9" * 25, "-0", "1E5"]


@_new_settings
@given(st.data())
def test_mutated_metadata_gives_typed_errors(
    tmp_path: Path, sample: bytes, crashed: bytes, data: st.DataObject
) -> None:
    """dtype / shape / number / type / nesting mutations of the JSON, CRCs resealed."""
    kind = data.draw(st.sampled_from(["final", "tmp"]))
    raw = bytearray(sample if kind == "final" else crashed)
    doc = json.loads(meta_text(raw))
    for s in doc["streams"]:  # room in a .tmp's metadata block
        del s["rate_hz"], s["timestamp_source"]
    s = doc["streams"][data.draw(st.integers(0, len(doc["streams"]) - 1))]
    what = data.draw(st.sampled_from(["dtype", "shape", "number", "token", "nesting", "type"]))
    text_sub = None
    if what == "dtype":
        s["dtype"] = data.draw(st.sampled_from(_DTYPES))
        s["shuffle"] = data.draw(st.booleans())
    elif what == "shape":
        s["shape"] = data.draw(st.sampled_from(_SHAPES))
    elif what == "number":
        key = data.draw(st.sampled_from(["window_ns", "id", "level", "segment_seq"]))
        target = doc if key == "window_ns" else doc["file"] if key == "segment_seq" else s
        target[key] = data.draw(st.sampled_from(_NUMBERS))
    elif what == "token":
        key = data.draw(st.sampled_from(["window_ns", "level", "created_ns"]))
        (doc if key == "window_ns" else doc["file"] if key == "created_ns" else s)[key] = "@T@"
        text_sub = ('"@T@"', data.draw(st.sampled_from(_TOKENS)))
    elif what == "nesting":
        depth = data.draw(st.sampled_from([30, 33, 100, 3000]))
        doc["file"]["extra"] = {"d": "@T@"}
        text_sub = ('"@T@"', "[" * depth + "]" * depth)
    else:
        key = data.draw(st.sampled_from(["codec", "name", "kind", "encoding", "extra", "shuffle"]))
        s[key] = data.draw(st.sampled_from([["x"], {"a": 1}, 5, None, "", True, 1.5]))
    text = json.dumps(doc, separators=(",", ":"))
    if text_sub is not None:
        text = text.replace(*text_sub)
    h = header(raw)
    assume(kind == "final" or len(text) <= h.data_offset - h.meta_offset)
    put_meta(raw, text)
    path = tmp_path / ("m.hf" if kind == "final" else "m.hf.tmp")
    path.write_bytes(bytes(raw))
    if kind == "final":
        _expect_typed(path)
    _expect_recovery_verifies(path, tmp_path / "out.hf")


_BLOCK_FIELDS = [(8, "<q"), (16, "<I"), (20, "<I"), (24, "<Q"), (32, "<Q")]
_ENTRY_FIELDS = [(0, "<H"), (2, "<H"), (4, "<I"), (8, "<Q"), (16, "<Q"), (24, "<I"), (28, "<I")]


@_new_settings
@given(st.data())
def test_mutated_blocks_recover_to_files_that_verify(
    tmp_path: Path, crashed: bytes, data: st.DataObject
) -> None:
    """Block records and entry tables edited with every CRC resealed: recovery proves or drops."""
    raw = bytearray(crashed)
    pos = data.draw(st.sampled_from(block_positions(raw)))
    if data.draw(st.booleans()):
        off, fmt = data.draw(st.sampled_from(_BLOCK_FIELDS))
    else:
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        off, fmt = data.draw(st.sampled_from(_ENTRY_FIELDS))
        off += 64 + 32 * data.draw(st.integers(0, count - 1))
    bits = struct.calcsize(fmt) * 8
    (old,) = struct.unpack_from(fmt, raw, pos + off)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if fmt == "<q" else (0, 2**bits - 1)
    value = data.draw(
        st.one_of(
            st.integers(lo, hi),
            st.sampled_from([lo, hi, 0, 1]),
            st.integers(-130, 130).map(lambda d: min(hi, max(lo, old + d))),
        )
    )
    struct.pack_into(fmt, raw, pos + off, value)
    reseal(raw)
    path = tmp_path / "b.hf.tmp"
    path.write_bytes(bytes(raw))
    _expect_recovery_verifies(path, tmp_path / "out.hf")


@_new_settings
@given(st.data())
def test_resealed_payload_edits_give_typed_errors(
    tmp_path: Path,
    sample: bytes,
    crashed: bytes,
    blocked: bytes,
    blosc2_blocked: bytes,
    data: st.DataObject,
) -> None:
    """Codec headers, block tables, Blosc2 chunk headers and payload bytes changed, CRCs
    resealed: only decoding can tell."""
    kind = data.draw(st.sampled_from(["final", "tmp", "blocked", "blosc2"]))
    bases = {"final": sample, "tmp": crashed, "blocked": blocked, "blosc2": blosc2_blocked}
    raw = bytearray(bases[kind])
    h = header(raw)
    if kind != "tmp":
        e = h.index_offset + 32 * data.draw(st.integers(0, h.frame_count - 1))
    else:
        pos = data.draw(st.sampled_from(block_positions(raw)))
        e = pos + 64
    off, size = struct.unpack_from("<QI", raw, e + 16)
    assume(size >= 4)
    how = data.draw(st.sampled_from(["prefix", "bytes", "flags", "table", "chunk"]))
    if how == "chunk":  # a byte of the first block's head: a Blosc2 chunk header in codec 5
        count = -(-struct.unpack_from("<I", raw, off)[0] // 4096) if kind == "blosc2" else 0
        at = min(8 + 4 * count + data.draw(st.integers(0, 31)), size - 1)
        raw[off + at] = data.draw(st.integers(0, 255))
    elif how in ("prefix", "table"):  # the size prefix, or a u32 of a block table
        at = 0 if how == "prefix" else 4 * data.draw(st.integers(0, min(8, size // 4 - 1)))
        value = data.draw(
            st.one_of(
                st.integers(0, 2**32 - 1),
                st.sampled_from([0, 1, 4096, size, 255 * size, 256 * size]),
            )
        )
        struct.pack_into("<I", raw, off + at, value % 2**32)
    elif how == "bytes":
        for _ in range(data.draw(st.integers(1, 8))):
            raw[off + data.draw(st.integers(0, size - 1))] = data.draw(st.integers(0, 255))
    else:
        flags = data.draw(st.integers(0, 0xFFFF))
        for p in entry_positions(raw, off):
            struct.pack_into("<H", raw, p + 2, flags)
    crc = crc32c(bytes(raw[off : off + size]))
    for p in entry_positions(raw, off):
        struct.pack_into("<I", raw, p + 28, crc)
    reseal(raw)
    path = tmp_path / ("p.hf.tmp" if kind == "tmp" else "p.hf")
    path.write_bytes(bytes(raw))
    if kind != "tmp":
        _expect_typed(path)
    _expect_recovery_verifies(path, tmp_path / "out.hf")


@_new_settings
@given(st.data())
def test_aliasing_and_amplification_are_refused(
    tmp_path: Path, sample: bytes, data: st.DataObject
) -> None:
    """Entries pointed at another payload (one or many), or at a small ZSTD bomb."""
    raw = bytearray(sample)
    h = header(raw)
    target = data.draw(st.integers(0, h.frame_count - 1))
    src = h.index_offset + 32 * target
    if data.draw(st.booleans()):  # a ZSTD frame of many zero bytes, in place of this payload
        off, size = struct.unpack_from("<QI", raw, src + 16)
        bomb = zstandard.ZstdCompressor(level=19).compress(
            bytes(data.draw(st.sampled_from([size * 300, 1 << 20, 16 << 20])))
        )
        assume(len(bomb) <= size)
        raw[off : off + len(bomb)] = bomb
        for p in entry_positions(raw, off):
            struct.pack_into("<H", raw, p + 2, 2 << 4)  # codec zstd, no shuffle
            struct.pack_into("<QII", raw, p + 16, off, len(bomb), crc32c(bomb))
    victims = data.draw(st.lists(st.integers(0, h.frame_count - 1), max_size=h.frame_count))
    for v in victims:
        p = h.index_offset + 32 * v
        raw[p + 2 : p + 4] = raw[src + 2 : src + 4]
        raw[p + 16 : p + 32] = raw[src + 16 : src + 32]
    reseal(raw)
    path = tmp_path / "a.hf"
    path.write_bytes(bytes(raw))
    _expect_typed(path)
    if any(v != target for v in victims):
        with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match="overlap"):
            r.read_positions(np.arange(r.frame_count))


@_new_settings
@given(st.integers(0, 10**6), st.integers(0, 7))
def test_tmp_metadata_flip_is_never_recovered(
    tmp_path: Path, crashed: bytes, pos: int, bit: int
) -> None:
    """One bit of an unfinished file's stream table, nothing resealed: MetaCrc refuses it."""
    raw = bytearray(crashed)
    h = header(raw)
    raw[h.meta_offset + pos % h.meta_size] ^= 1 << bit
    path = tmp_path / "f.hf.tmp"
    path.write_bytes(bytes(raw))
    with pytest.raises(HyperframesError, match="metadata"):
        recover(path, tmp_path / "out.hf")


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
