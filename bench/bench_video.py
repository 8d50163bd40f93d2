#!/usr/bin/env python3
"""Video benchmark: the H.265 layer against bare PyAV and against storing JPEG.

Run by hand (not part of the test suite)::

    python bench/bench_video.py [--width 1600 --height 900] [--frames 60] [--gops 1,3,10,30]
                                [--decoders cpu,nvdec] [--preset fast] [--quality 28]

Sections (every ratio is against a baseline measured in this run, on the same
frames, alternated round by round; numbers are medians):

1. Encoder frames/s: ``create_encoder("x265")`` (forced IDRs from the planner,
   every access unit checked against the convention) vs a bare PyAV libx265
   loop with the same options on the same Yuv420 frames. Also the cost of
   JPEG decode + BT.709 conversion per frame, and ``encode_pictures`` end to
   end from JPEG bytes.
2. Per GOP length: stream size as a ratio to the JPEG input, PSNR of the
   decoded luma against the source, random-frame decode latency through
   ``VideoStream.frame_at`` (fresh random positions: mostly seeks) vs decoding
   one stored JPEG (simplejpeg), and streaming decode frames/s through
   ``VideoStream.frames()``, per decoder (``cpu``; ``nvdec`` where a GPU is lent).

The frames are synthetic (``hyperframes.video.testing.moving_scene``: smooth
gradients, a moving square, mild noise), encoded to JPEG at quality 90 as a
camera would deliver them; real footage compresses less.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
import simplejpeg

from hyperframes.reader import HyperframeReader
from hyperframes.video import (
    EncoderSettings,
    IdrPlanner,
    VideoStream,
    Yuv420,
    create_encoder,
    encode_pictures,
    to_yuv420,
)
from hyperframes.video._nvprobe import probe
from hyperframes.video._x265 import DEFAULT_PRESET, open_codec_context
from hyperframes.video.testing import camera_timestamps, moving_scene, psnr, write_h265_stream

NO_GROUPS = 1_000_000  # window-group k so large that only the GOP cap places IDRs


def median_of(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def bare_pyav_fps(frames: list[Yuv420], settings: EncoderSettings) -> float:
    """Frames/s of a bare PyAV loop on the x265 encoder's own codec context (no checks)."""
    ctx = open_codec_context(settings)
    t0 = time.perf_counter()
    n = 0
    for i, pic in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(pic.to_i420(), format="yuv420p")
        frame.pts = i
        if i % settings.max_gop == 0:
            frame.pict_type = av.video.frame.PictureType.I
        n += sum(len(bytes(p)) > 0 for p in ctx.encode(frame))
    n += sum(len(bytes(p)) > 0 for p in ctx.encode(None))
    assert n == len(frames)
    return len(frames) / (time.perf_counter() - t0)


def hyperframes_fps(frames: list[Yuv420], settings: EncoderSettings) -> float:
    enc = create_encoder("x265", settings)
    t0 = time.perf_counter()
    out = []
    for i, pic in enumerate(frames):
        out += enc.encode(pic, i, idr=i % settings.max_gop == 0)
    out += enc.flush()
    assert len(out) == len(frames)
    return len(frames) / (time.perf_counter() - t0)


def section_encoder(jpegs: list[bytes], settings: EncoderSettings, repeats: int) -> list[str]:
    yuv = [to_yuv420(j) for j in jpegs]
    bare: list[float] = []
    ours: list[float] = []
    for _ in range(repeats):  # alternate, so a slow phase of the machine hits both
        bare.append(bare_pyav_fps(yuv, settings))
        ours.append(hyperframes_fps(yuv, settings))
    b, o = statistics.median(bare), statistics.median(ours)
    conv = []
    for j in jpegs[: min(len(jpegs), 20)]:
        t0 = time.perf_counter()
        to_yuv420(j)
        conv.append((time.perf_counter() - t0) * 1e3)
    jdec = []
    for j in jpegs[: min(len(jpegs), 20)]:
        t0 = time.perf_counter()
        simplejpeg.decode_jpeg(j, colorspace="RGB")
        jdec.append((time.perf_counter() - t0) * 1e3)

    def end_to_end() -> float:
        enc = create_encoder("x265", settings)
        planner = IdrPlanner(100_000_000, k=NO_GROUPS, max_gop=settings.max_gop)
        stamps = camera_timestamps(len(jpegs), settings.rate_hz)
        t0 = time.perf_counter()
        n = sum(1 for _ in encode_pictures(zip(stamps, jpegs, strict=True), enc, planner))
        assert n == len(jpegs)
        return len(jpegs) / (time.perf_counter() - t0)

    e2e = median_of(end_to_end, max(1, repeats // 2))
    return [
        row(
            "1",
            f"x265 encoder vs bare PyAV libx265, GOP {settings.max_gop}",
            f"{o:.1f} fps",
            f"{b:.1f} fps",
            f"{b / o:.3f}x time",
            "<= 1.10x",
        ),
        row(
            "1",
            "  JPEG decode + BT.709 4:2:0 conversion per frame",
            f"{statistics.median(conv):.1f} ms",
            f"{statistics.median(jdec):.1f} ms",
            f"{statistics.median(conv) / statistics.median(jdec):.2f}x",
            "info",
        ),
        row(
            "1",
            "  encode_pictures from JPEG (conversion on a thread)",
            f"{e2e:.1f} fps",
            f"{o:.1f} fps",
            f"{o / e2e:.3f}x time",
            "info",
        ),
    ]


def section_gop(
    jpegs: list[bytes],
    base: EncoderSettings,
    gops: list[int],
    decoders: list[str],
    queries: int,
    workdir: Path,
) -> list[str]:
    rows = []
    source = [to_yuv420(j) for j in jpegs]
    jpeg_bytes = sum(len(j) for j in jpegs)
    jdec = []
    rng = random.Random(1)
    for _ in range(queries):
        j = jpegs[rng.randrange(len(jpegs))]
        t0 = time.perf_counter()
        simplejpeg.decode_jpeg(j, colorspace="RGB")
        jdec.append((time.perf_counter() - t0) * 1e3)
    jpeg_ms = statistics.median(jdec)
    for gop in gops:
        settings = EncoderSettings(
            base.width, base.height, base.rate_hz, gop, base.quality, base.preset
        )
        path = workdir / f"gop{gop}.hf"
        written = write_h265_stream(path, source, settings, k=NO_GROUPS)
        size = sum(len(f.data) for f in written)
        with HyperframeReader(path) as r:
            for name in decoders:
                vs = VideoStream(r, "cam", decoder=name, output="yuv420p")
                quality = statistics.mean(psnr(f.image.y, source[f.index].y) for f in vs.frames())
                positions = [rng.randrange(len(vs)) for _ in range(queries)]
                lat = []
                for i in positions:
                    t0 = time.perf_counter()
                    vs.frame_at(i)
                    lat.append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                n = sum(1 for _ in vs.frames())
                stream_fps = n / (time.perf_counter() - t0)
                vs.close()
                rows.append(
                    row(
                        "2",
                        f"GOP {gop:>2} {name}: size vs JPEG, PSNR-Y {quality:.1f} dB",
                        f"{size / 1e6:.2f} MB",
                        f"{jpeg_bytes / 1e6:.2f} MB",
                        f"{jpeg_bytes / size:.1f}:1",
                        "info",
                    )
                )
                rows.append(
                    row(
                        "2",
                        f"GOP {gop:>2} {name}: random frame_at vs one JPEG decode",
                        f"{statistics.median(lat):.1f} ms",
                        f"{jpeg_ms:.1f} ms",
                        f"{statistics.median(lat) / jpeg_ms:.1f}x",
                        "info",
                    )
                )
                rows.append(
                    row(
                        "2",
                        f"GOP {gop:>2} {name}: streaming frames() vs JPEG decode",
                        f"{stream_fps:.0f} fps",
                        f"{1e3 / jpeg_ms:.0f} fps",
                        f"{stream_fps * jpeg_ms / 1e3:.2f}x",
                        "info",
                    )
                )
    return rows


def row(sec: str, what: str, ours: str, base: str, ratio: str, target: str) -> str:
    return f"| {sec} | {what:<58} | {ours:>10} | {base:>10} | {ratio:>11} | {target:>8} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--gops", default="1,3,10,30")
    ap.add_argument("--decoders", default="cpu" + (",nvdec" if probe().can_decode else ""))
    ap.add_argument("--preset", default=DEFAULT_PRESET)
    ap.add_argument("--quality", type=int, default=28)
    ap.add_argument("--overhead-gop", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-encoder", action="store_true", help="only section 2")
    args = ap.parse_args(argv)

    print(
        f"# bench_video: {args.width}x{args.height}, {args.frames} frames, preset "
        f"{args.preset}, quality {args.quality}; PyAV {av.__version__}; NVIDIA: "
        f"{probe().summary()}",
        flush=True,
    )
    scene = moving_scene(args.width, args.height, args.frames, args.seed)
    jpegs = [simplejpeg.encode_jpeg(f, quality=90, colorsubsampling="420") for f in scene]
    del scene
    base = EncoderSettings(
        args.width, args.height, max_gop=args.overhead_gop, quality=args.quality, preset=args.preset
    )
    print("| # | measurement | hyperframes | baseline | ratio | target |")
    print("|---|---|---:|---:|---:|---:|")
    if not args.skip_encoder:
        for line in section_encoder(jpegs, base, args.repeats):
            print(line, flush=True)
    gops = [int(g) for g in args.gops.split(",")]
    decoders = [d for d in args.decoders.split(",") if d]
    with tempfile.TemporaryDirectory(prefix="hf-bench-video-") as tmp:
        for line in section_gop(jpegs, base, gops, decoders, args.queries, Path(tmp)):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
