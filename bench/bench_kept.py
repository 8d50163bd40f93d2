"""Frames a caller keeps: large reads held in batches, glibc's malloc defaults vs tuned.

A training loop, ``read_range``, ``get_window`` or a map built from lidar
sweeps keeps several large frames alive and then drops them together.
glibc may then give the freed top of its heap back to the kernel, and the
next frames fault every page in again. This bench reads random lidar sweeps
and camera frames of a ``vehicle`` recording, keeping them in batches of
1-16, each variant in a fresh process (a busy heap hides the effect):

- ``default``: glibc's own thresholds (dynamic mmap threshold, trim at 2x it),
- ``tuned``: ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:``
  ``glibc.malloc.trim_threshold=268435456`` (docs/TRAINING.md),
- ``trim only``: the trim threshold alone, which also freezes the mmap
  threshold at 128 KiB (every large buffer mapped and faulted afresh),

alternating, and prints per-read medians, page faults per read and the
ratio default / tuned.

    python bench/bench_kept.py                 # 5 s recording, 5 repeats, ~1.5 minutes
    python bench/bench_kept.py --repeats 9 --workdir /var/tmp/hfk
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hyperframes.synth import profile, write_synthetic

BATCHES = (1, 2, 4, 8, 16)
TUNED = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
VARIANTS = {
    "default": None,
    "tuned": TUNED,
    "trim only": "glibc.malloc.trim_threshold=268435456",
}

# Runs in a fresh interpreter: argv = path, kind, seed; prints {batch: [[median ns, faults/read]]}
_CHILD = """
import json, random, resource, statistics, sys, time
from hyperframes.reader import HyperframeReader

path, kind, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
out = {}
with HyperframeReader(path, threads=1) as r:
    rows = [i for s in r.streams if r.streams[s].kind.value == kind
            for i in range(*r.stream_slice(s))]
    for _ in range(3):  # rounds; the batch sizes in a new order each round
        for batch in rng.sample(BATCHES, len(BATCHES)):
            picks = rng.sample(rows, min(32, len(rows)))
            times, kept = [], []
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for i in picks:
                t0 = time.perf_counter_ns()
                kept.append(r.frame_at(i))
                times.append(time.perf_counter_ns() - t0)
                if len(kept) == batch:
                    kept = []
            kept = []
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            out.setdefault(batch, []).append((statistics.median(times), faults / len(picks)))
print(json.dumps(out))
"""


def run_child(
    path: Path, kind: str, seed: int, tunables: str | None
) -> dict[int, list[list[float]]]:
    """One variant in a fresh interpreter: per batch size, (median ns, faults/read) a round."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    code = f"BATCHES = {BATCHES!r}\n" + _CHILD
    res = subprocess.run(
        [sys.executable, "-c", code, str(path), kind, str(seed)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {int(k): v for k, v in json.loads(res.stdout).items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="recording length (default 5)")
    ap.add_argument("--repeats", type=int, default=5, help="processes per variant (default 5)")
    ap.add_argument("--workdir", type=Path, help="keep the recording here (default: temp dir)")
    args = ap.parse_args(argv)

    own = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="hf-kept-")) if own else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "vehicle.hf"
    try:
        if not path.exists():
            write_synthetic(str(path), profile("vehicle"), args.seconds, seed=0)
        with path.open("rb") as f:  # page cache warm for every variant
            while f.read(1 << 24):
                pass
        print(
            f"frames kept in batches: {path} ({path.stat().st_size / 1e6:.0f} MB), "
            f"{args.repeats} processes per variant, load {os.getloadavg()[0]:.2f}"
        )
        head = "".join(f"{name:>16}{'faults':>8}" for name in VARIANTS)
        print(f"{'kind':<8}{'batch':>6}{head}{'default/tuned':>15}")
        names = list(VARIANTS)
        for kind in ("lidar", "camera"):
            runs: dict[str, dict[int, list[list[float]]]] = {n: {} for n in names}
            for rep in range(args.repeats):
                for name in names[rep % len(names) :] + names[: rep % len(names)]:
                    for b, rounds in run_child(path, kind, rep, VARIANTS[name]).items():
                        runs[name].setdefault(b, []).extend(rounds)
            for b in BATCHES:
                cells, med = "", {}
                for name in names:
                    med[name] = statistics.median(t for t, _ in runs[name][b])
                    faults = statistics.median(f for _, f in runs[name][b])
                    cells += f"{med[name] / 1e3:>13.0f} us{faults:>8.0f}"
                print(f"{kind:<8}{b:>6}{cells}{med['default'] / med['tuned']:>14.2f}x")
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
