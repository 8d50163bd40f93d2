"""Test pictures and helpers shared by the tests, the benchmark and the GPU check.

Deterministic: the same arguments always give the same pictures and files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.synth import BASE_NS, make_generator
from hyperframes.video import _deps
from hyperframes.video.encode import EncoderSettings, create_encoder
from hyperframes.video.gop import IdrPlanner
from hyperframes.video.pictures import Picture
from hyperframes.video.quality import psnr
from hyperframes.video.transcode import EncodedFrame, encode_pictures
from hyperframes.writer import HyperframeWriter

__all__ = [
    "BAR_COLOURS",
    "colour_bars",
    "moving_scene",
    "synth_jpegs",
    "psnr",
    "camera_timestamps",
    "h265_stream_info",
    "write_h265_stream",
    "x265_access_units",
]

# 75% colour bars: white, yellow, cyan, green, magenta, red, blue, black
BAR_COLOURS = np.array(
    [
        [191, 191, 191],
        [191, 191, 0],
        [0, 191, 191],
        [0, 191, 0],
        [191, 0, 191],
        [191, 0, 0],
        [0, 0, 191],
        [0, 0, 0],
    ],
    np.uint8,
)


def colour_bars(width: int, height: int) -> np.ndarray:
    """Eight vertical colour bars, each starting on an even column (chroma-aligned)."""
    edges = [2 * round(i * width / 16) for i in range(9)]
    img = np.empty((height, width, 3), np.uint8)
    for i, colour in enumerate(BAR_COLOURS):
        img[:, edges[i] : edges[i + 1]] = colour
    return img


def moving_scene(width: int, height: int, n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` frames of smooth gradients with a moving square and mild noise (camera-like)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    side = max(8, min(width, height) // 5)
    frames = []
    for i in range(n):
        r = 120 + 70 * np.sin(xx / 41.0 + i * 0.05)
        g = 110 + 60 * np.cos(yy / 29.0 - i * 0.03)
        b = 100 + 50 * np.sin((xx + yy) / 67.0)
        img = np.stack([r, g, b], axis=-1)
        x0 = (i * 5) % max(1, width - side)
        y0 = (i * 3) % max(1, height - side)
        img[y0 : y0 + side, x0 : x0 + side] = (230, 60, 40)
        img += rng.normal(0, 2.0, img.shape)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return frames


def synth_jpegs(width: int, height: int, n: int, seed: int = 0) -> list[bytes]:
    """``n`` JPEG camera frames from ``hyperframes synth``'s camera generator."""
    stream = StreamInfo(
        0, "cam", SensorKind.CAMERA, "jpeg", extra={"width": width, "height": height}
    )
    gen = make_generator(stream, seed)
    return [gen(i) for i in range(n)]


def camera_timestamps(n: int, rate_hz: float = 30.0, start_ns: int = BASE_NS + 1) -> list[int]:
    """``n`` capture times at ``rate_hz`` from ``start_ns``."""
    period = round(1e9 / rate_hz)
    return [start_ns + i * period for i in range(n)]


def h265_stream_info(stream_id: int = 0, name: str = "cam", rate_hz: float = 30.0) -> StreamInfo:
    """A camera stream table entry for H.265 access units."""
    return StreamInfo(stream_id, name, SensorKind.CAMERA, "h265", rate_hz=rate_hz)


def write_h265_stream(
    path: str | os.PathLike[str],
    pictures: Sequence[Picture],
    settings: EncoderSettings,
    *,
    window_ns: int = 100_000_000,
    k: int = 1,
    timestamps: Iterable[int] | None = None,
    encoder: str = "x265",
) -> list[EncodedFrame]:
    """Encode ``pictures`` and write them as one ``h265`` stream of a new file.

    IDRs on the first frame of every ``k``-th window, capped at
    ``settings.max_gop`` frames; KEYFRAME set exactly on IDRs, HW_TIMESTAMP on
    all. Returns what was written.
    """
    ts = (
        list(timestamps)
        if timestamps is not None
        else camera_timestamps(len(pictures), settings.rate_hz)
    )
    enc = create_encoder(encoder, settings)
    planner = IdrPlanner(window_ns, k=k, max_gop=settings.max_gop)
    out = list(encode_pictures(zip(ts, pictures, strict=True), enc, planner))
    enc.close()
    info = h265_stream_info(rate_hz=settings.rate_hz)
    with HyperframeWriter(path, [info], window_ns) as w:
        for f in out:
            flags = FrameFlags.HW_TIMESTAMP | (FrameFlags.KEYFRAME if f.keyframe else 0)
            w.append(info.id, f.timestamp_ns, f.data, flags=int(flags))
    return out


def x265_access_units(
    width: int,
    height: int,
    n: int,
    x265_params: str,
    *,
    zerolatency: bool = True,
    pix_fmt: str = "yuv420p",
    seed: int = 0,
) -> list[bytes]:
    """Access units straight from libx265 with the given x265-params (for crafting streams).

    Unlike the ``x265`` encoder this applies no convention and no checks, so
    tests can make streams with B-frames, open GOPs, full range and so on.
    """
    av: Any = _deps.require("av")
    ctx = av.CodecContext.create("libx265", "w")
    ctx.width, ctx.height, ctx.pix_fmt = width, height, pix_fmt
    ctx.time_base = Fraction(1, 30)
    ctx.framerate = Fraction(30)
    options = {"preset": "ultrafast", "x265-params": "log-level=error:" + x265_params}
    if zerolatency:
        options["tune"] = "zerolatency"
    ctx.options = options
    ctx.open()
    aus: list[bytes] = []
    for i, rgb in enumerate(moving_scene(width, height, n, seed)):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix_fmt)
        frame.pts = i
        aus += [bytes(p) for p in ctx.encode(frame)]
    aus += [bytes(p) for p in ctx.encode(None)]
    return aus
