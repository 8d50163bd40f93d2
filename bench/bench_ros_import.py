#!/usr/bin/env python3
"""ROS 2 import benchmark: ``hyperframes.ros`` import against reading the same bag.

Run by hand (not part of the test suite)::

    python bench/bench_ros_import.py [--size-gb 1.0] [--repeats 3] [--dir DIR] [--lidar scan]

Writes (once; kept in ``--dir``, default a directory under the system temp
dir, and reused while its parameters match) a rosbag2 directory with
``rosbags`` (mcap storage): a PointCloud2 lidar (x, y, z, intensity float32,
~100k points, 10 Hz), two CompressedImage cameras (real JPEG bytes of
~100-200 KB, 30 and 20 Hz) and an Imu at 200 Hz, header stamps a few ms
before the log times. The lidar (``--lidar``): ``scan`` (default) is what a
spinning lidar gives, 128 rings of points on a street (ground, building
fronts, parked cars), ranges in mm with 1 cm of noise, smooth along a ring,
intensity small integers by surface (LZ4 with byte shuffle stores it in ~77%);
``noise`` is the older cloud, ranges with 5 cm of noise and random intensities,
which hardly compresses (~84%). Then, repeat by repeat and in a rotating order,
it times:

(a) ``hyperframes.ros.import_bag`` of the bag to a ``.hf`` file (default
    codecs, 100 ms windows, header time; includes finalize + fsync);
(b) ``rosbags`` alone: ``AnyReader`` over the bag, ``deserialize`` of every
    message (what the import must do at least);
(b2) the same, and every message's CDR bytes written to one file, fsync at the end
    (info: the least any importer that writes the bytes pays);
(c) the ``mcap`` library's Python reader: ``make_reader(...).iter_messages()``
    over the storage file, every message's bytes touched, no deserialization;
    and, where ``mcap_ros2`` is installed, ``iter_decoded_messages`` with its
    ROS 2 decoder.

The bag is read once before timing, so every side reads it from the page
cache. Reported: medians over the repeats of MB/s (bag bytes on disk) and
messages/s, the ratios import/rosbags-read (the issue's goal, >= 0.5x: out of
reach, since (b2), reading and writing the bytes once with an fsync, is itself
~0.3x of (b); the line says what (b2) reaches), import/rosbags-read+write
(the floor of any importer that writes and syncs; aim >= 0.7x) and
import/mcap-read, each with the lowest and highest ratio of single repeats;
and the size of the ``.hf`` file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    from PIL import Image
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore
except ImportError as exc:  # pragma: no cover - the bench needs the ros extra
    sys.exit(f"bench_ros_import needs rosbags and Pillow ({exc}): pip install '.[ros]'")

from hyperframes.format import blosc2
from hyperframes.ros import import_bag

try:
    from mcap.reader import make_reader

    HAVE_MCAP = True
except ImportError:  # pragma: no cover
    HAVE_MCAP = False
try:
    from mcap_ros2.decoder import DecoderFactory  # type: ignore[import-not-found]
except ImportError:
    DecoderFactory = None

MB = 1e6
T0 = 1_735_689_600_000_000_000
SECOND = 1_000_000_000
TS = get_typestore(Stores.ROS2_HUMBLE)
T = TS.types
# topic, type, rate in Hz
TOPICS = [
    ("/lidar/points", "sensor_msgs/msg/PointCloud2", 10),
    ("/cam/front/image_raw/compressed", "sensor_msgs/msg/CompressedImage", 30),
    ("/cam/rear/image_raw/compressed", "sensor_msgs/msg/CompressedImage", 20),
    ("/imu", "sensor_msgs/msg/Imu", 200),
]
POINTS = 100_000
JPEGS = 8  # distinct JPEG frames per camera, cycled


# --- the bag ------------------------------------------------------------------


def _header(stamp: int, frame: str) -> Any:
    t = T["builtin_interfaces/msg/Time"](sec=stamp // SECOND, nanosec=stamp % SECOND)
    return T["std_msgs/msg/Header"](stamp=t, frame_id=frame)


def _jpegs(rng: np.random.Generator, w: int, h: int) -> list[bytes]:
    """Camera-like JPEGs (gradients, a moving pattern, sensor noise), ~100-200 KB each."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    out = []
    for k in range(JPEGS):
        base = np.stack([x * 0.15 + y * 0.05 + 8 * k, y * 0.2 + 40 * np.sin((x + 30 * k) / 90),
                         (x + y) * 0.1], -1) % 256  # fmt: skip
        img = np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=85)
        out.append(buf.getvalue())
    return out


RINGS = 128
LIDARS = ("scan", "noise")


def _scan(rng: np.random.Generator, stamp: int) -> np.ndarray:
    """A spinning lidar's scan from a car in a street, (N, 4) x, y, z, intensity float32,
    ring by ring: the ground 1.8 m below for the rings that look down, building fronts
    8-40 m away by azimuth sector and parked cars nearer, all drifting with time; ranges
    in mm with 1 cm of noise; intensity a small integer by surface (asphalt, facades)."""
    t = stamp / SECOND
    az = np.linspace(0, 2 * np.pi, POINTS // RINGS, endpoint=False)
    el = np.linspace(-0.4, 0.2, RINGS)[:, None]
    sector = ((az + 0.05 * t) * 12 / (2 * np.pi)).astype(int) % 12
    fronts = np.array([12, 25, 9, 40, 18, 30, 15, 22, 35, 11, 28, 20], float)[sector]
    fronts = fronts * (1 + 0.05 * np.sin(7 * az))
    cars = np.where(np.sin(5 * az + 0.2 * t) > 0.85, 6 + 2 * np.sin(3 * az), np.inf)
    wall = np.minimum(fronts, cars)[None, :] / np.cos(el)
    ground = np.where(el < 0, 1.8 / np.sin(-np.minimum(el, -1e-3)), np.inf)
    on_ground = ground <= wall
    r = np.round(np.minimum(ground, wall) + rng.normal(0, 0.01, on_ground.shape), 3)
    refl = np.where(on_ground, 18, 60 + 30 * (sector % 3))
    pts = np.empty((r.size, 4), np.float32)
    pts[:, 0] = (r * np.cos(el) * np.cos(az)).ravel()
    pts[:, 1] = (r * np.cos(el) * np.sin(az)).ravel()
    pts[:, 2] = (r * np.sin(el)).ravel()
    pts[:, 3] = np.clip(refl + rng.integers(-4, 5, r.shape), 0, 255).ravel()
    return pts


def _noise(rng: np.random.Generator, stamp: int) -> np.ndarray:
    """The older cloud: 128 rings, ranges with 5 cm of noise, random intensities (LZ4 with
    byte shuffle hardly shrinks it)."""
    az = np.linspace(0, 2 * np.pi, POINTS // RINGS, endpoint=False, dtype=np.float32)
    el = np.linspace(-0.4, 0.2, RINGS, dtype=np.float32)[:, None]
    rng_m = 20 + 10 * np.sin(3 * az + stamp / SECOND) + rng.normal(0, 0.05, (RINGS, az.size))
    pts = np.empty((RINGS * az.size, 4), np.float32)
    pts[:, 0] = (rng_m * np.cos(el) * np.cos(az)).ravel()
    pts[:, 1] = (rng_m * np.cos(el) * np.sin(az)).ravel()
    pts[:, 2] = (rng_m * np.sin(el)).ravel()
    pts[:, 3] = rng.integers(0, 255, pts.shape[0]).astype(np.float32)
    return pts


def _cloud(rng: np.random.Generator, stamp: int, lidar: str) -> object:
    """A PointCloud2 of the ``lidar`` cloud (``scan`` or ``noise``), x, y, z, intensity."""
    pts = _scan(rng, stamp) if lidar == "scan" else _noise(rng, stamp)
    pf = T["sensor_msgs/msg/PointField"]
    fields = [pf(name=n, offset=4 * i, datatype=7, count=1)
              for i, n in enumerate(["x", "y", "z", "intensity"])]  # fmt: skip
    return T["sensor_msgs/msg/PointCloud2"](
        header=_header(stamp, "lidar"), height=1, width=pts.shape[0], fields=fields,
        is_bigendian=False, point_step=16, row_step=16 * pts.shape[0],
        data=pts.view(np.uint8).reshape(-1), is_dense=True,
    )  # fmt: skip


def _imu(rng: np.random.Generator, stamp: int) -> object:
    v3, q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    a, g = rng.normal(0, 0.1, 3), rng.normal(0, 0.01, 3)
    return T["sensor_msgs/msg/Imu"](
        header=_header(stamp, "imu"), orientation=q(x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=np.full(9, 0.01), angular_velocity=v3(x=g[0], y=g[1], z=g[2]),
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=v3(x=a[0], y=a[1], z=9.81 + a[2]),
        linear_acceleration_covariance=np.zeros(9),
    )  # fmt: skip


def bag_bytes(bag: Path) -> int:
    return sum(p.stat().st_size for p in bag.iterdir() if p.is_file())


def write_bag(bag: Path, size_gb: float, lidar: str) -> None:
    """The bag, ``size_gb`` GB of messages (stops at the first second past it)."""
    rng = np.random.default_rng(20)
    cams = {topic: _jpegs(rng, 1280, 720) for topic, typ, _ in TOPICS if "Compressed" in typ}
    sizes = [len(j) for js in cams.values() for j in js]
    print(f"writing {bag} ({size_gb} GB, lidar {lidar}; "
          f"JPEG {min(sizes) // 1000}-{max(sizes) // 1000} KB)")  # fmt: skip
    if bag.exists():
        shutil.rmtree(bag)
    target = size_gb * 1e9
    written = 0
    t0 = time.monotonic()
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {topic: w.add_connection(topic, typ, typestore=TS) for topic, typ, _ in TOPICS}
        second = 0
        while written < target:
            events = []  # (log time, topic, index in the second)
            for k, (topic, _typ, hz) in enumerate(TOPICS):
                step = SECOND // hz
                offset = 137_000 * k  # topics not all on the same ns
                events += [(T0 + second * SECOND + i * step + offset, topic, i) for i in range(hz)]
            for log, topic, i in sorted(events):
                stamp = log - (1 + (i * 7) % 9) * 1_000_000  # 1-9 ms before the log time
                typ = next(t for name, t, _ in TOPICS if name == topic)
                if typ == "sensor_msgs/msg/PointCloud2":
                    msg = _cloud(rng, stamp, lidar)
                elif typ == "sensor_msgs/msg/CompressedImage":
                    data = cams[topic][(second * 30 + i) % JPEGS]
                    msg = T[typ](header=_header(stamp, topic.split("/")[2]), format="jpeg",
                                 data=np.frombuffer(data, np.uint8))  # fmt: skip
                else:
                    msg = _imu(rng, stamp)
                raw = TS.serialize_cdr(msg, typ)
                w.write(conns[topic], log, raw)
                written += len(raw)
            second += 1
    print(f"  {second} s of recording, {bag_bytes(bag) / MB:.0f} MB in "
          f"{time.monotonic() - t0:.0f} s")  # fmt: skip


def ensure_bag(root: Path, size_gb: float, lidar: str) -> Path:
    bag = root / f"bag_{size_gb:g}gb_{lidar}"
    stamp = bag / "bench.json"
    want = {"size_gb": size_gb, "topics": TOPICS, "points": POINTS, "lidar": lidar,
            "version": 2}  # fmt: skip
    if stamp.exists() and json.loads(stamp.read_text()) == json.loads(json.dumps(want)):
        print(f"using the cached bag {bag} ({bag_bytes(bag) / MB:.0f} MB)")
        return bag
    write_bag(bag, size_gb, lidar)
    stamp.write_text(json.dumps(want))
    return bag


# --- the three readers --------------------------------------------------------


STORED: list[int] = []  # the .hf file's size, import by import


def run_import(bag: Path, out: Path) -> int:
    report = import_bag(bag, out, window_ns=100_000_000, overwrite=True)
    if report.problems:
        raise SystemExit(f"import problems: {report.problems}")
    STORED.append(out.stat().st_size)
    out.unlink()
    return int(report.frames)


def run_rosbags(bag: Path) -> int:
    n = 0
    with AnyReader([bag], default_typestore=TS) as r:
        for conn, _t, raw in r.messages():
            r.deserialize(raw, conn.msgtype)
            n += 1
    return n


def run_copy(bag: Path, out: Path) -> int:
    """rosbags read + deserialize, then every message's CDR bytes written to one file
    (fsync at the end): what any importer that writes the bytes pays at least."""
    n = 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with AnyReader([bag], default_typestore=TS) as r:
            for conn, _t, raw in r.messages():
                r.deserialize(raw, conn.msgtype)
                os.write(fd, raw)
                n += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    out.unlink()
    return n


def _storage_files(bag: Path) -> list[Path]:
    return sorted(bag.glob("*.mcap"))


def run_mcap(bag: Path) -> int:
    n = 0
    for path in _storage_files(bag):
        with open(path, "rb") as f:
            for _schema, _channel, message in make_reader(f).iter_messages():
                n += len(message.data) > 0
    return n


def run_mcap_ros2(bag: Path) -> int:
    n = 0
    for path in _storage_files(bag):
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory()])
            for _m in reader.iter_decoded_messages():
                n += 1
    return n


# --- main ---------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0, help="bag size (default 1.0)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each (default 3; 0: bag only)")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "hf_bench_ros",
                    help="where the bag is kept between runs (and the .hf written)")  # fmt: skip
    ap.add_argument("--lidar", choices=LIDARS, default="scan",
                    help="the lidar's points: scan (a street, default) or noise (hardly "
                         "compresses)")  # fmt: skip
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    bag = ensure_bag(args.dir, args.size_gb, args.lidar)
    if args.repeats < 1:  # --repeats 0: write the bag only
        return 0
    size = bag_bytes(bag)
    for p in bag.iterdir():  # into the page cache for every side
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    out = args.dir / "bench_import.hf"
    blosc2.available()  # the writer's lazy import of python-blosc2: not timed
    variants: dict[str, Callable[[], int]] = {
        "import": lambda: run_import(bag, out),
        "rosbags read": lambda: run_rosbags(bag),
        "rosbags read+write": lambda: run_copy(bag, args.dir / "bench_copy.bin"),
    }
    if HAVE_MCAP:
        variants["mcap read"] = lambda: run_mcap(bag)
        if DecoderFactory is not None:
            variants["mcap_ros2 decode"] = lambda: run_mcap_ros2(bag)
    load = os.getloadavg()[0]
    print(f"bag {size / MB:.0f} MB; {args.repeats} repeats of {', '.join(variants)}; "
          f"{os.cpu_count()} CPUs, load {load:.1f}")  # fmt: skip
    if not HAVE_MCAP:
        print("  mcap is not installed: no mcap read (pip install mcap)")
    elif DecoderFactory is None:
        print("  mcap_ros2 is not installed: the mcap line is a read without decoding "
              "(pip install mcap-ros2-support for the decoded one)")  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in variants}
    counts: dict[str, int] = {}
    names = list(variants)
    for rep in range(args.repeats):
        order = names[rep % len(names) :] + names[: rep % len(names)]  # rotate who goes first
        for name in order:
            t0 = time.perf_counter()
            counts[name] = variants[name]()
            times[name].append(time.perf_counter() - t0)
            print(
                f"  repeat {rep + 1}: {name:<18} {times[name][-1]:7.2f} s  "
                f"{size / MB / times[name][-1]:7.1f} MB/s  ({counts[name]} messages/frames)"
            )
    messages = counts["rosbags read"]
    print(f"\nload at the end {os.getloadavg()[0]:.1f}; the .hf file {STORED[-1] / MB:.0f} MB "
          f"({STORED[-1] / size:.0%} of the bag)\n")  # fmt: skip
    print(f"| {'measure':<18} | {'median s':>9} | {'MB/s':>7} | {'messages/s':>11} |")
    print(f"|{'-' * 20}|{'-' * 11}|{'-' * 9}|{'-' * 13}|")
    for name in names:
        med = statistics.median(times[name])
        print(f"| {name:<18} | {med:9.2f} | {size / MB / med:7.1f} | {messages / med:11.0f} |")
    print()
    imp = times["import"]
    bases = ("rosbags read", "rosbags read+write", "mcap read", "mcap_ros2 decode")
    med_of = {k: statistics.median(v) for k, v in times.items()}
    floor = med_of["rosbags read"] / med_of["rosbags read+write"]
    goals = {"rosbags read": 0.5, "rosbags read+write": 0.7}
    for base in bases:
        goal = goals.get(base)
        if base not in times:
            continue
        ratios = [b / a for a, b in zip(imp, times[base], strict=True)]
        med = statistics.median(times[base]) / statistics.median(imp)
        verdict = "" if goal is None else f"  goal >= {goal}x: {'PASS' if med >= goal else 'MISS'}"
        if base == "rosbags read":
            verdict += f" (read+write+fsync alone: {floor:.2f}x)"
        print(f"import / {base:<18} {med:.2f}x  (repeats {min(ratios):.2f}-{max(ratios):.2f}x)"
              f"{verdict}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
