"""The data of a timeline plot, as plain dataclasses: pure, no I/O, no matplotlib.

:func:`build_timeline` turns :class:`~hyperframes.viz.facts.RecordingFacts`
into one :class:`Lane` per stream (a tick per frame, or a density band when
there are too many frames to tell apart), the highlighted spans and marks of
:mod:`hyperframes.viz.events`, the window grid and the frames per window per
stream. :mod:`hyperframes.viz.plot` only draws what is here, so tests check
a plot's content on these objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# not `from hyperframes.viz import events`: the package imports this module (a cycle)
import hyperframes.viz.events as ev
from hyperframes.viz.errors import EmptyRangeError
from hyperframes.viz.facts import RecordingFacts, StreamFacts

__all__ = [
    "MAX_TICKS",
    "MAX_BOUNDARIES",
    "DENSITY_BINS",
    "Density",
    "Lane",
    "SyncPanel",
    "Timeline",
    "EventMark",
    "build_timeline",
]

MAX_TICKS = 2000  # per lane; more frames than this in view: a density band instead
MAX_BOUNDARIES = 120  # window boundaries drawn as lines up to this many
DENSITY_BINS = 600  # at most


@dataclass(frozen=True, slots=True)
class Density:
    """Frames per bin of a lane, relative to the stream's nominal rate (1.0 = as expected)."""

    edges_ns: np.ndarray  # int64, len(bins) + 1
    counts: np.ndarray  # int64
    relative: np.ndarray  # float64, counts / expected per bin (nan without a known rate)


@dataclass(frozen=True, slots=True)
class Lane:
    """One stream's row of the timeline."""

    name: str
    kind: str
    hardware: bool
    frames: int  # frames in view
    ticks: np.ndarray | None  # int64 timestamps in view, or None when shown as density
    density: Density | None
    gaps: tuple[ev.Span, ...]
    missing: tuple[ev.Span, ...]  # missing windows, adjacent ones merged
    stale: tuple[ev.Span, ...]
    late: np.ndarray  # int64 timestamps of LATE frames in view
    dropped: tuple[ev.Drop, ...]
    quarantined: np.ndarray  # int64 receive times of quarantined frames in view
    quarantined_unplaced: int  # quarantined frames with no receive time (counted, not drawn)

    @property
    def mode(self) -> str:
        """``"ticks"`` or ``"density"``."""
        return "ticks" if self.ticks is not None else "density"


@dataclass(frozen=True, slots=True)
class SyncPanel:
    """One stream's alignment error against the reference, as ``sync-report`` computes it."""

    ref: str
    other: str
    edges_ns: tuple[int, ...]
    histogram: tuple[int, ...]
    matched: int
    max_ns: int | None
    p99_ns: int | None
    note: str = ""


@dataclass(frozen=True, slots=True)
class EventMark:
    """An event on the timeline: its time, name, and the span it keeps (``pre_s``/``post_s``)."""

    t_ns: int
    name: str
    start_ns: int
    end_ns: int
    quarantined: bool = False


@dataclass(frozen=True, slots=True)
class Timeline:
    """Everything a timeline figure shows."""

    title: str
    start_ns: int  # the view
    end_ns: int
    origin_ns: int  # x = 0 (the recording's start)
    window_ns: int
    boundaries: np.ndarray | None  # window boundaries in view (None: too many to draw)
    absent: tuple[ev.Span, ...]  # windows with no block at all
    lanes: tuple[Lane, ...]
    window_ids: np.ndarray  # int64, the grid of windows in view
    counts: np.ndarray  # int64 (windows, lanes): frames per window per stream
    expected: np.ndarray  # float64 (lanes,): frames a window should hold (nan: unknown)
    sync: tuple[SyncPanel, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    segment_starts: tuple[int, ...] = field(default=())  # in view: where each later file begins
    marks: tuple[EventMark, ...] = field(default=())


def _clip(spans: Sequence[ev.Span], lo: int, hi: int) -> tuple[ev.Span, ...]:
    return tuple(
        ev.Span(max(s.start_ns, lo), min(s.end_ns, hi))
        for s in spans
        if s.end_ns >= lo and s.start_ns <= hi
    )


def _density(ts: np.ndarray, lo: int, hi: int, period: int | None) -> Density:
    """Counts in at most DENSITY_BINS bins, each at least 4 periods wide (so 1.0 is smooth)."""
    bins = DENSITY_BINS if not period else int(np.clip((hi - lo) // (4 * period), 1, DENSITY_BINS))
    edges = np.linspace(lo, hi, bins + 1).astype(np.int64)
    counts = np.histogram(ts, bins=edges)[0].astype(np.int64)
    if period:
        expected = np.diff(edges) / period
        relative = np.where(expected > 0, counts / np.maximum(expected, 1e-9), np.nan)
    else:
        relative = np.full(len(counts), np.nan)
    return Density(edges, counts, relative)


def _lane(facts: RecordingFacts, s: StreamFacts, lo: int, hi: int, max_ticks: int) -> Lane:
    ts = s.timestamps.astype(np.int64)
    a, b = np.searchsorted(ts, lo, "left"), np.searchsorted(ts, hi, "right")
    view = ts[a:b]
    period = ev.period_ns(s)
    ticks = view if len(view) <= max_ticks else None
    density = None if ticks is not None else _density(view, lo, hi, period)
    missing = ev.merge_runs(ev.missing_windows(facts, s), facts.window_ns)
    late = ev.late_frames(s).astype(np.int64)
    quarantined = [q for q in facts.quarantined if q.stream_id == s.id]
    placed = np.array([q.receive_ns for q in quarantined if q.receive_ns], np.int64)
    return Lane(
        name=s.name,
        kind=s.kind,
        hardware=s.hardware,
        frames=len(view),
        ticks=ticks,
        density=density,
        gaps=_clip(ev.gaps(s), lo, hi),
        missing=_clip([span for span, _n in missing], lo, hi),
        stale=_clip([span for span, _n in ev.stale_periods(facts, s)], lo, hi),
        late=late[(late >= lo) & (late <= hi)],
        dropped=tuple(d for d in ev.drops(s) if lo <= d.timestamp_ns <= hi),
        quarantined=placed[(placed >= lo) & (placed <= hi)],
        quarantined_unplaced=sum(1 for q in quarantined if not q.receive_ns),
    )


def build_timeline(
    facts: RecordingFacts,
    *,
    streams: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    max_ticks: int = MAX_TICKS,
    sync: Sequence[SyncPanel] = (),
    marks: Sequence[EventMark] = (),
) -> Timeline:
    """The timeline of ``facts`` for the chosen ``streams`` (default all) and time range.

    Raises :class:`EmptyRangeError` when the range is empty or holds no
    frame of the chosen streams, KeyError for an unknown stream name.
    ``marks`` (events) are kept where their time is in view.
    """
    chosen = [facts.stream(n) for n in streams] if streams else list(facts.streams)
    lo = facts.start_ns if start_ns is None else start_ns
    hi = facts.end_ns if end_ns is None else end_ns
    if hi <= lo:
        raise EmptyRangeError(facts.path, f"empty time range [{lo}, {hi}] ns")
    lanes = tuple(_lane(facts, s, lo, hi, max_ticks) for s in chosen)
    if not any(lane.frames for lane in lanes):
        raise EmptyRangeError(
            facts.path, f"no frame of {', '.join(s.name for s in chosen)} in [{lo}, {hi}] ns"
        )
    grid = ev.window_grid(facts, lo, hi)
    bounds = np.append(grid, grid[-1] + 1) * facts.window_ns
    bounds = bounds[(bounds >= lo) & (bounds <= hi)]
    counts = (
        np.stack([ev.window_counts(s, grid, facts.window_ns) for s in chosen], axis=1)
        if chosen
        else np.zeros((len(grid), 0), np.int64)
    )
    expected = np.array(
        [facts.window_ns / p if (p := ev.period_ns(s)) else np.nan for s in chosen],
        np.float64,
    )
    notes = []
    unplaced = sum(lane.quarantined_unplaced for lane in lanes)
    if unplaced:
        notes.append(f"{unplaced} quarantined frame(s) without a receive time are not drawn")
    host = [lane.name for lane in lanes if not lane.hardware]
    if host:
        notes.append(f"host-clock stamps: {', '.join(host)}")
    return Timeline(
        title=facts.path,
        start_ns=lo,
        end_ns=hi,
        origin_ns=facts.start_ns,
        window_ns=facts.window_ns,
        boundaries=bounds if len(bounds) <= MAX_BOUNDARIES else None,
        absent=_clip([span for span, _n in ev.absent_windows(facts)], lo, hi),
        lanes=lanes,
        window_ids=grid,
        counts=counts,
        expected=expected,
        sync=tuple(sync),
        notes=tuple(notes),
        segment_starts=tuple(t for t in facts.segment_starts if lo <= t <= hi),
        marks=tuple(m for m in marks if lo <= m.t_ns <= hi),
    )
