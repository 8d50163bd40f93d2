"""``hyperframes serve``: time to first message after a seek on a 1-hour drive, local and
from a bucket (the ``serve`` section of bench/bench_live.py; also runs alone).

    python bench/bench_live_serve.py --segments 60 --segment-seconds 60 --seeks 10

A cheap 1-hour drive: ``--segments`` segments of ``--segment-seconds`` s (a small
"JPEG" camera at 10 Hz with 4 KB payloads, a 1,000-point lidar at 10 Hz, an IMU at
100 Hz), written by the real writer. Served by :class:`hyperframes.live.serve.Player`
from the directory, then from moto (tests/s3_stores.py) as ``s3://bucket/drive/``;
a client of the Foxglove WebSocket protocol (tests/foxglove_client.py) subscribes to
every channel and, paused and drained, seeks to ``--seeks`` random times and plays:
the seconds from sending the request to the first message of the new time (median,
max), and the open time (and, from the bucket, the requests the open made per segment:
tables only).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from foxglove_client import PAUSED, PLAYING, FoxgloveClient  # noqa: E402

from hyperframes.format.streams import (  # noqa: E402
    FileMetadata,
    SensorKind,
    StreamInfo,
)
from hyperframes.live.serve import Player, resolve_sources  # noqa: E402
from hyperframes.synth import BASE_NS  # noqa: E402
from hyperframes.writer import HyperframeWriter  # noqa: E402

S = 1_000_000_000


def write_drive(out: Path, segments: int, seconds: float) -> int:
    """The cheap drive: returns the number of frames."""
    streams = [
        StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=10.0),
        StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", "<f4", (-1, 4), rate_hz=10.0),
        StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", "<f8", (6,), rate_hz=100.0),
    ]
    jpeg = b"\xff\xd8" + bytes(4096) + b"\xff\xd9"
    cloud = bytes(16 * 1000)
    imu = struct.pack("<6d", *range(6))
    n = 0
    for k in range(segments):
        t0 = BASE_NS + int(k * seconds * S)
        meta = FileMetadata(vehicle_id="bench", recorder_version="bench", segment_seq=k,
                            created_ns=t0)  # fmt: skip
        with HyperframeWriter(str(out / f"bench_{k:05d}.hf"), streams, 100_000_000, meta) as w:
            for i in range(int(seconds * 100)):
                t = t0 + i * 10_000_000 + 1
                if i % 10 == 0:
                    w.append(0, t, jpeg)
                    w.append(1, t + 1, cloud)
                    n += 2
                w.append(2, t + 2, imu)
                n += 1
    return n


def seek_latencies(player: Player, seeks: int, rng: random.Random) -> list[float]:
    out = []
    with FoxgloveClient(f"ws://127.0.0.1:{player.port}") as c:
        c.wait_channels(len(player.streams))
        c.subscribe()
        time.sleep(0.2)
        for _ in range(seeks):
            t = rng.randrange(player.start_ns, player.end_ns - 5 * S)
            c.playback(PAUSED, 1.0)
            while c.messages(timeout=0.3):  # drain what was in flight
                pass
            sent = time.monotonic()
            c.playback(PLAYING, 1.0, t)
            got = None
            deadline = sent + 30
            while got is None and time.monotonic() < deadline:
                for m in c.messages(1, timeout=0.5):
                    if t <= m.log_time < t + S:  # this seek's, not an earlier one's
                        got = m
            if got is None:
                raise RuntimeError(f"no message after a seek to {t}")
            out.append(got.received - sent)
    return out


def report(label: str, open_s: float, lat: list[float], extra: str = "") -> None:
    print(f"  {label:<6} open {open_s:6.2f} s   first message after a seek: median "
          f"{statistics.median(lat) * 1e3:6.1f} ms, max {max(lat) * 1e3:6.1f} ms "
          f"({len(lat)} seeks){extra}")  # fmt: skip


def bench_serve(args: argparse.Namespace) -> None:
    """The section: write the drive, serve it locally and from moto, seek."""
    segments = getattr(args, "segments", 60)
    seg_s = getattr(args, "segment_seconds", 60.0)
    seeks = getattr(args, "seeks", 10)
    rng = random.Random(1)
    print(f"== serve: {segments} segments x {seg_s:g} s, {seeks} seeks")
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        drive = Path(tmp, "drive")
        drive.mkdir()
        t = time.monotonic()
        n = write_drive(drive, segments, seg_s)
        size = sum(p.stat().st_size for p in drive.iterdir())
        print(f"  wrote {n} frames, {size / 1e6:.0f} MB in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        with Player(resolve_sources(drive), port=0) as p:
            open_s = time.monotonic() - t
            report("local", open_s, seek_latencies(p, seeks, rng))
        from s3_stores import moto_s3

        with moto_s3() as store:
            env = store.env()
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                client: Any = store.client()
                client.create_bucket(Bucket="bench")
                for f in sorted(drive.iterdir()):
                    client.upload_file(str(f), "bench", f"drive/{f.name}")
                t = time.monotonic()
                url = store.with_bucket("bench").url("drive/")
                with Player(resolve_sources(url), port=0) as p:
                    open_s = time.monotonic() - t
                    first = p.reader(0).remote  # opened at start; the others: a header each
                    n = first.stats.requests if first is not None else 0
                    extra = f"; open: {n} requests for the first segment, 1 for each other"
                    report("moto", open_s, seek_latencies(p, seeks, rng), extra)
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--segments", type=int, default=60)
    ap.add_argument("--segment-seconds", type=float, default=60.0)
    ap.add_argument("--seeks", type=int, default=10)
    bench_serve(ap.parse_args())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
