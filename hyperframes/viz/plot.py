"""Drawing a :class:`~hyperframes.viz.timeline.Timeline` with matplotlib (``hyperframes plot``).

Top panel: one lane per stream, a tick per frame (or a density band), window
boundaries, and highlighted what went wrong: gaps (red hatching), stale
periods (red), missing windows (orange), absent windows (grey), late frames
(orange triangles), dropped frames (red carets), quarantined frames
(magenta crosses, at their receive time). Bottom panel: frames per window
per stream against what the stream's rate predicts. With ``--sync REF``, a
row of alignment-error histograms from ``sync-report``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hyperframes.events import events_of_files
from hyperframes.format.times import parse_range
from hyperframes.reader import HyperframeReader
from hyperframes.storage.local import atomic_output
from hyperframes.viz.errors import MissingExtraError
from hyperframes.viz.facts import facts_from_reader, merge_facts
from hyperframes.viz.timeline import EventMark, SyncPanel, Timeline, build_timeline

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "COLOURS",
    "PlotResult",
    "require_matplotlib",
    "draw_timeline",
    "legend_labels",
    "plot_files",
    "sync_panels",
]

COLOURS = {
    "camera": "#1f77b4",
    "lidar": "#2ca02c",
    "imu": "#9467bd",
    "radar": "#8c564b",
    "gap": "#d62728",
    "stale": "#d62728",
    "missing": "#ff7f0e",
    "absent": "#7f7f7f",
    "late": "#ff7f0e",
    "dropped": "#d62728",
    "quarantined": "#e377c2",
    "other": "#17becf",
    "event": "#bcbd22",
    "event_mark": "#d62728",
}
_HALF = 0.36  # half the height of a lane's band


@dataclass(frozen=True, slots=True)
class PlotResult:
    """A written plot: where, and the timeline it shows."""

    output: Path
    timeline: Timeline

    def __str__(self) -> str:
        tl = self.timeline
        bad = sum(
            len(lane.gaps) + len(lane.stale) + len(lane.missing) + len(lane.late)
            + len(lane.dropped) + len(lane.quarantined)
            for lane in tl.lanes
        )  # fmt: skip
        return (
            f"wrote {self.output}: {len(tl.lanes)} streams, "
            f"{(tl.end_ns - tl.start_ns) / 1e9:.1f} s, {len(tl.window_ids)} windows, "
            f"{bad} highlighted spans/marks, {len(tl.absent)} absent-window spans"
        )


def require_matplotlib() -> None:
    """Raise :class:`MissingExtraError` naming the ``viz`` extra when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401, PLC0415 - optional extra
    except ImportError:
        raise MissingExtraError("matplotlib", "viz") from None


def _s(tl: Timeline, t: int | np.ndarray) -> float | np.ndarray:
    """ns to seconds from the origin."""
    return (np.asarray(t, np.int64) - tl.origin_ns) / 1e9


def _span(ax: Axes, tl: Timeline, y: float, s: int, e: int, **kw: object) -> None:
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    x0, x1 = float(_s(tl, s)), float(_s(tl, e))
    ax.add_patch(Rectangle((x0, y - _HALF), max(x1 - x0, 1e-6), 2 * _HALF, **kw))  # type: ignore[arg-type]


def _draw_lanes(ax: Axes, tl: Timeline) -> None:
    n = len(tl.lanes)
    for span in tl.absent:
        ax.axvspan(float(_s(tl, span.start_ns)), float(_s(tl, span.end_ns)),
                   color=COLOURS["absent"], alpha=0.25, hatch="xx", lw=0)  # fmt: skip
    if tl.boundaries is not None:
        ax.vlines(_s(tl, tl.boundaries), -0.5, n - 0.5, color="#bbbbbb", lw=0.5, zorder=0)
    for i, lane in enumerate(tl.lanes):
        y = n - 1 - i
        colour = COLOURS.get(lane.kind, COLOURS["other"])
        for sp in lane.missing:
            _span(ax, tl, y, sp.start_ns, sp.end_ns, color=COLOURS["missing"], alpha=0.35, lw=0)
        for sp in lane.stale:
            _span(ax, tl, y, sp.start_ns, sp.end_ns, color=COLOURS["stale"], alpha=0.45, lw=0)
        for sp in lane.gaps:
            _span(ax, tl, y, sp.start_ns, sp.end_ns, fill=False, hatch="///",
                  edgecolor=COLOURS["gap"], lw=0.8)  # fmt: skip
        if lane.ticks is not None:
            ax.vlines(_s(tl, lane.ticks), y - _HALF * 0.8, y + _HALF * 0.8, color=colour, lw=0.6)
        elif lane.density is not None:
            d = lane.density
            rel = d.relative if not np.all(np.isnan(d.relative)) else (
                d.counts / max(float(np.median(d.counts)), 1.0)
            )  # fmt: skip
            height = np.clip(np.nan_to_num(rel), 0, 1.25) / 1.25 * 2 * _HALF
            ax.stairs(y - _HALF + height, _s(tl, d.edges_ns), baseline=y - _HALF,
                      fill=True, color=colour, alpha=0.8)  # fmt: skip
        if len(lane.late):
            ax.scatter(_s(tl, lane.late), np.full(len(lane.late), y + _HALF + 0.08), marker="v",
                       s=18, color=COLOURS["late"], zorder=5)  # fmt: skip
        if lane.dropped:
            xs = _s(tl, np.array([d.timestamp_ns for d in lane.dropped], np.int64))
            ax.scatter(xs, np.full(len(lane.dropped), y - _HALF - 0.08), marker="^", s=22,
                       color=COLOURS["dropped"], zorder=5)  # fmt: skip
        if len(lane.quarantined):
            ax.scatter(_s(tl, lane.quarantined), np.full(len(lane.quarantined), y), marker="x",
                       s=40, color=COLOURS["quarantined"], zorder=6)  # fmt: skip
    for k, t in enumerate(tl.segment_starts):
        x = float(_s(tl, t))
        ax.axvline(x, color="black", lw=1.2, ls="--", zorder=7)
        ax.text(x, n - 0.35, f" file {k + 2}", fontsize=7, va="bottom", ha="left")
    _draw_marks(ax, tl, n)
    ax.set_yticks(range(n))
    ax.set_yticklabels(
        [
            f"{lane.name}{'' if lane.hardware else ' (host clock)'}\n{lane.frames} frames"
            for lane in reversed(tl.lanes)
        ],
        fontsize=8,
    )
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(float(_s(tl, tl.start_ns)), float(_s(tl, tl.end_ns)))
    ax.set_xlabel("seconds from the recording start")


def _draw_marks(ax: Axes, tl: Timeline, n: int) -> None:
    """Events: a line at their time, their name on top, the span they keep shaded."""
    for m in tl.marks:
        x = float(_s(tl, m.t_ns))
        colour = COLOURS["quarantined"] if m.quarantined else COLOURS["event_mark"]
        ax.axvspan(float(_s(tl, m.start_ns)), float(_s(tl, m.end_ns)), color=colour,
                   alpha=0.08, lw=0, zorder=0)  # fmt: skip
        ax.axvline(x, color=colour, lw=1.2, ls="--", zorder=7)
        ax.text(x, n - 0.45, m.name, color=colour, fontsize=7, rotation=90, ha="right",
                va="top", zorder=8)  # fmt: skip


def legend_labels(tl: Timeline) -> list[str]:
    """The markers the timeline draws, in legend order (only those that occur)."""
    lanes = tl.lanes
    occurs = {
        "gap": any(lane.gaps for lane in lanes),
        "stale": any(lane.stale for lane in lanes),
        "missing window": any(lane.missing for lane in lanes),
        "absent window": bool(tl.absent),
        "late": any(len(lane.late) for lane in lanes),
        "dropped": any(lane.dropped for lane in lanes),
        "quarantined": any(len(lane.quarantined) for lane in lanes),
        "event": bool(tl.marks),
    }
    return [label for label, seen in occurs.items() if seen]


def _legend(ax: Axes, tl: Timeline) -> None:
    from matplotlib.lines import Line2D  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    handles = {
        "gap": Patch(facecolor="none", edgecolor=COLOURS["gap"], hatch="///", label="gap"),
        "stale": Patch(color=COLOURS["stale"], alpha=0.45, label="stale"),
        "missing window": Patch(color=COLOURS["missing"], alpha=0.35, label="missing window"),
        "absent window": Patch(color=COLOURS["absent"], alpha=0.25, label="absent window"),
        "late": Line2D([], [], marker="v", ls="", color=COLOURS["late"], label="late"),
        "dropped": Line2D([], [], marker="^", ls="", color=COLOURS["dropped"], label="dropped"),
        "quarantined": Line2D([], [], marker="x", ls="", color=COLOURS["quarantined"],
                              label="quarantined"),
        "event": Line2D([], [], ls="--", color=COLOURS["event_mark"], label="event"),
    }  # fmt: skip
    labels = legend_labels(tl)
    if not labels:
        ax.text(0.5, 1.01, "no gaps, stale streams, missing windows, late, dropped or "
                "quarantined frames", transform=ax.transAxes, ha="center", va="bottom",
                fontsize=8, color="#2ca02c")  # fmt: skip
        return
    ax.legend(handles=[handles[k] for k in labels], loc="upper center",
              bbox_to_anchor=(0.5, 1.0), ncol=len(labels), fontsize=8, frameon=False,
              borderaxespad=-1.6)  # fmt: skip


def _draw_counts(fig: Figure, ax: Axes, tl: Timeline) -> None:
    counts = tl.counts.astype(np.float64)
    norm = np.where(np.isnan(tl.expected), np.maximum(np.median(counts, axis=0), 1.0), tl.expected)
    rel = counts / np.maximum(norm, 1e-9)
    x0 = float(_s(tl, int(tl.window_ids[0]) * tl.window_ns))
    x1 = float(_s(tl, (int(tl.window_ids[-1]) + 1) * tl.window_ns))
    n = len(tl.lanes)
    image = ax.imshow(rel.T, aspect="auto", interpolation="nearest", cmap="RdYlGn", vmin=0,
                      vmax=1.5, extent=(x0, x1, n - 0.5, -0.5))  # fmt: skip
    ax.set_yticks(range(n))
    ax.set_yticklabels(
        [
            f"{lane.name} ({e:.3g}/window)" if not np.isnan(e) else lane.name
            for lane, e in zip(tl.lanes, tl.expected, strict=True)
        ],
        fontsize=8,
    )
    ax.set_xlim(float(_s(tl, tl.start_ns)), float(_s(tl, tl.end_ns)))
    ax.set_title("frames per window / expected (red: none)", fontsize=9, loc="left")
    bar = fig.colorbar(image, ax=ax, pad=0.01, fraction=0.03)
    bar.set_label("frames / expected", fontsize=8)
    bar.ax.tick_params(labelsize=7)


def _draw_sync(axes: Sequence[Axes], tl: Timeline) -> None:
    for ax, p in zip(axes, tl.sync, strict=True):
        labels = [f"<{p.edges_ns[k + 1] / 1e6:g}" for k in range(len(p.edges_ns) - 1)]
        labels.append(f">={p.edges_ns[-1] / 1e6:g}")
        ax.bar(range(len(p.histogram)), p.histogram, color=COLOURS["camera"])
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        stats = (f"max {p.max_ns / 1e6:.2f} ms" if p.max_ns is not None else "not matched") + (
            f", p99 {p.p99_ns / 1e6:.2f} ms" if p.p99_ns is not None else ""
        )
        ax.set_title(f"{p.other} vs {p.ref}\n{stats}", fontsize=8)
        ax.set_xlabel("|time error| to the nearest frame, ms (bins)", fontsize=8)
        ax.set_ylabel("frames", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        if p.note:
            ax.text(0.02, 0.95, p.note, transform=ax.transAxes, fontsize=6, va="top")


def draw_timeline(tl: Timeline) -> Figure:
    """The figure of a timeline (matplotlib, Agg backend)."""
    require_matplotlib()
    from matplotlib.figure import Figure  # noqa: PLC0415

    n = len(tl.lanes)
    rows = [max(2.0, 0.55 * n + 1.0), max(1.5, 0.3 * n + 0.8)]
    if tl.sync:
        rows.append(2.4)
    fig = Figure(figsize=(16, sum(rows) + 0.8), layout="constrained")
    grid = fig.add_gridspec(len(rows), 1, height_ratios=rows)
    ax = fig.add_subplot(grid[0])
    _draw_lanes(ax, tl)
    _legend(ax, tl)
    _draw_counts(fig, fig.add_subplot(grid[1], sharex=ax), tl)
    if tl.sync:
        sub = grid[2].subgridspec(1, len(tl.sync))
        _draw_sync([fig.add_subplot(sub[0, k]) for k in range(len(tl.sync))], tl)
    seconds = (tl.end_ns - tl.start_ns) / 1e9
    title = (
        f"{tl.title}  ({seconds:.1f} s, {len(tl.window_ids)} windows of {tl.window_ns / 1e6:g} ms)"
    )
    if tl.notes:
        title += "\n" + "; ".join(tl.notes)
    fig.suptitle(title, fontsize=10)
    return fig


def sync_panels(
    readers: Sequence[HyperframeReader],
    ref: str,
    *,
    others: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> tuple[list[SyncPanel], str]:
    """Alignment-error histograms against ``ref`` from ``hyperframes.sync`` (summed over files).

    ``others`` (default: every other stream) and ``start_ns``/``end_ns`` are
    those of the plot, so the histograms describe what the plot shows.
    Returns the panels and a note (empty, or why there are none).
    """
    try:
        from hyperframes.sync import sync_report  # noqa: PLC0415 - built separately
    except ImportError:
        return [], "--sync: hyperframes.sync is not available in this installation"
    merged: dict[str, SyncPanel] = {}
    for r in readers:
        if ref not in {s.name for s in r.streams.values()}:
            continue  # a segment without the reference stream
        names = {s.name for s in r.streams.values()}
        mine = None if others is None else [n for n in others if n in names]
        report = sync_report(r, ref, others=mine, start_ns=start_ns, end_ns=end_ns)
        for pair in report.pairs:
            if pair.stats is None:
                merged.setdefault(
                    pair.other,
                    SyncPanel(pair.ref, pair.other, (0,), (0,), 0, None, None, pair.note),
                )
                continue
            st = pair.stats
            old = merged.get(pair.other)
            if old is None or old.matched == 0:
                merged[pair.other] = SyncPanel(
                    pair.ref, pair.other, st.edges_ns, st.histogram, st.matched, st.max_ns,
                    st.p99_ns, pair.note,
                )  # fmt: skip
                continue
            merged[pair.other] = SyncPanel(
                pair.ref, pair.other, st.edges_ns,
                tuple(a + b for a, b in zip(old.histogram, st.histogram, strict=True)),
                old.matched + st.matched, max(old.max_ns or 0, st.max_ns or 0), None,
                "p99 per file only (several files)",
            )  # fmt: skip
    return list(merged.values()), ""


def plot_files(
    files: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    streams: Sequence[str] | None = None,
    start: str | None = None,
    end: str | None = None,
    sync_ref: str | None = None,
    overwrite: bool = False,
) -> PlotResult:
    """Plot the timeline of ``files`` (consecutive segments) to the PNG ``output``.

    ``start``/``end`` take the forms of :func:`~hyperframes.format.times.parse_time`.
    """
    require_matplotlib()
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(HyperframeReader(p, verify=False)) for p in files]
        facts = merge_facts([facts_from_reader(r) for r in readers])
        lo, hi = parse_range(start, end, facts.start_ns, facts.end_ns)
        for name in streams or ():
            facts.stream(name)  # KeyError naming the streams when unknown
        panels: list[SyncPanel] = []
        note = ""
        if sync_ref is not None:
            facts.stream(sync_ref)
            others = [n for n in streams if n != sync_ref] if streams else None
            panels, note = sync_panels(readers, sync_ref, others=others, start_ns=lo, end_ns=hi)
    marks = [
        EventMark(e.t_ns, e.name, e.start_ns, e.end_ns, e.quarantined)
        for e in events_of_files(files)
    ]
    tl = build_timeline(facts, streams=streams, start_ns=lo, end_ns=hi, sync=panels, marks=marks)
    if note:
        tl = dataclasses.replace(tl, notes=(*tl.notes, note))
    fig = draw_timeline(tl)
    with atomic_output(output, overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return PlotResult(Path(output), tl)
