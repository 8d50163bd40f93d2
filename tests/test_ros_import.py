"""ROS 2 bags in (hyperframes/ros, docs/ROS2.md): bags written by ``rosbags`` itself.

Each bag holds a CompressedImage camera (real JPEG), a bgr8 Image with row
padding, two PointCloud2 (x, y, z, intensity; and one with a ``ring`` field),
an Imu, a NavSatFix and /tf_static; header stamps 1-110 ms before the log
times. The import is checked against rosbags' own reader.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")

from PIL import Image
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader
from hyperframes.ros import import_bag
from hyperframes.ros.decode import image_pixels

TS = get_typestore(Stores.ROS2_HUMBLE)
T0 = 1_735_689_600_000_000_000
N = 20  # messages per topic
W, H, STEP = 8, 6, 8 * 3 + 8  # bgr8 rows padded by 8 bytes
RNG = np.random.default_rng(7)
JPEG = []
for _i in range(3):
    buf = io.BytesIO()
    Image.fromarray(RNG.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(buf, "JPEG")
    JPEG.append(buf.getvalue())

T = TS.types


def _header(stamp: int, frame: str) -> object:
    time = T["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9)
    return T["std_msgs/msg/Header"](stamp=time, frame_id=frame)


def _cloud(stamp: int, i: int, ring: bool) -> tuple[object, np.ndarray]:
    pf = T["sensor_msgs/msg/PointField"]
    fields = [pf(name=n, offset=4 * k, datatype=7, count=1)
              for k, n in enumerate(["x", "y", "z", "intensity"])]  # fmt: skip
    dt = np.dtype({"names": ["x", "y", "z", "intensity"], "formats": ["<f4"] * 4,
                   "offsets": [0, 4, 8, 12], "itemsize": 16})  # fmt: skip
    if ring:
        fields.append(pf(name="ring", offset=16, datatype=4, count=1))
        dt = np.dtype({"names": [*dt.names, "ring"], "formats": ["<f4"] * 4 + ["<u2"],
                       "offsets": [0, 4, 8, 12, 16], "itemsize": 24})  # fmt: skip
    pts = np.zeros(50 + i, dt)
    for n in ("x", "y", "z", "intensity"):
        pts[n] = RNG.standard_normal(pts.size)
    if ring:
        pts["ring"] = np.arange(pts.size) % 16
    data = np.frombuffer(pts.tobytes(), np.uint8)
    msg = T["sensor_msgs/msg/PointCloud2"](
        header=_header(stamp, "lidar"), height=1, width=pts.size, fields=fields,
        is_bigendian=False, point_step=dt.itemsize, row_step=dt.itemsize * pts.size,
        data=data, is_dense=True,
    )  # fmt: skip
    return msg, pts


def _messages(i: int) -> list[tuple[str, str, int, object]]:
    """(topic, type, log time, message) of step ``i``."""
    log = T0 + i * 100_000_000
    stamp = log - (1 + (i * 37) % 110) * 1_000_000
    v3, q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    px = RNG.integers(0, 255, (H, STEP), dtype=np.uint8).reshape(-1)
    out = [
        ("/cam/compressed", "sensor_msgs/msg/CompressedImage", log, T[
            "sensor_msgs/msg/CompressedImage"](header=_header(stamp, "cam"), format="jpeg",
                                               data=np.frombuffer(JPEG[i % 3], np.uint8))),
        ("/cam_raw", "sensor_msgs/msg/Image", log + 1000, T["sensor_msgs/msg/Image"](
            header=_header(stamp, "raw"), height=H, width=W, encoding="bgr8", is_bigendian=0,
            step=STEP, data=px)),
        ("/points", "sensor_msgs/msg/PointCloud2", log + 2000, _cloud(stamp, i, False)[0]),
        ("/points_ring", "sensor_msgs/msg/PointCloud2", log + 3000, _cloud(stamp, i, True)[0]),
        ("/imu", "sensor_msgs/msg/Imu", log + 4000, T["sensor_msgs/msg/Imu"](
            header=_header(stamp, "imu"), orientation=q(x=0.0, y=0.0, z=0.1 * i, w=1.0),
            orientation_covariance=np.full(9, 0.5), angular_velocity=v3(x=i / 3, y=-0.0, z=1e-300),
            angular_velocity_covariance=np.zeros(9), linear_acceleration=v3(x=9.81, y=i / 7, z=-i),
            linear_acceleration_covariance=np.arange(9.0))),
        ("/fix", "sensor_msgs/msg/NavSatFix", log + 5000, T["sensor_msgs/msg/NavSatFix"](
            header=_header(stamp, "gps"), status=T["sensor_msgs/msg/NavSatStatus"](
                status=0, service=1), latitude=48.1 + i * 1e-6, longitude=11.5, altitude=520.0,
            position_covariance=np.eye(3).reshape(-1), position_covariance_type=2)),
    ]  # fmt: skip
    if i == 0:
        tf = T["geometry_msgs/msg/TransformStamped"](
            header=_header(stamp, "base"), child_frame_id="lidar",
            transform=T["geometry_msgs/msg/Transform"](
                translation=v3(x=1.0, y=0.0, z=1.8), rotation=q(x=0.0, y=0.0, z=0.0, w=1.0)))
        out.append(("/tf_static", "tf2_msgs/msg/TFMessage", log + 6000,
                    T["tf2_msgs/msg/TFMessage"](transforms=[tf])))  # fmt: skip
    return out


TOPICS = ["/cam/compressed", "/cam_raw", "/fix", "/imu", "/points", "/points_ring", "/tf_static"]


def _write_bag(path: Path, steps: range, plugin: StoragePlugin,
               compression: CompressionMode | None = None) -> None:  # fmt: skip
    w = Writer(path, version=9, storage_plugin=plugin)
    if compression is not None:
        w.set_compression(compression, CompressionFormat.ZSTD)
    with w:
        conns = {topic: w.add_connection(topic, typ, typestore=TS)
                 for topic, typ, _, _ in _messages(0)}  # fmt: skip
        for i in steps:
            for topic, typ, log, msg in _messages(i):
                w.write(conns[topic], log, TS.serialize_cdr(msg, typ))


def _read_back(bag: Path) -> dict[str, list[tuple[int, object]]]:
    """Every message, decoded by rosbags (the second decoder)."""
    out: dict[str, list[tuple[int, object]]] = {}
    with AnyReader([bag]) as r:
        for conn, t, raw in r.messages():
            out.setdefault(conn.topic, []).append((t, r.deserialize(raw, conn.msgtype)))
    return out


def _stamp(msg: object) -> int:
    s = msg.header.stamp  # type: ignore[attr-defined]
    return int(s.sec) * 10**9 + int(s.nanosec)


def _check(bag: Path, out: Path, time: str = "header") -> None:
    report = import_bag(bag, out, window_ns=100_000_000, time_source=time)  # type: ignore[arg-type]
    assert not report.problems, report.problems
    ref = _read_back(bag)
    with HyperframeReader(out) as r:
        by_name = {s.name: s for s in r.streams.values()}
        assert {t.topic for t in report.topics.values()} == set(TOPICS)
        for topic in TOPICS:
            stream = report.topics[topic].streams[0]
            frames = list(r.frames(stream.name))
            msgs = ref[topic]
            assert len(frames) == len(msgs), topic
            for f, (log, msg) in zip(frames, msgs, strict=True):
                if topic == "/tf_static":
                    assert f.timestamp_ns == log  # no header: log time
                    continue
                assert f.timestamp_ns == (_stamp(msg) if time == "header" else log), topic
                if topic == "/cam/compressed":
                    assert f.data.tobytes() == msg.data.tobytes()
                    assert f.image().shape == (16, 16, 3)
                elif topic == "/cam_raw":
                    assert stream.encoding == "raw-bgr"
                    rows = msg.data.reshape(H, STEP)[:, : W * 3]
                    assert f.data.tobytes() == rows.tobytes()
                elif topic == "/points":
                    assert stream.encoding == "xyzi-f32"
                    pts = msg.data.view("<f4").reshape(-1, 4)
                    np.testing.assert_array_equal(f.array(), pts)
                elif topic == "/points_ring":
                    got = f.array()
                    names = by_name["points_ring"].extra["fields"]
                    assert names == ["x", "y", "z", "intensity", "ring"]
                    want = np.frombuffer(msg.data.tobytes(), np.dtype(
                        {"names": names, "formats": ["<f4"] * 4 + ["<u2"],
                         "offsets": [0, 4, 8, 12, 16], "itemsize": 24}))  # fmt: skip
                    for k, n in enumerate(names):
                        np.testing.assert_array_equal(got[f"f{k}"], want[n])
                elif topic == "/imu":
                    a, g = msg.linear_acceleration, msg.angular_velocity
                    want = np.array([a.x, a.y, a.z, g.x, g.y, g.z])
                    assert f.array().tobytes() == want.astype("<f8").tobytes()
                elif topic == "/fix":
                    assert f.array()[:3].tolist() == [msg.latitude, msg.longitude, msg.altitude]
        orient = list(r.frames("imu.orientation"))
        assert len(orient) == len(ref["/imu"])
        assert orient[3].array()[:4].tolist() == [0.0, 0.0, 0.1 * 3, 1.0]
        tf = r.metadata.extra["ros"]["tf_static"]
        assert tf[0]["child"] == "lidar" and tf[0]["translation"] == [1.0, 0.0, 1.8]


@pytest.mark.parametrize("plugin", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_a_bag_imports_on_header_time(tmp_path: Path, plugin: StoragePlugin) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(N), plugin)
    _check(bag, tmp_path / "out.hf")
    (storage,) = [p for p in bag.iterdir() if p.suffix in (".mcap", ".db3")]
    _check(storage, tmp_path / "file.hf")  # the storage file alone


def test_log_time_and_compression(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(N), StoragePlugin.MCAP, CompressionMode.MESSAGE)
    _check(bag, tmp_path / "out.hf", time="log")
    bag2 = tmp_path / "bag2"
    _write_bag(bag2, range(N), StoragePlugin.SQLITE3, CompressionMode.FILE)
    _check(bag2, tmp_path / "out2.hf")


def test_splits_join_into_one_recording(tmp_path: Path) -> None:
    a, b, bag = tmp_path / "a", tmp_path / "b", tmp_path / "bag"
    _write_bag(a, range(10), StoragePlugin.MCAP)
    _write_bag(b, range(10, N), StoragePlugin.MCAP)  # no /tf_static message in this split
    bag.mkdir()
    ma = yaml.safe_load((a / "metadata.yaml").read_text())
    mb = yaml.safe_load((b / "metadata.yaml").read_text())
    info, info_b = ma["rosbag2_bagfile_information"], mb["rosbag2_bagfile_information"]
    shutil.move(a / "a.mcap", bag / "bag_0.mcap")
    shutil.move(b / "b.mcap", bag / "bag_1.mcap")
    info["relative_file_paths"] = ["bag_0.mcap", "bag_1.mcap"]
    info["files"][0]["path"] = "bag_0.mcap"
    info["files"].append({**info_b["files"][0], "path": "bag_1.mcap"})
    counts = {t["topic_metadata"]["name"]: t for t in info_b["topics_with_message_count"]}
    for t in info["topics_with_message_count"]:
        t["message_count"] += counts[t["topic_metadata"]["name"]]["message_count"]
    info["message_count"] += info_b["message_count"]
    info["duration"]["nanoseconds"] = info_b["starting_time"]["nanoseconds_since_epoch"] + \
        info_b["duration"]["nanoseconds"] - info["starting_time"]["nanoseconds_since_epoch"]
    (bag / "metadata.yaml").write_text(yaml.safe_dump(ma))
    _check(bag, tmp_path / "out.hf")
    # the second split alone: the same topics and stream ids, /tf_static with no frame
    r1 = import_bag(bag / "bag_1.mcap", tmp_path / "x.hf", window_ns=100_000_000)
    with HyperframeReader(tmp_path / "out.hf") as r:
        ids = {s.name: s.id for s in r.streams.values()}
    assert {s.name: s.id for t in r1.topics.values() for s in t.streams} == ids


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(5), StoragePlugin.MCAP)
    code = main(["import", str(bag), str(tmp_path / "out.hf"), "--window-ms", "100",
                 "--map", "/cam/compressed=cam_front", "--all-topics"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cam_front" in out and "jpeg" in out and "header.stamp" in out
    assert "kept as CDR: /tf_static" in out and "no header (log time): /tf_static" in out
    (storage,) = bag.glob("*.mcap")
    assert main(["import", str(storage), str(tmp_path / "o2.hf"), "--window-ms", "100"]) == 0


def test_image_pixels_big_endian_mono16() -> None:
    img = T["sensor_msgs/msg/Image"](
        header=_header(T0, "d"), height=2, width=3, encoding="mono16", is_bigendian=1,
        step=8, data=np.array([0, 1, 0, 2, 1, 0, 9, 9, 0, 3, 0, 4, 0, 5, 9, 9], np.uint8),
    )  # fmt: skip
    assert np.frombuffer(image_pixels(img), "<u2").tolist() == [1, 2, 256, 3, 4, 5]
