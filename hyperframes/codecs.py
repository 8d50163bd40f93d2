"""Per-frame container codecs: none, LZ4 (fast or HC), ZSTD, with optional byte shuffle.

A codec is chosen per stream by name (the names used in YAML configs) and
recorded per frame in the index flags, so a reader never needs the config.
Encoded layouts (docs/FORMAT.md):

- ``none`` (id 0): the payload bytes.
- ``lz4``/``lz4hc`` (id 1): u32 little-endian raw size, then one LZ4 block.
- ``zstd`` (id 2): one ZSTD frame with its content size set.

Byte shuffle (flag ``SHUFFLED``) regroups the bytes of fixed-size items (the
first bytes of every float, then the second...) before compression; it makes
float point clouds and IMU arrays far more compressible. Trailing bytes that
do not fill an item are kept in place.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Final

import lz4.block
import numpy as np
import zstandard

from hyperframes._crc import BytesLike
from hyperframes._io import aligned_empty
from hyperframes.layout import CODEC_MASK, CODEC_SHIFT, FrameFlags

__all__ = [
    "CODEC_NONE",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CODEC_NAMES",
    "CodecSpec",
    "CodecError",
    "codec_of",
    "encode_frame",
    "decode_frame",
    "shuffle",
    "unshuffle",
]

CODEC_NONE: Final = 0
CODEC_LZ4: Final = 1
CODEC_ZSTD: Final = 2
CODEC_NAMES: Final = {CODEC_NONE: "none", CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}

# name -> (codec id, default level, allowed level range)
_SPECS: Final[dict[str, tuple[int, int, tuple[int, int]]]] = {
    "none": (CODEC_NONE, 0, (0, 0)),
    "lz4": (CODEC_LZ4, 0, (0, 0)),
    "lz4hc": (CODEC_LZ4, 3, (1, 12)),
    "zstd": (CODEC_ZSTD, 3, (1, 22)),
}
_LZ4_SIZE = struct.Struct("<I")
_LZ4_MAX_RATIO = 255  # an LZ4 sequence emits at most ~255 bytes per input byte


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
        text = f"{self.name}:{self.level}" if self.name in ("lz4hc", "zstd") else self.name
        return text + ("+shuffle" if self.shuffle else "")


def codec_of(flags: int) -> int:
    """The codec id held in an index entry's flags."""
    return (flags & CODEC_MASK) >> CODEC_SHIFT


def shuffle(data: BytesLike, itemsize: int) -> memoryview:
    """Byte-transpose ``data`` viewed as items of ``itemsize`` bytes."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n = buf.size // itemsize
    if itemsize <= 1 or n == 0:
        return memoryview(data).cast("B")
    out = np.empty(buf.size, dtype=np.uint8)
    src = buf[: n * itemsize].reshape(n, itemsize)
    dst = out[: n * itemsize].reshape(itemsize, n)
    for k in range(itemsize):  # one strided column at a time beats a full transpose
        dst[k] = src[:, k]
    out[n * itemsize :] = buf[n * itemsize :]
    return out.data


def unshuffle(data: BytesLike, itemsize: int) -> np.ndarray:
    """Inverse of :func:`shuffle`; returns a fresh 64-byte-aligned uint8 array."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = aligned_empty(buf.size)
    n = buf.size // itemsize
    if itemsize <= 1 or n == 0:
        out[:] = buf
        return out
    src = buf[: n * itemsize].reshape(itemsize, n)
    dst = out[: n * itemsize].reshape(n, itemsize)
    for k in range(itemsize):
        dst[:, k] = src[k]
    out[n * itemsize :] = buf[n * itemsize :]
    return out


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


def encode_frame(payload: BytesLike, spec: CodecSpec, itemsize: int = 1) -> tuple[BytesLike, int]:
    """Compress one payload; returns (stored bytes, index flag bits for codec and shuffle).

    Falls back to storing the payload raw (codec ``none``, no shuffle) when
    compression does not make it smaller (then the result is a view of
    ``payload``, not a copy). Thread-safe; releases the GIL in the compressors.
    """
    raw = memoryview(payload).cast("B")
    if spec.codec_id == CODEC_NONE:
        return raw, 0
    data: BytesLike = shuffle(raw, itemsize) if spec.shuffle and itemsize > 1 else raw
    if spec.codec_id == CODEC_LZ4:
        if spec.name == "lz4hc":
            out = lz4.block.compress(
                data, mode="high_compression", compression=spec.level, store_size=True
            )
        else:
            out = lz4.block.compress(data, store_size=True)
    else:
        out = _zstd_compressor(spec.level or 3).compress(data)
    if len(out) >= raw.nbytes:
        return raw, 0
    flags = spec.codec_id << CODEC_SHIFT
    if spec.shuffle and itemsize > 1:
        flags |= FrameFlags.SHUFFLED
    return out, flags


def decode_frame(
    stored: BytesLike, flags: int, itemsize: int, max_size: int
) -> BytesLike | np.ndarray:
    """Decompress one stored payload by its index flags.

    ``max_size`` bounds the decoded size: a size field claiming more raises
    :class:`CodecError` before anything is allocated.
    """
    codec = codec_of(flags)
    if codec == CODEC_NONE:
        out: BytesLike = stored
    elif codec == CODEC_LZ4:
        if len(stored) < _LZ4_SIZE.size:
            raise CodecError("lz4 frame shorter than its size prefix")
        (raw_size,) = _LZ4_SIZE.unpack_from(stored, 0)
        bound = min(max_size, _LZ4_MAX_RATIO * len(stored) + 64)
        if raw_size > bound:
            raise CodecError(f"lz4 frame claims {raw_size} raw bytes, more than {bound}")
        try:
            out = lz4.block.decompress(stored)
        except lz4.block.LZ4BlockError as exc:
            raise CodecError(f"lz4 frame does not decode: {exc}") from None
    elif codec == CODEC_ZSTD:
        try:
            raw_size = zstandard.frame_content_size(stored)
        except zstandard.ZstdError as exc:
            raise CodecError(f"zstd frame header invalid: {exc}") from None
        if raw_size < 0 or raw_size > max_size:
            raise CodecError(f"zstd frame content size {raw_size} unknown or over {max_size}")
        try:
            out = _zstd_decompressor().decompress(stored, max_output_size=raw_size)
        except zstandard.ZstdError as exc:
            raise CodecError(f"zstd frame does not decode: {exc}") from None
        if len(out) != raw_size:
            raise CodecError(f"zstd frame decoded to {len(out)} bytes, header said {raw_size}")
    else:
        raise CodecError(f"unknown codec id {codec}")
    if flags & FrameFlags.SHUFFLED:
        return unshuffle(out, itemsize)
    return out
