"""CRC32C (Castagnoli), hardware-accelerated through the ``crc32c`` package."""

from __future__ import annotations

from typing import TypeAlias

import crc32c as _impl
import numpy as np

__all__ = ["BytesLike", "crc32c"]

BytesLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray


def crc32c(data: BytesLike, value: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``value``."""
    return int(_impl.crc32c(data, value))
