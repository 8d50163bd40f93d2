"""Object storage benchmark against a real S3 endpoint on loopback (run by hand).

    python bench/bench_objstore.py                     # all parts; 6 segments of 24 MiB, 3 rounds
    python bench/bench_objstore.py --segments 4 --mb 64 --rounds 5
    python bench/bench_objstore.py --only dataset --files 4 --seconds 10 --epochs 5

Starts moto's S3 server (tests/s3_server.py) and, in the same run:

1. Upload throughput: ``UploadService.run_once`` (sums, multipart with a
   SHA-256 per part, verification, durable marks) against a plain boto3
   multipart put of the same files with the same part size (create, parts,
   complete; no checksums, no marks) and against obstore's ``put`` (its
   own multipart writer). Median MB/s and the ratio to the plain put.
2. Range reads, as the reader would make them (a 512-byte header, a
   64 KiB index, a 1.9 MB window): median latency of boto3 ``get_object``
   with ``Range`` and obstore's ``get_range``, and the client's import cost.
3. ``HyperframeReader`` on a synthetic recording (the ``demo`` profile,
   30 s): open + one ``get_window`` from the endpoint against the same file on
   local disk, in requests and median milliseconds. (moto's ranged GET costs
   grow with the object's size: a 900 MB object takes seconds per request
   there, so the bench keeps the object small.)

4. A ``HyperframeDataset`` in a DataLoader (``--workers``, ``--batch``,
   shuffled, ``decode="cpu"``, every stream) over ``s3://train/v/*.hf``
   against the same files on local disk, epochs alternating: median
   samples/s and the ratio; one more epoch through a counting relay
   (``FaultyLink``) gives the GET requests per sample.

Numbers are for the loopback endpoint (moto is itself the bottleneck: its
Python server parses every byte), so read them as ratios between clients in
one run, not as what a depot link gives.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from s3_server import s3_client, s3_endpoint  # noqa: E402

from hyperframes.recorder.config import parse_config  # noqa: E402
from hyperframes.recorder.upload.service import UploadService  # noqa: E402

MiB = 1024 * 1024
S3Client = Any  # a boto3 S3 client: boto3 has no type stubs here


def _segments(out: Path, n: int, mb: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    paths = []
    for i in range(n):
        p = out / f"bench_20261202T0{i % 10}0000Z_{i:06d}.hf"
        p.write_bytes(rng.randbytes(mb * MiB))
        paths.append(p)
    return paths


def _plain_put(client: S3Client, bucket: str, paths: list[Path], part: int) -> None:
    for p in paths:
        key = f"plain/{p.name}"
        up = client.create_multipart_upload(Bucket=bucket, Key=key)
        parts = []
        with p.open("rb") as f:
            n = 1
            while chunk := f.read(part):
                r = client.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"],
                                       PartNumber=n, Body=chunk)  # fmt: skip
                parts.append({"PartNumber": n, "ETag": r["ETag"]})
                n += 1
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up["UploadId"],
                                         MultipartUpload={"Parts": parts})  # fmt: skip


def _obstore_put(url: str, bucket: str, paths: list[Path], part: int) -> None:
    import obstore
    from obstore.store import S3Store

    store = S3Store(bucket, endpoint=url, access_key_id="bench", secret_access_key="bench",
                    region="us-east-1", client_options={"allow_http": True})  # fmt: skip
    for p in paths:
        with p.open("rb") as f:
            obstore.put(store, f"obstore/{p.name}", f, chunk_size=part)


def _reader_lines(tmp: Path, client: S3Client, url: str) -> None:
    from hyperframes.reader import HyperframeReader
    from hyperframes.synth import profile, write_synthetic

    local = tmp / "demo.hf"
    write_synthetic(str(local), profile("demo"), 30.0, seed=0)
    client.create_bucket(Bucket="readers")
    client.upload_file(str(local), "readers", "v.hf")
    os.environ["AWS_ENDPOINT_URL"] = url
    for label, target in (("local file", str(local)), ("s3 endpoint", "s3://readers/v.hf")):
        opens, windows, reqs = [], [], (0, 0)
        for i in range(15):
            t0 = time.perf_counter()
            r = HyperframeReader(target)
            t1 = time.perf_counter()
            before = r.remote.stats.requests if r.remote else 0
            r.get_window(i * 7 % r.window_count())
            t2 = time.perf_counter()
            if r.remote:
                reqs = (before, r.remote.stats.requests - before)
            r.close()
            opens.append(t1 - t0)
            windows.append(t2 - t1)
        extra = f", {reqs[0]} requests to open, {reqs[1]} per window" if reqs[0] else ""
        print(f"  {label:<12} open {statistics.median(opens) * 1e3:7.2f} ms, "
              f"window {statistics.median(windows) * 1e3:7.2f} ms{extra}")  # fmt: skip
    print(f"  file {local.stat().st_size / 1e6:.0f} MB")


def _dataset_lines(tmp: Path, client: S3Client, url: str, args: argparse.Namespace) -> None:
    """Samples/s of one DataLoader over the bucket and over the same files on local disk."""
    import torch
    from s3_server import FaultyLink

    from hyperframes.synth import profile, write_synthetic
    from hyperframes.torch import HyperframeDataset, collate

    client.create_bucket(Bucket="train")
    files = []
    for i in range(args.files):
        local = tmp / f"train{i}.hf"
        write_synthetic(str(local), profile("demo"), args.seconds, seed=i)
        client.upload_file(str(local), "train", f"v/{local.name}")
        files.append(local)
    os.environ["AWS_ENDPOINT_URL"] = url

    def epoch(paths: object) -> tuple[int, float]:
        ds = HyperframeDataset(paths, decode="cpu")  # type: ignore[arg-type]
        loader = torch.utils.data.DataLoader(
            ds,
            batch_size=args.batch,
            shuffle=True,
            num_workers=args.workers,
            collate_fn=collate,
            generator=torch.Generator().manual_seed(0),
        )
        t0 = time.perf_counter()
        n = sum(len(b["file"]) for b in loader)
        return n, time.perf_counter() - t0

    rates: dict[str, list[float]] = {"local disk": [], "s3 endpoint": []}
    glob = "s3://train/v/*.hf"
    for _ in range(args.epochs):  # interleaved, so that load drifts hit both alike
        for label, paths in (("local disk", [str(p) for p in files]), ("s3 endpoint", glob)):
            n, took = epoch(paths)
            rates[label].append(n / took)
    link = FaultyLink(int(url.rsplit(":", 1)[1]))  # one more epoch through a relay that counts
    os.environ["AWS_ENDPOINT_URL"] = link.url
    n, _ = epoch(glob)
    gets = sum(1 for s in link.seen if s.startswith("GET /train/v/train"))
    link.close()
    os.environ["AWS_ENDPOINT_URL"] = url
    size = sum(p.stat().st_size for p in files) / 1e6
    print(f"  {args.files} files x {args.seconds:g} s of the demo profile ({size:.0f} MB), "
          f"{n} samples an epoch; DataLoader: {args.workers} workers, batch {args.batch}, "
          "shuffled, decode=cpu, every stream")  # fmt: skip
    base = statistics.median(rates["local disk"])
    for label, xs in rates.items():
        med = statistics.median(xs)
        print(f"  {label:<12} {med:7.1f} samples/s  ({min(xs):.1f}-{max(xs):.1f})  "
              f"{med / base:5.2f}x")  # fmt: skip
    print(
        f"  {gets / n:.2f} GET requests per sample from the endpoint ({gets} in one epoch, "
        f"opens included: {args.workers} workers x {args.files} files)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=6)
    ap.add_argument("--mb", type=int, default=24, help="MiB per segment")
    ap.add_argument("--part-mb", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--only",
        choices=("upload", "reader", "dataset"),
        help="one part: upload (1, 2), reader (3) or dataset (4)",
    )
    ap.add_argument("--files", type=int, default=4, help="dataset: files (default 4)")
    ap.add_argument(
        "--seconds", type=float, default=10.0, help="dataset: seconds per file (default 10)"
    )
    ap.add_argument("--epochs", type=int, default=5, help="dataset: epochs each (default 5)")
    ap.add_argument("--workers", type=int, default=2, help="dataset: DataLoader workers")
    ap.add_argument("--batch", type=int, default=8, help="dataset: batch size")
    args = ap.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")  # fmt: skip
    total = args.segments * args.mb * MiB
    print(f"load {os.getloadavg()[0]:.1f}; {args.segments} segments x {args.mb} MiB, "
          f"parts of {args.part_mb} MiB, {args.rounds} rounds")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, s3_endpoint() as url:
        client = s3_client(url, "bench", "bench")
        if args.only in (None, "upload"):
            _upload_lines(Path(tmp), client, url, args, total)
        if args.only in (None, "reader"):
            print("\n3. HyperframeReader: open + one window (median of 15)")
            _reader_lines(Path(tmp), client, url)
        if args.only in (None, "dataset"):
            print("\n4. dataset samples/s (median over epochs; ratio to local disk)")
            _dataset_lines(Path(tmp), client, url, args)
    if args.only in (None, "upload"):
        _import_lines()
    return 0


def _upload_lines(
    tmp: Path, client: S3Client, url: str, args: argparse.Namespace, total: int
) -> None:
    rates: dict[str, list[float]] = {"hyperframes upload": [], "boto3 plain multipart": [],
                                     "obstore put": []}  # fmt: skip
    for r in range(args.rounds):
        out = Path(tmp) / f"out{r}"
        paths = _segments(out, args.segments, args.mb)
        bucket = f"bench{r}"
        client.create_bucket(Bucket=bucket)
        cfg = parse_config({
            "vehicle_id": "bench", "output_dir": str(out),
            "zmq": {"endpoint": "tcp://127.0.0.1:5999"},
            "streams": [{"id": 0, "name": "imu", "kind": "imu", "encoding": "imu-f64",
                         "topic": "imu"}],
            "upload": {"dest": f"s3://{bucket}/hf", "endpoint_url": url,
                       "part_mb": args.part_mb},
        })  # fmt: skip
        assert cfg.upload is not None
        part = args.part_mb * MiB
        t0 = time.perf_counter()
        _plain_put(client, bucket, paths, part)
        t1 = time.perf_counter()
        UploadService(cfg, cfg.upload).run_once()
        t2 = time.perf_counter()
        _obstore_put(url, bucket, paths, part)
        t3 = time.perf_counter()
        for name, took in (("boto3 plain multipart", t1 - t0), ("hyperframes upload", t2 - t1),
                           ("obstore put", t3 - t2)):  # fmt: skip
            rates[name].append(total / took / 1e6)
    base = statistics.median(rates["boto3 plain multipart"])
    print("\n1. upload throughput (median MB/s over rounds; ratio to the plain put)")
    for name, xs in rates.items():
        med = statistics.median(xs)
        print(f"  {name:<24} {med:7.1f} MB/s  ({min(xs):.1f}-{max(xs):.1f})  {med / base:5.2f}x")

    key = "hf/bench/2026-12-02/" + paths[0].name
    print("\n2. range reads of one object (median ms over 30)")
    import obstore
    from obstore.store import S3Store

    store = S3Store("bench0", endpoint=url, access_key_id="bench", secret_access_key="bench",
                    region="us-east-1", client_options={"allow_http": True})  # fmt: skip
    seg = args.mb * MiB
    for label, off, size in (
        ("header 512 B", 0, 512),
        ("index 64 KiB", seg - 65536, 65536),
        ("window 1.9 MB", seg // 3, min(1_900_000, seg // 2)),
    ):
        b, o = [], []
        for _ in range(30):
            t0 = time.perf_counter()
            client.get_object(Bucket="bench0", Key=key, Range=f"bytes={off}-{off + size - 1}")[
                "Body"
            ].read()
            b.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            bytes(obstore.get_range(store, key, start=off, length=size))
            o.append(time.perf_counter() - t0)
        print(f"  {label:<14} boto3 {statistics.median(b) * 1e3:6.2f} ms   "
              f"obstore {statistics.median(o) * 1e3:6.2f} ms")  # fmt: skip


def _import_lines() -> None:
    for mod in ("boto3", "obstore"):
        code = (
            f"import time;t=time.perf_counter();import {mod};"
            "hwm=[l for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
            "print(time.perf_counter()-t, hwm.split()[1])"
        )
        t, rss = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split()  # fmt: skip
        print(f"  import {mod:<8} {float(t) * 1e3:6.0f} ms, peak RSS {int(rss) / 1024:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
