"""ROS 2 out (hyperframes/ros/export.py, docs/ROS2.md "ROS 2 out"): read back by ``rosbags``.

A bag written by ``rosbags`` (the bag of tests/test_ros_import.py), imported
and exported again with ``--profile ros2``, reads back message by message
equal to the original; a native recording exports and every topic reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
pytest.importorskip("mcap")

from mcap.reader import make_reader
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin
from test_ros_import import TOPICS, _read_back, _stamp, _write_bag

from hyperframes.cli.main import main
from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.mcap import check_mcap
from hyperframes.reader import HyperframeReader
from hyperframes.ros.export import export_ros2, plan_channels
from hyperframes.synth import profile, write_synthetic
from hyperframes.writer import HyperframeWriter, WriteFrame

N = 12


def _points(msg: object) -> dict[str, np.ndarray]:
    """A PointCloud2's points by field name (its own offsets and point_step)."""
    types = {2: "u1", 4: "<u2", 7: "<f4", 8: "<f8"}
    fields = msg.fields  # type: ignore[attr-defined]
    dt = np.dtype({"names": [f.name for f in fields],
                   "formats": [types[f.datatype] for f in fields],
                   "offsets": [f.offset for f in fields],
                   "itemsize": msg.point_step})  # type: ignore[attr-defined]  # fmt: skip
    arr = np.frombuffer(msg.data.tobytes(), dt)  # type: ignore[attr-defined]
    return {n: arr[n] for n in dt.names or ()}


def _equal(topic: str, a: object, b: object) -> None:
    """``b`` (exported) carries what ``a`` (the original) carries, its frame id too."""
    if hasattr(a, "header"):
        assert _stamp(a) == _stamp(b), topic
        assert a.header.frame_id == b.header.frame_id, topic  # type: ignore[attr-defined]
    if topic == "/cam/compressed":
        assert a.format == b.format and a.data.tobytes() == b.data.tobytes()  # type: ignore[attr-defined]
    elif topic == "/cam_raw":
        for k in ("width", "height", "encoding"):
            assert getattr(a, k) == getattr(b, k), k
        w = a.width * 3  # type: ignore[attr-defined]
        rows_a = a.data.reshape(a.height, a.step)[:, :w]  # type: ignore[attr-defined]
        rows_b = b.data.reshape(b.height, b.step)[:, :w]  # type: ignore[attr-defined]
        np.testing.assert_array_equal(rows_a, rows_b)
    elif topic.startswith("/points"):
        pa, pb = _points(a), _points(b)
        assert list(pa) == list(pb)
        for n in pa:
            assert pa[n].tobytes() == pb[n].tobytes(), n
    elif topic == "/imu":
        for k in ("orientation", "angular_velocity", "linear_acceleration"):
            va, vb = getattr(a, k), getattr(b, k)
            assert [getattr(va, c) for c in "xyz"] == [getattr(vb, c) for c in "xyz"], k
        assert a.orientation.w == b.orientation.w  # type: ignore[attr-defined]
        for k in ("orientation", "angular_velocity", "linear_acceleration"):
            ca, cb = getattr(a, f"{k}_covariance"), getattr(b, f"{k}_covariance")
            assert ca.tobytes() == cb.tobytes(), k
    elif topic == "/fix":
        for k in ("latitude", "longitude", "altitude", "position_covariance_type"):
            assert getattr(a, k) == getattr(b, k), k
        assert (a.status.status, a.status.service) == (b.status.status, b.status.service)  # type: ignore[attr-defined]
        assert a.position_covariance.tobytes() == b.position_covariance.tobytes()  # type: ignore[attr-defined]


def _raw(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    out: dict[str, list[tuple[int, bytes]]] = {}
    with AnyReader([path]) as r:
        for conn, t, raw in r.messages():
            out.setdefault(conn.topic, []).append((t, bytes(raw)))
    return out


def test_a_bag_comes_back_message_by_message(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(N), StoragePlugin.MCAP)
    hf, out = tmp_path / "b.hf", tmp_path / "back.mcap"
    assert main(["import", str(bag), str(hf), "--window-ms", "100"]) == 0
    assert main(["export", str(hf), "--mcap", str(out), "--profile", "ros2", "-q"]) == 0
    assert check_mcap(out).ok
    with open(out, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "ros2"
        summary = reader.get_summary()
        assert summary is not None
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
        assert "hyperframes" in {m.name for m in reader.iter_metadata()}
        (att,) = list(reader.iter_attachments())
        assert att.name == "hyperframes/events.json" and isinstance(json.loads(att.data), list)
    ref, got = _read_back(bag), _read_back(out)
    assert set(got) == set(TOPICS)
    with AnyReader([bag]) as a, AnyReader([out]) as b:
        types_a = {c.topic: c.msgtype for c in a.connections}
        assert types_a == {c.topic: c.msgtype for c in b.connections}
    for topic in TOPICS:
        assert len(got[topic]) == len(ref[topic]), topic
        for (log_a, msg_a), (log_b, msg_b) in zip(ref[topic], got[topic], strict=True):
            assert log_a == log_b, topic  # the log time comes back
            _equal(topic, msg_a, msg_b)
    # CDR pass-through: the bytes unchanged
    assert _raw(bag)["/tf_static"] == _raw(out)["/tf_static"]


def test_a_rosbag2_directory(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(4), StoragePlugin.SQLITE3)
    hf = tmp_path / "b.hf"
    assert main(["import", str(bag), str(hf), "--window-ms", "100"]) == 0
    back = tmp_path / "back"
    report = export_ros2([hf], back, rosbag2=True)
    assert (back / "metadata.yaml").is_file() and not report.left_out
    ref, got = _read_back(bag), _read_back(back)
    for topic in TOPICS:
        assert len(got[topic]) == len(ref[topic]), topic
        for (_, a), (_, b) in zip(ref[topic], got[topic], strict=True):
            _equal(topic, a, b)
    assert "hyperframes.events" in (back / "metadata.yaml").read_text()
    with pytest.raises(FileExistsError):
        export_ros2([hf], back, rosbag2=True)


def test_a_native_recording_plays_in_ros(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    hf, out = tmp_path / "demo.hf", tmp_path / "demo.mcap"
    write_synthetic(str(hf), profile("demo"), 1.0)
    assert main(["export", str(hf), "--mcap", str(out), "--profile", "ros2", "-q"]) == 0
    text = capsys.readouterr().out
    assert check_mcap(out).ok
    assert main(["export", str(hf)]) == 2  # no output named
    assert "--mcap" in capsys.readouterr().err
    assert "sensor_msgs/msg/CompressedImage" in text and "left out" not in text
    want = {"/cam_front": "sensor_msgs/msg/CompressedImage",
            "/cam_rear": "sensor_msgs/msg/CompressedImage",
            "/lidar_top": "sensor_msgs/msg/PointCloud2", "/imu": "sensor_msgs/msg/Imu"}  # fmt: skip
    with AnyReader([out]) as r, HyperframeReader(hf) as h:
        assert {c.topic: c.msgtype for c in r.connections} == want
        counts: dict[str, int] = {}
        for conn, _t, raw in r.messages():
            msg = r.deserialize(raw, conn.msgtype)
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
            if conn.topic == "/lidar_top" and counts[conn.topic] == 1:
                first = next(iter(h.frames("lidar_top")))
                assert _stamp(msg) == first.timestamp_ns
                pts = _points(msg)
                assert list(pts) == ["x", "y", "z", "intensity"]
                np.testing.assert_array_equal(pts["intensity"], first.array()[:, 3])
            if conn.topic == "/imu":
                assert msg.orientation_covariance[0] == -1.0  # no orientation stream
        for name in ("cam_front", "cam_rear", "lidar_top", "imu"):
            assert counts[f"/{name}"] == len(h.timestamps(name)), name


def test_other_streams_and_what_is_left_out(tmp_path: Path) -> None:
    streams = [
        StreamInfo(0, "video", SensorKind.CAMERA, "h265"),
        StreamInfo(1, "gray", SensorKind.CAMERA, "raw-gray16", extra={"width": 3, "height": 2}),
        StreamInfo(2, "blob", SensorKind.OTHER, "bytes"),
        StreamInfo(3, "cam", SensorKind.CAMERA, "jpeg",
                   extra={"ros": {"topic": "/front/image/compressed", "frame_id": "front"}}),
    ]  # fmt: skip
    channels, left = plan_channels(streams)
    assert {c.stream: (c.topic, c.msgtype) for c in channels} == {
        "video": ("/video", "foxglove_msgs/msg/CompressedVideo"),
        "gray": ("/gray", "sensor_msgs/msg/Image"),
        "cam": ("/front/image/compressed", "sensor_msgs/msg/CompressedImage"),
    }
    assert list(left) == ["blob"] and "bytes" in left["blob"]
    hf, out = tmp_path / "x.hf", tmp_path / "x.mcap"
    au = b"\x00\x00\x00\x01\x26\x01" + bytes(10)
    px = np.arange(6, dtype="<u2").tobytes()
    with HyperframeWriter(hf, streams, 100_000_000) as w:
        w.write_window(10, [WriteFrame(0, 1_000_000_005, au, 1), WriteFrame(1, 1_000_000_006, px),
                            WriteFrame(2, 1_000_000_007, b"x")])  # fmt: skip
    report = export_ros2([hf], out)
    assert report.left_out == {"blob": left["blob"]}
    with AnyReader([out]) as r:
        msgs = {c.topic: r.deserialize(raw, c.msgtype) for c, _t, raw in r.messages()}
    assert msgs["/video"].data.tobytes() == au and msgs["/video"].format == "h265"
    assert msgs["/video"].timestamp.nanosec == 5
    g = msgs["/gray"]
    assert (g.encoding, g.step, g.width, g.height) == ("mono16", 6, 3, 2)
    assert g.data.tobytes() == px and _stamp(g) == 1_000_000_006
