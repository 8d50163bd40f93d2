"""Drawing a :class:`~hyperframes.viz.contact.ContactSheet` with matplotlib (``hyperframes show``).

One row per camera (its frames of the window side by side), then one row
with the lidar sweeps from above, the IMU traces and anything else. H.265
cameras are decoded through the video layer (:class:`hyperframes.video.VideoStream`,
imported only when needed); when it cannot decode, the panel says why.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hyperframes.format.streams import StreamInfo
from hyperframes.reader import Frame, HyperframeReader
from hyperframes.storage.local import atomic_output
from hyperframes.viz.contact import (
    BevPanel,
    ContactSheet,
    ImagePanel,
    Panel,
    TextPanel,
    TracePanel,
    VideoDecoder,
    build_sheet,
)
from hyperframes.viz.errors import EmptyRangeError
from hyperframes.viz.plot import require_matplotlib

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["ShowResult", "video_decoder", "draw_sheet", "show_window"]


@dataclass(frozen=True, slots=True)
class ShowResult:
    """A written contact sheet: where, and what it shows."""

    output: Path
    sheet: ContactSheet

    def __str__(self) -> str:
        s = self.sheet
        images = sum(len(row) for row in s.cameras)
        return (
            f"wrote {self.output}: window {s.position} (id {s.window_id}), {images} camera frames, "
            f"{len(s.others)} other panels"
            + (f", no frame from {', '.join(s.missing)}" if s.missing else "")
        )


def _as_numpy(image: Any) -> np.ndarray:
    if hasattr(image, "cpu"):  # a torch tensor from NVDEC
        image = image.cpu().numpy()
    return np.asarray(image)


def video_decoder(reader: HyperframeReader, decoder: str = "cpu") -> VideoDecoder:
    """A :data:`VideoDecoder` over ``reader`` with the video layer's ``decoder`` (lazy import).

    When the video layer or its decoder is unavailable, every frame gets a
    placeholder text saying so (``"h265: decoder unavailable (...)"``).
    """

    def decode(stream: StreamInfo, frames: Sequence[Frame]) -> list[np.ndarray | str]:
        try:
            from hyperframes.video import VideoError, VideoStream  # noqa: PLC0415 - optional
        except ImportError as exc:
            return [f"{stream.encoding}: decoder unavailable ({exc})"] * len(frames)
        try:
            vs = VideoStream(reader, stream.id, decoder=decoder, output="rgb")
        except (VideoError, ImportError, ValueError, OSError) as exc:
            return [f"{stream.encoding}: decoder unavailable ({exc})"] * len(frames)
        out: list[np.ndarray | str] = []
        try:
            for f in frames:
                try:
                    image = vs.frame_at(timestamp_ns=f.timestamp_ns).image
                    out.append(_as_numpy(image))
                except (VideoError, ValueError, LookupError) as exc:
                    out.append(f"{stream.encoding}: cannot decode this frame ({exc})")
        finally:
            vs.close()
        return out

    return decode


def _image(ax: Axes, p: ImagePanel) -> None:
    if p.image is not None:
        ax.imshow(p.image)
    else:
        ax.text(0.5, 0.5, textwrap.fill(p.placeholder, 36), ha="center", va="center", fontsize=8,
                color="#d62728", transform=ax.transAxes)  # fmt: skip
        ax.set_facecolor("#eeeeee")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(p.caption, fontsize=7)


def _panel(ax: Axes, p: Panel) -> None:
    if isinstance(p, ImagePanel):
        _image(ax, p)
    elif isinstance(p, BevPanel):
        ax.set_facecolor("#1a1a1a")  # points stand out on dark, not on white
        points = ax.scatter(p.x, p.y, c=p.value, s=1.5, cmap="viridis", linewidths=0)
        ax.set_xlim(-p.half_extent_m, p.half_extent_m)
        ax.set_ylim(-p.half_extent_m, p.half_extent_m)
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)", fontsize=7)
        ax.set_ylabel("y (m)", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.set_title(p.caption, fontsize=7)
        if p.value_name and ax.figure is not None:
            # inside the panel's cell, so the bar does not narrow this column
            cax = ax.inset_axes((1.02, 0.0, 0.04, 1.0))
            bar = ax.figure.colorbar(points, cax=cax)
            bar.set_label(p.value_name, fontsize=7)
            bar.ax.tick_params(labelsize=6)
    elif isinstance(p, TracePanel):
        for name, values in p.series.items():
            ax.plot(p.t_ms, values, lw=0.8, label=name)
        ax.set_xlabel("ms from the window start", fontsize=7)
        ax.set_ylabel(p.unit, fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6, loc="best")
        ax.set_title(p.caption, fontsize=7)
    elif isinstance(p, TextPanel):
        ax.axis("off")
        ax.set_title(p.caption, fontsize=7)
        ax.text(0.0, 1.0, "\n".join(p.lines), va="top", fontsize=7, family="monospace",
                transform=ax.transAxes)  # fmt: skip


def draw_sheet(sheet: ContactSheet) -> Figure:
    """The figure of a contact sheet (matplotlib, no pyplot)."""
    require_matplotlib()
    from matplotlib.figure import Figure  # noqa: PLC0415

    cols = max([len(row) for row in sheet.cameras] + [len(sheet.others), 1])
    rows = len(sheet.cameras) + (1 if sheet.others else 0)
    fig = Figure(figsize=(3.6 * cols, 2.5 * max(rows, 1) + 0.6), layout="constrained")
    grid = fig.add_gridspec(max(rows, 1), cols)
    for r, row in enumerate(sheet.cameras):
        for c, panel in enumerate(row):
            _image(fig.add_subplot(grid[r, c]), panel)
    if sheet.others:
        last = len(sheet.cameras)
        for c, other in enumerate(sheet.others):
            _panel(fig.add_subplot(grid[last, c]), other)
    fig.suptitle(
        sheet.heading() + (f"; no frame from {', '.join(sheet.missing)}" if sheet.missing else ""),
        fontsize=10,
    )
    return fig


def show_window(
    file: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    window: int = 0,
    streams: Sequence[str] | None = None,
    decoder: str = "cpu",
    overwrite: bool = False,
) -> ShowResult:
    """Write the contact sheet of window ``window`` (0-based position, negative from the end)."""
    require_matplotlib()
    with HyperframeReader(file) as r:
        n = r.window_count()
        if not -n <= window < n:
            raise EmptyRangeError(file, f"no window {window}: the file has {n} (0..{n - 1})")
        chosen = [r.stream(s) for s in streams] if streams else list(r.streams.values())
        hf = r.get_window(window)
        sheet = build_sheet(
            hf, chosen, title=Path(file).name, video=video_decoder(r, decoder),
            position=window % n, windows=n, origin_ns=r.start_ns,
        )  # fmt: skip
    fig = draw_sheet(sheet)
    with atomic_output(output, overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    return ShowResult(Path(output), sheet)
