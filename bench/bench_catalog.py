"""Fleet catalog benchmark: build from a bucket, a query over a million events, and from a
query to the first training batch (issue 37; run by hand).

    python bench/bench_catalog.py                          # 10,000 segments in moto, ~10 min
    python bench/bench_catalog.py --store rclone           # rclone's S3 server instead
    python bench/bench_catalog.py --segments 200 --events 20000   # a smoke run (~1 min)
    python bench/bench_catalog.py --only query             # one section: build, query, train

Starts a local S3 server (moto by default, ``--store rclone``; tests/s3_stores.py) and,
in the same run:

a. **Build**: ``--segments`` real small segments (1 s, four streams, one event each,
   written by the real writer) put into the bucket, cataloged with
   ``hyperframes.catalog.build.build`` into ``s3://BUCKET/catalog``: seconds per 1,000
   segments, and requests per segment (the builder's own count of the reads; and every
   request the process's boto3 clients sent, listing and part writes included). Then
   ``--new`` more segments arrive and the build runs again (incremental, repeated with
   fresh segments each time): the ratio of the full build's time to the incremental
   run's median (goal >= 50x).
b. **Query** "events of one vehicle in one week with two given streams"
   (``find_events(vehicle=, since=, until=, with_streams=)``) over synthetic rows in a
   local catalog (``--events`` events, ``--catalog-segments`` segments, four stream
   rows each): median seconds over ``--repeats`` runs on one connection (goal < 1 s), the
   first run on a fresh connection, and part files opened against all part files (the
   partition pruning). Baseline in the same run: the same query with the vehicle and
   time filters applied to the unpartitioned tables (a ``SELECT`` over every part).
c. **Train**: from the catalog built in (a) in the bucket, query ``--clips`` events
   (``find_events``), snapshot them into a manifest (``catalog.manifest.snapshot``, which
   runs the query again), ``HyperframeDataset.from_manifest`` over the bucket,
   and a ``DataLoader`` (``--loader-workers``, batch ``--batch``) to its first batch:
   seconds from the query to the first batch (goal < 10 s), by step.

Numbers are for a loopback server whose own Python (moto) or Go (rclone) is the
bottleneck on a small machine; read them as orders of magnitude and ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

S = 1_000_000_000
WINDOW_NS = S // 10
T0 = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
SEGMENT_EVERY_S = 600  # a vehicle's segments start ten minutes apart (1 s recorded each)
STREAM_NAMES = ("cam_front", "cam_rear", "lidar_top", "imu")
QUERY_SPAN_DAYS = 56  # (b): each vehicle's segments spread over eight weeks


# --- segments for the bucket ---------------------------------------------------------------


def _segment_plan(first: int, n: int, vehicles: int) -> list[tuple[str, int, int]]:
    """(vehicle, seq, start_ns) of segments ``first .. first + n``, dealt round the vehicles
    (new segments continue each vehicle's recording)."""
    out = []
    for i in range(first, first + n):
        seq, v = divmod(i, vehicles)
        out.append((f"veh-{v:04d}", seq, T0 + seq * SEGMENT_EVERY_S * S))
    return out


def _write_segments(args: tuple[str, list[tuple[str, int, int]]]) -> list[str]:
    """Write segments into a folder (a process pool's task); their paths."""
    from hyperframes import FileMetadata, SensorKind, StreamInfo
    from hyperframes.events import Event, event_stream_info
    from hyperframes.format.naming import segment_name
    from hyperframes.writer import HyperframeWriter, WriteFrame

    folder, plan = args
    ev = event_stream_info()
    streams = [
        StreamInfo(0, "imu", SensorKind.IMU, "imu-f64", rate_hz=20.0),
        StreamInfo(1, "lidar_top", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
        StreamInfo(2, "cam_front", SensorKind.CAMERA, "jpeg", rate_hz=10.0),
        ev,
    ]
    imu = np.zeros(6, "<f8").tobytes()
    sweep = np.zeros((16, 4), "<f4").tobytes()
    jpeg = b"\xff\xd8" + bytes(64) + b"\xff\xd9"
    paths = []
    for vehicle, seq, start in plan:
        path = Path(folder) / segment_name(vehicle, start, seq)
        meta = FileMetadata(vehicle, "bench", seq, start)
        with HyperframeWriter(path, streams, WINDOW_NS, meta, fsync_interval_s=0) as w:
            for k in range(10):
                lo = start + k * WINDOW_NS
                frames = [WriteFrame(0, lo + 1, imu), WriteFrame(0, lo + WINDOW_NS // 2, imu),
                          WriteFrame(1, lo + 2, sweep), WriteFrame(2, lo + 3, jpeg)]  # fmt: skip
                if k == 5:
                    e = Event(lo + 10, "hard_brake", 0.3, 0.2, source="rule")
                    frames.append(WriteFrame(ev.id, e.t_ns, e.to_json()))
                w.write_window(lo // WINDOW_NS, frames)
        paths.append(str(path))
    return paths


def _make_segments(folder: Path, plan: list[tuple[str, int, int]], procs: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    chunks = [(str(folder), plan[i : i + 200]) for i in range(0, len(plan), 200)]
    with ProcessPoolExecutor(procs) as pool:
        return [p for got in pool.map(_write_segments, chunks) for p in got]


def _upload(client: Any, bucket: str, paths: Sequence[str], threads: int = 16) -> None:
    from hyperframes.format.naming import parse_segment_name

    def put(p: str) -> None:
        name = Path(p).name
        parsed = parse_segment_name(name)
        assert parsed is not None
        key = f"raw/{parsed.vehicle}/{parsed.start:%Y-%m-%d}/{name}"
        client.put_object(Bucket=bucket, Key=key, Body=Path(p).read_bytes())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, paths))


class _Requests:
    """Counts the requests every boto3 client of this process sends (botocore's event hook)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, **_: Any) -> None:
        self.n += 1

    def hook(self, client: Any) -> None:
        client.meta.events.register("before-send.s3", self)


@contextlib.contextmanager
def _store(name: str) -> Iterator[Any]:
    import s3_stores

    starter = {"moto": s3_stores.moto_s3, "rclone": s3_stores.rclone_s3}[name]
    with starter() as store:
        yield store


def _section_build(args: argparse.Namespace, store: Any, tmp: Path) -> dict[str, Any]:
    from hyperframes.catalog.build import build, known_objects
    from hyperframes.catalog.listing import list_sources
    from hyperframes.catalog.store import CatalogRoot
    from hyperframes.storage.objects import client_for, list_objects

    bucket, client = args.bucket, store.client()
    client.create_bucket(Bucket=bucket)
    per = args.build_vehicles
    t = time.perf_counter()
    paths = _make_segments(tmp / "segs", _segment_plan(0, args.segments, per), args.procs)
    t_write = time.perf_counter() - t
    t = time.perf_counter()
    _upload(client, bucket, paths)
    t_up = time.perf_counter() - t
    size = sum(Path(p).stat().st_size for p in paths) / len(paths)
    print(f"\na. build: {len(paths)} segments of {size / 1e3:.1f} kB ({per} "
          f"vehicles; written in {t_write:.1f} s, put in {t_up:.1f} s)")  # fmt: skip
    counter = _Requests()
    counter.hook(client_for())
    root = f"s3://{bucket}/catalog"
    src = [f"s3://{bucket}/raw/"]
    before = counter.n
    full = build(src, root, workers=args.workers)
    sent = counter.n - before
    if full.read != len(paths) or full.failed or full.problems:
        raise SystemExit(f"the full build read {full.read} of {len(paths)}: {full.to_dict()}")
    print(f"  full build       {full.seconds:8.2f} s  {full.seconds / full.read * 1e3:7.2f} s per "
          f"1,000 segments; {full.requests_per_segment:.2f} reads per segment (builder), "
          f"{sent / full.read:.2f} requests per segment in all; {full.parts} parts, "
          f"{full.events} events")  # fmt: skip
    incs, inc_sent = [], []
    first = args.segments
    for r in range(args.repeats):
        plan = _segment_plan(first + r * args.new, args.new, per)
        new = _make_segments(tmp / f"new{r}", plan, args.procs)
        _upload(client, bucket, new)
        before = counter.n
        rep = build(src, root, workers=args.workers)
        inc_sent.append(counter.n - before)
        if rep.read != args.new or rep.skipped != args.segments + r * args.new:
            raise SystemExit(f"the incremental run read {rep.read}, skipped {rep.skipped}")
        incs.append(rep.seconds)
    inc = statistics.median(incs)
    t_lists, t_flats, t_knowns = [], [], []
    for _ in range(3):
        t = time.perf_counter()
        listed = list_sources(src)
        t_lists.append(time.perf_counter() - t)
        t = time.perf_counter()
        flat = list_objects(bucket, "raw/")  # one paginated listing, as before (baseline)
        t_flats.append(time.perf_counter() - t)
        t = time.perf_counter()
        known_objects(CatalogRoot.open(root), workers=args.workers)
        t_knowns.append(time.perf_counter() - t)
    t_list, t_flat = statistics.median(t_lists), statistics.median(t_flats)
    t_known = statistics.median(t_knowns)
    assert len(flat) == len(listed), (len(flat), len(listed))
    per_seg = max(0.0, inc - t_list - t_known) / args.new
    print(f"  incremental      {inc:8.2f} s  (+{args.new} segments over {args.segments}; "
          f"median of {len(incs)}: {min(incs):.2f}-{max(incs):.2f} s; "
          f"{statistics.median(inc_sent):.0f} requests)")  # fmt: skip
    print(f"  of an incremental run (medians of 3): listing {len(listed)} objects "
          f"{t_list:.2f} s by vehicle prefix on threads ({t_list / len(listed) * 1e3:.3f} s per "
          f"1,000 keys; one paginated listing {t_flat:.2f} s), reading what the catalog holds "
          f"{t_known:.2f} s, the rest (reading {args.new} segments, writing parts) "
          f"{per_seg * 1e3:.1f} ms per segment")  # fmt: skip
    floor = t_list + t_known
    print(f"  full / incremental {full.seconds / inc:6.1f}x  (goal >= 50x; bound by listing "
          f"every key and reading what the catalog holds, {floor:.2f} s: at most "
          f"{full.seconds / floor:.0f}x on this store; per key listed "
          f"{t_list / len(listed) * 1e3:.2f} ms vs per segment read "
          f"{full.seconds / full.read * 1e3:.2f} ms in the full build)")  # fmt: skip
    return {"root": root}


# --- synthetic rows for the query ----------------------------------------------------------


def _write_parts(root: Path, table: str, t: Any, vehicles: np.ndarray, dates: np.ndarray) -> int:
    """One part per (vehicle, date) of ``t`` (rows sorted by them); how many."""
    import pyarrow.parquet as pq

    from hyperframes.catalog.schema import PARQUET_VERSION_KEY, VERSION, partition_dir

    keys = vehicles.astype(np.int64) * 100_000 + dates
    order = np.argsort(keys, kind="stable")
    t = t.take(order)
    keys = keys[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(keys)]])
    meta = {PARQUET_VERSION_KEY: str(VERSION).encode()}
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        v, d = divmod(int(keys[a]), 100_000)
        day = (dt.date(1970, 1, 1) + dt.timedelta(days=d)).isoformat()
        folder = root / partition_dir(table, f"veh-{v:04d}", day)
        folder.mkdir(parents=True, exist_ok=True)
        part = t.slice(a, b - a).replace_schema_metadata(meta)
        pq.write_table(part, folder / f"part-{uuid.uuid4().hex}.parquet")
    return len(starts)


def _synthetic_catalog(root: Path, n_seg: int, n_ev: int, vehicles: int) -> dict[str, int]:
    """A local catalog of ``n_seg`` segments (10 min each, spread evenly over eight weeks per
    vehicle), four stream rows each (lidar missing in a fifth of them), ``n_ev`` events
    among them."""
    import pyarrow as pa

    from hyperframes.catalog.schema import EVENTS, FORMAT, MARKER, SEGMENTS, STREAMS, VERSION

    root.mkdir(parents=True)
    (root / MARKER).write_text(json.dumps({"format": FORMAT, "version": VERSION}))
    rng = np.random.default_rng(0)
    per = n_seg // vehicles
    veh = np.repeat(np.arange(vehicles), per)
    seq = np.tile(np.arange(per), vehicles)
    every = max(600 * S, QUERY_SPAN_DAYS * 86400 * S // max(1, per))
    start = T0 + seq * every
    end = start + 600 * S
    n = len(veh)
    names = np.char.add(np.char.add(np.char.mod("veh-%04d_", veh), np.char.mod("%06d", seq)), ".hf")
    dates = (start // (86400 * S)).astype(np.int64)
    uri = np.char.add("s3://fleet/raw/", names)
    seg = pa.table({
        "uri": uri, "name": names, "seq": seq.astype(np.int64), "start_ns": start, "end_ns": end,
        "window_ns": np.full(n, WINDOW_NS), "windows": np.full(n, 6000),
        "frames": np.full(n, 60_000), "streams": np.full(n, 4, np.int32),
        "bytes_stored": np.full(n, 10**8), "bytes_payload": np.full(n, 10**8 - 10**5),
        "fingerprint": np.char.mod("100000000-%08x-00000000", seq), "etag": [None] * n,
        "sha256": [None] * n, "format_version": np.full(n, 1, np.int32),
        "recorder_version": ["bench"] * n, "converted": np.zeros(n, bool),
        "converted_from": [None] * n, "dropped": np.zeros(n, np.int64),
        "late": np.zeros(n, np.int64), "quarantined": np.zeros(n, np.int64),
        "events": np.full(n, n_ev // n, np.int32), "modified_ns": end,
        "cataloged_ns": np.ones(n, np.int64),
    }, schema=SEGMENTS)  # fmt: skip
    files = _write_parts(root, "segments", seg, veh, dates)
    k = len(STREAM_NAMES)
    has = np.ones((n, k), bool)
    has[:, 2] = rng.random(n) >= 0.2  # lidar missing in a fifth of the segments
    sveh, sdates = np.repeat(veh, k), np.repeat(dates, k)
    frames = np.where(has.ravel(), 6000, 0).astype(np.int64)
    first = np.where(has.ravel(), np.repeat(start, k) + 1, 0)
    last = np.where(has.ravel(), np.repeat(end, k) - 1, 0)
    st = pa.table({
        "uri": np.repeat(uri, k), "stream_id": np.tile(np.arange(k, dtype=np.int32), n),
        "name": np.tile(np.array(STREAM_NAMES), n),
        "kind": np.tile(np.array(["camera", "camera", "lidar", "imu"]), n),
        "encoding": np.tile(np.array(["jpeg", "jpeg", "xyzi-f32", "imu-f64"]), n),
        "codec": np.tile(np.array(["none", "none", "zstd", "lz4"]), n),
        "rate_hz": np.tile(np.array([10.0, 10.0, 10.0, 200.0]), n), "frames": frames,
        "first_ns": pa.array(first, mask=~has.ravel()),
        "last_ns": pa.array(last, mask=~has.ravel()),
        "missing_windows": np.zeros(n * k, np.int64), "cataloged_ns": np.ones(n * k, np.int64),
    }, schema=STREAMS)  # fmt: skip
    files += _write_parts(root, "streams", st, sveh, sdates)
    at = rng.integers(0, n, n_ev)
    t = start[at] + rng.integers(5 * S, 595 * S, n_ev)
    ev_names = np.array(["hard_brake", "near_miss", "takeover", "mark"])[rng.integers(0, 4, n_ev)]
    ids = np.char.mod("%020x", np.arange(n_ev))
    ev = pa.table({
        "event_id": ids, "t_ns": t, "name": ev_names, "pre_s": np.full(n_ev, 3.0),
        "post_s": np.full(n_ev, 2.0), "start_ns": t - 3 * S, "end_ns": t + 2 * S,
        "source": np.full(n_ev, "rule"), "clock": np.full(n_ev, "host"),
        "tags": pa.MapArray.from_arrays(np.zeros(n_ev + 1, np.int32), pa.array([], pa.string()),
                                        pa.array([], pa.string())),
        "note": [None] * n_ev, "payload": [None] * n_ev, "uri": uri[at],
        "cataloged_ns": np.ones(n_ev, np.int64),
    }, schema=EVENTS)  # fmt: skip
    files += _write_parts(root, "events", ev, veh[at], (t // (86400 * S)).astype(np.int64))
    return {"files": files, "days": int(dates.max() - dates.min() + 1)}


def _section_query(args: argparse.Namespace, tmp: Path) -> None:
    from hyperframes.catalog.query import EventsQuery, files_opened, find_events, run_sql
    from hyperframes.catalog.sql import events_sql
    from hyperframes.catalog.views import open_catalog

    root = tmp / "synthetic"
    t = time.perf_counter()
    made = _synthetic_catalog(root, args.catalog_segments, args.events, args.vehicles)
    print(f"\nb. query: {args.events:,} events, {args.catalog_segments:,} segments, "
          f"{args.catalog_segments * 4:,} stream rows of {args.vehicles} vehicles over "
          f"{made['days']} days in {made['files']:,} part files (written in "
          f"{time.perf_counter() - t:.1f} s)")  # fmt: skip
    vehicle = f"veh-{args.vehicles // 2:04d}"
    since = dt.date(2026, 1, 1) + dt.timedelta(days=QUERY_SPAN_DAYS // 2)
    until = since + dt.timedelta(days=6)  # a bare date as until includes that day: 7 days
    ask = {"vehicle": vehicle, "since": since, "until": until,
           "with_streams": ("lidar_top", "cam_front")}  # fmt: skip
    t = time.perf_counter()
    con = open_catalog(root)
    hits = find_events(con, **ask)  # type: ignore[arg-type]
    cold = time.perf_counter() - t
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        got = find_events(con, **ask)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t)
        assert got.num_rows == hits.num_rows
    q = EventsQuery(vehicle, None, since, until, ("lidar_top", "cam_front"))
    opened = files_opened(con, q)  # as find_events reads it: the partition folders alone
    sql, params = events_sql(q.resolve())  # the same question over the generic views
    opened_views = files_opened(con, sql, params)
    views = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        assert run_sql(con, sql, params).num_rows == hits.num_rows
        views.append(time.perf_counter() - t)
    # baseline: the same question without the partition columns (every part is read)
    flat = sql
    for cond in ("vehicle = ?", "date >= ?", "date <= ?"):  # volatile: never pushed down
        flat = flat.replace(cond, f"({cond} OR random() < 0)")
    base = []
    for _ in range(max(1, args.repeats // 2)):
        t = time.perf_counter()
        n = run_sql(con, flat, params).num_rows
        base.append(time.perf_counter() - t)
    assert n == hits.num_rows, (n, hits.num_rows)
    opened_flat = files_opened(con, flat, params)
    med = statistics.median(times)
    print(f"  find_events      {med:8.3f} s  median of {len(times)} ({min(times):.3f}-"
          f"{max(times):.3f}); first on a fresh connection {cold:.3f} s; {hits.num_rows} "
          f"events  (goal < 1 s)")  # fmt: skip
    print(f"  files opened     {opened:8d} of {made['files']:,} part files "
          f"({opened / made['files']:.2%}); through the views {opened_views:,} (globbing "
          f"every part first: {statistics.median(views):.3f} s); without pruning "
          f"{opened_flat:,}")  # fmt: skip
    print(f"  no pruning       {statistics.median(base):8.3f} s  (the same rows; "
          f"{statistics.median(base) / med:.1f}x the pruned query)")  # fmt: skip
    con.close()


# --- from a query to a training batch ------------------------------------------------------


def _section_train(args: argparse.Namespace, root: str, tmp: Path) -> None:
    import torch

    from hyperframes.catalog.manifest import snapshot
    from hyperframes.catalog.query import EventsQuery, find_events
    from hyperframes.catalog.views import open_catalog
    from hyperframes.torch import HyperframeDataset, collate

    streams = ("lidar_top", "imu")
    ask = EventsQuery(name="hard_brake", with_streams=streams, limit=args.clips)
    out = tmp / "set.parquet"
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    con = open_catalog(root)
    steps["open catalog"] = time.perf_counter() - t0
    t = time.perf_counter()
    entries = snapshot(con, ask, out, streams=streams)  # runs the question, writes the manifest
    steps["snapshot"] = time.perf_counter() - t
    t = time.perf_counter()
    ds = HyperframeDataset.from_manifest(out, decode="raw", streams=list(streams))
    steps["dataset"] = time.perf_counter() - t
    t = time.perf_counter()
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=args.batch,
        shuffle=True,
        num_workers=args.loader_workers,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(0),
    )
    batch = next(iter(loader))
    steps["first batch"] = time.perf_counter() - t
    total = time.perf_counter() - t0
    t = time.perf_counter()
    events = find_events(con, name="hard_brake", with_streams=streams, limit=args.clips)
    alone = time.perf_counter() - t
    con.close()
    n = len(batch["file"])
    print(f"\nc. train: {events.num_rows} events -> {entries} manifest entries -> {len(ds)} "
          f"windows from the bucket; batch of {n} ({args.loader_workers} workers)")  # fmt: skip
    print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    print(f"  query to first batch {total:6.2f} s  (goal < 10 s; the question alone, "
          f"find_events on the open catalog: {alone:.2f} s)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=10_000, help="(a) segments in the bucket")
    ap.add_argument("--new", type=int, default=100, help="(a) new segments per incremental run")
    ap.add_argument("--build-vehicles", type=int, default=10, help="(a) vehicles")
    ap.add_argument("--events", type=int, default=1_000_000, help="(b) event rows")
    ap.add_argument("--catalog-segments", type=int, default=None,
                    help="(b) segment rows (default: events / 10)")  # fmt: skip
    ap.add_argument("--vehicles", type=int, default=100, help="(b) vehicles")
    ap.add_argument("--clips", type=int, default=1000, help="(c) event clips in the manifest")
    ap.add_argument("--store", choices=("moto", "rclone"), default="moto")
    ap.add_argument("--workers", type=int, default=8, help="(a) build threads")
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 2, help="segment writers")
    ap.add_argument("--repeats", type=int, default=5, help="runs per timed line (median)")
    ap.add_argument("--loader-workers", type=int, default=2, help="(c) DataLoader workers")
    ap.add_argument("--batch", type=int, default=16, help="(c) batch size")
    ap.add_argument("--only", choices=("build", "query", "train"), help="one section")
    ap.add_argument("--workdir", type=Path, help="keep files here (default: a temp dir)")
    args = ap.parse_args()
    if args.catalog_segments is None:
        args.catalog_segments = max(args.vehicles, args.events // 10)
    args.repeats = max(1, args.repeats)
    args.bucket = "fleet"
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; store {args.store}")
    with contextlib.ExitStack() as stack:
        if args.workdir is not None:
            args.workdir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=args.workdir))
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hf-bench-")))
        if args.only in (None, "query"):
            _section_query(args, tmp)
        if args.only in (None, "build", "train"):
            store = stack.enter_context(_store(args.store))
            os.environ.update(store.env())
            built = _section_build(args, store, tmp)
            if args.only in (None, "train"):
                _section_train(args, built["root"], tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
