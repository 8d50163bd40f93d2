#!/usr/bin/env python3
"""Converter benchmark: sizes after conversion and converter speed, as ratios.

Run by hand (not part of the test suite)::

    python bench/bench_convert.py [--seconds 1] [--repeats 3] [--psnr-floor 35]
                                  [--preset fast] [--quality 28] [--workdir DIR]

On a ``hyperframes synth --profile vehicle`` archive (6 cameras 1600x900 JPEG
q90 at 30 Hz, a camera-like textured scene under a slow pan and zoom with
noise of sigma 2; a 10 Hz 120k-point lidar, a 200 Hz IMU), with the default
conversion config (``--preset``/``--quality``/``--psnr-floor`` change it):

1. Sizes: the converted file as a ratio to the input and to the same frames
   in MCAP with zstd chunks (mcap's writer, 1 MiB chunks, level 3); camera
   bytes as a ratio to the JPEG input at the PSNR reached (min/median of the
   verification sample); lidar and IMU bytes as a ratio to the input
   (LZ4 + shuffle as recorded) and to the raw payloads.
2. Speed: converter camera frames/s (``convert_archive`` end to end: read,
   encode, lossless ZSTD, write, verify, publish) as a ratio to bare encoding
   of the same frames (``hyperframes.video.encode_pictures`` per camera from
   JPEG bytes already in memory, same encoder settings, the cameras on the
   same number of threads, no container I/O, no verification). Converter and
   bare runs alternate; medians over ``--repeats``. Archives/hour is the
   converter's rate applied to a 60 s archive.
3. CPU time against the ``ffmpeg`` CLI doing the same encode: per camera,
   ``ffmpeg`` reads the same JPEG frames (MJPEG), converts them to BT.709
   limited 4:2:0 and encodes them with libx265 at the same preset, CRF and
   x265-params, IDRs forced on the same frames the converter's IDR plan
   picks. The ratio is ffmpeg's CPU seconds (user + system of the
   children) over the converter's (``convert_archive`` end to end, every
   thread of this process: cameras, lossless streams, the per-frame check,
   verification); >= 0.95x is the target. Alternated with the other runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from hyperframes.converter._camera import open_encoder
from hyperframes.converter.config import ConvertConfig, VerifyConfig, VideoConfig
from hyperframes.converter.convert import ConversionResult, convert_archive
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, write_synthetic
from hyperframes.video import IdrPlanner, decode_jpeg, encode_pictures, plan_idrs
from hyperframes.video._x265 import x265_params
from hyperframes.video.encode import EncoderSettings

try:
    from mcap.writer import CompressionType
    from mcap.writer import Writer as McapWriter
except ImportError:  # pragma: no cover - the bench extra
    McapWriter = None  # type: ignore[assignment,misc]


def write_mcap(path: Path, reader: HyperframeReader) -> int:
    """Every frame of ``reader`` (decoded payloads) into MCAP with zstd chunks; returns bytes."""
    with open(path, "wb") as f:
        w = McapWriter(f, compression=CompressionType.ZSTD)  # 1 MiB chunks, level 3
        w.start(profile="", library="hyperframes-bench")
        ch = {
            s.id: w.register_channel(s.name, "application/octet-stream", 0)
            for s in reader.streams.values()
        }
        for window in reader:
            for frames in window.frames.values():
                for fr in frames:
                    w.add_message(
                        ch[fr.stream_id],
                        log_time=fr.timestamp_ns,
                        data=fr.tobytes(),
                        publish_time=fr.timestamp_ns,
                        sequence=fr.stream_index,
                    )
        w.finish()  # type: ignore[no-untyped-call]  # mcap's Writer.finish has no annotations
    return path.stat().st_size


def camera_frames(reader: HyperframeReader) -> dict[int, list[tuple[int, bytes]]]:
    """(timestamp, JPEG bytes) per camera stream, in index order."""
    out: dict[int, list[tuple[int, bytes]]] = {}
    for sid, s in reader.streams.items():
        if str(s.kind) == "camera":
            out[sid] = [(f.timestamp_ns, f.tobytes()) for f in reader.frames(sid)]
    return out


def bare_encode(
    frames: dict[int, list[tuple[int, bytes]]], cfg: ConvertConfig, window_ns: int, rate: float
) -> tuple[float, int]:
    """Encode every camera's frames with encode_pictures, cameras on threads; (wall s, bytes)."""

    def one(items: list[tuple[int, bytes]]) -> int:
        h, w = decode_jpeg(items[0][1]).shape[:2]
        enc = open_encoder(cfg.video.encoder, w, h, rate, cfg.video, cfg.video.max_gop)
        planner = IdrPlanner(window_ns, k=cfg.video.k, max_gop=cfg.video.max_gop)
        n = sum(len(f.data) for f in encode_pictures(items, enc, planner))
        enc.close()
        return n

    threads = cfg.video.threads or len(frames)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, frames.values()))
    return time.perf_counter() - t0, total


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ffmpeg_inputs(
    work: Path, frames: dict[int, list[tuple[int, bytes]]], cfg: ConvertConfig, window_ns: int
) -> list[tuple[Path, list[int], int, int]]:
    """Per camera: an MJPEG file of its frames, its IDR positions and picture size."""
    out = []
    for sid, items in frames.items():
        path = work / f"cam{sid}.mjpeg"
        path.write_bytes(b"".join(j for _, j in items))
        idrs = plan_idrs([t for t, _ in items], window_ns, cfg.video.k, cfg.video.max_gop)
        h, w = decode_jpeg(items[0][1]).shape[:2]
        out.append((path, [i for i, x in enumerate(idrs) if x], w, h))
    return out


def ffmpeg_encode(
    inputs: list[tuple[Path, list[int], int, int]], cfg: ConvertConfig, rate: float
) -> tuple[float, int]:
    """The same encode with the ffmpeg CLI, one camera after the other: (CPU s, bytes)."""
    total = 0
    before = children_cpu()
    for path, idrs, w, h in inputs:
        settings = EncoderSettings(
            w, h, rate_hz=rate, max_gop=cfg.video.max_gop, quality=cfg.video.quality
        )
        out = path.with_suffix(".hevc")
        keys = ",".join(f"{i / rate:.6f}" for i in idrs)
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-f", "mjpeg", "-framerate", f"{rate:g}",
             "-i", str(path), "-vf",
             "scale=in_range=full:out_range=tv:in_color_matrix=bt601:out_color_matrix=bt709,"
             "format=yuv420p",
             "-c:v", "libx265", "-preset", cfg.video.x265_preset, "-tune", "zerolatency",
             "-forced-idr", "1", "-force_key_frames", keys,
             "-x265-params", x265_params(settings), "-f", "hevc", str(out)],
            check=True,
        )  # fmt: skip
        total += out.stat().st_size
    return children_cpu() - before, total


def row(label: str, value: str, base: str = "", ratio: str = "", target: str = "") -> str:
    return f"| {label:<58} | {value:>14} | {base:>14} | {ratio:>8} | {target:>8} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--psnr-floor", type=float, default=35.0)
    ap.add_argument("--preset", default=None, help="x265 preset (default: the config's, fast)")
    ap.add_argument("--quality", type=int, default=None)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()

    video = VideoConfig()
    if args.preset:
        video = replace(video, x265_preset=args.preset)
    if args.quality is not None:
        video = replace(video, quality=args.quality)
    cfg = ConvertConfig(video=video, verify=VerifyConfig(psnr_floor_db=args.psnr_floor))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hf-bench-convert-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "vehicle.hf"
    if not src.exists():
        t = time.perf_counter()
        write_synthetic(str(src), profile("vehicle"), args.seconds)
        print(
            f"synth: {src} ({src.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s"
        )
    with HyperframeReader(src) as r:
        frames = camera_frames(r)
        window_ns = r.window_ns
        rate = next(iter(r.streams.values())).rate_hz or 30.0
        mcap_bytes = write_mcap(work / "vehicle.mcap", r) if McapWriter is not None else None
        raw_bytes: dict[str, int] = {}
        for sid, s in r.streams.items():
            raw_bytes[str(s.kind)] = raw_bytes.get(str(s.kind), 0) + sum(
                len(f.data) for f in r.frames(sid)
            )
    n_cam = sum(len(v) for v in frames.values())
    ff_inputs = ffmpeg_inputs(work, frames, cfg, window_ns) if shutil.which("ffmpeg") else []
    conv_t: list[float] = []
    bare_t: list[float] = []
    conv_cpu: list[float] = []
    ff_cpu: list[float] = []
    ff_bytes = 0
    result: ConversionResult | None = None
    bare_bytes = 0
    for k in range(args.repeats):
        out = work / f"out{k}"
        shutil.rmtree(out, ignore_errors=True)
        t, c = time.perf_counter(), time.process_time()
        result = convert_archive(src, out, cfg)
        conv_t.append(time.perf_counter() - t)
        conv_cpu.append(time.process_time() - c)
        if ff_inputs:
            cpu, ff_bytes = ffmpeg_encode(ff_inputs, cfg, rate)
            ff_cpu.append(cpu)
        wall, bare_bytes = bare_encode(frames, cfg, window_ns, rate)
        bare_t.append(wall)
        ff = (
            f", ffmpeg CLI {ff_cpu[-1]:.1f} s CPU ({ff_cpu[-1] / conv_cpu[-1]:.3f}x)"
            if ff_cpu
            else ""
        )
        print(
            f"  round {k + 1}: converter {conv_t[-1]:.1f} s (write {result.write_seconds:.1f} "
            f"+ verify {result.verify_seconds:.1f}; {conv_cpu[-1]:.1f} s CPU){ff}, "
            f"bare encoding {wall:.1f} s"
        )
    assert result is not None
    conv, bare = statistics.median(conv_t), statistics.median(bare_t)
    kinds: dict[str, list[int]] = {}
    cams = []
    for sr in result.streams:
        k_ = kinds.setdefault(sr.kind, [0, 0])
        k_[0] += sr.bytes_in
        k_[1] += sr.bytes_out
        if sr.quality:
            cams.append((sr.quality["psnr_min_db"], sr.quality["psnr_median_db"]))
    psnr_min = min(c[0] for c in cams)
    psnr_med = statistics.median(c[1] for c in cams)

    print(
        f"\nvehicle profile, {args.seconds:g} s: {n_cam} camera frames, "
        f"{result.bytes_in / 1e6:.1f} MB in; {os.cpu_count()} CPUs; preset "
        f"{cfg.video.x265_preset}, CRF {cfg.video.quality}, k {cfg.video.k}; medians of "
        f"{args.repeats}\n"
    )
    print(row("measurement", "converter", "baseline", "ratio", "target"))
    print(row("-" * 58, "-" * 14, "-" * 14, "-" * 8, "-" * 8))

    def mb(n: float) -> str:
        return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"

    print(
        row(
            "file size vs input",
            mb(result.bytes_out),
            mb(result.bytes_in),
            f"{result.bytes_out / result.bytes_in:.3f}x",
        )
    )
    if mcap_bytes:
        print(
            row(
                "file size vs MCAP, zstd chunks (same input frames)",
                mb(result.bytes_out),
                mb(mcap_bytes),
                f"{result.bytes_out / mcap_bytes:.3f}x",
            )
        )
    c_in, c_out = kinds["camera"]
    print(
        row(
            f"camera vs JPEG input (PSNR min {psnr_min:.1f} / median {psnr_med:.1f} dB)",
            mb(c_out),
            mb(c_in),
            f"{c_out / c_in:.4f}x",
        )
    )
    print(
        row(
            "  camera, bare encoding of the same frames",
            mb(bare_bytes),
            mb(c_in),
            f"{bare_bytes / c_in:.4f}x",
        )
    )
    for kind in ("lidar", "imu"):
        a, b = kinds[kind]
        print(
            row(f"{kind} vs input (lz4+shuffle -> zstd:3+shuffle)", mb(b), mb(a), f"{b / a:.3f}x")
        )
        print(
            row(
                f"  {kind} vs raw payloads",
                mb(b),
                mb(raw_bytes[kind]),
                f"{b / raw_bytes[kind]:.3f}x",
            )
        )
    fps_c, fps_b = n_cam / conv, n_cam / bare
    print(
        row(
            "camera frames/s: converter vs bare encoding",
            f"{fps_c:.2f}",
            f"{fps_b:.2f}",
            f"{fps_c / fps_b:.3f}x",
            ">= 0.909x",
        )
    )
    write_s = result.write_seconds
    print(
        row(
            "  converter without verification (last round)",
            f"{n_cam / write_s:.2f}",
            f"{fps_b:.2f}",
            f"{(n_cam / write_s) / fps_b:.3f}x",
        )
    )
    if ff_cpu:
        cc, fc = statistics.median(conv_cpu), statistics.median(ff_cpu)
        print(
            row(
                "CPU s: ffmpeg CLI (same encode) / converter (all of it)",
                f"{cc:.1f} s",
                f"{fc:.1f} s",
                f"{fc / cc:.3f}x",
                ">= 0.95x",
            )
        )
        rounds = sorted(f / c for f, c in zip(ff_cpu, conv_cpu, strict=True))
        mid = statistics.median(rounds)
        print(row(f"  per round (min / max / median of {len(rounds)})",
                  f"{rounds[0]:.3f}x", f"{rounds[-1]:.3f}x", f"{mid:.3f}x"))  # fmt: skip
        print(row("  camera bytes: converter vs ffmpeg CLI", mb(c_out), mb(ff_bytes),
                  f"{c_out / ff_bytes:.3f}x"))  # fmt: skip
    per_archive = conv * 60.0 / args.seconds
    print(
        row(
            "archives/hour (60 s vehicle archives, default config)",
            f"{3600 / per_archive:.2f}",
            "",
            "",
            "info",
        )
    )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
