"""What went wrong in a recording, inferred from its tables: pure functions, no I/O.

Shared by ``hyperframes plot`` (the highlighted spans) and ``hyperframes
export`` (the annotation topic). Definitions:

- **gap**: two consecutive frames of a stream further apart than
  ``GAP_FACTOR`` times its period (from ``rate_hz``, else the median interval);
- **dropped**: a jump in a stream's sequence numbers (frames that never arrived);
- **late**: a frame flagged LATE (received after its window was written);
- **quarantined**: a frame the recorder judged implausibly stamped; it is not
  in the index and is placed at its receive time;
- **missing window**: a window in which a stream delivered nothing (as the
  recorder recorded it), for streams expected in every window (period at
  most the window length);
- **stale**: a run of consecutive missing windows of one stream lasting at
  least ``max(2 windows, STALE_PERIODS periods)``: the stream went quiet;
- **absent window**: a hole in the file's window grid (no block at all).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from hyperframes.format.layout import FrameFlags
from hyperframes.format.windows import window_end, window_start
from hyperframes.viz.facts import RecordingFacts, StreamFacts

__all__ = [
    "GAP_FACTOR",
    "STALE_PERIODS",
    "Span",
    "Drop",
    "Event",
    "period_ns",
    "gaps",
    "drops",
    "late_frames",
    "missing_windows",
    "stale_periods",
    "absent_windows",
    "window_grid",
    "window_counts",
    "merge_runs",
    "recording_events",
]

GAP_FACTOR = 2.5
STALE_PERIODS = 3
_LATE = int(FrameFlags.LATE)


@dataclass(frozen=True, slots=True)
class Span:
    """A time interval in ns (``start_ns`` < ``end_ns``)."""

    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        """``end_ns - start_ns``."""
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class Drop:
    """``count`` frames that never arrived, before the frame stamped ``timestamp_ns``."""

    timestamp_ns: int
    after_index: int
    count: int


@dataclass(frozen=True, slots=True)
class Event:
    """One annotation: a kind, a time span, the stream it is about, a count and a note."""

    kind: str  # window, missing, stale, gap, dropped, late, quarantined
    start_ns: int
    end_ns: int
    stream: str = ""
    count: int = 1
    detail: str = ""


def period_ns(stream: StreamFacts) -> int | None:
    """The stream's nominal frame period: from ``rate_hz``, else the median interval."""
    if stream.rate_hz:
        return round(1e9 / stream.rate_hz)
    if stream.frames >= 2:
        return int(np.median(np.diff(stream.timestamps.astype(np.int64))))
    return None


def gaps(stream: StreamFacts, factor: float = GAP_FACTOR) -> list[Span]:
    """Intervals between consecutive frames longer than ``factor`` periods."""
    period = period_ns(stream)
    if period is None or period <= 0 or stream.frames < 2:
        return []
    ts = stream.timestamps.astype(np.int64)
    d = np.diff(ts)
    idx = np.flatnonzero(d > factor * period)
    return [Span(int(ts[i]), int(ts[i + 1])) for i in idx]


def drops(stream: StreamFacts) -> list[Drop]:
    """Jumps in the sequence numbers, in sequence order (each at the frame after the jump)."""
    if stream.frames < 2:
        return []
    order = np.argsort(stream.stream_index, kind="stable")
    seq = stream.stream_index[order].astype(np.int64)
    jump = np.diff(seq)
    idx = np.flatnonzero(jump > 1)
    ts = stream.timestamps[order]
    return [Drop(int(ts[i + 1]), int(seq[i]), int(jump[i] - 1)) for i in idx]


def late_frames(stream: StreamFacts) -> np.ndarray:
    """Timestamps of the frames flagged LATE."""
    late: np.ndarray = stream.timestamps[(stream.flags.astype(np.int64) & _LATE) != 0]
    return late


def missing_windows(facts: RecordingFacts, stream: StreamFacts) -> list[int]:
    """Window ids where ``stream`` delivered nothing, if it is expected in every window."""
    period = period_ns(stream)
    if period is not None and period > facts.window_ns:
        return []  # slower than the window: empty windows are normal, gaps tell dropouts
    return sorted(w for w, sids in facts.missing.items() if stream.id in sids)


def merge_runs(window_ids: list[int], window_ns: int) -> list[tuple[Span, int]]:
    """Consecutive window ids merged into spans: ``(span, number of windows)``."""
    out: list[tuple[Span, int]] = []
    run_start: int | None = None
    prev = 0
    for w in [*sorted(window_ids), None]:
        if w is not None and run_start is not None and w == prev + 1:
            prev = w
            continue
        if run_start is not None:
            out.append(
                (
                    Span(window_start(run_start, window_ns), window_end(prev, window_ns)),
                    prev - run_start + 1,
                )
            )
        if w is not None:
            run_start = prev = w
    return out


def stale_periods(facts: RecordingFacts, stream: StreamFacts) -> list[tuple[Span, int]]:
    """Runs of missing windows long enough to call the stream stale (see the module doc)."""
    wids = sorted(w for w, sids in facts.missing.items() if stream.id in sids)
    period = period_ns(stream) or facts.window_ns
    threshold = max(2 * facts.window_ns, STALE_PERIODS * period)
    return [(s, n) for s, n in merge_runs(wids, facts.window_ns) if s.duration_ns >= threshold]


def absent_windows(facts: RecordingFacts) -> list[tuple[Span, int]]:
    """Holes in the window grid between the first and last window with a block."""
    ids = facts.window_ids
    if len(ids) < 2:
        return []
    present = {int(w) for w in ids}
    holes = [w for w in range(int(ids[0]), int(ids[-1]) + 1) if w not in present]
    return merge_runs(holes, facts.window_ns)


def window_grid(facts: RecordingFacts, start_ns: int, end_ns: int) -> np.ndarray:
    """Ids of every window of the grid that meets ``(start_ns, end_ns]`` (int64)."""
    first = start_ns // facts.window_ns
    last = (end_ns - 1) // facts.window_ns
    return np.arange(first, last + 1, dtype=np.int64)


def window_counts(stream: StreamFacts, grid: np.ndarray, window_ns: int) -> np.ndarray:
    """Frames of ``stream`` per window of ``grid`` (end-inclusive windows)."""
    edges = np.append(grid, grid[-1] + 1) * window_ns if len(grid) else np.empty(0, np.int64)
    if not len(edges):
        return np.empty(0, np.int64)
    pos = np.searchsorted(stream.timestamps, edges.astype(np.uint64), side="right")
    return np.diff(pos).astype(np.int64)


def recording_events(facts: RecordingFacts, *, windows: bool = True) -> list[Event]:
    """Every event of a recording, by start time: windows, missing, stale, gaps, drops, late,
    quarantined frames. Window events list the frames per stream and the missing streams."""
    names = {s.id: s.name for s in facts.streams}
    out: list[Event] = []
    if windows and len(facts.window_ids):
        grid = facts.window_ids
        counts = {s.name: window_counts(s, grid, facts.window_ns) for s in facts.streams}
        late_w = Counter(
            (int(t) - 1) // facts.window_ns for s in facts.streams for t in late_frames(s).tolist()
        )
        for i, wid in enumerate(grid.tolist()):
            missing = [names.get(x, str(x)) for x in facts.missing.get(wid, ())]
            frames = ", ".join(f"{n}={int(c[i])}" for n, c in counts.items())
            late = late_w.get(wid, 0)
            detail = f"frames: {frames}" + (f"; missing: {', '.join(missing)}" if missing else "")
            detail += f"; late: {late}" if late else ""
            out.append(
                Event(
                    "window",
                    window_start(wid, facts.window_ns),
                    window_end(wid, facts.window_ns),
                    count=int(sum(int(c[i]) for c in counts.values())),
                    detail=detail,
                )
            )
    for s in facts.streams:
        for w in missing_windows(facts, s):
            out.append(
                Event(
                    "missing", window_start(w, facts.window_ns), window_end(w, facts.window_ns),
                    s.name, 1, f"window {w}: no frame",
                )
            )  # fmt: skip
        for span, n in stale_periods(facts, s):
            out.append(
                Event(
                    "stale", span.start_ns, span.end_ns, s.name, n, f"{n} windows without a frame"
                )
            )
        for g in gaps(s):
            out.append(
                Event("gap", g.start_ns, g.end_ns, s.name, 1,
                      f"{g.duration_ns / 1e6:.1f} ms between frames")
            )  # fmt: skip
        for d in drops(s):
            out.append(
                Event("dropped", d.timestamp_ns, d.timestamp_ns, s.name, d.count,
                      f"{d.count} frame(s) after sequence number {d.after_index} never arrived")
            )  # fmt: skip
        for t in late_frames(s).tolist():
            out.append(Event("late", int(t), int(t), s.name, 1, "received after its window"))
    for q in facts.quarantined:
        at = q.receive_ns or facts.start_ns
        out.append(
            Event(
                "quarantined", at, at, names.get(q.stream_id, str(q.stream_id)), 1,
                f"stamp {q.timestamp_ns} ns judged implausible; sequence number {q.stream_index}, "
                f"{q.size} bytes" + ("" if q.receive_ns else "; receive time unknown"),
            )
        )  # fmt: skip
    out.sort(key=lambda e: (e.start_ns, e.kind, e.stream))
    return out
