#!/usr/bin/env python3
"""Training-input benchmark: hyperframes.torch datasets through a real DataLoader.

Run by hand (not part of the test suite)::

    python bench/bench_dataset.py [--seconds 5] [--video-seconds 3] [--video-cameras 2]
                                  [--repeats 3] [--workers 2] [--workdir DIR]

Every line is a ratio against a baseline measured in the same run, on the
same frames, alternated round by round (same sample order per round for
every variant), reported as the median over ``--repeats`` epochs. Workers are
persistent and warmed up by one untimed epoch; every file is read once
before timing (page cache). See bench/README.md ("Training input").

1. Samples/s of ``HyperframeDataset`` (a ``vehicle`` recording: 6 cameras
   1600x900 JPEG, lidar, IMU; one sample per 100 ms window, JPEG decoded with
   simplejpeg in the workers) vs the same frames loaded from one file per frame
   (``.jpg``/``.npy``, a manifest per window: the image-folder layout) and from
   the same recording in MCAP (``iter_messages`` over the window's time range,
   lz4 chunks). Same decode, same collate, same sampler. Again with the lidar
   and IMU only (no JPEG decode): the loading path without the decoder.
2. H.265 cameras (the vehicle's cameras encoded with x265, an IDR every 3rd
   window): random-window samples/s and sequence (clip) samples/s, decoded on
   the CPU in the workers, vs decoding each camera from the start of its stream
   up to the frames needed (no keyframe index); ``decode="gpu"`` with NVDEC in
   the main process where a GPU is present.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import simplejpeg
import torch
from torch.utils.data import DataLoader, Dataset

from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.synth import PROFILES, write_synthetic
from hyperframes.torch import (
    GpuVideoDecoder,
    HyperframeDataset,
    SequenceDataset,
    WindowSampler,
    tune_malloc,
)
from hyperframes.torch import collate as hf_collate
from hyperframes.video import (
    EncoderSettings,
    IdrPlanner,
    create_decoder,
    create_encoder,
    encode_pictures,
)
from hyperframes.video._nvprobe import probe
from hyperframes.writer import HyperframeWriter

try:
    from mcap.reader import make_reader
    from mcap.writer import CompressionType
    from mcap.writer import Writer as McapWriter
except ImportError:  # pragma: no cover - the bench says so and skips the MCAP line
    McapWriter = None  # type: ignore[assignment,misc]

Sample = dict[str, Any]


# --- the same sample layout for every baseline ------------------------------------------


def make_sample(
    window_id: int, frames: dict[str, tuple[str, list[tuple[int, np.ndarray]]]]
) -> Sample:
    """A window sample as hyperframes.torch builds it: kind -> stream -> data/timestamps/masks."""
    s: Sample = {"file": "", "window": 0, "window_id": window_id, "start_ns": 0, "end_ns": 0}
    for name, (kind, items) in frames.items():
        s.setdefault(kind, {})[name] = {
            "data": [torch.from_numpy(a) for _, a in items],
            "timestamp_ns": torch.tensor([t for t, _ in items], dtype=torch.int64),
            "is_pad": torch.zeros(len(items), dtype=torch.bool),
            "missing": not items,
        }
    return s


def decode_payload(stream: StreamInfo, data: bytes | np.ndarray) -> np.ndarray:
    if stream.encoding == "jpeg":
        rgb: np.ndarray = simplejpeg.decode_jpeg(data, colorspace="RGB")  # untyped module
        return rgb
    arr = np.frombuffer(data, np.dtype(stream.dtype)).copy()  # bytes are read-only
    return arr.reshape(stream.shape) if stream.shape is not None else arr


class FilesDataset(Dataset[Sample]):
    """One file per frame (``.jpg`` as stored, arrays as ``.npy``) and a manifest per window."""

    def __init__(self, root: Path, streams: list[StreamInfo], manifest: list[Any]) -> None:
        self.root, self.streams, self.manifest = root, streams, manifest

    def __len__(self) -> int:
        return len(self.manifest)

    def __getitem__(self, i: int) -> Sample:
        wid, per_stream = self.manifest[i]
        frames = {}
        for s in self.streams:
            items = []
            for ts, rel in per_stream[s.name]:
                p = self.root / rel
                if s.encoding == "jpeg":
                    items.append((ts, simplejpeg.decode_jpeg(p.read_bytes(), colorspace="RGB")))
                else:
                    items.append((ts, np.load(p)))
            frames[s.name] = (str(s.kind), items)
        return make_sample(wid, frames)


class McapDataset(Dataset[Sample]):
    """The same recording in MCAP: each window is an ``iter_messages`` over its time range."""

    def __init__(self, path: Path, streams: list[StreamInfo], windows: list[tuple[int, int, int]]):
        self.path, self.streams, self.windows = path, streams, windows
        self._reader: Any = None
        self._pid = -1

    def __len__(self) -> int:
        return len(self.windows)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_reader": None, "_pid": -1}

    def __getitem__(self, i: int) -> Sample:
        if self._reader is None or self._pid != os.getpid():
            self._reader = make_reader(open(self.path, "rb"))  # noqa: SIM115 - one per worker
            self._pid = os.getpid()
        wid, start, end = self.windows[i]
        by_topic = {s.name: s for s in self.streams}
        items: dict[str, list[tuple[int, np.ndarray]]] = {s.name: [] for s in self.streams}
        for _, channel, message in self._reader.iter_messages(
            topics=list(by_topic), starting_after=start, ending_at=end, log_time_order=True
        ):
            s = by_topic[channel.topic]
            items[s.name].append((message.log_time, decode_payload(s, message.data)))
        return make_sample(wid, {s.name: (str(s.kind), items[s.name]) for s in self.streams})


class FromStartDataset(Dataset[Sample]):
    """H.265 without a keyframe index: each camera decoded from its first frame, fresh decoder."""

    def __init__(self, path: Path, windows: Sequence[Sequence[int]]) -> None:
        self.path = path
        self.windows = [list(w) for w in windows]  # window positions per sample
        self._reader: HyperframeReader | None = None

    def __len__(self) -> int:
        return len(self.windows)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_reader": None}

    def __getitem__(self, i: int) -> Sample:
        if self._reader is None:
            self._reader = HyperframeReader(self.path)
        r = self._reader
        positions = self.windows[i]
        ids = [int(r.window_ids[p]) for p in positions]
        start, end = ids[0] * r.window_ns, (ids[-1] + 1) * r.window_ns
        frames = {}
        for sid, s in r.streams.items():
            ts = r.timestamps(sid)
            a, b = int(np.searchsorted(ts, start, "right")), int(np.searchsorted(ts, end, "right"))
            dec = create_decoder("cpu", "rgb")
            base = int(np.searchsorted(r.index["stream_id"], sid))
            items = []
            for k in range(b):
                pics = dec.decode(r.frame_at(base + k).data, k)
                if k >= a:
                    items.append((int(ts[k]), pics[0].image))
            dec.close()
            frames[s.name] = (str(s.kind), items)
        return make_sample(ids[0], frames)


# --- building the inputs -------------------------------------------------------------------


def export_files(hf: Path, root: Path) -> list[Any]:
    """Every frame of ``hf`` as its own file under ``root``; returns the per-window manifest."""
    manifest = []
    with HyperframeReader(hf) as r:
        for i in range(r.window_count()):
            w = r.get_window(i)
            per_stream: dict[str, list[tuple[int, str]]] = {}
            for sid, s in r.streams.items():
                rows = per_stream.setdefault(s.name, [])
                for f in w[sid]:
                    rel = f"{s.name}/{f.timestamp_ns}" + (
                        ".jpg" if s.encoding == "jpeg" else ".npy"
                    )
                    (root / s.name).mkdir(parents=True, exist_ok=True)
                    if s.encoding == "jpeg":
                        (root / rel).write_bytes(f.tobytes())
                    else:
                        np.save(root / rel, f.array())
                    rows.append((f.timestamp_ns, rel))
            manifest.append((w.window_id, per_stream))
    return manifest


def export_mcap(hf: Path, out: Path) -> None:
    with HyperframeReader(hf) as r, open(out, "wb") as f:
        w = McapWriter(f, compression=CompressionType.LZ4)  # 1 MiB chunks, indexes, CRCs
        w.start(profile="", library="hyperframes-bench")
        ch = {
            sid: w.register_channel(s.name, "application/octet-stream", 0)
            for sid, s in r.streams.items()
        }
        rows = sorted(
            (int(e["timestamp_ns"]), i) for i, e in enumerate(r.index)
        )  # time order, as a recorder writes
        for _, i in rows:
            fr = r.frame_at(i)
            w.add_message(
                ch[fr.stream.id],
                log_time=fr.timestamp_ns,
                data=fr.tobytes(),
                publish_time=fr.timestamp_ns,
                sequence=fr.stream_index,
            )
        w.finish()  # type: ignore[no-untyped-call]  # mcap's Writer.finish has no annotations


def write_h265_cameras(src: Path, out: Path, cameras: int, seconds: float) -> None:
    """The first ``cameras`` JPEG cameras of ``src`` as H.265 (x265 ultrafast, IDR every 3rd
    window), ``seconds`` long."""
    with HyperframeReader(src) as r:
        cams = [s for s in r.streams.values() if s.encoding == "jpeg"][:cameras]
        t_end = r.start_ns + int(seconds * 1e9)
        streams = [
            StreamInfo(i, s.name, SensorKind.CAMERA, "h265", rate_hz=s.rate_hz)
            for i, s in enumerate(cams)
        ]
        rows = []
        for i, s in enumerate(cams):
            frames = [f for f in r.frames(s.id) if f.timestamp_ns <= t_end]
            w, h = int(s.extra["width"]), int(s.extra["height"])
            enc = create_encoder("x265", EncoderSettings(w, h, preset="ultrafast"))
            pairs = [(f.timestamp_ns, f.tobytes()) for f in frames]
            for e in encode_pictures(pairs, enc, IdrPlanner(r.window_ns, k=3), workers=2):
                flags = int(FrameFlags.HW_TIMESTAMP | (FrameFlags.KEYFRAME if e.keyframe else 0))
                rows.append((e.timestamp_ns, i, e.data, flags))
            enc.close()
        rows.sort(key=lambda x: (x[0], x[1]))
        with HyperframeWriter(out, streams, r.window_ns) as wr:
            for t, sid, data, flags in rows:
                wr.append(sid, t, data, flags=flags)


# --- measuring -----------------------------------------------------------------------------


def tuned_worker(worker_id: int) -> None:
    """``worker_init_fn``: glibc keeps the worker's freed heap (docs/TRAINING.md)."""
    tune_malloc(worker_id)


def loader(
    ds: Dataset[Sample],
    order: list[int],
    workers: int,
    batch: int,
    init: Callable[[int], None] | None = None,
) -> DataLoader[Any]:
    return DataLoader(
        ds,
        batch_size=batch,
        sampler=order,
        num_workers=workers,
        collate_fn=hf_collate,
        persistent_workers=workers > 0,
        multiprocessing_context="fork" if workers else None,
        worker_init_fn=init,
    )


class Variant:
    """A dataset measured epoch by epoch through a persistent DataLoader."""

    def __init__(
        self,
        name: str,
        ds: Dataset[Sample],
        workers: int,
        batch: int,
        after: Callable[[Any], Any] | None = None,
        init: Callable[[int], None] | None = None,
    ) -> None:
        self.name, self.ds, self.after = name, ds, after
        self.order: list[int] = []
        self.dl = loader(ds, self.order, workers, batch, init)
        self.rates: list[float] = []

    def epoch(self, order: list[int]) -> float:
        self.order[:] = order  # the sampler is this list: same order for every variant
        t0 = time.perf_counter()
        n = 0
        for batch in self.dl:
            done = self.after(batch) if self.after is not None else batch
            n += len(done["window_id"])
        return n / (time.perf_counter() - t0)


def compare(variants: list[Variant], orders: list[list[int]], warm: list[int]) -> None:
    for v in variants:
        v.epoch(warm)  # starts the workers, fills the page cache
    for order in orders:
        for v in variants:
            v.rates.append(v.epoch(order))


def median(v: Variant) -> float:
    return statistics.median(v.rates)


def row(what: str, a: Variant, b: Variant, target: str = "info") -> None:
    ra, rb = median(a), median(b)
    ratio = ra / rb
    verdict = "info" if target == "info" else ("PASS" if ratio >= float(target[3:-1]) else "MISS")
    print(f"  {what:<58} {ra:>8.2f}/s {rb:>8.2f}/s {ratio:>7.2f}x  {target:<8} {verdict}")
    # the epochs alternate variant by variant, so each round's pair saw the same phase of the box
    paired = sorted(x / y for x, y in zip(a.rates, b.rates, strict=True))
    print(
        f"    {'the same per round (epochs side by side): min / median / max':<56} "
        f"{paired[0]:.2f}x / {statistics.median(paired):.2f}x / {paired[-1]:.2f}x"
    )


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"  {'measurement':<58} {'hyperfr.':>10} {'baseline':>10} {'ratio':>8}  target")


def section_jpeg(args: argparse.Namespace, work: Path) -> Path:
    hf = work / "vehicle.hf"
    if not hf.exists():
        print(f"writing {hf} ({args.seconds:g} s vehicle profile) ...", flush=True)
        write_synthetic(str(hf), PROFILES["vehicle"], args.seconds, seed=args.seed)
    with HyperframeReader(hf) as r:
        streams = list(r.streams.values())
        windows = [(int(w), int(w) * r.window_ns, (int(w) + 1) * r.window_ns) for w in r.window_ids]
    files = work / "files"
    if not files.exists():
        print("exporting one file per frame ...", flush=True)
        (work / "manifest.json").write_text(json.dumps(export_files(hf, files)))
    manifest = json.loads((work / "manifest.json").read_text())
    mcap = work / "vehicle.mcap"
    if McapWriter is not None and not mcap.exists():
        print("exporting MCAP (lz4 chunks) ...", flush=True)
        export_mcap(hf, mcap)
    for p in [hf, mcap, *files.rglob("*")]:
        if p.is_file():
            p.read_bytes()  # page cache
    n = len(windows)
    print(
        f"vehicle: {n} windows, {hf.stat().st_size / 1e6:.0f} MB; "
        f"{args.workers} workers, batch {args.batch}, {args.repeats} epochs per variant"
    )
    orders = [WindowSampler(n, seed=args.seed).indices(e).tolist() for e in range(args.repeats)]
    arrays = [s for s in streams if s.encoding != "jpeg"]
    groups = {"arrays": arrays} if args.arrays_only else {"all": streams, "arrays": arrays}
    results: dict[str, list[Variant]] = {}
    for what, sel in groups.items():
        names = [s.name for s in sel]
        variants = [
            Variant("hyperframes", HyperframeDataset(hf, streams=names), args.workers, args.batch),
            Variant("files", FilesDataset(files, sel, manifest), args.workers, args.batch),
        ]
        if McapWriter is not None:
            variants.append(
                Variant("mcap", McapDataset(mcap, sel, windows), args.workers, args.batch)
            )
        if what == "arrays" and args.workers:  # the same reader, glibc told to keep freed heap
            ds = HyperframeDataset(hf, streams=names)
            variants.append(Variant("tune_malloc", ds, args.workers, args.batch, init=tuned_worker))
        compare(variants, orders, warm=list(range(n)))
        results[what] = variants
    header("[1] window samples through a DataLoader (vehicle)")
    for what, label in (
        ("all", "6 JPEG cameras decoded + lidar + IMU"),
        ("arrays", "lidar + IMU only (no JPEG)"),
    ):
        if what not in results:
            continue
        v = results[what]
        by = {x.name: x for x in v}
        target = ">= 1.0x"  # both: issue 2 (all), issue 19 (lidar + IMU)
        row(f"{label}: vs one file per frame", by["hyperframes"], by["files"], target)
        if "mcap" in by:
            row(f"{label}: vs MCAP", by["hyperframes"], by["mcap"])
        if "tune_malloc" in by:
            tuned, plain = by["tune_malloc"], by["hyperframes"]
            row(f"{label}: workers after tune_malloc() vs not", tuned, plain)
        for x in v:
            print(f"    {x.name:<12} epochs: " + ", ".join(f"{r:.2f}" for r in x.rates))
    return hf


def section_video(args: argparse.Namespace, work: Path, src: Path) -> None:
    h265 = work / f"cams{args.video_cameras}.h265.hf"
    if not h265.exists():
        print(
            f"\nencoding {args.video_cameras} cameras x {args.video_seconds:g} s to H.265 "
            "(x265 ultrafast; slow on noisy synthetic frames) ...",
            flush=True,
        )
        write_h265_cameras(src, h265, args.video_cameras, args.video_seconds)
    h265.read_bytes()
    with HyperframeReader(h265) as r:
        n = r.window_count()
        size = sum(int(r.index["size"][r.index["stream_id"] == s].sum()) for s in r.streams)
    print(f"H.265: {args.video_cameras} cameras, {n} windows, {size / 1e6:.1f} MB of access units")
    rng = np.random.default_rng(args.seed)
    k = min(args.video_samples, n)
    orders = [rng.permutation(n)[:k].tolist() for _ in range(args.repeats)]
    hf_v = Variant("random", HyperframeDataset(h265), args.workers, args.batch)
    start_v = Variant(
        "from start", FromStartDataset(h265, [[i] for i in range(n)]), args.workers, args.batch
    )
    variants = [hf_v, start_v]
    gpu_v = None
    caps = probe()
    if caps.can_decode and torch.cuda.is_available():
        dec = GpuVideoDecoder("nvdec")
        gpu_v = Variant(
            "gpu", HyperframeDataset(h265, decode="gpu"), args.workers, args.batch, after=dec
        )
        variants.append(gpu_v)
    compare(variants, orders, warm=orders[0])
    seq = SequenceDataset(h265, args.clip, stride=args.clip)
    m = len(seq)
    clips = [seq.clips[i] for i in range(m)]
    seq_v = Variant("clips", seq, args.workers, 1)
    seq_start = Variant(
        "clips from start",
        FromStartDataset(h265, [list(range(int(c), int(c) + args.clip)) for c in clips]),
        args.workers,
        1,
    )
    sorders = [
        np.random.default_rng([args.seed, e]).permutation(m).tolist() for e in range(args.repeats)
    ]
    compare([seq_v, seq_start], sorders, warm=sorders[0])
    header(f"[2] H.265 cameras ({args.video_cameras}), decoded on the CPU in the workers")
    row("random windows: keyframe index vs decode from stream start", hf_v, start_v)
    row(f"clips of {args.clip} windows: streaming vs decode from start", seq_v, seq_start)
    print(
        f"    clips/s {median(seq_v):.2f} = {median(seq_v) * args.clip:.2f} windows/s; "
        f"random windows/s {median(hf_v):.2f}"
    )
    if gpu_v is not None:
        row("random windows: NVDEC in the main process vs CPU in workers", gpu_v, hf_v)
    else:
        print(f"  NVDEC: not measured ({caps.summary()}; torch cuda={torch.cuda.is_available()})")
    for v in (*variants, seq_v, seq_start):
        print(f"    {v.name:<16} epochs: " + ", ".join(f"{x:.2f}" for x in v.rates))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=5.0, help="vehicle recording (default 5)")
    p.add_argument("--video-seconds", type=float, default=3.0, help="H.265 part (default 3)")
    p.add_argument("--video-cameras", type=int, default=2, help="cameras encoded (default 2)")
    p.add_argument("--video-samples", type=int, default=12, help="random windows per epoch")
    p.add_argument("--clip", type=int, default=4, help="windows per clip (default 4)")
    p.add_argument("--repeats", type=int, default=3, help="timed epochs per variant")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", type=Path, default=None, help="keep the inputs here")
    p.add_argument("--no-video", action="store_true")
    p.add_argument(
        "--arrays-only", action="store_true", help="section [1] on lidar + IMU only (no JPEG)"
    )
    args = p.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hf-bench-dataset-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"workdir {work}"
    )
    try:
        src = section_jpeg(args, work)
        if not args.no_video:
            section_video(args, work, src)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
