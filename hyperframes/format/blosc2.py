"""One Blosc2 chunk per payload block (codec 5): the checks before c-blosc2 sees stored bytes.

python-blosc2 is imported on first use (it costs ~0.5 s and pulls in a few
packages), so a reader that never meets codec 5 never loads it; writers
and the recorder import it at start (:func:`hyperframes.format.codecs.preload`). Decoding is
bounded before the library runs: a chunk's 32-byte header must be one that
this project's writer produces (LZ4 or ZSTD, byte shuffle or no filter, no
dictionary, no lazy, special-value or user-defined parts: those would let a
hostile file choose code paths, plugins or uninitialised output), its sizes
must match the block table exactly, and the output buffer is exactly the
decoded size the block table allows (python-blosc2 trusts the chunk's own
size field for the output length, so a larger field would overflow a smaller
buffer: the header check is what makes the call safe).
"""

from __future__ import annotations

import importlib
import logging
import struct
import threading
from types import ModuleType
from typing import Any, Final

import numpy as np

from hyperframes.format.crc import BytesLike

__all__ = [
    "Blosc2Error",
    "DEFAULT_LEVEL",
    "HEADER_SIZE",
    "available",
    "compress",
    "decompress_into",
    "header_problem",
]

DEFAULT_LEVEL: Final = 5  # blosc2-lz4 level (bench/bench_codecs.py: size, write and read cost)
HEADER_SIZE: Final = 32  # the extended (Blosc2) chunk header
_HEAD = struct.Struct("<BBBBiii6sBB6sBB")
_EXTENDED = 0x05  # flags bits 0 and 2 both set: the extended header follows
_MEMCPYED = 0x02
_NOSPLIT = 0x10
_LZ4, _ZSTD = 1, 4  # compressor enumeration in the flags' top three bits
# the codec ids c-blosc2 also records in the header's codec byte, per compressor
_CODEC_BYTE: Final = {_LZ4: frozenset({1, 2}), _ZSTD: frozenset({5})}  # lz4, lz4hc; zstd
_FILTERS_OK = frozenset({0, 1})  # no filter, byte shuffle
_MAX_TYPESIZE = 255
_NO_BYTES = bytes(6)
_INSTALL = "pip install 'hyperframes-sensors'  (blosc2 is one of its dependencies)"


class Blosc2Error(ValueError):
    """A stored Blosc2 chunk is refused or does not decode (the message says why)."""


class _Lazy:
    """python-blosc2, imported once on first use (or why it could not be)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.module: ModuleType | None = None
        self.missing: str | None = None

    def load(self) -> ModuleType | None:
        if self.module is not None or self.missing is not None:
            return self.module
        with self.lock:
            if self.module is None and self.missing is None:
                # numexpr (a dependency of blosc2) logs "NumExpr defaulting to N threads."
                # at INFO on import, into every command's and the recorder's log
                logging.getLogger("numexpr.utils").setLevel(logging.WARNING)
                try:
                    mod = importlib.import_module("blosc2")
                except ImportError as exc:
                    self.missing = str(exc)
                    return None
                mod.set_releasegil(True)  # decode and compress on several threads at once
                self.module = mod
        return self.module


_lazy = _Lazy()
_load = _lazy.load


def available() -> bool:
    """Whether python-blosc2 can be imported here (the writer falls back to LZ4 if not)."""
    return _load() is not None


def _need() -> Any:
    mod = _load()
    if mod is None:
        raise Blosc2Error(f"codec 5 (blosc2) needs python-blosc2 ({_lazy.missing}): {_INSTALL}")
    return mod


def compress(data: BytesLike, zstd: bool, level: int, typesize: int) -> bytes:
    """One chunk of ``data``: LZ4 (or ZSTD) at ``level``, byte shuffle when ``typesize > 1``."""
    mod = _need()
    shuffle = 1 < typesize <= _MAX_TYPESIZE
    out: bytes = mod.compress2(
        data,
        codec=mod.Codec.ZSTD if zstd else mod.Codec.LZ4,
        clevel=level,
        filters=[mod.Filter.SHUFFLE if shuffle else mod.Filter.NOFILTER],
        typesize=typesize if shuffle else 1,
        nthreads=1,
        splitmode=mod.SplitMode.NEVER_SPLIT,
    )
    return out


def header_problem(chunk: BytesLike, size: int) -> str | None:
    """Why ``chunk`` is not a Blosc2 chunk this reader decodes to ``size`` bytes, or None."""
    n = len(memoryview(chunk))
    if n < HEADER_SIZE:
        return f"blosc2 chunk of {n} bytes, shorter than its {HEADER_SIZE}-byte header"
    (_, _, flags, typesize, nbytes, blocksize, cbytes, filters, udcodec, codec_meta,
     filters_meta, reserved, flags2) = _HEAD.unpack_from(chunk, 0)  # fmt: skip
    compressor = flags >> 5
    if flags & 0x1F & ~(_MEMCPYED | _NOSPLIT) != _EXTENDED or compressor not in (_LZ4, _ZSTD):
        return f"blosc2 chunk flags 0x{flags:02x} are not an LZ4 or ZSTD chunk of this format"
    if (
        flags2
        or udcodec not in _CODEC_BYTE[compressor]
        or codec_meta
        or reserved
        or filters_meta != _NO_BYTES
    ):
        return "blosc2 chunk uses a dictionary, lazy or special values, or a user-defined codec"
    if not set(filters) <= _FILTERS_OK or typesize == 0:
        return f"blosc2 chunk filters {list(filters)} (typesize {typesize}) are not shuffle or none"
    if nbytes != size or cbytes != n:
        return (
            f"blosc2 chunk says {nbytes} raw and {cbytes} stored bytes, "
            f"its block holds {size} raw and {n} stored"
        )
    if not 0 < blocksize <= max(size, 1):
        return f"blosc2 chunk block size {blocksize} outside 1..{size}"
    return None


def decompress_into(chunk: memoryview, out: np.ndarray) -> None:
    """Decode ``chunk`` into ``out`` (contiguous uint8), which it must fill exactly."""
    problem = header_problem(chunk, out.size)
    if problem is not None:
        raise Blosc2Error(problem)
    mod = _need()
    try:
        mod.decompress2(chunk, dst=out, nthreads=1)
    except (ValueError, RuntimeError) as exc:
        raise Blosc2Error(f"blosc2 chunk does not decode: {exc}") from None
