"""Per-frame container codecs: none, LZ4 (fast or HC), ZSTD, with optional byte shuffle.

A codec is chosen per stream by name (the names used in YAML configs) and
recorded per frame in the index flags, so a reader never needs the config.
Encoded layouts (docs/FORMAT.md):

- ``none`` (id 0): the payload bytes.
- ``lz4``/``lz4hc`` (id 1): u32 little-endian raw size, then one LZ4 block.
- ``zstd`` (id 2): one ZSTD frame with its content size set, and nothing after it.
- ``lz4`` in blocks (id 3), ``zstd`` in blocks (id 4): a frame of two blocks
  or more (:data:`BLOCK_SIZE` raw bytes each) is cut into blocks compressed
  alone, behind a table of their sizes (:mod:`hyperframes.format.payload_blocks`),
  so that several threads can decode one large frame. Stream specs still say
  ``lz4``/``lz4hc``/``zstd``: the split is the writer's choice per frame.
- ``blosc2-lz4``/``blosc2-zstd`` (id 5): the same block table, each block one
  Blosc2 chunk (LZ4 or ZSTD inside, the byte shuffle of ``shuffle`` inside it,
  in SIMD): :mod:`hyperframes.format.blosc2`. Written for new files only; every
  frame of the older codecs keeps reading.

Byte shuffle (flag ``SHUFFLED``) regroups the bytes of fixed-size items (the
first bytes of every float, then the second...) before compression; it makes
float point clouds and IMU arrays far more compressible. Trailing bytes that
do not fill an item are kept in place.

Decoding is bounded: a stored payload of ``n`` bytes may decode to at most
:func:`max_decoded_size` ``(n)`` = 255 n + 64 bytes (LZ4's own limit, applied
to every codec), and the size is checked from the codec header before
anything is allocated. The writer never stores a frame beyond that bound.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import lz4.block
import numpy as np
import zstandard

from hyperframes.format import blosc2 as _blosc2
from hyperframes.format import payload_blocks as blocks
from hyperframes.format.buffers import Scratch, aligned_empty
from hyperframes.format.crc import BytesLike
from hyperframes.format.layout import CODEC_MASK, CODEC_SHIFT, FrameFlags
from hyperframes.format.payload_blocks import (
    BLOCK_SIZE,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    BlockTableError,
    block_size_problem,
)
from hyperframes.format.split import run_split

__all__ = [
    "CODEC_NONE",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CODEC_LZ4_BLOCKS",
    "CODEC_ZSTD_BLOCKS",
    "CODEC_BLOSC2",
    "CODEC_NAMES",
    "DEFAULT_ARRAY_CODEC",
    "BLOCK_SIZE",
    "MIN_BLOCK_SIZE",
    "MAX_BLOCK_SIZE",
    "block_size_problem",
    "CodecSpec",
    "CodecError",
    "codec_of",
    "encode_frame",
    "preload",
    "decode_frame",
    "decode_aligned",
    "decoded_size",
    "max_decoded_size",
    "MAX_RATIO",
    "shuffle",
    "unshuffle",
]

CODEC_NONE: Final = 0
CODEC_LZ4: Final = 1
CODEC_ZSTD: Final = 2
CODEC_LZ4_BLOCKS: Final = 3
CODEC_ZSTD_BLOCKS: Final = 4
CODEC_BLOSC2: Final = 5
CODEC_NAMES: Final = {
    CODEC_NONE: "none",
    CODEC_LZ4: "lz4",
    CODEC_ZSTD: "zstd",
    CODEC_LZ4_BLOCKS: "lz4 (blocks)",
    CODEC_ZSTD_BLOCKS: "zstd (blocks)",
    CODEC_BLOSC2: "blosc2",
}
#: The writer's codec for array streams (byte shuffle on for items wider than a byte):
#: bench/README.md, "Codecs", for the sizes, write and read costs that chose it.
DEFAULT_ARRAY_CODEC: Final = "blosc2-lz4"
_BLOCKED: Final = {CODEC_LZ4: CODEC_LZ4_BLOCKS, CODEC_ZSTD: CODEC_ZSTD_BLOCKS}

# name -> (codec id, default level, allowed level range)
_SPECS: Final[dict[str, tuple[int, int, tuple[int, int]]]] = {
    "none": (CODEC_NONE, 0, (0, 0)),
    "lz4": (CODEC_LZ4, 0, (0, 0)),
    "lz4hc": (CODEC_LZ4, 3, (1, 12)),
    "zstd": (CODEC_ZSTD, 3, (1, 22)),
    "blosc2-lz4": (CODEC_BLOSC2, _blosc2.DEFAULT_LEVEL, (1, 9)),
    "blosc2-zstd": (CODEC_BLOSC2, 3, (1, 9)),
}
_LZ4_SIZE = struct.Struct("<I")
MAX_RATIO: Final = 255  # an LZ4 sequence emits at most ~255 bytes per input byte
_SLACK = 64
_INT_MAX = (1 << 31) - 1


def max_decoded_size(stored_size: int) -> int:
    """The most bytes a stored payload of ``stored_size`` bytes may decode to, any codec.

    255 x the stored size (+64) is LZ4's own ceiling; applying it to ZSTD too
    bounds what a small hostile payload can make a reader allocate, and (with
    aliased payloads refused) the decoded bytes of a whole file by 255 x its size.
    """
    return MAX_RATIO * stored_size + _SLACK


class CodecError(ValueError):
    """Stored bytes cannot be decoded (raised as CorruptFileError by the reader)."""


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """How a stream's frames are compressed: codec name, level and byte shuffle."""

    name: str = "none"
    level: int | None = None
    shuffle: bool = False

    def __post_init__(self) -> None:
        if self.name not in _SPECS:
            raise ValueError(f"unknown codec {self.name!r}; allowed: {', '.join(_SPECS)}")
        _, default, (lo, hi) = _SPECS[self.name]
        level = default if self.level is None else self.level
        if not (isinstance(level, int) and lo <= level <= hi):
            raise ValueError(
                f"codec {self.name!r}: level {self.level!r} out of range {lo}..{hi}"
                if hi
                else f"codec {self.name!r} takes no level, got {self.level!r}"
            )
        object.__setattr__(self, "level", level)

    @classmethod
    def parse(cls, text: str, shuffle: bool = False) -> CodecSpec:
        """``"lz4hc:9"``, ``"zstd"``, ``"none"`` -> spec."""
        name, _, level = text.partition(":")
        try:
            lvl = int(level) if level else None
        except ValueError:
            raise ValueError(f"codec {text!r}: level must be an integer") from None
        return cls(name.strip().lower(), lvl, shuffle)

    @property
    def codec_id(self) -> int:
        """The id stored in the index flags."""
        return _SPECS[self.name][0]

    def __str__(self) -> str:
        text = f"{self.name}:{self.level}" if self.name in _LEVELLED else self.name
        return text + ("+shuffle" if self.shuffle else "")


_LEVELLED: Final = frozenset({"lz4hc", "zstd", "blosc2-lz4", "blosc2-zstd"})


def codec_of(flags: int) -> int:
    """The codec id held in an index entry's flags."""
    return (flags & CODEC_MASK) >> CODEC_SHIFT


_WIDE = 16  # items wider than this are (un)shuffled with one transposed copy


def shuffle(data: BytesLike, itemsize: int) -> memoryview:
    """Byte-transpose ``data`` viewed as items of ``itemsize`` bytes."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if itemsize <= 1 or buf.size < itemsize:
        return memoryview(data).cast("B")
    n = buf.size // itemsize
    out = np.empty(buf.size, dtype=np.uint8)
    src = buf[: n * itemsize].reshape(n, itemsize)
    dst = out[: n * itemsize].reshape(itemsize, n)
    if itemsize > _WIDE:
        dst[...] = src.T
    else:
        for k in range(itemsize):  # one strided column at a time beats a full transpose
            dst[k] = src[:, k]
    out[n * itemsize :] = buf[n * itemsize :]
    return out.data


def unshuffle(data: BytesLike | np.ndarray, itemsize: int, threads: int = 1) -> np.ndarray:
    """Inverse of :func:`shuffle`; returns a fresh 64-byte-aligned uint8 array.

    An item size of 0 or 1 (or data shorter than one item) is a plain copy.
    Large data is cut into one run of items per thread, for up to
    ``threads`` threads (numpy releases the GIL in each run's few whole-array
    operations; smaller runs would cost more in per-call overhead than they
    gain in cache).
    """
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    out = aligned_empty(buf.size)
    if itemsize <= 1 or buf.size < itemsize or buf.size < BLOCK_SIZE or threads <= 1:
        _unshuffle_into(buf, itemsize, out)
        return out
    n = buf.size // itemsize
    body = n * itemsize
    planes = buf[:body].reshape(itemsize, n)
    run = -(-n // (threads * 64)) * 64  # items per part, whole cache lines of output

    def task(j: int) -> None:
        a, b = j * run, min((j + 1) * run, n)
        _interleave(planes[:, a:b], out[a * itemsize : b * itemsize])

    run_split(-(-n // run), task, threads)
    out[body:] = buf[body:]
    return out


def _unshuffle_into(buf: np.ndarray, itemsize: int, out: np.ndarray) -> None:
    """:func:`unshuffle` of ``buf`` into ``out`` (the same size), on this thread."""
    if itemsize <= 1 or buf.size < itemsize:
        out[:] = buf
        return
    n = buf.size // itemsize
    body = n * itemsize
    _interleave(buf[:body].reshape(itemsize, n), out[:body])
    out[body:] = buf[body:]


def _interleave(planes: np.ndarray, out: np.ndarray) -> None:
    """Write the ``k`` byte planes (k x n) as ``n`` items of ``k`` bytes into ``out``."""
    itemsize, n = planes.shape
    if n <= _FEW:  # a few items: one transposed copy beats several whole-array passes
        out.reshape(n, itemsize)[...] = planes.T
    elif itemsize in _MERGE:
        _merge_planes(planes, out)
    elif itemsize > _WIDE:
        out.reshape(n, itemsize)[...] = planes.T
    else:
        dst = out.reshape(n, itemsize)
        for k in range(itemsize):
            dst[:, k] = planes[k]


_FEW = 256
_MERGE = {2: 1, 4: 2, 8: 3}  # item size -> rounds of pairwise plane merging
_LE_UINT: Final[dict[int, np.dtype[Any]]] = {
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}


def _merge_planes(planes: np.ndarray, out: np.ndarray) -> None:
    """Interleave ``k`` byte planes (k = 2, 4, 8) into ``out``, pairwise by widening.

    Plane pairs become little-endian words twice as wide, ``a | b << bits``,
    until one plane of ``k``-byte items is left: log2(k) rounds of whole-array
    shifts and ORs, about twice as fast as ``k`` byte-strided copies.
    """
    cur = planes
    width = 1
    while cur.shape[0] > 1:
        width *= 2
        dtype = _LE_UINT[width]
        if cur.shape[0] == 2:
            nxt = out.view(dtype).reshape(1, -1)
        else:
            nxt = np.empty((cur.shape[0] // 2, cur.shape[1]), dtype)
        np.left_shift(cur[1::2], 4 * width, out=nxt, dtype=dtype)
        np.bitwise_or(nxt, cur[0::2], out=nxt)
        cur = nxt


# zstd (de)compressor objects are not safe to share between threads: one per thread.
_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zc", None)
    if cache is None:
        cache = _local.zc = {}
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return comp


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    dec: zstandard.ZstdDecompressor | None = getattr(_local, "zd", None)
    if dec is None:
        dec = _local.zd = zstandard.ZstdDecompressor()
    return dec


def encode_frame(
    payload: BytesLike, spec: CodecSpec, itemsize: int = 1, block_size: int = BLOCK_SIZE
) -> tuple[BytesLike, int]:
    """Compress one payload; returns (stored bytes, index flag bits for codec and shuffle).

    A payload of at least two ``block_size`` blocks is stored in independent
    blocks (codec ids 3 and 4) so that readers can decode it on several
    threads; ``block_size=0`` always stores one block. Falls back to storing
    the payload raw (codec ``none``, no shuffle) when compression does not
    make it smaller (then the result is a view of ``payload``, not a copy).
    Thread-safe; releases the GIL in the compressors.
    """
    problem = block_size_problem(block_size)
    if problem is not None:
        raise ValueError(problem)
    raw = memoryview(payload).cast("B")
    if spec.codec_id == CODEC_NONE:
        return raw, 0
    if spec.codec_id == CODEC_BLOSC2:
        if block_size and 0 < raw.nbytes <= MAX_BLOCK_SIZE and _blosc2.available():
            chunks = _blosc2_blocks(raw, spec, itemsize, block_size)
            if chunks is not None and len(chunks) < raw.nbytes:
                return chunks, CODEC_BLOSC2 << CODEC_SHIFT
            if chunks is not None:
                return raw, 0
        # no blosc2 here, or frames stored whole for older readers, or beyond 255:1
        spec = CodecSpec("zstd" if spec.name == "blosc2-zstd" else "lz4", None, spec.shuffle)
    shuffled = spec.shuffle and itemsize > 1
    data = shuffle(raw, itemsize) if shuffled else raw
    out: BytesLike | None = None
    if block_size and 2 * block_size <= raw.nbytes <= MAX_BLOCK_SIZE:  # raw size is a u32
        out = _compress_blocks(data, spec, block_size)
        codec_id = _BLOCKED[spec.codec_id]
        if out is None:  # a ZSTD block beyond 255:1: LZ4 cannot exceed the limit
            out = _compress_blocks(data, _PLAIN_LZ4, block_size)
            codec_id = CODEC_LZ4_BLOCKS
    if out is None:
        out, codec_id = _compress_one(data, spec)
    if len(out) >= raw.nbytes or raw.nbytes > max_decoded_size(len(out)):
        return raw, 0
    flags = codec_id << CODEC_SHIFT
    if shuffled:
        flags |= FrameFlags.SHUFFLED
    return out, flags


_PLAIN_LZ4: Final = CodecSpec("lz4")


def _compress(data: BytesLike, spec: CodecSpec, store_size: bool) -> bytes:
    """One LZ4 block (with its u32 size prefix when ``store_size``) or one ZSTD frame."""
    if spec.codec_id == CODEC_ZSTD:
        return _zstd_compressor(spec.level or 3).compress(data)
    if spec.name == "lz4hc":
        out: bytes = lz4.block.compress(
            data, mode="high_compression", compression=spec.level, store_size=store_size
        )
    else:
        out = lz4.block.compress(data, store_size=store_size)
    return out


def _compress_one(data: BytesLike, spec: CodecSpec) -> tuple[bytes, int]:
    out = _compress(data, spec, store_size=True)
    if spec.codec_id == CODEC_ZSTD and len(memoryview(data)) > max_decoded_size(len(out)):
        # more than 255:1 (long runs of one byte): readers refuse such ratios, LZ4 cannot
        # exceed it
        return _compress(data, _PLAIN_LZ4, store_size=True), CODEC_LZ4
    return out, spec.codec_id


def _compress_blocks(data: memoryview, spec: CodecSpec, block_size: int) -> bytes | None:
    """``data`` in independently compressed blocks, or None if a block breaks the ratio limit."""
    parts = []
    for lo in range(0, data.nbytes, block_size):
        part = data[lo : lo + block_size]
        out = _compress(part, spec, store_size=False)
        if part.nbytes > max_decoded_size(len(out)):
            return None  # ZSTD beyond 255:1; the whole-frame path falls back to LZ4
        parts.append(out)
    return blocks.pack(parts, data.nbytes, block_size)


def _blosc2_blocks(
    data: memoryview, spec: CodecSpec, itemsize: int, block_size: int
) -> bytes | None:
    """``data`` in blocks of one Blosc2 chunk each, or None if a block breaks the ratio limit."""
    zstd = spec.name == "blosc2-zstd"
    parts = []
    for lo in range(0, data.nbytes, block_size):
        part = data[lo : lo + block_size]
        out = _blosc2.compress(part, zstd, spec.level or 1, itemsize if spec.shuffle else 1)
        if part.nbytes > max_decoded_size(len(out)) or _blosc2.header_problem(out, part.nbytes):
            return None  # beyond 255:1, or a run c-blosc2 stored as a special value
        parts.append(out)
    return blocks.pack(parts, data.nbytes, block_size)


def preload(specs: Iterable[CodecSpec]) -> None:
    """Import now the libraries that ``specs`` compress with (python-blosc2 takes ~0.5 s).

    Writers and the recorder call it at start, so that the first frame of a
    blosc2 stream is not held up by the import.
    """
    if any(s.codec_id == CODEC_BLOSC2 for s in specs):
        _blosc2.available()


def decoded_size(stored: BytesLike, flags: int, max_size: int) -> int:
    """The size ``stored`` decodes to, from its codec header; checked, nothing allocated.

    Raises :class:`CodecError` for an unknown codec, a header or block table
    that does not parse, or a size over ``max_size`` or :func:`max_decoded_size`.
    """
    codec = codec_of(flags)
    n = len(stored)
    if codec == CODEC_NONE:
        return n
    if codec in _BLOCK_CODECS:
        return _block_table(stored, codec, max_size).raw_size
    bound = min(max_size, max_decoded_size(n))
    if codec == CODEC_LZ4:
        if n < _LZ4_SIZE.size:
            raise CodecError("lz4 frame shorter than its size prefix")
        (raw_size,) = _LZ4_SIZE.unpack_from(stored, 0)
        what = "lz4 frame claims"
    elif codec == CODEC_ZSTD:
        raw_size = _zstd_content_size(stored, "zstd frame")
        what = "zstd frame declares"
    else:
        raise CodecError(f"unknown codec id {codec}")
    _check_bound(what, raw_size, n, bound, max_size)
    return int(raw_size)


def _check_bound(what: str, raw_size: int, stored_size: int, bound: int, max_size: int) -> None:
    if raw_size > bound:
        raise CodecError(
            f"{what} {raw_size} raw bytes, more than {bound} for {stored_size} stored bytes "
            f"(at most {MAX_RATIO}:1 and {max_size} bytes)"
        )


def _zstd_content_size(frame: BytesLike, what: str) -> int:
    try:
        size = int(zstandard.frame_content_size(frame))
    except zstandard.ZstdError as exc:
        raise CodecError(f"{what} header invalid: {exc}") from None
    if size < 0:
        raise CodecError(f"{what} does not declare its content size")
    return size


def _block_table(stored: BytesLike, codec: int, max_size: int) -> blocks.BlockTable:
    """The checked block table of a blocked payload (CodecError if it is inconsistent)."""
    name = CODEC_NAMES[codec]
    try:
        table = blocks.parse(stored, MAX_RATIO, _SLACK)
    except BlockTableError as exc:
        raise CodecError(f"{name} payload: {exc}") from None
    n = len(stored)
    _check_bound(
        f"{name} payload claims", table.raw_size, n, min(max_size, max_decoded_size(n)), max_size
    )
    return table


def decode_frame(
    stored: BytesLike, flags: int, itemsize: int, max_size: int, *, threads: int = 1
) -> BytesLike | np.ndarray:
    """Decompress one stored payload by its index flags.

    ``max_size`` bounds the decoded size (so does :func:`max_decoded_size`): a
    size field claiming more raises :class:`CodecError` before anything is
    allocated. A payload without codec or shuffle comes back as it is.
    ``threads`` as for :func:`decode_aligned`.
    """
    if not flags & _DECODE_BITS:
        return stored
    return decode_aligned(stored, flags, itemsize, max_size, threads=threads)


def decode_aligned(
    stored: BytesLike,
    flags: int,
    itemsize: int,
    max_size: int,
    *,
    threads: int = 1,
    first: Callable[[], None] | None = None,
) -> np.ndarray:
    """Like :func:`decode_frame`, always into a fresh 64-byte-aligned uint8 array.

    LZ4 decodes straight into the aligned array (or, when shuffled, into a
    per-thread scratch buffer that the unshuffle reads), so no decoded byte
    is copied twice. With ``threads > 1``, a large frame's blocks are decoded
    on up to that many threads, and ``first`` (say, a CRC check of
    ``stored``) runs on the calling thread meanwhile; an exception from
    ``first`` wins over a decode error. Without threads ``first`` runs before
    the decode.
    """
    codec = codec_of(flags)
    shuffled = bool(flags & FrameFlags.SHUFFLED)
    if codec == CODEC_NONE:
        if first is not None:
            first()
        return unshuffle(stored, itemsize) if shuffled else _copy_aligned(stored)
    if codec == CODEC_BLOSC2 and shuffled:
        if first is not None:
            first()
        raise CodecError("blosc2 payload flagged SHUFFLED (its shuffle is inside its chunks)")
    src = memoryview(stored).cast("B")
    table: blocks.BlockTable | None = None
    try:
        if codec in _BLOCK_CODECS:
            table = _block_table(src, codec, max_size)
            raw_size, count = table.raw_size, table.count
            base = _BLOCK_BASE[codec]
        else:
            raw_size, count, base = decoded_size(src, flags, max_size), 1, codec
    except CodecError:
        if first is not None:
            first()  # a checksum error says more than the header it damaged
        raise
    target = _scratch(raw_size) if shuffled else aligned_empty(raw_size)
    threads = threads if raw_size >= BLOCK_SIZE else 1
    if table is not None and base == CODEC_LZ4 and _lz4_into is not None and _lz4_fits(src, table):
        _lz4_blocks_into(src, table, target, threads, first, CODEC_NAMES[codec])
        return unshuffle(target, itemsize, threads) if shuffled else target

    def task(i: int) -> None:
        if table is None:
            _decode_into(src, base, target, whole=True)
            return
        lo, hi = table.raw_range(i)
        part = src[table.offsets[i] : table.offsets[i + 1]]
        try:
            _decode_into(part, base, target[lo:hi], whole=False)
        except CodecError as exc:
            raise CodecError(f"{CODEC_NAMES[codec]} block {i}: {exc}") from None

    run_split(count, task, threads, first)
    return unshuffle(target, itemsize, threads) if shuffled else target


def _lz4_fits(src: memoryview, table: blocks.BlockTable) -> bool:
    """Whether every block's sizes fit the C ints of ``LZ4_decompress_safe``."""
    return src.nbytes <= _INT_MAX and table.block_size <= _INT_MAX


def _lz4_blocks_into(
    src: memoryview,
    table: blocks.BlockTable,
    out: np.ndarray,
    threads: int,
    first: Callable[[], None] | None,
    name: str,
) -> None:
    """Decode every LZ4 block of ``src`` (its table checked) into ``out``, no object per block.

    The addresses are taken once and each block is one ``LZ4_decompress_safe``
    call on plain ints (the checked block table bounds every pointer: the
    blocks lie inside ``src``, their raw shares fill ``out`` exactly). With
    threads, blocks are handed out in runs (about four runs per thread), so a
    frame of many small blocks costs one claim per run, not per block.
    """
    assert _lz4_into is not None
    decode = _lz4_into
    src_addr = np.frombuffer(src, dtype=np.uint8).ctypes.data
    out_addr = out.ctypes.data
    offs = table.offsets
    bs, raw, count = table.block_size, table.raw_size, table.count
    per = count if threads <= 1 else -(-count // (4 * threads))

    def run(j: int) -> None:
        for i in range(j * per, min((j + 1) * per, count)):
            lo = i * bs
            size = min(bs, raw - lo)
            a = offs[i]
            if decode(src_addr + a, out_addr + lo, offs[i + 1] - a, size) != size:
                raise CodecError(f"{name} block {i}: lz4 data does not decode to its {size} bytes")

    run_split(-(-count // per), run, threads, first)


def _decode_into(src: memoryview, codec: int, out: np.ndarray, whole: bool) -> None:
    """Decode one LZ4 block or ZSTD frame into ``out``, which it must fill exactly.

    ``whole``: ``src`` is a whole-frame payload (LZ4 with its u32 size prefix).
    """
    size = out.size
    if codec == CODEC_BLOSC2:
        try:
            _blosc2.decompress_into(src, out)
        except _blosc2.Blosc2Error as exc:
            raise CodecError(str(exc)) from None
        return
    if codec == CODEC_LZ4:
        skip = _LZ4_SIZE.size if whole else 0
        if _lz4_into is not None and max(src.nbytes, size) <= _INT_MAX:
            addr = np.frombuffer(src, dtype=np.uint8).ctypes.data
            got = _lz4_into(addr + skip, out.ctypes.data, src.nbytes - skip, size)
            if got != size:
                raise CodecError(f"lz4 data does not decode to its {size} bytes")
            return
        try:
            data: BytesLike = lz4.block.decompress(src[skip:], uncompressed_size=size)
        except lz4.block.LZ4BlockError as exc:
            raise CodecError(f"lz4 data does not decode: {exc}") from None
    else:
        if not whole and _zstd_content_size(src, "zstd frame") != size:
            raise CodecError(f"zstd frame does not declare its block's {size} bytes")
        try:  # a payload (a block) is exactly one frame: no bytes may follow it
            data = _zstd_decompressor().decompress(
                src, max_output_size=size, allow_extra_data=False
            )
        except zstandard.ZstdError as exc:
            raise CodecError(f"zstd frame does not decode: {exc}") from None
    if len(data) != size:
        raise CodecError(f"decoded to {len(data)} bytes, the header said {size}")
    out[:] = np.frombuffer(data, dtype=np.uint8)


_BLOCK_CODECS: Final = frozenset({CODEC_LZ4_BLOCKS, CODEC_ZSTD_BLOCKS, CODEC_BLOSC2})
_BLOCK_BASE: Final = {
    CODEC_LZ4_BLOCKS: CODEC_LZ4,
    CODEC_ZSTD_BLOCKS: CODEC_ZSTD,
    CODEC_BLOSC2: CODEC_BLOSC2,
}
_DECODE_BITS = CODEC_MASK | int(FrameFlags.SHUFFLED)


def _copy_aligned(data: BytesLike) -> np.ndarray:
    out = aligned_empty(len(data))
    out[:] = np.frombuffer(data, dtype=np.uint8)
    return out


# the shuffled bytes before unshuffle: a buffer of its own, not the reader's, which holds the
# stored bytes being decoded
_scratch = Scratch().take


def _load_lz4_into() -> Callable[[int, int, int, int], int] | None:
    """``LZ4_decompress_safe`` from the lz4 package's own extension, or None.

    python-lz4 links the LZ4 library into ``lz4.block._block`` and exports its
    symbols; calling it directly decodes into a buffer of ours. ctypes drops
    the GIL for the call. Without it, decoding falls back to ``lz4.block``.
    """
    try:
        from lz4.block import _block  # noqa: PLC0415 - the extension module, for its path

        fn = ctypes.CDLL(_block.__file__).LZ4_decompress_safe
    except (ImportError, OSError, AttributeError):  # pragma: no cover - other lz4 builds
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_lz4_into = _load_lz4_into()
