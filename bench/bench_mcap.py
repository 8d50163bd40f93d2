#!/usr/bin/env python3
"""MCAP export benchmark: ``hyperframes export`` against the ``mcap`` library alone.

Run by hand (not part of the test suite)::

    python bench/bench_mcap.py [--seconds N] [--profile vehicle] [--repeats 5]

For each chunk compression (zstd, lz4, none), in one process, alternating
round by round:

- ``export``: :func:`hyperframes.mcap.export_mcap` of a synthetic recording,
  end to end: reading and decompressing the hyperframe file, Foxglove message
  encoding, the annotation topic, the MCAP writer, fsync and rename;
- ``mcap``: ``mcap.writer.Writer`` alone writing the same payload bytes
  (already in memory, no message encoding) with the same compression and
  chunk size, one channel per stream, then fsync: the floor of any MCAP
  export in Python;
- ``foxglove-sdk`` (when installed): its Rust MCAP writer on the same
  in-memory payloads, same compression and chunk size, then fsync.

MB/s is payload bytes (the frames' raw bytes) per wall-clock second; the
ratios are export / mcap and foxglove-sdk / mcap. "vs read+mcap" compares
export with the sum of reading the payloads from the hyperframe file alone
(``HyperframeReader``, window by window, from the page cache) and the bare
mcap write: the cost of message encoding and the annotation topic. Medians
over ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter

from hyperframes.mcap import export_mcap
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, write_synthetic

MB = 1e6
CHUNK = 4 << 20
COMPRESSIONS = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4,
                "none": CompressionType.NONE}  # fmt: skip

Frames = list[tuple[int, int, bytes]]  # (stream id, timestamp, payload) in time order


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_frames(path: Path) -> tuple[Frames, dict[int, str]]:
    with HyperframeReader(path) as r:
        order = r.index.argsort(order=["timestamp_ns", "stream_id"], kind="stable")
        frames = [(r.frame_at(int(i)).stream.id, int(r.index["timestamp_ns"][i]),
                   r.frame_at(int(i)).tobytes()) for i in order]  # fmt: skip
        return frames, {sid: s.name for sid, s in r.streams.items()}


def write_mcap(out: Path, frames: Frames, names: dict[int, str], compression: str) -> None:
    with open(out, "wb") as f:
        w = McapWriter(f, chunk_size=CHUNK, compression=COMPRESSIONS[compression])
        w.start()
        schema = w.register_schema("raw", "", b"")
        chans = {sid: w.register_channel("/" + n, "", schema) for sid, n in names.items()}
        for sid, ts, payload in frames:
            w.add_message(chans[sid], ts, payload, ts)
        w.finish()  # type: ignore[no-untyped-call]  # mcap's Writer.finish has no annotations
    _fsync(out)


def read_all(path: Path) -> int:
    """Every payload of the file, read and decoded as export reads them (one window at a time)."""
    n = 0
    with HyperframeReader(path) as r:
        for hf in r:
            n += sum(len(f.data) for frames in hf.frames.values() for f in frames)
    return n


def foxglove_writer() -> Callable[[Path, Frames, dict[int, str], str], None] | None:
    try:
        import foxglove
        from foxglove.mcap import MCAPCompression, MCAPWriteOptions
    except ImportError:
        return None
    modes = {"zstd": MCAPCompression.Zstd, "lz4": MCAPCompression.Lz4, "none": None}

    def write(out: Path, frames: Frames, names: dict[int, str], compression: str) -> None:
        ctx = foxglove.Context()
        opts = MCAPWriteOptions(compression=modes[compression], chunk_size=CHUNK)
        schema = foxglove.Schema(name="raw", encoding="", data=b"")
        with foxglove.open_mcap(out, context=ctx, writer_options=opts):
            chans = {sid: foxglove.Channel("/" + n, schema=schema, message_encoding="raw",
                                           context=ctx) for sid, n in names.items()}  # fmt: skip
            for sid, ts, payload in frames:
                chans[sid].log(payload, log_time=ts)
        _fsync(out)

    return write


def timed(fn: Callable[[], object], out: Path) -> float:
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="recording length (default 3)")
    ap.add_argument("--profile", default="vehicle", help="synth profile (default vehicle)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds per compression (default 5)")
    ap.add_argument("--workdir", type=Path, help="keep files here (default: a temp dir)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hf-bench-mcap-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        hf = work / "rec.hf"
        hf.unlink(missing_ok=True)
        write_synthetic(str(hf), profile(args.profile), args.seconds)
        frames, names = load_frames(hf)
        payload = sum(len(p) for _s, _t, p in frames)
        print(f"{args.profile}, {args.seconds:g} s: {len(frames)} frames, {payload / MB:.0f} MB "
              f"of payload, {len(names)} streams, chunks of {CHUNK >> 20} MiB, "
              f"median of {args.repeats}")  # fmt: skip
        fox = foxglove_writer()
        t_read = statistics.median(timed(partial(read_all, hf), work / "none") for _ in range(3))
        print(
            f"reading the payloads from the hyperframe file alone: {payload / t_read / MB:.0f} MB/s"
        )
        print(
            f"{'compression':<12} {'export MB/s':>12} {'mcap MB/s':>10} {'ratio':>6} "
            f"{'vs read+mcap':>12}" + (f" {'foxglove-sdk MB/s':>18} {'ratio':>6}" if fox else "")
        )
        for comp in COMPRESSIONS:
            t_exp: list[float] = []
            t_mcap: list[float] = []
            t_fox: list[float] = []
            for _ in range(args.repeats):
                out, base, fo = work / "export.mcap", work / "mcap.mcap", work / "fox.mcap"
                export = partial(export_mcap, [hf], out, compression=comp, chunk_size=CHUNK)
                t_exp.append(timed(export, out))
                size = out.stat().st_size
                t_mcap.append(timed(partial(write_mcap, base, frames, names, comp), base))
                if fox is not None:
                    t_fox.append(timed(partial(fox, fo, frames, names, comp), fo))
            e, m = payload / statistics.median(t_exp) / MB, payload / statistics.median(t_mcap) / MB
            both = (t_read + statistics.median(t_mcap)) / statistics.median(t_exp)
            line = f"{comp:<12} {e:>12.0f} {m:>10.0f} {e / m:>6.2f} {both:>12.2f}"
            if fox is not None:
                fx = payload / statistics.median(t_fox) / MB
                line += f" {fx:>18.0f} {fx / m:>6.2f}"
            print(line + f"   (export file {size / MB:.0f} MB)")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
