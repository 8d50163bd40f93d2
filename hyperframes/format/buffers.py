"""Memory laid out as the format lays out payloads: uint8 arrays starting on 64-byte boundaries.

Payloads sit on 64-byte boundaries in a file (:data:`hyperframes.format.layout.ALIGN`)
so that a frame read or decoded into memory can be viewed as numpy arrays,
SIMD and CUDA copies without a copy; these buffers keep that alignment in
memory. Pure: no I/O.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from hyperframes.format.layout import ALIGN

__all__ = ["aligned_empty", "Scratch", "scratch"]

_SMALL = 16 << 10  # buffers up to this size are carved from a per-thread arena
_ARENA = 1 << 20
_local = threading.local()


_address_of = ctypes.addressof
_char_at = ctypes.c_char.from_buffer


_U8 = np.dtype(np.uint8)
_empty = np.empty


def _aligned_alloc(size: int, align: int) -> np.ndarray:
    # a dtype object, not dtype=np.uint8 (~0.3 us less), and the address through
    # ctypes (~1 us less than raw.ctypes.data): a large aligned_empty in ~0.8 us, not 1.4
    raw = _empty(size + align, _U8)
    start = -_address_of(_char_at(raw)) % align  # type: ignore[arg-type]  # arrays are buffers
    return raw[start : start + size]


def aligned_empty(size: int) -> np.ndarray:
    """An uninitialised uint8 array of ``size`` bytes whose data starts on a 64-byte boundary.

    Small buffers are slices of a per-thread 1 MiB arena (finding an address
    costs more than a small read); a slice keeps its arena alive.
    """
    if size > _SMALL:
        return _aligned_alloc(size, ALIGN)
    state: list[Any] | None = getattr(_local, "arena", None)  # [arena, next free offset]
    step = (size + ALIGN - 1) & -ALIGN or ALIGN
    if state is None or state[1] + step > _ARENA:
        state = _local.arena = [_aligned_alloc(_ARENA, ALIGN), 0]
    pos = state[1]
    state[1] = pos + step
    arena: np.ndarray = state[0]
    return arena[pos : pos + size]


_SCRATCH_MAX = 16 << 20  # larger buffers are fresh and not kept


class Scratch:
    """A 64-byte-aligned buffer per thread, reused from one call to the next.

    For bytes that are only decoded from: what :meth:`take` returns is
    overwritten by the next call in the same thread, so it must not be kept.
    A reused buffer costs no allocation and no page faults; sizes over 16 MiB
    get a fresh buffer. Two instances never share memory, so bytes held in
    one (a payload read from a file) can be decoded into another (the
    shuffled bytes before unshuffle).
    """

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = threading.local()

    def take(self, size: int) -> np.ndarray:
        """A uint8 array of ``size`` bytes, valid until this thread's next call."""
        if size > _SCRATCH_MAX:
            return aligned_empty(size)
        buf: np.ndarray | None = getattr(self._local, "buf", None)
        if buf is None or buf.size < size:
            buf = self._local.buf = _aligned_alloc(max(size, 1 << 20), ALIGN)
        return buf[:size]


#: The buffer the reader reads compressed payloads into (:class:`Scratch`).
scratch = Scratch().take
