"""The sync report of one file, as data: alignment error tails per stream pair, drops, gaps.

:func:`sync_report` reads only the index, aux and quarantine tables and the
window table of a :class:`~hyperframes.reader.HyperframeReader` (no payloads)
and computes, against one reference stream:

- per other stream, the alignment error of matching every reference frame
  (max, p99, p50, the median signed error and a histogram: the tail matters,
  not the mean), with the clock check of the pair (hardware vs host stamps are
  not matched unless allowed, and then flagged);
- per stream, the frames dropped according to its counter (gaps), counter
  resets, late and quarantined frames, and the windows where it has no frame.

``hyperframes sync-report FILE --ref STREAM`` prints it (:mod:`hyperframes.cli.sync`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hyperframes.format.layout import FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.sync.clocks import Clock, ClockCheck, check_clocks, clock_of
from hyperframes.sync.errors import ClockMismatchError
from hyperframes.sync.match import Anchor, Match, frame_intervals, intersect, nearest
from hyperframes.sync.stats import (
    DEFAULT_EDGES_NS,
    ErrorStats,
    Gap,
    counter_gaps,
    error_stats,
    missing_windows,
)

__all__ = ["Method", "StreamReport", "PairReport", "SyncReport", "sync_report"]

Method = Literal["nearest", "interval"]
_LATE = int(FrameFlags.LATE)


@dataclass(frozen=True, slots=True)
class StreamReport:
    """Counters, gaps and missing windows of one stream."""

    id: int
    name: str
    kind: str
    declared_clock: str  # the stream table's timestamp_source
    clock: Clock  # what the frames' HW_TIMESTAMP flags say
    frames: int
    rate_hz: float | None
    dropped: int
    gaps: tuple[Gap, ...]
    counter_resets: int
    late: int
    quarantined: int
    missing_windows: tuple[int, ...]
    with_duration: int  # frames with a recorded exposure/scan duration

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "declared_clock": self.declared_clock,
            "clock": self.clock,
            "frames": self.frames,
            "rate_hz": self.rate_hz,
            "dropped": self.dropped,
            "gaps": [g.to_dict() for g in self.gaps],
            "counter_resets": self.counter_resets,
            "late": self.late,
            "quarantined": self.quarantined,
            "missing_windows": list(self.missing_windows),
            "with_duration": self.with_duration,
        }


@dataclass(frozen=True, slots=True)
class PairReport:
    """Alignment of one stream to the reference; ``stats`` is None when not matched."""

    ref: str
    other: str
    method: Method
    tolerance_ns: int | None
    clocks: ClockCheck
    stats: ErrorStats | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        c = self.clocks
        return {
            "ref": self.ref,
            "other": self.other,
            "method": self.method,
            "tolerance_ns": self.tolerance_ns,
            "clocks": {
                "ref": c.ref_clock,
                "other": c.other_clock,
                "mixed": c.mixed,
                "allowed": c.allowed,
            },
            "stats": self.stats.to_dict() if self.stats is not None else None,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class SyncReport:
    """The whole report; :meth:`to_dict` for JSON, :meth:`format_text` for people."""

    path: str
    ref: str
    method: Method
    window_ns: int
    windows: int
    streams: tuple[StreamReport, ...]
    pairs: tuple[PairReport, ...]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "path": self.path,
            "ref": self.ref,
            "method": self.method,
            "window_ns": self.window_ns,
            "windows": self.windows,
            "streams": [s.to_dict() for s in self.streams],
            "pairs": [p.to_dict() for p in self.pairs],
            "notes": list(self.notes),
        }

    def format_text(self) -> str:
        """A human-readable report."""
        lines = [
            f"{self.path}: {self.windows} windows of {self.window_ns / 1e6:g} ms; "
            f"reference {self.ref}, method {self.method}",
            "",
            "alignment error |other - ref| per reference frame (ms):",
            f"  {'stream':<20} {'clocks':<17} {'matched':>8} {'unmatched':>9} {'max':>8} "
            f"{'p99':>8} {'p50':>8} {'bias':>8}",
        ]
        for p in self.pairs:
            clocks = f"{p.clocks.ref_clock[:4]}/{p.clocks.other_clock[:4]}"
            if p.clocks.mixed:
                clocks += " MIXED"
            if p.stats is None:
                lines.append(f"  {p.other:<20} {clocks:<17} {p.note}")
                continue
            s = p.stats
            lines.append(
                f"  {p.other:<20} {clocks:<17} {s.matched:>8} {s.unmatched:>9} "
                f"{_ms(s.max_ns):>8} {_ms(s.p99_ns):>8} {_ms(s.p50_ns):>8} "
                f"{_ms(s.median_signed_ns):>8}" + (f"  {p.note}" if p.note else "")
            )
        lines += ["", "histogram of |error| (frames per bin, ms):"]
        edges = self.pairs[0].stats.edges_ns if self.pairs and self.pairs[0].stats else ()
        if edges:
            bins = [f"{_ms(a)}-{_ms(b)}" for a, b in itertools.pairwise(edges)]
            bins.append(f">={_ms(edges[-1])}")
            lines.append(f"  {'stream':<20} " + " ".join(f"{b:>9}" for b in bins))
            for p in self.pairs:
                if p.stats is not None:
                    lines.append(
                        f"  {p.other:<20} " + " ".join(f"{c:>9}" for c in p.stats.histogram)
                    )
        lines += [
            "",
            "streams:",
            f"  {'id':>4} {'name':<20} {'clock':<9} {'frames':>7} {'dropped':>7} {'gaps':>5} "
            f"{'resets':>6} {'late':>5} {'quar.':>5} {'missing windows':>15}",
        ]
        for st in self.streams:
            clock = st.clock + ("!" if st.clock != st.declared_clock else "")
            lines.append(
                f"  {st.id:>4} {st.name:<20} {clock:<9} {st.frames:>7} {st.dropped:>7} "
                f"{len(st.gaps):>5} {st.counter_resets:>6} {st.late:>5} {st.quarantined:>5} "
                f"{len(st.missing_windows):>15}"
            )
        for st in self.streams:
            for g in st.gaps[:10]:
                lines.append(
                    f"  gap {st.name}: {g.dropped} frame(s) dropped between counter "
                    f"{g.after_index} ({g.start_ns} ns) and {g.next_index} ({g.end_ns} ns)"
                )
            if len(st.gaps) > 10:
                lines.append(f"  gap {st.name}: ... {len(st.gaps) - 10} more")
            if st.missing_windows:
                shown = ", ".join(map(str, st.missing_windows[:8]))
                more = (
                    f" ... ({len(st.missing_windows)} in all)"
                    if len(st.missing_windows) > 8
                    else ""
                )
                lines.append(f"  missing {st.name}: windows {shown}{more}")
            if st.clock not in (st.declared_clock, "none"):
                lines.append(
                    f"  clock {st.name}: declared {st.declared_clock}, frames say {st.clock}"
                )
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}".rstrip("0").rstrip(".")


def _stream_reports(r: HyperframeReader) -> list[StreamReport]:
    index = r.index
    aux = r.aux()
    quarantine = r.quarantine()
    window_ids = np.asarray(r.window_ids, np.int64)
    meta_missing: dict[int, set[int]] = {}
    for wid, sids in r.missing.items():
        for sid in sids:
            meta_missing.setdefault(sid, set()).add(int(wid))
    out = []
    for sid, info in r.streams.items():
        rows = np.flatnonzero(index["stream_id"] == sid)
        ts = index["timestamp_ns"][rows]
        flags = index["flags"][rows].astype(np.int64)
        q_rows = quarantine[quarantine["stream_id"] == sid]
        gaps = counter_gaps(index["stream_index"][rows], ts, q_rows["stream_index"])
        missing = set(missing_windows(window_ids, ts, r.window_ns).tolist())
        missing |= meta_missing.get(sid, set())
        out.append(
            StreamReport(
                id=sid,
                name=info.name,
                kind=str(info.kind),
                declared_clock=str(info.timestamp_source),
                clock=clock_of(flags),
                frames=len(rows),
                rate_hz=info.rate_hz,
                dropped=gaps.dropped,
                gaps=gaps.gaps,
                counter_resets=gaps.resets,
                late=int(((flags & _LATE) != 0).sum()),
                quarantined=len(q_rows),
                missing_windows=tuple(sorted(missing)),
                with_duration=int((aux["duration_ns"][rows] > 0).sum()) if len(aux) else 0,
            )
        )
    return out


def _match(
    r: HyperframeReader,
    ref_rows: np.ndarray,
    rows: np.ndarray,
    method: Method,
    tolerance_ns: int | None,
    anchor: Anchor,
) -> Match:
    index = r.index
    ref_ts, ts = index["timestamp_ns"][ref_rows], index["timestamp_ns"][rows]
    if method == "nearest":
        return nearest(ref_ts, ts, tolerance_ns=tolerance_ns)
    aux = r.aux()
    zeros = np.zeros(len(index), np.uint32)
    dur = aux["duration_ns"] if len(aux) else zeros
    found = intersect(
        frame_intervals(ref_ts, dur[ref_rows], anchor=anchor),
        frame_intervals(ts, dur[rows], anchor=anchor),
    )
    if tolerance_ns is None:
        return found
    far = np.abs(found.error_ns) > tolerance_ns
    pad = found.is_pad | far
    return Match(np.where(pad, -1, found.index), np.where(pad, 0, found.error_ns), pad)


def sync_report(
    reader: HyperframeReader,
    ref: int | str,
    *,
    method: Method = "nearest",
    tolerance_ns: int | None = None,
    anchor: Anchor = "start",
    allow_mixed_clocks: bool = False,
    edges_ns: tuple[int, ...] = DEFAULT_EDGES_NS,
    others: Sequence[int | str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> SyncReport:
    """The sync report of ``reader``'s file against stream ``ref`` (see the module docstring).

    ``method="interval"`` matches exposure/scan intervals (from the aux
    table's durations; ``anchor`` says what a timestamp marks) instead of
    instants. Matches further than ``tolerance_ns`` count as unmatched. Pairs
    whose clocks differ are listed unmatched unless ``allow_mixed_clocks``.
    ``others`` limits the pairs to these streams (default: every other one);
    ``start_ns``/``end_ns`` limit both sides to frames stamped in that range
    (inclusive).
    """
    if method not in ("nearest", "interval"):
        raise ValueError(f"method must be 'nearest' or 'interval', got {method!r}")
    ref_info = reader.stream(ref)
    index = reader.index
    path = str(reader.path)
    stamps = index["timestamp_ns"]
    in_range = np.ones(len(index), bool)
    if start_ns is not None:
        in_range &= stamps >= start_ns
    if end_ns is not None:
        in_range &= stamps <= end_ns
    ref_rows = np.flatnonzero((index["stream_id"] == ref_info.id) & in_range)
    wanted = None if others is None else {reader.stream(o).id for o in others}
    streams = _stream_reports(reader)
    notes: list[str] = []
    if method == "interval":
        no_dur = [s.name for s in streams if s.frames and s.with_duration == 0]
        if no_dur:
            notes.append(
                "no exposure/scan durations recorded for "
                + ", ".join(no_dur)
                + ": their frames are instants"
            )
    pairs = []
    for sid, info in reader.streams.items():
        if sid == ref_info.id or (wanted is not None and sid not in wanted):
            continue
        rows = np.flatnonzero((index["stream_id"] == sid) & in_range)
        ref_flags, flags = index["flags"][ref_rows], index["flags"][rows]
        try:
            clocks = check_clocks(
                ref_info.name,
                ref_flags,
                info.name,
                flags,
                allow_mixed_clocks=allow_mixed_clocks,
                path=path,
            )
        except ClockMismatchError:
            clocks = ClockCheck(
                ref_info.name, clock_of(ref_flags), info.name, clock_of(flags), allowed=False
            )
            pairs.append(
                PairReport(
                    ref_info.name,
                    info.name,
                    method,
                    tolerance_ns,
                    clocks,
                    None,
                    "not matched: mixed clocks (allow_mixed_clocks to force)",
                )
            )
            continue
        m = _match(reader, ref_rows, rows, method, tolerance_ns, anchor)
        note = "MIXED CLOCKS: errors include the clock offset" if clocks.mixed else ""
        if not len(rows):
            note = "no frames"
        pairs.append(
            PairReport(
                ref_info.name,
                info.name,
                method,
                tolerance_ns,
                clocks,
                error_stats(m.error_ns, m.is_pad, edges_ns),
                note,
            )
        )
    return SyncReport(
        path=path,
        ref=ref_info.name,
        method=method,
        window_ns=reader.window_ns,
        windows=reader.window_count(),
        streams=tuple(streams),
        pairs=tuple(pairs),
        notes=tuple(notes),
    )
