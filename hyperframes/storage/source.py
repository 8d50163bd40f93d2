"""The one small interface the reader reads through: a local file or an object in a store.

A :data:`Fd` is an open file descriptor or a :class:`RangeSource` (an object
in an S3-compatible store, :class:`hyperframes.storage.objects.RemoteFile`).
:func:`pread_exact`, :func:`pread_into` and :func:`file_size` serve both, so
the reader, ``verify`` and recovery never ask which one they hold.
"""

from __future__ import annotations

import os
from typing import Protocol, TypeAlias

import numpy as np

__all__ = ["BytesLike", "Fd", "HeldBytes", "RangeSource", "file_size", "pread_exact", "pread_into"]

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What a write takes: any contiguous bytes."""


class RangeSource(Protocol):
    """What the reader needs of a remote object in place of a descriptor (see objstore)."""

    size: int

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``."""
        ...

    def prefetch(self, offset: int, size: int) -> None:
        """Fetch and keep ``[offset, offset + size)``."""
        ...


class HeldBytes:
    """The first bytes of a file (or object), already read, as a :class:`RangeSource` of a
    file of ``size`` bytes: to check a header fetched on its own (one ranged GET)."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data = data
        self.size = size

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``, of those held."""
        return self.data[offset : offset + size]

    def prefetch(self, offset: int, size: int) -> None:
        """Nothing beyond what is held is fetched."""


Fd: TypeAlias = int | RangeSource
"""A file descriptor, or a :class:`RangeSource` (an object in a store)."""


def pread_exact(fd: Fd, size: int, offset: int) -> bytes:
    """Exactly ``size`` bytes at ``offset``; fewer only at end of file.

    ``fd`` may also be a remote object with ``pread`` (:mod:`hyperframes.storage.objects`).
    """
    if not isinstance(fd, int):
        data: bytes = fd.pread(size, offset)
        return data
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def pread_into(fd: Fd, buf: np.ndarray, offset: int) -> np.ndarray:
    """Fill ``buf`` from ``offset``; returns ``buf``, shorter if the file ends first."""
    if not isinstance(fd, int):  # a remote object (hyperframes.storage.objects.RemoteFile)
        data = fd.pread(buf.size, offset)
        buf[: len(data)] = np.frombuffer(data, np.uint8)
        return buf[: len(data)]
    size = buf.size
    got = os.preadv(fd, [buf], offset)  # type: ignore[list-item]  # arrays are buffers
    if got == size:
        return buf
    view = buf.data
    while got < size:
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            return buf[:got]
        got += n
    return buf


def file_size(fd: Fd) -> int:
    """Size of the open file ``fd`` (or of a remote object with ``size``)."""
    if not isinstance(fd, int):
        size: int = fd.size
        return size
    return os.fstat(fd).st_size
