#!/usr/bin/env python3
"""Drive benchmark: a run of many segments against one segment, ``cp`` and a bare listing.

Run by hand (not part of the test suite)::

    python bench/bench_drive.py [--minutes 60] [--camera-kb 10] [--ls-segments 1000]

1. ``Drive.read(stream, t)`` against ``HyperframeReader.read`` on the
   segment that holds the frame, already open (goal: within 1.2x), per
   stream, the same timestamps, interleaved round by round.
2. ``slice`` of one minute (across a segment boundary) out of the whole run
   against ``cp`` of the output's bytes (goal: within 2x); slice fsyncs and
   verifies its output, so ``cp`` + fsync is shown too.
3. ``open_drive`` and ``ls --json`` of ``--ls-segments`` small segments,
   against ``os.scandir`` + ``stat`` of the same directory.

Every number is a median over repeats; ratios are against a baseline
measured in the same run. Files are read from the page cache (just written).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hyperframes import FileMetadata, SensorKind, StreamInfo
from hyperframes.drive import open_drive
from hyperframes.drive.splice import slice_drive
from hyperframes.format.naming import segment_name
from hyperframes.reader import HyperframeReader
from hyperframes.writer import HyperframeWriter

T0 = 1_735_689_600_000_000_000
WINDOW_NS = 100_000_000
STREAMS = [
    StreamInfo(0, "cam_front", SensorKind.CAMERA, "jpeg", rate_hz=10.0),
    StreamInfo(1, "lidar_top", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
    StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", rate_hz=100.0),
]


def write_run(directory: Path, minutes: int, camera_kb: int, seconds_per_segment: int = 60) -> None:
    """``minutes`` of camera (JPEG-sized random bytes), lidar (2,000 points) and IMU."""
    rng = np.random.default_rng(0)
    cam = rng.integers(0, 256, camera_kb * 1024, dtype=np.uint8).tobytes()
    sweep = np.round(rng.normal(0, 10, (2000, 4)), 2).astype("<f4")
    for seg in range(minutes * 60 // seconds_per_segment):
        t_seg = T0 + seg * seconds_per_segment * 1_000_000_000
        name = directory / segment_name("car-7", t_seg, seg)
        with HyperframeWriter(name, STREAMS, WINDOW_NS, FileMetadata("car-7", "bench", seg)) as w:
            for k in range(seconds_per_segment * 100):  # 10 ms steps
                t = t_seg + k * 10_000_000 + 1
                if k % 10 == 0:
                    w.append(0, t, cam[k % 100 :] + cam[: k % 100])
                    w.append(1, t + 1, sweep)
                w.append(2, t + 2, np.full(6, k, "<f8"))


def median_time(fn: Callable[[], object], repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def bench_read(directory: Path, queries: int, rounds: int) -> None:
    print(f"\n1. Drive.read vs HyperframeReader.read on the holding segment ({queries} queries)")
    drive = open_drive(directory, max_open=1024)
    readers = [HyperframeReader(s.path) for s in drive.segments]
    rng = random.Random(1)
    ts = [rng.randrange(drive.start_ns, drive.end_ns) for _ in range(queries)]
    for name in ("imu", "lidar_top", "cam_front"):
        holder = [readers[drive.find(name, t).segment] for t in ts]
        for t in ts:  # warm both: every segment's index loaded, pages cached
            drive.read(name, t)

        def on_drive(name: str = name) -> None:
            for t in ts:
                drive.read(name, t)

        def on_reader(name: str = name, holder: list[HyperframeReader] = holder) -> None:
            for r, t in zip(holder, ts, strict=True):
                r.read(name, t)

        d_times: list[float] = []
        r_times: list[float] = []
        for k in range(rounds):  # alternate which goes first: no order bias
            for fn, out in ((on_drive, d_times), (on_reader, r_times))[:: 1 if k % 2 else -1]:
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
        ratios = [a / b for a, b in zip(d_times, r_times, strict=True)]
        d, r = statistics.median(d_times), statistics.median(r_times)
        print(
            f"  {name:<10} drive {d / queries * 1e6:7.1f} us  reader {r / queries * 1e6:7.1f} us"
            f"  ratio {statistics.median(ratios):.2f}x (per round {min(ratios):.2f}-"
            f"{max(ratios):.2f}; goal <= 1.2x)"
        )
    drive.close()
    for reader in readers:
        reader.close()


def bench_slice(directory: Path, out_dir: Path, repeats: int) -> None:
    drive = open_drive(directory)
    mid = drive.start_ns + (drive.end_ns - drive.start_ns) // 2 - 30_000_000_000
    print(f"\n2. slice of 1 minute (across a boundary) out of {drive.size / 1e6:.0f} MB vs cp")
    out = out_dir / "minute.hf"

    def do_slice() -> None:
        slice_drive(drive, mid, mid + 60_000_000_000, out, overwrite=True)

    def do_cp() -> None:
        subprocess.run(["cp", str(out), str(out_dir / "copy.hf")], check=True)

    def do_cp_sync() -> None:
        do_cp()
        fd = os.open(out_dir / "copy.hf", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    do_slice()
    s = median_time(do_slice, repeats)
    c = median_time(do_cp, repeats)
    cs = median_time(do_cp_sync, repeats)
    size = out.stat().st_size
    print(
        f"  slice {s:.3f} s ({size / 1e6:.0f} MB out, verified)  cp {c:.3f} s  cp+fsync {cs:.3f} s"
    )
    print(f"  ratio slice/cp {s / c:.2f}x, slice/(cp+fsync) {s / cs:.2f}x (goal <= 2x)")
    drive.close()


def bench_ls(root: Path, segments: int, repeats: int) -> None:
    print(f"\n3. {segments} segments: open_drive and ls --json vs scandir + stat")
    d = root / "many"
    d.mkdir()
    for seg in range(segments):
        t = T0 + seg * 1_000_000_000
        name = d / segment_name("car-7", t, seg)
        with HyperframeWriter(name, STREAMS[2:], WINDOW_NS, FileMetadata("car-7", "b", seg)) as w:
            for k in range(10):
                w.append(2, t + k * 100_000_000 + 1, np.zeros(6, "<f8"))

    def listing() -> None:
        with os.scandir(d) as it:
            for e in it:
                e.stat()

    def opening() -> None:
        open_drive(d).close()

    def ls_cmd() -> None:
        from hyperframes.cli.main import main

        with open(os.devnull, "w") as null:
            old, sys.stdout = sys.stdout, null
            try:
                main(["ls", str(d), "--json"])
            finally:
                sys.stdout = old

    base = median_time(listing, repeats)
    o = median_time(opening, repeats)
    ls = median_time(ls_cmd, repeats)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hyperframes.cli", "ls", str(d)],
        check=True,
        capture_output=True,
    )
    whole = time.perf_counter() - t0
    print(f"  scandir+stat {base * 1e3:.1f} ms  open_drive {o * 1e3:.1f} ms ({o / base:.1f}x)")
    print(
        f"  ls --json in process {ls * 1e3:.1f} ms ({ls / base:.1f}x); as a command {whole:.2f} s"
    )
    print("  open_drive reads each segment's 512-byte header; ls adds each window table")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--camera-kb", type=int, default=10)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--ls-segments", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-drive-", dir=args.workdir))
    try:
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min)")
        t = time.perf_counter()
        run = root / "run"
        run.mkdir()
        write_run(run, args.minutes, args.camera_kb)
        print(f"wrote {args.minutes} segments of 60 s in {time.perf_counter() - t:.1f} s")
        bench_read(run, args.queries, args.rounds)
        bench_slice(run, root, 5)
        bench_ls(root, args.ls_segments, 5)
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
