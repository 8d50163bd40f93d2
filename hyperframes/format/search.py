"""Timestamp search over one stream's sorted timestamps: pure functions, no I/O.

The index is sorted by (stream, timestamp) when the file is finalized, so
frames that arrived slightly out of order are already in timestamp order
here; "nearest" compares the two neighbours around the insertion point.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Literal

import numpy as np

__all__ = ["find", "find_in_list", "range_between", "window_between"]

_U64_MAX = (1 << 64) - 1


def _clamp(t: int) -> np.uint64:
    # An explicit uint64: numpy would otherwise compare a Python int as float64
    # and lose the low bits of nanosecond timestamps.
    return np.uint64(min(max(int(t), 0), _U64_MAX))


def find(ts: np.ndarray, t: int, mode: Literal["nearest", "before", "after"]) -> int | None:
    """Position in ``ts`` (sorted uint64) of the match for ``t``, or None if there is none.

    - ``before``: the last timestamp <= t
    - ``after``: the first timestamp >= t
    - ``nearest``: the closest timestamp; on a tie the earlier one
    """
    n = len(ts)
    if n == 0:
        return None
    if mode == "before":
        if t < 0:
            return None
        i = int(ts.searchsorted(_clamp(t), "right")) - 1
        return i if i >= 0 else None
    if mode == "after":
        if t > _U64_MAX:
            return None
        i = int(ts.searchsorted(_clamp(t), "left"))
        return i if i < n else None
    if mode != "nearest":
        raise ValueError(f"mode must be 'nearest', 'before' or 'after', got {mode!r}")
    i = int(ts.searchsorted(_clamp(t), "left"))
    if i == 0:
        return 0
    if i == n:
        return n - 1
    return i - 1 if t - int(ts[i - 1]) <= int(ts[i]) - t else i


def find_in_list(ts: list[int], t: int, mode: Literal["nearest", "before", "after"]) -> int | None:
    """:func:`find` over the same timestamps as a list of Python ints (exact, ~4x faster
    per call than ``searchsorted``: no array scalars)."""
    n = len(ts)
    if n == 0:
        return None
    t = int(t)
    if mode == "before":
        i = bisect_right(ts, t) - 1
        return i if i >= 0 else None
    if mode == "after":
        i = bisect_left(ts, t)
        return i if i < n else None
    if mode != "nearest":
        raise ValueError(f"mode must be 'nearest', 'before' or 'after', got {mode!r}")
    i = bisect_left(ts, t)
    if i == 0:
        return 0
    if i == n:
        return n - 1
    return i - 1 if t - ts[i - 1] <= ts[i] - t else i


def range_between(ts: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """Half-open position range of timestamps with ``start <= t <= end``."""
    if end < start or end < 0:
        return 0, 0
    a = int(ts.searchsorted(_clamp(start), "left"))
    b = int(ts.searchsorted(_clamp(end), "right"))
    return a, max(a, b)


def window_between(ts: np.ndarray, start_exclusive: int, end_inclusive: int) -> tuple[int, int]:
    """Half-open position range of timestamps with ``start < t <= end`` (one window)."""
    if end_inclusive < 0:
        return 0, 0
    a = 0 if start_exclusive < 0 else int(ts.searchsorted(_clamp(start_exclusive), "right"))
    b = int(ts.searchsorted(_clamp(end_inclusive), "right"))
    return a, max(a, b)
