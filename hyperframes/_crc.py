"""CRC32C (Castagnoli), hardware-accelerated through the ``crc32c`` package."""

from __future__ import annotations

from typing import TypeAlias

import crc32c as _impl
import numpy as np

__all__ = ["BytesLike", "PayloadLike", "byte_view", "crc32c"]

BytesLike: TypeAlias = bytes | bytearray | memoryview
PayloadLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray


def byte_view(data: PayloadLike) -> memoryview:
    """A flat unsigned-byte memoryview of ``data`` (arrays made contiguous first)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8).data
    return memoryview(data).cast("B")


def crc32c(data: BytesLike | np.ndarray, value: int = 0) -> int:
    """CRC32C of ``data`` (any contiguous buffer), continuing from ``value``."""
    return int(_impl.crc32c(data, value))  # type: ignore[arg-type]  # arrays are buffers
