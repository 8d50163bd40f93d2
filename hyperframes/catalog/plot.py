"""A picture of a fleet's coverage (``hyperframes catalog plot``): per vehicle, a timeline.

Each vehicle gets a lane: its raw segments (upper half) and converted
segments (lower half) as bars, the gaps between spans with data (red
hatching, from the ``coverage`` view) and its events as markers. The
content is gathered first as plain data (:func:`coverage_lanes`, tested
directly); :func:`draw_coverage` draws it with matplotlib (the ``viz`` extra,
imported only there, Agg backend), in the colours of ``hyperframes plot``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from hyperframes.catalog.query import run_sql
from hyperframes.catalog.when import When, to_ns
from hyperframes.storage.local import atomic_output
from hyperframes.viz.plot import COLOURS, require_matplotlib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Lane", "CoveragePlot", "coverage_lanes", "draw_coverage", "plot_coverage"]

_DAY_NS = 86_400 * 1_000_000_000
_RAW = COLOURS["camera"]
_CONVERTED = COLOURS["lidar"]

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Lane:
    """One vehicle's timeline: spans in ns since the epoch, events as (time, name)."""

    vehicle: str
    raw: tuple[Span, ...]
    converted: tuple[Span, ...]
    gaps: tuple[Span, ...]
    events: tuple[tuple[int, str], ...]

    @property
    def start_ns(self) -> int | None:
        """The earliest time the lane shows."""
        times = [s for s, _ in self.raw + self.converted] + [t for t, _ in self.events]
        return min(times) if times else None

    @property
    def end_ns(self) -> int | None:
        """The latest time the lane shows."""
        times = [e for _, e in self.raw + self.converted] + [t for t, _ in self.events]
        return max(times) if times else None


@dataclass(frozen=True, slots=True)
class CoveragePlot:
    """A written coverage plot: where, and what it shows."""

    output: Path
    lanes: tuple[Lane, ...]

    def __str__(self) -> str:
        segs = sum(len(la.raw) + len(la.converted) for la in self.lanes)
        gaps = sum(len(la.gaps) for la in self.lanes)
        events = sum(len(la.events) for la in self.lanes)
        return (
            f"wrote {self.output}: {len(self.lanes)} vehicles, {segs} segments, "
            f"{gaps} gaps, {events} events"
        )


def _where(
    vehicles: list[str] | None, since_ns: int | None, params: list[object], end: str = "end_ns"
) -> str:
    parts = ["true"]
    if vehicles is not None:
        parts.append(f"vehicle IN ({', '.join('?' * len(vehicles))})")
        params.extend(vehicles)
    if since_ns is not None:
        parts.append(f"{end} >= ?")
        params.append(since_ns)
    return " AND ".join(parts)


def coverage_lanes(
    con: duckdb.DuckDBPyConnection,
    *,
    vehicles: list[str] | None = None,
    since: When | None = None,
    now_ns: int | None = None,
) -> tuple[Lane, ...]:
    """Each vehicle's lane (sorted by vehicle), from the catalog's views; ``since``: only
    what ends at or after it (a duration back from now, a date or time, ns)."""
    import time  # noqa: PLC0415

    since_ns = None if since is None else to_ns(since, now_ns or time.time_ns())
    params: list[object] = []
    where = _where(vehicles, since_ns, params)
    if since_ns is not None:
        where += " AND date >= ?"
        params.append(_date_of(since_ns - _DAY_NS))
    segs = run_sql(
        con,
        f"SELECT vehicle, start_ns, end_ns, coalesce(converted, false) AS conv "
        f"FROM segments WHERE {where} ORDER BY vehicle, start_ns",
        params,
    )
    params = []
    gaps = run_sql(
        con,
        f"SELECT vehicle, start_ns, end_ns FROM coverage WHERE kind = 'gap' "
        f"AND {_where(vehicles, since_ns, params)}",
        params,
    )
    params = []
    where = _where(vehicles, since_ns, params, end="t_ns")
    events = run_sql(
        con, f"SELECT vehicle, t_ns, name FROM events WHERE {where} ORDER BY vehicle, t_ns", params
    )
    spans: dict[tuple[str, str], list[Span]] = {}
    marks: dict[str, list[tuple[int, str]]] = {}
    for row in segs.to_pylist():
        kind = "converted" if row["conv"] else "raw"
        spans.setdefault((row["vehicle"], kind), []).append((row["start_ns"], row["end_ns"]))
    for row in gaps.to_pylist():
        spans.setdefault((row["vehicle"], "gaps"), []).append((row["start_ns"], row["end_ns"]))
    for row in events.to_pylist():
        marks.setdefault(row["vehicle"], []).append((row["t_ns"], row["name"] or ""))
    vehicles_seen = sorted({v for v, _ in spans} | set(marks))
    return tuple(
        Lane(
            v,
            tuple(spans.get((v, "raw"), ())),
            tuple(spans.get((v, "converted"), ())),
            tuple(spans.get((v, "gaps"), ())),
            tuple(marks.get(v, ())),
        )
        for v in vehicles_seen
    )


def _date_of(t_ns: int) -> object:
    import datetime as dt  # noqa: PLC0415

    return dt.datetime.fromtimestamp(max(0, t_ns) // 1_000_000_000, dt.UTC).date()


def _days(t_ns: int) -> float:
    """ns since the epoch as matplotlib's date numbers (days since 1970-01-01)."""
    return t_ns / _DAY_NS


def draw_coverage(lanes: tuple[Lane, ...], title: str = "fleet coverage") -> Figure:
    """The figure of the lanes (matplotlib, Agg backend)."""
    require_matplotlib()
    import matplotlib.dates as mdates  # noqa: PLC0415
    from matplotlib.artist import Artist  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    fig = Figure(figsize=(16, max(2.5, 0.6 * len(lanes) + 1.5)), layout="constrained")
    ax = fig.add_subplot()
    names = sorted({n for la in lanes for _, n in la.events})
    marks = ("v", "^", "o", "s", "D", "P", "X", "*")
    for i, la in enumerate(lanes):
        y = len(lanes) - 1 - i
        for spans, y0, colour in ((la.raw, y, _RAW), (la.converted, y - 0.36, _CONVERTED)):
            bars = [(_days(s), max(_days(e) - _days(s), 1e-9)) for s, e in spans]
            if bars:
                ax.broken_barh(bars, (y0, 0.34), facecolors=colour, edgecolors="none")
        gaps = [(_days(s), _days(e) - _days(s)) for s, e in la.gaps]
        if gaps:
            ax.broken_barh(
                gaps,
                (y - 0.38, 0.76),
                facecolors="none",
                edgecolors=COLOURS["gap"],
                hatch="///",
                linewidth=0,
            )
        for k, name in enumerate(names):
            xs = [_days(t) for t, n in la.events if n == name]
            if xs:
                ax.plot(
                    xs,
                    [y + 0.42] * len(xs),
                    linestyle="none",
                    marker=marks[k % len(marks)],
                    color=COLOURS["event_mark"],
                    markersize=6,
                )
    ax.set_yticks(range(len(lanes)), [la.vehicle for la in reversed(lanes)])
    ax.set_ylim(-0.7, max(len(lanes), 1) - 0.3 + 0.3)
    starts = [s for la in lanes if (s := la.start_ns) is not None]
    ends = [e for la in lanes if (e := la.end_ns) is not None]
    if starts and ends:
        pad = max((max(ends) - min(starts)) // 100, 1_000_000_000)
        ax.set_xlim(_days(min(starts) - pad), _days(max(ends) + pad))
    ax.xaxis_date()
    locator = ax.xaxis.get_major_locator()
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("time (UTC)")
    handles: list[Artist] = [
        Patch(facecolor=_RAW, label="raw segments"),
        Patch(facecolor=_CONVERTED, label="converted segments"),
        Patch(facecolor="none", edgecolor=COLOURS["gap"], hatch="///", label="gap"),
    ]
    from matplotlib.lines import Line2D  # noqa: PLC0415

    handles += [
        Line2D(
            [],
            [],
            linestyle="none",
            marker=marks[k % len(marks)],
            color=COLOURS["event_mark"],
            label=f"event: {name}",
        )
        for k, name in enumerate(names[:12])
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if not lanes:
        ax.text(0.5, 0.5, "no segments or events", transform=ax.transAxes, ha="center")
    fig.suptitle(title, fontsize=10)
    return fig


def plot_coverage(
    con: duckdb.DuckDBPyConnection,
    out_path: str | os.PathLike[str],
    *,
    vehicles: list[str] | None = None,
    since: When | None = None,
    overwrite: bool = False,
) -> CoveragePlot:
    """Write the coverage picture of the catalog (PNG) to ``out_path``.

    Raises :class:`~hyperframes.viz.errors.MissingExtraError` without matplotlib,
    ``FileExistsError`` when ``out_path`` exists and not ``overwrite``.
    """
    require_matplotlib()
    lanes = coverage_lanes(con, vehicles=vehicles, since=since)
    root = run_sql(con, "SELECT root FROM catalog_info").column("root").to_pylist()
    fig = draw_coverage(lanes, f"coverage of {root[0] if root else 'the catalog'}")
    with atomic_output(out_path, overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return CoveragePlot(Path(out_path), lanes)
