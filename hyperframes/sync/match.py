"""Matching frames of one stream to query times: nearest neighbour and interval intersection.

Pure numpy, no I/O. Every query takes an explicit tolerance and returns a
mask of the queries that found nothing (``is_pad``, as in lerobot), never a
silent far-away match.

- :func:`nearest`: the frame closest in time (or the last at/before, the first
  at/after). The error is bounded by half the frame interval: a 10 Hz lidar
  matched to a 30 Hz camera is off by up to 50 ms, the camera matched to the
  lidar by up to ~16.7 ms.
- :func:`intersect`: frames as ``[start, end]`` intervals built from their
  exposure or scan duration (:func:`frame_intervals`); the match is the frame
  whose interval overlaps the query's most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from hyperframes.sync._arrays import TimesLike, as_ns, as_sorted_ns

__all__ = ["Match", "IntervalMatch", "Anchor", "nearest", "frame_intervals", "intersect"]

Anchor = Literal["start", "center", "end"]
_CHUNK = 1 << 20  # candidate pairs evaluated at once by intersect()
_BIG = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class Match:
    """Per query: the matched frame, its time error and whether nothing matched.

    ``index`` is the position in the searched timestamps (-1 where
    ``is_pad``); ``error_ns`` is matched time minus query time (0 where
    ``is_pad``).
    """

    index: np.ndarray  # int64
    error_ns: np.ndarray  # int64
    is_pad: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.index)

    @property
    def matched(self) -> np.ndarray:
        """True where a frame matched (the complement of ``is_pad``)."""
        return ~self.is_pad

    @property
    def abs_error_ns(self) -> np.ndarray:
        """Absolute errors of the matched queries only."""
        out: np.ndarray = np.abs(self.error_ns[~self.is_pad])
        return out


@dataclass(frozen=True, slots=True)
class IntervalMatch(Match):
    """A :class:`Match` from :func:`intersect`; ``error_ns`` compares interval centres.

    ``overlap_ns`` is the length of the intersection (0 where ``is_pad``, and
    for intervals that only touch or contain a zero-length interval).
    """

    overlap_ns: np.ndarray  # int64


def _empty(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.full(n, -1, np.int64), np.zeros(n, np.int64), np.ones(n, bool)


def nearest(
    query_ns: TimesLike,
    timestamps_ns: TimesLike,
    *,
    tolerance_ns: int | None,
    mode: Literal["nearest", "before", "after"] = "nearest",
) -> Match:
    """Match every query time to a frame of the sorted ``timestamps_ns``.

    ``mode="nearest"`` takes the closest frame (the earlier one on a tie),
    ``"before"`` the last frame at or before the query (causal), ``"after"``
    the first at or after. A match further than ``tolerance_ns`` away is
    padded; ``tolerance_ns=None`` accepts any distance (say so explicitly).
    """
    if tolerance_ns is not None and tolerance_ns < 0:
        raise ValueError(f"tolerance_ns must be >= 0 or None, got {tolerance_ns}")
    q = as_ns(query_ns, "query_ns")
    ts = as_sorted_ns(timestamps_ns, "timestamps_ns")
    index, error, is_pad = _empty(len(q))
    n = len(ts)
    if n == 0 or len(q) == 0:
        return Match(index, error, is_pad)
    if mode == "before":
        idx = np.searchsorted(ts, q, "right") - 1
        ok = idx >= 0
    elif mode == "after":
        idx = np.searchsorted(ts, q, "left")
        ok = idx < n
    elif mode == "nearest":
        right = np.minimum(np.searchsorted(ts, q, "left"), n - 1)
        left = np.maximum(right - 1, 0)
        take_left = (q - ts[left]) <= (ts[right] - q)  # a tie goes to the earlier frame
        idx = np.where(take_left, left, right)
        ok = np.ones(len(q), bool)
    else:
        raise ValueError(f"mode must be 'nearest', 'before' or 'after', got {mode!r}")
    idx = np.clip(idx, 0, n - 1)
    err = ts[idx] - q
    if tolerance_ns is not None:
        ok &= np.abs(err) <= tolerance_ns
    index[ok] = idx[ok]
    error[ok] = err[ok]
    is_pad[ok] = False
    return Match(index, error, is_pad)


def frame_intervals(
    timestamps_ns: TimesLike,
    duration_ns: TimesLike,
    *,
    anchor: Anchor,
    default_duration_ns: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Each frame as ``[start, end]`` ns from its timestamp and exposure/scan duration.

    ``anchor`` says what the timestamp marks: the ``"start"`` of the exposure
    or scan, its ``"center"`` (``start = t - d // 2``) or its ``"end"``.
    Durations of 0 (unknown, as the aux table stores them) become
    ``default_duration_ns``.
    """
    ts = as_ns(timestamps_ns, "timestamps_ns")
    d = as_ns(duration_ns, "duration_ns")
    if len(d) != len(ts):
        raise ValueError(f"{len(ts)} timestamps but {len(d)} durations")
    if default_duration_ns < 0 or (d.size and int(d.min()) < 0):
        raise ValueError("durations must be >= 0")
    d = np.where(d == 0, np.int64(default_duration_ns), d)
    if anchor == "start":
        start = ts
    elif anchor == "center":
        start = ts - d // 2
    elif anchor == "end":
        start = ts - d
    else:
        raise ValueError(f"anchor must be 'start', 'center' or 'end', got {anchor!r}")
    return start, start + d


def _centre(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    out: np.ndarray = start + (end - start) // 2
    return out


def intersect(
    query: tuple[TimesLike, TimesLike],
    frames: tuple[TimesLike, TimesLike],
    *,
    min_overlap_ns: int = 0,
) -> IntervalMatch:
    """Match each query interval to the frame interval that overlaps it most.

    Both are ``(start, end)`` arrays (see :func:`frame_intervals`), closed
    intervals: touching intervals and an instant inside an interval intersect
    with overlap 0. A query whose best overlap is below ``min_overlap_ns`` (or
    that intersects nothing) is padded. Ties go to the frame whose centre is
    closer, then to the earlier one. ``error_ns`` is the matched frame's
    centre minus the query's centre.
    """
    if min_overlap_ns < 0:
        raise ValueError(f"min_overlap_ns must be >= 0, got {min_overlap_ns}")
    qs, qe = as_ns(query[0], "query start"), as_ns(query[1], "query end")
    fs, fe = as_ns(frames[0], "frame start"), as_ns(frames[1], "frame end")
    if len(qs) != len(qe) or len(fs) != len(fe):
        raise ValueError("start and end arrays must have the same length")
    if (qe < qs).any() or (fe < fs).any():
        raise ValueError("an interval ends before it starts")
    index, error, is_pad = _empty(len(qs))
    overlap = np.zeros(len(qs), np.int64)
    if len(fs) == 0 or len(qs) == 0:
        return IntervalMatch(index, error, is_pad, overlap)
    order = np.argsort(fs, kind="stable")
    s, e = fs[order], fe[order]
    longest = int((e - s).max())
    lo = np.searchsorted(s, qs - longest, "left")
    hi = np.searchsorted(s, qe, "right")
    width = int((hi - lo).max(initial=0))
    if width == 0:
        return IntervalMatch(index, error, is_pad, overlap)
    qc, fc = _centre(qs, qe), _centre(s, e)
    step = max(1, _CHUNK // width)
    offsets = np.arange(width)
    for a in range(0, len(qs), step):
        b = min(len(qs), a + step)
        cand = lo[a:b, None] + offsets
        valid = cand < hi[a:b, None]
        cand = np.minimum(cand, len(s) - 1)
        ov = np.minimum(qe[a:b, None], e[cand]) - np.maximum(qs[a:b, None], s[cand])
        ov = np.where(valid, ov, -1)
        best = ov.max(axis=1)
        err = np.abs(fc[cand] - qc[a:b, None])
        err = np.where(ov == best[:, None], err, _BIG)
        pos = np.where(err == err.min(axis=1)[:, None], order[cand], _BIG)
        chosen = pos.min(axis=1)
        ok = best >= min_overlap_ns
        rows = np.arange(a, b)[ok]
        index[rows] = chosen[ok]
        overlap[rows] = best[ok]
        is_pad[rows] = False
    m = ~is_pad
    error[m] = _centre(fs[index[m]], fe[index[m]]) - qc[m]
    return IntervalMatch(index, error, is_pad, overlap)
