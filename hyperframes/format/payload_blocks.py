"""The block table of a payload stored in independent blocks (codecs 3 and 4): pure layout.

A large frame is cut into blocks of ``block_size`` raw bytes (the last one
shorter), each compressed alone, so that several threads can decode one
frame. Stored layout (docs/FORMAT.md, "Stored payloads and codecs"):

    u32 raw size | u32 block size | u32 stored size of each block | the blocks

The number of blocks is ``ceil(raw size / block size)``. :func:`parse`
checks everything a decoder relies on before anything is allocated: the
table fits, every block is non-empty, the blocks fill the payload exactly,
and no block claims more than the codec ratio limit allows.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

import numpy as np

from hyperframes.format.crc import BytesLike

__all__ = [
    "BLOCK_SIZE",
    "MIN_BLOCK_SIZE",
    "MAX_BLOCK_SIZE",
    "BlockTable",
    "BlockTableError",
    "block_size_problem",
    "pack",
    "parse",
]

BLOCK_SIZE: Final = 256 << 10  # raw bytes per block; frames of two blocks or more are split
MIN_BLOCK_SIZE: Final = 4096  # smaller blocks would only add table and thread overhead
MAX_BLOCK_SIZE: Final = (1 << 32) - 1  # a u32 of the table head
_HEAD = struct.Struct("<II")


def block_size_problem(block_size: int) -> str | None:
    """Why ``block_size`` is not a writer's block size (0: never split), or None."""
    if block_size == 0 or MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        return None
    return (
        f"block_size must be 0 (frames stored whole) or {MIN_BLOCK_SIZE}..{MAX_BLOCK_SIZE}, "
        f"got {block_size}"
    )


class BlockTableError(ValueError):
    """The block table of a stored payload is inconsistent (the message says how)."""


@dataclass(frozen=True, slots=True)
class BlockTable:
    """Where each block of a blocked payload lies, stored and decoded."""

    raw_size: int
    block_size: int
    offsets: tuple[int, ...]  # n + 1 stored offsets: block i is offsets[i]:offsets[i + 1]

    @property
    def count(self) -> int:
        """Number of blocks."""
        return len(self.offsets) - 1

    def raw_range(self, i: int) -> tuple[int, int]:
        """Decoded byte range ``[lo, hi)`` of block ``i``."""
        lo = i * self.block_size
        return lo, min(lo + self.block_size, self.raw_size)


def pack(blocks: Sequence[BytesLike], raw_size: int, block_size: int) -> bytes:
    """The stored payload holding ``blocks`` (already compressed, in order)."""
    sizes = np.array([len(memoryview(b)) for b in blocks], dtype="<u4")
    return b"".join([_HEAD.pack(raw_size, block_size), sizes.tobytes(), *blocks])


def parse(stored: BytesLike, max_ratio: int, slack: int) -> BlockTable:
    """Read and check the block table of ``stored``.

    ``max_ratio`` and ``slack`` bound each block: a block of ``n`` stored
    bytes may decode to at most ``max_ratio * n + slack`` bytes. Raises
    :class:`BlockTableError` naming what is wrong.

    Plain ints through ``struct``, ``accumulate`` and ``min`` (C loops, no
    numpy): a lidar read parses its 8-entry table right after the ``pread``
    of ~1.6 MB has left the caches cold, where numpy's ten small calls took
    ~40 us and this takes a few.
    """
    total = len(memoryview(stored))
    if total < _HEAD.size:
        raise BlockTableError(f"{total} bytes, shorter than the 8-byte block table head")
    raw_size, block_size = _HEAD.unpack_from(stored, 0)
    if block_size < MIN_BLOCK_SIZE:
        raise BlockTableError(f"block size {block_size} under the minimum {MIN_BLOCK_SIZE}")
    if raw_size == 0:
        raise BlockTableError("raw size 0: a blocked payload holds at least one byte")
    count = -(-raw_size // block_size)
    body = _HEAD.size + 4 * count
    if body + count > total:  # every block holds at least one byte
        raise BlockTableError(
            f"{count} blocks of {block_size} bytes for {raw_size} raw bytes "
            f"do not fit in {total} stored bytes"
        )
    sizes: tuple[int, ...] = struct.unpack_from(f"<{count}I", stored, _HEAD.size)
    if not min(sizes):
        raise BlockTableError(f"block {sizes.index(0)} is empty")
    offsets = tuple(accumulate(sizes, initial=body))
    if offsets[-1] != total:
        raise BlockTableError(
            f"the blocks hold {offsets[-1] - body} bytes, "
            f"the payload has {total - body} after its table"
        )
    last = raw_size - (count - 1) * block_size
    # block i decodes to raw_i <= max_ratio * n_i + slack: every full block against the
    # smallest full block, the last one alone; the loop only runs to name the culprit
    if (count > 1 and block_size > max_ratio * min(sizes[:-1]) + slack) or (
        last > max_ratio * sizes[-1] + slack
    ):
        for i, n in enumerate(sizes):
            raw = block_size if i < count - 1 else last
            if raw > max_ratio * n + slack:
                raise BlockTableError(
                    f"block {i} claims {raw} raw bytes from {n} stored (more than {max_ratio}:1)"
                )
    return BlockTable(raw_size, block_size, offsets)
