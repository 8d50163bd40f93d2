"""Reading the frames at given index positions of one stream with few ``pread`` calls."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from hyperframes.reader import Frame, HyperframeReader

__all__ = ["runs", "read_frames"]


def runs(positions: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted unique positions as inclusive runs ``(first, last)`` of consecutive values."""
    out: list[tuple[int, int]] = []
    for p in sorted(set(positions)):
        if out and p == out[-1][1] + 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


def read_frames(
    reader: HyperframeReader, sid: int, base: int, ts: np.ndarray, positions: Iterable[int]
) -> dict[int, Frame]:
    """Frames at stream-relative ``positions``; a run of consecutive frames is one range read.

    A run is read with ``read_range`` when its first and last timestamps are
    not shared with the frames around it (so the range holds exactly the run);
    otherwise frame by frame.
    """
    out: dict[int, Frame] = {}
    n = len(ts)
    for lo, hi in runs(positions):
        clean = (lo == 0 or ts[lo - 1] < ts[lo]) and (hi == n - 1 or ts[hi] < ts[hi + 1])
        if clean and hi > lo:
            frames = reader.read_range(sid, int(ts[lo]), int(ts[hi]))
            if len(frames) == hi - lo + 1:
                out.update(zip(range(lo, hi + 1), frames, strict=True))
                continue
        for p in range(lo, hi + 1):
            out[p] = reader.frame_at(base + p)
    return out
