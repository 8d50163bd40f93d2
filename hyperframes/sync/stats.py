"""Summaries for sync reports: error tails and histograms, counter gaps, missing windows.

Pure numpy, no I/O. Percentiles are nearest-rank (``inverted_cdf``), so every
reported value is an error that actually occurred.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hyperframes.sync._arrays import TimesLike, as_ns

__all__ = [
    "DEFAULT_EDGES_NS",
    "ErrorStats",
    "error_stats",
    "Gap",
    "CounterGaps",
    "counter_gaps",
    "missing_windows",
]

_MS = 1_000_000
# |error| histogram edges: fine below a millisecond, coarse in the tail; last bin open
DEFAULT_EDGES_NS: tuple[int, ...] = (
    0,
    100_000,
    200_000,
    500_000,
    1 * _MS,
    2 * _MS,
    5 * _MS,
    10 * _MS,
    20 * _MS,
    50 * _MS,
    100 * _MS,
)


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Absolute alignment errors of one stream pair; the tail first, never the mean alone.

    ``histogram[k]`` counts errors in ``[edges_ns[k], edges_ns[k+1])``; the
    last bin is ``[edges_ns[-1], inf)``. Error fields are None without matches.
    """

    matched: int
    unmatched: int
    max_ns: int | None
    p99_ns: int | None
    p50_ns: int | None
    median_signed_ns: int | None  # a systematic offset shows here
    edges_ns: tuple[int, ...]
    histogram: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "matched": self.matched,
            "unmatched": self.unmatched,
            "max_ns": self.max_ns,
            "p99_ns": self.p99_ns,
            "p50_ns": self.p50_ns,
            "median_signed_ns": self.median_signed_ns,
            "edges_ns": list(self.edges_ns),
            "histogram": list(self.histogram),
        }


def _rank(values: np.ndarray, q: float) -> int:
    return int(np.percentile(values, q, method="inverted_cdf"))


def error_stats(
    error_ns: np.ndarray, is_pad: np.ndarray, edges_ns: tuple[int, ...] = DEFAULT_EDGES_NS
) -> ErrorStats:
    """Max, p99, p50 and a histogram of ``|error_ns|`` over the entries not padded."""
    if list(edges_ns) != sorted(set(edges_ns)) or not edges_ns or edges_ns[0] != 0:
        raise ValueError(f"edges_ns must start at 0 and strictly increase, got {edges_ns}")
    err = np.asarray(error_ns, np.int64)[~np.asarray(is_pad, bool)]
    unmatched = len(error_ns) - len(err)
    absolute = np.abs(err)
    counts = np.bincount(
        np.searchsorted(np.asarray(edges_ns, np.int64), absolute, "right") - 1,
        minlength=len(edges_ns),
    )
    if not len(err):
        return ErrorStats(
            0, unmatched, None, None, None, None, tuple(edges_ns), tuple(int(c) for c in counts)
        )
    return ErrorStats(
        matched=len(err),
        unmatched=unmatched,
        max_ns=int(absolute.max()),
        p99_ns=_rank(absolute, 99),
        p50_ns=_rank(absolute, 50),
        median_signed_ns=_rank(err, 50),
        edges_ns=tuple(edges_ns),
        histogram=tuple(int(c) for c in counts),
    )


@dataclass(frozen=True, slots=True)
class Gap:
    """Frames missing between two consecutive frames of a stream, from the counter."""

    after_index: int  # stream index (counter) of the frame before the gap
    next_index: int  # stream index of the frame after it
    dropped: int  # counter values missing in between (quarantined frames excluded)
    start_ns: int  # timestamp of the frame before the gap
    end_ns: int  # timestamp of the frame after it

    def to_dict(self) -> dict[str, int]:
        """Plain JSON-ready dict."""
        return {
            "after_index": self.after_index,
            "next_index": self.next_index,
            "dropped": self.dropped,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
        }


@dataclass(frozen=True, slots=True)
class CounterGaps:
    """Drops found from a stream's counter; ``resets`` counts non-increasing steps."""

    dropped: int
    gaps: tuple[Gap, ...]
    resets: int


def counter_gaps(
    stream_index: np.ndarray,
    timestamps_ns: TimesLike,
    quarantined_indices: np.ndarray | None = None,
) -> CounterGaps:
    """Gaps in a stream's per-frame counter (frames in timestamp order).

    A step of the counter from ``a`` to ``b > a + 1`` means ``b - a - 1``
    frames were dropped, less those the recorder kept in quarantine (their
    counters are in ``quarantined_indices``). A step to ``b <= a`` (a sensor
    restart, or duplicates) is counted in ``resets``, not as a gap.
    """
    idx = np.asarray(stream_index, np.int64)
    ts = as_ns(timestamps_ns, "timestamps_ns")
    if len(idx) != len(ts):
        raise ValueError(f"{len(idx)} counters but {len(ts)} timestamps")
    if len(idx) < 2:
        return CounterGaps(0, (), 0)
    step = np.diff(idx)
    resets = int((step <= 0).sum())
    at = np.flatnonzero(step > 1)
    q = np.sort(
        np.asarray(quarantined_indices if quarantined_indices is not None else [], np.int64)
    )
    gaps = []
    for k in at:
        a, b = int(idx[k]), int(idx[k + 1])
        kept = int(np.searchsorted(q, b, "left") - np.searchsorted(q, a, "right"))
        dropped = b - a - 1 - kept
        if dropped > 0:
            gaps.append(Gap(a, b, dropped, int(ts[k]), int(ts[k + 1])))
    return CounterGaps(sum(g.dropped for g in gaps), tuple(gaps), resets)


def missing_windows(window_ids: np.ndarray, timestamps_ns: TimesLike, window_ns: int) -> np.ndarray:
    """The ids among ``window_ids`` in which a stream has no frame (sorted, int64).

    Window ``k`` holds frames stamped in ``(k*L, (k+1)*L]`` (the global grid).
    """
    if window_ns <= 0:
        raise ValueError(f"window_ns must be > 0, got {window_ns}")
    ts = as_ns(timestamps_ns, "timestamps_ns")
    have = np.unique((ts - 1) // window_ns)
    ids = np.asarray(window_ids, np.int64)
    return np.sort(ids[~np.isin(ids, have)])
