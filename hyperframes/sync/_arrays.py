"""Input checks shared by the sync functions: timestamps as int64 nanoseconds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TimesLike", "as_ns", "as_sorted_ns"]

TimesLike = np.ndarray | Sequence[int]
_I64_MAX = np.iinfo(np.int64).max


def as_ns(times: TimesLike, what: str) -> np.ndarray:
    """``times`` as a 1-D int64 array of nanoseconds (uint64 stamps must fit in int64)."""
    arr = np.asarray(times)
    if arr.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array of ns timestamps, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, np.int64)
    if arr.dtype.kind == "u":
        if int(arr.max()) > _I64_MAX:
            raise ValueError(f"{what}: timestamp {int(arr.max())} ns does not fit in int64")
        return arr.astype(np.int64)
    if arr.dtype.kind != "i":
        raise TypeError(f"{what}: timestamps must be integer ns, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def as_sorted_ns(times: TimesLike, what: str) -> np.ndarray:
    """As :func:`as_ns`, and checked to be sorted ascending (the index order)."""
    arr = as_ns(times, what)
    if arr.size > 1:
        bad = np.flatnonzero(arr[1:] < arr[:-1])
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"{what}: timestamps must be sorted; position {k + 1} ({int(arr[k + 1])} ns) "
                f"comes before position {k} ({int(arr[k])} ns)"
            )
    return arr
