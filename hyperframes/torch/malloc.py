"""glibc's malloc thresholds for a training process: freed large buffers kept for reuse.

A DataLoader worker decodes a batch's frames into fresh arrays (a lidar
sweep 1.9 MB, a decoded 1600x900 image 4.3 MB), hands them to ``collate``
and frees them together. With glibc's defaults the freed top of the heap
then goes back to the kernel, and the next batch faults every page in
again (~700 page faults a lidar sample in a worker, 13 in one process).
:func:`tune_malloc` raises glibc's two thresholds as the environment
variable ``GLIBC_TUNABLES`` would (docs/TRAINING.md), but at run time, so
a notebook or a launcher that cannot set the environment can use it too.
The library never calls it by itself: freed heap kept for reuse is memory
the process holds, a choice for whoever sizes the box.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["tune_malloc"]

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_MMAP_MAX_MB = 32  # the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2)
_INT_MAX_MB = 2047  # mallopt takes a C int of bytes


def glibc_version() -> str | None:
    """``"2.36"`` where the C library is glibc, else None (musl, macOS)."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    if not found or not found.startswith("glibc "):
        return None
    return found.split()[1]


def tune_malloc(
    worker_id: int | None = None,
    *,
    mmap_threshold_mb: int = 32,
    trim_threshold_mb: int = 256,
) -> bool:
    """Keep freed buffers of up to ``mmap_threshold_mb`` in this process's heap for reuse.

    Allocations up to ``mmap_threshold_mb`` (at most 32) then come from the
    heap, and up to ``trim_threshold_mb`` (at most 2047) of freed heap stays with the
    process instead of going back to the kernel; it must exceed what one
    batch frees (a batch of 2 lidar + IMU samples: ~4 MB; 8 samples of six
    decoded 1600x900 cameras: ~600 MB). Call it in the training process
    before its DataLoader starts: fork workers inherit it. Spawn workers
    (the usual choice with CUDA) do not; pass ``worker_init_fn=tune_malloc``
    (``worker_id``, which the DataLoader passes, is ignored).

    Returns True when set, False where the C library is not glibc (nothing
    changed). Raises ValueError for a threshold out of range and OSError
    when glibc refuses one.
    """
    del worker_id
    for name, value, low, high in (
        ("mmap_threshold_mb", mmap_threshold_mb, 1, _MMAP_MAX_MB),
        ("trim_threshold_mb", trim_threshold_mb, 1, _INT_MAX_MB),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    if glibc_version() is None:
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    for param, mb, name in (
        (_M_MMAP_THRESHOLD, mmap_threshold_mb, "M_MMAP_THRESHOLD"),
        (_M_TRIM_THRESHOLD, trim_threshold_mb, "M_TRIM_THRESHOLD"),
    ):
        if mallopt(param, mb << 20) != 1:
            raise OSError(f"glibc refused mallopt({name}, {mb} MiB)")
    return True
