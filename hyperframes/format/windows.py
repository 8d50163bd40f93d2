"""The global window grid: pure arithmetic, no I/O.

Windows are multiples of the window length ``L`` since the Unix epoch and a
window's end is inclusive: window ``k`` holds the frames stamped in
``(k*L, (k+1)*L]``. A frame stamped exactly on a boundary therefore closes
the window that ends there, which is the "last frame at or before the end
time" rule of the design.
"""

from __future__ import annotations

__all__ = ["window_of", "window_start", "window_end"]


def window_of(timestamp_ns: int, window_ns: int) -> int:
    """The id of the window that holds a frame stamped ``timestamp_ns``."""
    if window_ns <= 0:
        raise ValueError(f"window length must be > 0 ns, got {window_ns}")
    return (timestamp_ns - 1) // window_ns


def window_start(window_id: int, window_ns: int) -> int:
    """Exclusive lower bound of window ``window_id`` in ns."""
    return window_id * window_ns


def window_end(window_id: int, window_ns: int) -> int:
    """Inclusive upper bound of window ``window_id`` in ns."""
    return (window_id + 1) * window_ns
