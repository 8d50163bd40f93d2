#!/usr/bin/env python3
"""Where the converter's video defaults come from: presets and the IDR grid k, measured.

Run by hand (not part of the test suite)::

    python bench/bench_defaults.py [--frames 60] [--width 1600 --height 900] [--rate 30]
                                   [--presets ultrafast,veryfast,fast] [--ks 1,3,10]

On camera-like content (one ``hyperframes synth`` camera: a textured street
scene under a slow pan and zoom, sensor noise sigma 2, JPEG q90), CRF 28,
x265 through ``hyperframes.video`` exactly as the converter calls it:

1. Presets (k = 3): encoder CPU ms per frame (process time, the JPEGs
   already converted to 4:2:0), stream bytes as a fraction of the JPEGs,
   PSNR min/median in R'G'B' against the JPEG (the CPU decoder), and each
   preset's CPU and bytes as a ratio to ``fast``.
2. The IDR grid (the preset of ``--k-preset``, default veryfast): bytes,
   PSNR, the CPU ms of one random ``VideoStream.frame_at`` (median of 40
   random frames, a fresh seek each time: what a training loader pays) and
   of one frame of a sequential ``frames()`` pass; bytes as a ratio to k=3.

Frame times are CPU time, which a shared machine disturbs less than wall
time; ``uptime`` is printed with the results.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.synth import make_generator
from hyperframes.video import VideoStream, Yuv420, decode_jpeg, to_yuv420
from hyperframes.video.encode import EncoderSettings
from hyperframes.video.quality import psnr
from hyperframes.video.testing import camera_timestamps, write_h265_stream

WINDOW_NS = 100_000_000


def encode(
    path: Path, pictures: list[Yuv420], rate: float, preset: str, k: int, quality: int
) -> tuple[float, int]:
    """Encode into ``path``; (CPU ms per frame, stream bytes)."""
    settings = EncoderSettings(
        pictures[0].width, pictures[0].height, rate_hz=rate, quality=quality, preset=preset
    )
    stamps = camera_timestamps(len(pictures), rate)
    t = time.process_time()
    out = write_h265_stream(path, pictures, settings, window_ns=WINDOW_NS, k=k, timestamps=stamps)
    cpu = (time.process_time() - t) / len(pictures) * 1e3
    return cpu, sum(len(f.data) for f in out)


def quality_of(path: Path, sources: list[np.ndarray]) -> tuple[float, float]:
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="rgb") as vs:
        values = [psnr(f.image, s) for f, s in zip(vs.frames(), sources, strict=True)]
    return min(values), statistics.median(values)


def decode_costs(path: Path, rng: np.random.Generator) -> tuple[float, float]:
    """(median CPU ms of a random frame_at, CPU ms per frame of a sequential pass)."""
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="rgb") as vs:
        n = len(vs)
        times = []
        for i in rng.integers(0, n, 40):
            t = time.process_time()
            vs.frame_at(int(i))
            times.append((time.process_time() - t) * 1e3)
        t = time.process_time()
        count = sum(1 for _ in vs.frames())
        seq = (time.process_time() - t) / count * 1e3
    return statistics.median(times), seq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--quality", type=int, default=28)
    ap.add_argument("--presets", default="ultrafast,veryfast,fast")
    ap.add_argument("--ks", default="1,3,10")
    ap.add_argument("--k-preset", default="veryfast")
    args = ap.parse_args()

    stream = StreamInfo(
        0, "cam", SensorKind.CAMERA, "jpeg", extra={"width": args.width, "height": args.height}
    )
    gen = make_generator(stream, 0)
    jpegs = [gen(i) for i in range(args.frames)]
    jpeg_bytes = sum(len(j) for j in jpegs)
    sources = [decode_jpeg(j) for j in jpegs]
    pictures = [to_yuv420(j) for j in jpegs]
    work = Path(tempfile.mkdtemp(prefix="hf-bench-defaults-"))
    print(
        f"{args.frames} frames {args.width}x{args.height} at {args.rate:g} Hz, "
        f"JPEG {jpeg_bytes / args.frames / 1e3:.0f} kB/frame, CRF {args.quality}; "
        f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}\n"
    )
    print("| preset | encode CPU ms/frame | vs fast | bytes / JPEG | vs fast | PSNR min / median |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = {}
    for preset in args.presets.split(","):
        path = work / f"p-{preset}.hf"
        cpu, size = encode(path, pictures, args.rate, preset, 3, args.quality)
        rows[preset] = (cpu, size, *quality_of(path, sources))
    base = rows.get("fast", next(iter(rows.values())))
    for preset, (cpu, size, lo, med) in rows.items():
        print(
            f"| {preset} | {cpu:.0f} | {cpu / base[0]:.2f}x | {size / jpeg_bytes:.4f} | "
            f"{size / base[1]:.3f}x | {lo:.2f} / {med:.2f} dB |"
        )
    print(f"\nIDR grid, preset {args.k_preset} (GOP ~ k * 100 ms):\n")
    print("| k | GOP frames | bytes / JPEG | vs k=3 | PSNR min / median | random frame_at "
          "CPU ms | sequential CPU ms/frame |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    krows = {}
    for k in (int(x) for x in args.ks.split(",")):
        path = work / f"k-{k}.hf"
        _cpu, size = encode(path, pictures, args.rate, args.k_preset, k, args.quality)
        with HyperframeReader(path) as r:
            keys = int(np.count_nonzero(r.index["flags"] & 1))
        krows[k] = (size, keys, *quality_of(path, sources), *decode_costs(path, rng))
    kbase = krows.get(3, next(iter(krows.values())))[0]
    for k, (size, keys, lo, med, ra, seq) in krows.items():
        print(
            f"| {k} | {args.frames / keys:.1f} | {size / jpeg_bytes:.4f} | {size / kbase:.2f}x | "
            f"{lo:.2f} / {med:.2f} dB | {ra:.1f} | {seq:.1f} |"
        )
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")
    for p in work.iterdir():
        p.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
