"""ROS 2 messages to this project's streams: pure (a deserialized message in, payloads out).

:func:`plan_topic` decides, from a topic's type and its first message, which
streams it becomes (:class:`TopicPlan`); ``plan.decode(msg, raw)`` turns each
message into one payload per stream. Messages are the objects ``rosbags``
deserializes (attributes as in the ``.msg`` files); ``raw`` is the CDR bytes.

- sensor_msgs/CompressedImage: camera, ``jpeg``/``png`` (``format``), the bytes unchanged;
- sensor_msgs/Image: camera, ``raw-rgb``/``raw-bgr``/``raw-gray8``/``raw-gray16``/``raw-f32``
  (rows unpadded, little endian), width/height in ``extra``;
- sensor_msgs/PointCloud2: lidar, ``xyzi-f32`` for x, y, z, intensity float32, ``points-f32``
  ``(-1, k)`` for other all-float32 fields, else ``points`` (a packed structured dtype,
  ``(-1,)``); the field names in ``extra["fields"]``;
- sensor_msgs/Imu: ``imu-f64`` (accel xyz, gyro xyz) and ``NAME.orientation``, 31 float64
  (orientation xyzw; the orientation, angular velocity, linear acceleration covariances);
- sensor_msgs/NavSatFix: gnss, ``navsatfix-f64``, 15 float64 (latitude, longitude,
  altitude, status, service, position covariance 9, covariance type);
- sensor_msgs/CameraInfo: ``ros2-cdr`` too; the importer puts the first message's
  intrinsics (:func:`camera_intrinsics`) into the ``extra["intrinsics"]`` of the cameras
  in the same namespace (:func:`camera_namespace`);
- anything else (tf2_msgs/TFMessage too): ``ros2-cdr``, the CDR message unchanged, its
  definition in ``extra["ros"]``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hyperframes.format.streams import SensorKind, StreamInfo, TimestampSource

__all__ = [
    "CDR_ENCODING",
    "IMU_EXTRA_ENCODING",
    "NAVSAT_ENCODING",
    "TopicPlan",
    "camera_intrinsics",
    "camera_namespace",
    "header_stamp",
    "plan_topic",
    "image_pixels",
    "pointcloud_points",
    "imu_values",
    "navsat_values",
]

CDR_ENCODING = "ros2-cdr"
IMU_EXTRA_ENCODING = "imu-orientation-f64"
NAVSAT_ENCODING = "navsatfix-f64"

# sensor_msgs/Image encoding -> (our encoding, numpy dtype of one sample, samples per pixel)
IMAGE_ENCODINGS: dict[str, tuple[str, str, int]] = {
    "rgb8": ("raw-rgb", "u1", 3),
    "bgr8": ("raw-bgr", "u1", 3),
    "mono8": ("raw-gray8", "u1", 1),
    "8UC1": ("raw-gray8", "u1", 1),
    "mono16": ("raw-gray16", "u2", 1),
    "16UC1": ("raw-gray16", "u2", 1),
    "32FC1": ("raw-f32", "f4", 1),
}
# sensor_msgs/PointField datatype -> numpy type
_POINT_TYPES = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}

#: A payload: the bytes, or a read-only view of the message's buffer (no copy) that stays
#: valid while the view is kept (``rosbags`` gives every message its own ``bytes``).
Payload = bytes | memoryview
Decode = Callable[[Any, bytes], tuple[Payload, ...]]


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """What one topic becomes: its streams (ids still 0), and how a message becomes payloads.

    ``cdr_reason`` says why a topic stays CDR (None when decoded).
    """

    streams: tuple[StreamInfo, ...]
    decode: Decode
    has_header: bool
    cdr_reason: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def header_stamp(msg: Any) -> int | None:
    """The message's ``header.stamp`` in ns, or None without a header."""
    header = getattr(msg, "header", None)
    stamp = getattr(header, "stamp", None)
    if stamp is None:
        return None
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def image_pixels(msg: Any) -> bytes:
    """A sensor_msgs/Image's pixels: rows without padding, samples little endian."""
    _, sample, channels = IMAGE_ENCODINGS[msg.encoding]
    dt = np.dtype(sample).newbyteorder(">" if msg.is_bigendian else "<")
    row = msg.width * channels * dt.itemsize
    data = np.asarray(msg.data, np.uint8)
    if msg.step < row or data.size < msg.step * (msg.height - 1) + row:
        raise ValueError(f"image of {data.size} bytes is not {msg.height} rows of step {msg.step}")
    rows = np.lib.stride_tricks.as_strided(data, (msg.height, row), (msg.step, 1))
    px = np.ascontiguousarray(rows).view(dt)
    return px.astype(dt.newbyteorder("<"), copy=False).tobytes()


def camera_namespace(topic: str) -> str:
    """The namespace a camera topic or its CameraInfo lives in: ``/cam/front`` for
    ``/cam/front/camera_info``, ``/cam/front/image_raw`` and ``/cam/front/image_raw/compressed``
    (the last segment dropped, and ``compressed`` after an image topic)."""
    parts = topic.rstrip("/").split("/")
    if len(parts) > 2 and parts[-1] in ("compressed", "compressedDepth", "theora"):
        parts = parts[:-1]
    return "/".join(parts[:-1]) or "/"


def camera_intrinsics(msg: Any) -> dict[str, Any]:
    """A sensor_msgs/CameraInfo as JSON: width, height, distortion_model, d, k (3x3), r (3x3),
    p (3x4), row-major, and its frame_id."""
    return {
        "width": int(msg.width),
        "height": int(msg.height),
        "distortion_model": str(msg.distortion_model),
        "d": [float(v) for v in msg.d],
        "k": [float(v) for v in msg.k],
        "r": [float(v) for v in msg.r],
        "p": [float(v) for v in msg.p],
        "frame_id": str(msg.header.frame_id),
    }


def _point_layout(msg: Any) -> tuple[np.dtype[Any], np.dtype[Any], list[str]]:
    """(the message's dtype with ``point_step`` padding, the packed dtype, field names)."""
    order = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for f in sorted(msg.fields, key=lambda f: f.offset):
        if f.datatype not in _POINT_TYPES:
            raise ValueError(f"point field {f.name!r}: unknown datatype {f.datatype}")
        base = order + _POINT_TYPES[f.datatype]
        names.append(f.name)
        formats.append(base if f.count <= 1 else f"({f.count},){base}")
        offsets.append(f.offset)
    padded = np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": msg.point_step}
    )
    packed = np.dtype({"names": names, "formats": [f.replace(">", "<") for f in formats]})
    return padded, packed, names


def pointcloud_points(msg: Any, packed: np.dtype[Any]) -> np.ndarray:
    """A PointCloud2's points as a packed array of ``packed`` (row padding, field padding
    and byte order removed).

    Where the message is already packed (no padding between fields or after the last,
    little endian, rows without padding: the usual x, y, z, intensity float32 of
    ``point_step`` 16) the result is a read-only view of ``msg.data``, not a copy.
    """
    padded, _, _ = _point_layout(msg)
    data = np.asarray(msg.data, np.uint8)
    row = msg.width * msg.point_step
    if msg.row_step < row or data.size < msg.row_step * max(msg.height - 1, 0) + row:
        raise ValueError(f"point cloud of {data.size} bytes is not {msg.height}x{msg.width}")
    if padded == packed and (msg.row_step == row or msg.height <= 1):
        return data[: row * msg.height].view(packed)  # packed already: a view
    rows = np.lib.stride_tricks.as_strided(data, (msg.height, row), (msg.row_step, 1))
    points = np.ascontiguousarray(rows).view(padded).reshape(-1)
    out = np.empty(points.shape, packed)
    for name in packed.names or ():
        out[name] = points[name]
    return out


def _view(a: np.ndarray) -> memoryview:
    """The bytes of a contiguous array, as a flat byte view (no copy)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


_F8X6 = struct.Struct("<6d")
_F8X4 = struct.Struct("<4d")


def imu_values(msg: Any) -> tuple[bytes, bytes]:
    """``imu-f64`` (accel xyz, gyro xyz) and the orientation stream's 31 doubles."""
    a, g, q = msg.linear_acceleration, msg.angular_velocity, msg.orientation
    main = _F8X6.pack(a.x, a.y, a.z, g.x, g.y, g.z)  # 200 a second: struct, not numpy
    extra = b"".join((
        _F8X4.pack(q.x, q.y, q.z, q.w),
        np.asarray(msg.orientation_covariance, "<f8").tobytes(),
        np.asarray(msg.angular_velocity_covariance, "<f8").tobytes(),
        np.asarray(msg.linear_acceleration_covariance, "<f8").tobytes(),
    ))  # fmt: skip
    if len(extra) != 31 * 8:
        raise ValueError(f"Imu covariances of {len(extra) // 8 - 4} values, not 27")
    return main, extra


def navsat_values(msg: Any) -> bytes:
    """The ``navsatfix-f64`` record of a NavSatFix (15 float64, see the module docstring)."""
    head = [msg.latitude, msg.longitude, msg.altitude, msg.status.status, msg.status.service]
    return np.concatenate([
        np.array(head, "<f8"),
        np.asarray(msg.position_covariance, "<f8"),
        np.array([msg.position_covariance_type], "<f8"),
    ]).tobytes()  # fmt: skip


def _cdr(name: str, msgtype: str, msgdef: str, reason: str, has_header: bool) -> TopicPlan:
    extra = {"ros": {"type": msgtype, "definition": msgdef, "serialization": "cdr"}}
    stream = StreamInfo(0, name, SensorKind.OTHER, CDR_ENCODING,
                        timestamp_source=TimestampSource.HOST, extra=extra)  # fmt: skip
    return TopicPlan((stream,), lambda _msg, raw: (raw,), has_header, reason)


def plan_topic(name: str, msgtype: str, msgdef: str, first: Any) -> TopicPlan:
    """The streams topic ``name`` of type ``msgtype`` (``pkg/msg/Type``) becomes; ``first``
    is its first message (deserialized; None when it does not deserialize)."""
    has_header = header_stamp(first) is not None
    ros = {"type": msgtype}
    host = TimestampSource.HOST
    short = msgtype.replace("/msg/", "/")
    if first is None:
        return _cdr(name, msgtype, msgdef, "does not deserialize", False)
    if short == "sensor_msgs/CompressedImage":
        fmt = str(first.format).lower()
        enc = "png" if "png" in fmt else "jpeg" if ("jpeg" in fmt or "jpg" in fmt) else None
        if enc is None or "compresseddepth" in fmt:
            return _cdr(name, msgtype, msgdef, f"CompressedImage format {first.format!r}", True)
        ros["format"] = str(first.format)
        s = StreamInfo(0, name, SensorKind.CAMERA, enc, timestamp_source=host,
                       extra={"ros": ros})  # fmt: skip
        return TopicPlan((s,), lambda m, _raw: (_view(m.data),), True)
    if short == "sensor_msgs/Image":
        if first.encoding not in IMAGE_ENCODINGS:
            return _cdr(name, msgtype, msgdef, f"Image encoding {first.encoding!r}", True)
        enc, _, _ = IMAGE_ENCODINGS[first.encoding]
        ros["encoding"] = str(first.encoding)
        extra = {"width": int(first.width), "height": int(first.height), "ros": ros}
        s = StreamInfo(0, name, SensorKind.CAMERA, enc, timestamp_source=host, extra=extra)

        def image(m: Any, _raw: bytes) -> tuple[bytes, ...]:
            if (m.width, m.height, m.encoding) != (first.width, first.height, first.encoding):
                raise ValueError(f"image {m.width}x{m.height} {m.encoding} after "
                                 f"{first.width}x{first.height} {first.encoding}")  # fmt: skip
            return (image_pixels(m),)

        return TopicPlan((s,), image, True)
    if short == "sensor_msgs/PointCloud2":
        try:
            _, packed, names = _point_layout(first)
        except ValueError as exc:
            return _cdr(name, msgtype, msgdef, str(exc), True)
        kinds = {packed[n].str for n in names} if all(not packed[n].shape for n in names) else {}
        if names == ["x", "y", "z", "intensity"] and kinds == {"<f4"}:
            s = StreamInfo(0, name, SensorKind.LIDAR, "xyzi-f32", timestamp_source=host,
                           extra={"fields": names, "ros": ros})  # fmt: skip
        elif kinds == {"<f4"}:
            s = StreamInfo(0, name, SensorKind.LIDAR, "points-f32", "<f4", (-1, len(names)),
                           timestamp_source=host, extra={"fields": names, "ros": ros})  # fmt: skip
        else:
            text = ",".join(packed[n].str if not packed[n].shape else
                            f"{packed[n].shape}{packed[n].base.str}" for n in names)  # fmt: skip
            s = StreamInfo(0, name, SensorKind.LIDAR, "points", text, (-1,),
                           timestamp_source=host, extra={"fields": names, "ros": ros})  # fmt: skip

        def cloud(m: Any, _raw: bytes) -> tuple[Payload, ...]:
            _, p, n = _point_layout(m)
            if n != names or p != packed:
                raise ValueError(f"point fields {n} after {names}")
            return (_view(pointcloud_points(m, packed)),)

        return TopicPlan((s,), cloud, True)
    if short == "sensor_msgs/Imu":
        main = StreamInfo(0, name, SensorKind.IMU, "imu-f64", timestamp_source=host,
                          extra={"ros": ros})  # fmt: skip
        orient = StreamInfo(0, f"{name[:116]}.orientation", SensorKind.IMU, IMU_EXTRA_ENCODING,
                            "<f8", (31,), timestamp_source=host, extra={"ros": ros})  # fmt: skip
        return TopicPlan((main, orient), lambda m, _raw: imu_values(m), True)
    if short == "sensor_msgs/NavSatFix":
        s = StreamInfo(0, name, SensorKind.GNSS, NAVSAT_ENCODING, "<f8", (15,),
                       timestamp_source=host, extra={"ros": ros})  # fmt: skip
        return TopicPlan((s,), lambda m, _raw: (navsat_values(m),), True)
    why = {
        "tf2_msgs/TFMessage": "transforms: kept as CDR",
        "sensor_msgs/CameraInfo": "camera intrinsics: kept as CDR (no camera in its namespace)",
    }.get(short, "no decoder for the type")
    return _cdr(name, msgtype, msgdef, why, has_header)
