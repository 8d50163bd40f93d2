"""Point-cloud codecs compared: stored size, write (encode) cost and read (decode) cost.

Run by hand (bench/README.md, "Codecs"):

    python bench/bench_codecs.py                  # 16 vehicle lidar sweeps, 9 rounds
    python bench/bench_codecs.py --rounds 15 --codecs lz4+shuffle,blosc2-lz4+shuffle

Every variant encodes and decodes the same sweeps (``hyperframes synth``'s
``vehicle`` lidar, 120k points of xyzi float32: 1.9 MB) through
``hyperframes.format.codecs`` (what the writer and the reader call), into fresh
64-byte-aligned output as the reader does. Rounds alternate the variants in a
fresh random order; each round's time of a variant is set against the
baseline's time in the same round (``--baseline``, default the writer's codec
before codec 5: ``lz4+shuffle``); medians and the lowest / highest ratio of
single rounds are printed, decode on one and on two threads.

The last line is the per-block cost of the block codecs: 4 MiB of 4 KiB LZ4
blocks against the same bytes as one LZ4 block, both on one thread.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from hyperframes import synth
from hyperframes.format.codecs import CodecSpec, decode_aligned, encode_frame

_MAX = 1 << 30


def _spec(text: str) -> CodecSpec:
    name, plus, _ = text.partition("+shuffle")
    return CodecSpec.parse(name, shuffle=bool(plus))


def _sweeps(n: int) -> list[bytes]:
    stream = next(s for s in synth.profile("vehicle").streams if s.name == "lidar_top")
    gen = synth.make_generator(stream, 0)
    return [gen(i) for i in range(n)]


def _timed(fn: Callable[[], object], items: int, cpu: bool = False) -> float:
    """Microseconds per item: wall time, or this thread's CPU time with ``cpu``."""
    clock = time.thread_time if cpu else time.perf_counter
    t0 = clock()
    fn()
    return (clock() - t0) / items * 1e6


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f}x ({min(values):.2f}-{max(values):.2f})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sweeps", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument(
        "--codecs",
        default="lz4+shuffle,lz4,blosc2-lz4:1+shuffle,blosc2-lz4:5+shuffle,blosc2-lz4:9+shuffle,"
        "zstd:1+shuffle,blosc2-zstd:1+shuffle,blosc2-zstd:3+shuffle",
    )
    ap.add_argument("--baseline", default="lz4+shuffle")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--wall",
        dest="cpu",
        action="store_false",
        help="time writes and one-thread reads in wall time (default: the thread's CPU time, "
        "which a loaded machine disturbs less; two-thread reads are always wall time)",
    )
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    sweeps = _sweeps(args.sweeps)
    raw = sum(len(s) for s in sweeps)
    names = args.codecs.split(",")
    if args.baseline not in names:
        names.insert(0, args.baseline)
    specs = {n: _spec(n) for n in names}
    stored = {n: [encode_frame(s, specs[n], 4) for s in sweeps] for n in names}
    kinds = ("write", "read 1 thr", "read 2 thr")
    times: dict[tuple[str, str], list[float]] = {(n, k): [] for n in names for k in kinds}

    def write(n: str) -> Callable[[], object]:
        return lambda: [encode_frame(s, specs[n], 4) for s in sweeps]

    def read(n: str, threads: int) -> Callable[[], object]:
        return lambda: [decode_aligned(b, f, 4, _MAX, threads=threads) for b, f in stored[n]]

    for name in names:  # warm-up (imports, thread pool, page faults of the buffers)
        read(name, 2)()
        write(name)()
    for _ in range(args.rounds):
        order = [(n, k) for n in names for k in kinds]
        rng.shuffle(order)
        for n, k in order:
            fn = write(n) if k == "write" else read(n, 1 if k == "read 1 thr" else 2)
            times[n, k].append(_timed(fn, len(sweeps), cpu=args.cpu and k != "read 2 thr"))
    base = args.baseline
    print(
        f"{len(sweeps)} lidar sweeps of {len(sweeps[0]) / 1e6:.2f} MB, {args.rounds} rounds, "
        f"load {os.getloadavg()[0]:.1f}; times per sweep (median), ratio = {base} time / "
        "variant time in the same round (median, lowest-highest); "
        + ("write and read 1 thr in CPU time, " if args.cpu else "")
        + "read 2 thr in wall time"
    )
    head = f"{'codec':<24} {'size':>6} " + " ".join(
        f"{k + ' us':>10} {'vs base':>23}" for k in kinds
    )
    print(head)
    for n in names:
        size = sum(len(b) for b, _ in stored[n]) / raw
        cells = []
        for k in kinds:
            ratios = [b / v for b, v in zip(times[base, k], times[n, k], strict=True)]
            cells.append(f"{statistics.median(times[n, k]):10.0f} {_fmt(ratios):>23}")
        print(f"{n:<24} {size:6.3f} " + " ".join(cells))
    _block_overhead(args.rounds)
    return 0


def _block_overhead(rounds: int) -> None:
    rng = np.random.default_rng(0)
    data = np.cumsum(rng.integers(-3, 4, 1 << 20)).astype("<f4").tobytes()  # 4 MiB
    small = encode_frame(data, CodecSpec("lz4"), 4, block_size=4096)
    whole = encode_frame(data, CodecSpec("lz4"), 4, block_size=0)
    ratios, t_small, t_whole = [], [], []
    for _ in range(rounds * 3):
        a = _timed(lambda: decode_aligned(small[0], small[1], 4, _MAX, threads=1), 1, cpu=True)
        b = _timed(lambda: decode_aligned(whole[0], whole[1], 4, _MAX, threads=1), 1, cpu=True)
        t_small.append(a)
        t_whole.append(b)
        ratios.append(a / b)
    print(
        f"4 MiB in 1024 LZ4 blocks of 4 KiB vs one LZ4 block, 1 thread, CPU time: "
        f"{statistics.median(t_small) / 1e3:.2f} ms vs {statistics.median(t_whole) / 1e3:.2f} ms, "
        f"{statistics.median(ratios):.2f}x time ({min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
