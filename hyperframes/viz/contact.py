"""The content of a contact sheet of one hyperframe, as plain dataclasses (no matplotlib).

:func:`build_sheet` turns a :class:`~hyperframes.reader.Hyperframe` into
panels: every camera frame as a thumbnail (JPEG and PNG decoded here, H.265
through a callback the caller supplies, raw RGB/gray reshaped), each lidar
sweep as a bird's-eye view, IMU samples as traces over the window, anything
else as a short text listing; every panel captioned with the stream name, the
frame's sequence number and its timestamp. :mod:`hyperframes.viz.show` draws
them.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.images import RAW_IMAGE_ENCODINGS, point_columns, raw_image, raw_size
from hyperframes.reader import Frame, Hyperframe

__all__ = [
    "MAX_THUMB_WIDTH",
    "MAX_FRAMES_PER_CAMERA",
    "MAX_POINTS",
    "ImagePanel",
    "BevPanel",
    "TracePanel",
    "TextPanel",
    "Panel",
    "ContactSheet",
    "VideoDecoder",
    "caption",
    "decode_image",
    "thumbnail",
    "bev",
    "build_sheet",
]

MAX_THUMB_WIDTH = 480
MAX_FRAMES_PER_CAMERA = 4
MAX_POINTS = 40_000

# decodes the given frames of one video stream to RGB arrays, or a placeholder text each
VideoDecoder = Callable[[StreamInfo, Sequence[Frame]], list["np.ndarray | str"]]


@dataclass(frozen=True, slots=True)
class ImagePanel:
    """A camera frame: an RGB thumbnail, or a placeholder text when it cannot be decoded."""

    stream: str
    caption: str
    image: np.ndarray | None  # (H, W, 3) uint8
    placeholder: str = ""


@dataclass(frozen=True, slots=True)
class BevPanel:
    """A lidar sweep seen from above: x forward, y left, coloured by intensity (or z)."""

    stream: str
    caption: str
    x: np.ndarray  # float32, metres
    y: np.ndarray
    value: np.ndarray  # the colour values
    value_name: str
    half_extent_m: float
    points: int  # points in the sweep (x/y hold at most MAX_POINTS of them)


@dataclass(frozen=True, slots=True)
class TracePanel:
    """Samples over the window: time in ms from the window start, one series per name."""

    stream: str
    caption: str
    t_ms: np.ndarray
    series: dict[str, np.ndarray]
    unit: str


@dataclass(frozen=True, slots=True)
class TextPanel:
    """A stream shown as text (unknown encodings, missing streams, failures)."""

    stream: str
    caption: str
    lines: tuple[str, ...]


Panel = ImagePanel | BevPanel | TracePanel | TextPanel


@dataclass(frozen=True, slots=True)
class ContactSheet:
    """One hyperframe's panels: camera rows first, then one row of everything else."""

    title: str
    window_id: int
    start_ns: int
    end_ns: int
    cameras: tuple[tuple[ImagePanel, ...], ...]  # one tuple per camera stream
    others: tuple[Panel, ...]
    missing: tuple[str, ...] = field(default=())  # streams without a frame in this window
    position: int | None = None  # the window's 0-based position in the file (``--window``)
    windows: int = 0  # windows in the file
    origin_ns: int | None = None  # the recording's start (times are shown from it)

    def heading(self) -> str:
        """The sheet's title: file, window position and id, time from the recording start."""
        where = (
            f"window {self.position} of {self.windows} (id {self.window_id})"
            if self.position is not None
            else f"window {self.window_id}"
        )
        ms = (self.end_ns - self.start_ns) / 1e6
        origin = self.origin_ns
        span = (
            f"{(self.start_ns - origin) / 1e9:.3f}-{(self.end_ns - origin) / 1e9:.3f} s "
            f"from the recording start ({ms:g} ms)"
            if origin is not None
            else f"({self.start_ns}, {self.end_ns}] ns ({ms:g} ms)"
        )
        return f"{self.title}: {where}, {span}"


def caption(f: Frame, start_ns: int, extra: str = "") -> str:
    """``name #index`` and ``+… ms`` into the window (``t=… ns`` after it, for lookups)."""
    offset = (f.timestamp_ns - start_ns) / 1e6
    flags = "".join((" LATE" if f.late else "", " host-clock" if not f.hardware_timestamp else ""))
    return (
        f"{f.stream.name} #{f.stream_index}{flags}{extra}\n+{offset:.1f} ms (t={f.timestamp_ns} ns)"
    )


def thumbnail(rgb: np.ndarray, max_width: int = MAX_THUMB_WIDTH) -> np.ndarray:
    """An RGB image no wider than ``max_width`` (aspect kept)."""
    h, w = rgb.shape[:2]
    if w <= max_width:
        return rgb
    img = Image.fromarray(rgb)
    img = img.resize((max_width, max(1, round(h * max_width / w))), Image.Resampling.BILINEAR)
    return np.asarray(img)


def _decode_jpeg(data: bytes, max_width: int) -> np.ndarray:
    try:
        import simplejpeg  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        simplejpeg = None
    if simplejpeg is not None:
        out = simplejpeg.decode_jpeg(data, colorspace="RGB", min_width=max_width, min_height=1)
        return np.asarray(out)
    img = Image.open(io.BytesIO(data))
    img.draft("RGB", (max_width, max(1, img.height * max_width // max(img.width, 1))))
    return np.asarray(img.convert("RGB"))


def _to_u8(gray: np.ndarray) -> np.ndarray:
    """A 16-bit or float picture (depth, thermal) for the eye: its finite values' 1st..99th
    percentile stretched over 0..255, NaN and inf black."""
    if gray.dtype == np.uint8:
        return gray
    values = gray.astype(np.float32)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(gray.shape, np.uint8)
    lo, hi = np.percentile(values[finite], [1, 99])
    scaled = (values - lo) * (255.0 / max(float(hi - lo), 1e-12))
    return np.where(finite, np.clip(scaled, 0, 255), 0).astype(np.uint8)


def _raw_rgb(stream: StreamInfo, data: bytes) -> np.ndarray:
    try:
        size = raw_size(stream.encoding, stream.extra, stream.shape)
        pixels = raw_image(data, stream.encoding, *size)
    except ValueError as exc:
        raise ValueError(f"{stream.encoding}: {exc}") from None
    if pixels.ndim == 3:
        return pixels
    return np.repeat(_to_u8(pixels)[:, :, None], 3, axis=2)


def decode_image(stream: StreamInfo, data: bytes, max_width: int = MAX_THUMB_WIDTH) -> np.ndarray:
    """An RGB thumbnail of an image payload (``jpeg``, ``png``, ``raw-rgb``, ``raw-bgr``,
    ``raw-gray8``, ``raw-gray16``, ``raw-f32``).

    Raw images need ``extra["width"]`` and ``extra["height"]`` (or a shape); gray16 and
    f32 are stretched to 8 bits (:func:`_to_u8`). Raises
    ValueError when the payload cannot be shown as an image.
    """
    enc = stream.encoding
    if enc == "jpeg":
        try:
            rgb = _decode_jpeg(data, max_width)
        except (OSError, ValueError) as exc:
            raise ValueError(f"not a decodable JPEG: {exc}") from None
    elif enc == "png":
        try:
            rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        except OSError as exc:
            raise ValueError(f"not a decodable PNG: {exc}") from None
    elif enc in RAW_IMAGE_ENCODINGS:
        rgb = _raw_rgb(stream, data)
    else:
        raise ValueError(f"encoding {enc!r} is not an image this tool decodes")
    return thumbnail(rgb, max_width)


def bev(
    stream: StreamInfo, points: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, float]:
    """``(x, y, value, value name, half extent)`` of a point array ``(N, k>=2)``.

    Every ``N // max_points``-th point is kept (deterministic); the extent
    covers the 98th percentile of ``|x|`` and ``|y|``.
    """
    if points.ndim != 2 or points.shape[1] < 2:
        raise ValueError(f"points of shape {points.shape} are not (N, k>=2)")
    step = max(1, -(-len(points) // max_points))
    p = points[::step].astype(np.float32, copy=False)
    names = stream.extra.get("fields") if isinstance(stream.extra.get("fields"), list) else None
    if p.shape[1] >= 4:
        value, name = p[:, 3], str(names[3]) if names and len(names) > 3 else "intensity"
    elif p.shape[1] == 3:
        value, name = p[:, 2], "z"
    else:
        value, name = np.zeros(len(p), np.float32), ""
    finite = np.isfinite(p[:, 0]) & np.isfinite(p[:, 1])
    x, y, value = p[finite, 0], p[finite, 1], value[finite]
    extent = float(np.percentile(np.abs(np.concatenate([x, y])), 98)) if len(x) else 1.0
    return x, y, value, name, max(extent, 1.0)


def _camera_row(
    stream: StreamInfo, frames: list[Frame], start_ns: int, video: VideoDecoder | None
) -> tuple[ImagePanel, ...]:
    shown = frames
    if len(frames) > MAX_FRAMES_PER_CAMERA:
        pick = np.linspace(0, len(frames) - 1, MAX_FRAMES_PER_CAMERA).round().astype(int)
        shown = [frames[i] for i in pick]
    extra = f" ({len(shown)} of {len(frames)})" if len(shown) < len(frames) else ""
    if stream.encoding in ("h264", "h265", "av1"):
        if video is None:
            decoded: list[np.ndarray | str] = [f"{stream.encoding}: decoder unavailable"] * len(
                shown
            )
        else:
            decoded = video(stream, shown)
        return tuple(
            ImagePanel(stream.name, caption(f, start_ns, extra), thumbnail(d), "")
            if isinstance(d, np.ndarray)
            else ImagePanel(stream.name, caption(f, start_ns, extra), None, d)
            for f, d in zip(shown, decoded, strict=True)
        )
    panels = []
    for f in shown:
        try:
            panels.append(
                ImagePanel(
                    stream.name, caption(f, start_ns, extra), decode_image(stream, f.tobytes())
                )
            )
        except ValueError as exc:
            panels.append(ImagePanel(stream.name, caption(f, start_ns, extra), None, str(exc)))
    return tuple(panels)


def _is_image(stream: StreamInfo) -> bool:
    return stream.kind is SensorKind.CAMERA or stream.encoding in (
        "jpeg", "png", *RAW_IMAGE_ENCODINGS, "h264", "h265", "av1",
    )  # fmt: skip


def _is_points(stream: StreamInfo) -> bool:
    if stream.encoding == "points" and stream.dtype is not None:  # structured (ROS)
        return stream.kind in (SensorKind.LIDAR, SensorKind.RADAR)
    return (
        stream.dtype is not None
        and stream.shape is not None
        and len(stream.shape) == 2
        and stream.shape[1] >= 2
        and stream.kind in (SensorKind.LIDAR, SensorKind.RADAR)
    )


def _others(stream: StreamInfo, frames: list[Frame], start_ns: int) -> list[Panel]:
    if _is_points(stream):
        out: list[Panel] = []
        for f in frames[-2:]:  # the last two sweeps at most
            fields = stream.extra.get("fields")
            pts = point_columns(f.array(), fields if isinstance(fields, list) else None)
            x, y, value, name, extent = bev(stream, pts)
            extra = f", {len(pts)} points"
            out.append(BevPanel(stream.name, caption(f, start_ns, extra), x, y, value, name,
                                extent, len(pts)))  # fmt: skip
        return out
    if stream.encoding == "imu-f64" and stream.shape == (6,):
        t = np.array([(f.timestamp_ns - start_ns) / 1e6 for f in frames])
        values = np.stack([f.array() for f in frames])
        first, last = frames[0], frames[-1]
        cap = (
            f"{stream.name} #{first.stream_index}..#{last.stream_index}, {len(frames)} samples, "
            f"+{t[0]:.1f}..+{t[-1]:.1f} ms"
        )
        return [
            TracePanel(stream.name, cap + "\naccelerometer",
                       t, {a: values[:, k] for k, a in enumerate(("ax", "ay", "az"))}, "m/s²"),
            TracePanel(stream.name, cap + "\ngyroscope",
                       t, {a: values[:, 3 + k] for k, a in enumerate(("gx", "gy", "gz"))}, "rad/s"),
        ]  # fmt: skip
    lines = tuple(
        f"#{f.stream_index} +{(f.timestamp_ns - start_ns) / 1e6:.1f} ms {len(f.data)} B"
        for f in frames[:12]
    ) + ((f"... {len(frames) - 12} more",) if len(frames) > 12 else ())
    return [
        TextPanel(stream.name, f"{stream.name} ({stream.encoding}), {len(frames)} frames", lines)
    ]


def build_sheet(
    hf: Hyperframe,
    streams: Sequence[StreamInfo],
    *,
    title: str = "",
    video: VideoDecoder | None = None,
    position: int | None = None,
    windows: int = 0,
    origin_ns: int | None = None,
) -> ContactSheet:
    """The contact sheet of ``hf`` for ``streams`` (in that order); see the module docstring.

    ``video`` decodes H.264/H.265/AV1 camera frames; without it they show a
    "decoder unavailable" placeholder. ``position``, ``windows`` and
    ``origin_ns`` (the recording's start) go into the heading.
    """
    cameras: list[tuple[ImagePanel, ...]] = []
    others: list[Panel] = []
    missing: list[str] = []
    for s in streams:
        frames = hf[s.id]
        if not frames:
            missing.append(s.name)
            others.append(
                TextPanel(s.name, f"{s.name} ({s.encoding})", ("no frame in this window",))
            )
            continue
        if _is_image(s):
            cameras.append(_camera_row(s, frames, hf.start_ns, video))
        else:
            others.extend(_others(s, frames, hf.start_ns))
    return ContactSheet(
        title=title,
        window_id=hf.window_id,
        start_ns=hf.start_ns,
        end_ns=hf.end_ns,
        cameras=tuple(cameras),
        others=tuple(others),
        missing=tuple(missing),
        position=position,
        windows=windows,
        origin_ns=origin_ns,
    )
