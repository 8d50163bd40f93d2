#!/usr/bin/env python3
"""Reading through a mapping of the file: what it would gain on issue 19's two unmet rows.

Issue 19 asks two things the reader does not reach on the 2-vCPU VM it is
measured on: a one-frame lidar lookup in a file with MCAP's own codec
(plain LZ4, one decode thread) at >= 1.5x MCAP's lookup, and ``read()`` of
a camera frame with its CRC check at <= 1.3x a bare ``pread``. The reader
copies a frame's stored bytes out of the page cache with ``pread``, checks
their CRC32C, then decodes. A reader that mapped the file (``mmap``) would
skip the copy; one that trusted the bytes would skip the CRC. This bench
measures those variants in one process, interleaved round by round:

lidar, same codec as the MCAP file, one thread (baseline: mcap's lookup)
  reader            ``HyperframeReader(threads=1).read`` (bench_container's row)
  pread+decode      the stored bytes into a reused buffer, decoded: no CRC, no reader
  mapped+crc        from a mapping of the whole file whose pages are already mapped
                    (a frame read before): CRC, then decode
  mapped            the same without the CRC
  first touch+crc   mapped+crc with the frame's pages unmapped before each lookup
                    (``MADV_DONTNEED``, not timed; the page cache keeps them): a frame this
                    process reads for the first time, as most are in a training epoch
  first touch       the same without the CRC
camera, stored raw (baseline: a bare ``os.pread``)
  reader            ``HyperframeReader.read`` (CRC on)
  mapped copy+crc   copied out of the mapping, CRC checked (pages already mapped)
  mapped copy       the same without the CRC
  mapped view+crc   no copy: the frame would be a view into the mapping
  first touch+crc   copy + CRC, the frame's pages unmapped before each lookup

A mapping is not free of promises: an I/O error (a failing disk, a
network file system) or a file truncated while it is mapped arrives as
SIGBUS and kills the process, where ``pread`` raises an error the reader
turns into a typed one naming the file. See bench/README.md ("Issue 19,
eighth round").

    python bench/bench_mmap.py                  # 3 s recording, 7 rounds, ~1 minute
    python bench/bench_mmap.py --rounds 15 --picks 80

Camera frames are small next to the CPU's last-level cache: with too few
distinct picks they are read from the L3 and not from memory, and every
fixed cost looks twice its size (``--camera-picks``).
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_container as bc

from hyperframes.format.codecs import CodecSpec, decode_aligned
from hyperframes.format.crc import crc32c
from hyperframes.format.streams import SensorKind
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, synth_frames

Row = tuple[int, int, int, int, int, int, int]  # an index entry, as reader.index.item() gives it


class Mapped:
    """A read-only mapping of a whole file and the index entries of the frames it is asked for."""

    def __init__(self, fd: int, rows: dict[bc.Lookup, Row], itemsize: dict[int, int]) -> None:
        self.map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        self.view = memoryview(self.map)
        self.rows = rows
        self.itemsize = itemsize

    def stored(self, q: bc.Lookup, check: bool) -> tuple[memoryview, Row]:
        """The stored bytes of ``q`` as a view into the mapping (CRC checked when ``check``)."""
        row = self.rows[q]
        offset, size, crc = row[4], row[5], row[6]
        data = self.view[offset : offset + size]
        if check and crc32c(data) != crc:
            raise ValueError(f"CRC mismatch at offset {offset}")
        return data, row

    def decode(self, q: bc.Lookup, check: bool) -> np.ndarray:
        data, row = self.stored(q, check)
        return decode_aligned(data, row[1], self.itemsize[row[0]], bc.MAX_FRAME)

    def copy(self, q: bc.Lookup, check: bool = True) -> np.ndarray:
        data, _row = self.stored(q, check)
        return np.frombuffer(data, np.uint8).copy()

    def view_of(self, q: bc.Lookup) -> np.ndarray:
        data, _row = self.stored(q, True)
        return np.frombuffer(data, np.uint8)

    def unmap_pages(self, q: bc.Lookup) -> None:
        """Unmap ``q``'s pages from this process (the page cache keeps the data)."""
        offset, size = self.rows[q][4], self.rows[q][5]
        start = offset - offset % mmap.PAGESIZE
        self.map.madvise(mmap.MADV_DONTNEED, start, offset + size - start)

    def close(self) -> None:
        self.view.release()
        self.map.close()


def picks_of(
    reader: HyperframeReader, kind: SensorKind, n: int, rng: random.Random
) -> list[bc.Lookup]:
    """``n`` random (stream id, timestamp) lookups of frames of ``kind``."""
    streams = [s for s in reader.streams.values() if s.kind is kind]
    return bc.random_lookups(reader, streams, n, rng)


def report(
    title: str,
    baseline: str,
    variants: dict[str, Callable[[bc.Lookup], object]],
    picks: Sequence[bc.Lookup],
    rounds: int,
    before_each: Callable[[bc.Lookup], object] | None = None,
) -> None:
    """Medians per call, and each variant's speed against ``baseline`` per round (min/med/max)."""
    per_round: dict[str, list[float]] = {}
    med = bc.interleaved(variants, picks, rounds, before_each=before_each, per_round=per_round)
    print(f"\n{title}: {len(picks)} lookups x {rounds} rounds")
    print(f"  speed vs {baseline} per round (higher: faster)")
    print(f"  {'variant':<18} {'median':>10}   {'min':>6} {'median':>6} {'max':>6}")
    base = per_round[baseline]
    for name in variants:
        r = sorted(b / v for b, v in zip(base, per_round[name], strict=True))
        print(
            f"  {name:<18} {bc.us(med[name]):>10}   {r[0]:>5.2f}x {statistics.median(r):>5.2f}x "
            f"{r[-1]:>5.2f}x"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="recording length (default 3)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--picks", type=int, default=50, help="lidar lookups per round (default 50)")
    ap.add_argument(
        "--camera-picks",
        type=int,
        default=400,
        help="camera lookups per round (default 400: ~57 MB, more than a 32 MiB L3 holds)",
    )
    ap.add_argument("--workdir", type=Path, help="where files go (default: a temp dir, removed)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        from mcap.reader import make_reader
    except ImportError:
        print("mcap is not installed: pip install mcap")
        return 2

    prof = profile("vehicle")
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="hf-mmap-")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(
            f"mapped-read bench: profile {prof.name}, {args.seconds:g} s, {os.cpu_count()} CPUs, "
            f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
        )
        frames = list(synth_frames(prof, args.seconds, args.seed))
        hf_path, mcap_path = workdir / "same.hfr", workdir / "rec.mcap"
        arrays = {s.id: CodecSpec("lz4") for s in prof.streams if not s.precompressed}
        bc.write_hf(hf_path, prof, frames, arrays)  # MCAP's codec: plain LZ4, no shuffle
        bc.write_mcap(mcap_path, prof, frames, "lz4")
        del frames
        for p in (hf_path, mcap_path):
            bc.warm_cache(p)

        rng = random.Random(args.seed)
        names = {s.id: s.name for s in prof.streams}
        itemsize = {s.id: s.itemsize for s in prof.streams}
        with (
            HyperframeReader(hf_path, threads=1) as reader,
            open(mcap_path, "rb") as mf,
        ):
            fd = os.open(hf_path, os.O_RDONLY)
            mreader = make_reader(mf)
            mreader.get_summary()
            lidar = picks_of(reader, SensorKind.LIDAR, args.picks, rng)
            camera = picks_of(reader, SensorKind.CAMERA, args.camera_picks, rng)
            rows: dict[bc.Lookup, Row] = {
                q: reader.index.item(reader.find(*q)) for q in lidar + camera
            }
            warm, touched = Mapped(fd, rows, itemsize), Mapped(fd, rows, itemsize)
            try:

                def mcap(q: bc.Lookup) -> bytes:
                    it = mreader.iter_messages(
                        topics=[names[q[0]]],
                        starting_at=q[1],
                        ending_before=q[1] + 1,
                        log_time_order=False,
                    )
                    return next(it)[2].data

                def pread(q: bc.Lookup) -> bytes:
                    return os.pread(fd, rows[q][5], rows[q][4])

                for q in lidar[:3]:  # the same bytes every way
                    want = bytes(reader.read(*q).data)
                    assert bytes(mcap(q)) == want == bytes(warm.decode(q, True))
                    assert bytes(touched.decode(q, False)) == want
                for q in camera[:3]:
                    assert bytes(reader.read(*q).data) == pread(q) == bytes(warm.view_of(q))

                report(
                    "lidar, same codec as the MCAP file (plain LZ4), one thread",
                    "mcap",
                    {
                        "mcap": mcap,
                        "reader": lambda q: reader.read(*q),
                        "pread+decode": lambda q: bc.bare_decode(fd, rows, itemsize, q),
                        "mapped+crc": lambda q: warm.decode(q, True),
                        "mapped": lambda q: warm.decode(q, False),
                        "first touch+crc": lambda q: touched.decode(q, True),
                        "first touch": lambda q: touched.decode(q, False),
                    },
                    lidar,
                    args.rounds,
                    before_each=touched.unmap_pages,
                )
                report(
                    "camera, stored raw",
                    "pread",
                    {
                        "pread": pread,
                        "reader": lambda q: reader.read(*q),
                        "mapped copy+crc": warm.copy,
                        "mapped copy": lambda q: warm.copy(q, False),
                        "mapped view+crc": warm.view_of,
                        "first touch+crc": touched.copy,
                    },
                    camera,
                    args.rounds,
                    before_each=touched.unmap_pages,
                )
            finally:
                warm.close()
                touched.close()
                os.close(fd)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
