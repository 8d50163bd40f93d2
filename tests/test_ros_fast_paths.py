"""The ROS importer's fast paths (docs/ROS2.md, "Measured"): a packed PointCloud2 is a view
of the message, not a copy; each decoded stream's codec is chosen from its first frame."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rosbags")

from rosbags.typesys import Stores, get_typestore

from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.ros.decode import _point_layout, pointcloud_points
from hyperframes.ros.ingest import _codec

T = get_typestore(Stores.ROS2_HUMBLE).types
RNG = np.random.default_rng(3)


def _cloud(dt: np.dtype, names: list[str], kinds: list[int], height: int, width: int,
           row_pad: int = 0) -> tuple[object, np.ndarray]:  # fmt: skip
    pf = T["sensor_msgs/msg/PointField"]
    fields = [pf(name=n, offset=dt.fields[n][1], datatype=k, count=1)
              for n, k in zip(names, kinds, strict=True)]  # fmt: skip
    pts = np.zeros((height, width), dt)
    for n in names:
        pts[n] = RNG.integers(0, 1000, pts.shape)
    rows = np.zeros((height, width * dt.itemsize + row_pad), np.uint8)
    rows[:, : width * dt.itemsize] = pts.view(np.uint8).reshape(height, -1)
    msg = T["sensor_msgs/msg/PointCloud2"](
        header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=1, nanosec=0),
                                        frame_id="l"),
        height=height, width=width, fields=fields, is_bigendian=False, point_step=dt.itemsize,
        row_step=width * dt.itemsize + row_pad, data=rows.reshape(-1), is_dense=True,
    )  # fmt: skip
    return msg, pts.reshape(-1)


XYZI = ["x", "y", "z", "intensity"]


def test_a_packed_cloud_is_a_view_of_the_message() -> None:
    dt = np.dtype({"names": XYZI, "formats": ["<f4"] * 4, "offsets": [0, 4, 8, 12],
                   "itemsize": 16})  # fmt: skip
    for height in (1, 3):
        msg, pts = _cloud(dt, XYZI, [7] * 4, height, 40)
        _, packed, _ = _point_layout(msg)
        got = pointcloud_points(msg, packed)
        assert np.shares_memory(got, msg.data)  # type: ignore[attr-defined]
        assert got.tobytes() == pts.tobytes()


@pytest.mark.parametrize("row_pad", [0, 8])
def test_padded_clouds_are_packed_field_by_field(row_pad: int) -> None:
    # x, y, z, intensity then 4 bytes of padding (point_step 20), and rows padded
    dt = np.dtype({"names": XYZI, "formats": ["<f4"] * 4, "offsets": [0, 4, 8, 12],
                   "itemsize": 20})  # fmt: skip
    msg, pts = _cloud(dt, XYZI, [7] * 4, 2, 30, row_pad)
    _, packed, _ = _point_layout(msg)
    got = pointcloud_points(msg, packed)
    assert not np.shares_memory(got, msg.data)  # type: ignore[attr-defined]
    assert got.dtype.itemsize == 16
    for n in XYZI:
        assert got[n].tobytes() == pts[n].tobytes()


def _stream(encoding: str, dtype: str | None = None, shape: tuple[int, ...] | None = None,
            codec: str | None = None) -> StreamInfo:  # fmt: skip
    return StreamInfo(0, "s", SensorKind.LIDAR, encoding, dtype, shape, codec=codec)


def test_the_codec_follows_the_first_frame() -> None:
    lidar = _stream("xyzi-f32")
    noise = RNG.bytes(400_000)  # does not shrink: stored as is
    assert _codec(lidar, noise).codec == "none"
    az = np.linspace(0, 2 * np.pi, 25_000)  # one ring: smooth ranges, smooth intensities
    r = np.round(20 + np.sin(3 * az) + RNG.normal(0, 0.01, az.size), 3)
    ring = np.stack([r * np.cos(az), r * np.sin(az), -0.09 * r,
                     np.round(50 + 10 * np.sin(az))], -1).astype("<f4")  # fmt: skip
    assert _codec(lidar, ring.tobytes()).codec is None  # the writer's default (shuffled)
    orientation = _stream("imu-orientation-f64", "<f8", (31,))
    record = np.r_[[0.1, 0.2, 0.3, 0.9], np.full(9, 0.01), np.zeros(18)].astype("<f8")
    assert _codec(orientation, record.tobytes()).codec == "lz4"  # runs of equal bytes
    assert _codec(_stream("jpeg"), noise).codec is None  # precompressed: never
    assert _codec(_stream("xyzi-f32", codec="zstd"), noise).codec == "zstd"  # set: kept
    assert _codec(lidar, b"").codec is None
