"""Message bodies and schemas: byte-exact against foxglove-sdk, round trips, bad bytes."""

from __future__ import annotations

import math
import struct

import pytest

from hyperframes.mcap import _pb
from hyperframes.mcap import messages as msg
from hyperframes.mcap._foxglove_schemas import DESCRIPTORS
from hyperframes.mcap.errors import MessageDecodeError
from hyperframes.mcap.schemas import annexb_keyframe

fx = pytest.importorskip("foxglove.messages", reason="foxglove-sdk is in the dev extra")

T = 1_735_689_600_123_456_789
F32 = fx.PackedElementFieldNumericType.Float32


def _ts(ns: int) -> object:
    return fx.Timestamp(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)


def test_vendored_descriptors_are_foxglove_sdks() -> None:
    for cls in (fx.CompressedImage, fx.CompressedVideo, fx.PointCloud, fx.RawImage):
        schema = cls.get_schema()
        assert schema.encoding == "protobuf"
        assert DESCRIPTORS[schema.name] == schema.data, (
            f"{schema.name} changed in foxglove-sdk: regenerate with "
            "python -m hyperframes.mcap._foxglove_schemas > hyperframes/mcap/_foxglove_schemas.py"
        )


@pytest.mark.parametrize("data", [b"\xff\xd8jpeg\xff\xd9", bytes(300), b""])
def test_compressed_image_bytes_equal_foxglove_sdk(data: bytes) -> None:
    ours = msg.encode_compressed_image(T, "cam_front", data, "jpeg")
    theirs = fx.CompressedImage(timestamp=_ts(T), frame_id="cam_front", data=data, format="jpeg")
    assert ours == theirs.encode()
    back = msg.decode_compressed_image(ours)
    assert (back.timestamp_ns, back.frame_id, bytes(back.data), back.format) == (
        T,
        "cam_front",
        data,
        "jpeg",
    )


def test_compressed_video_bytes_equal_foxglove_sdk() -> None:
    au = b"\x00\x00\x00\x01\x40\x01" + bytes(range(200))
    ours = msg.encode_compressed_video(T, "cam", au, "h265")
    theirs = fx.CompressedVideo(timestamp=_ts(T), frame_id="cam", data=au, format="h265")
    assert ours == theirs.encode()
    back = msg.decode_compressed_video(theirs.encode())
    assert (back.timestamp_ns, back.frame_id, bytes(back.data), back.format) == (
        T,
        "cam",
        au,
        "h265",
    )


def test_point_cloud_bytes_equal_foxglove_sdk() -> None:
    fields = [msg.PackedField(n, 4 * i, 7) for i, n in enumerate(("x", "y", "z", "intensity"))]
    data = struct.pack("<8f", *range(8))
    ours = msg.encode_point_cloud(T, "lidar_top", 16, fields, data)
    theirs = fx.PointCloud(
        timestamp=_ts(T),
        frame_id="lidar_top",
        pose=fx.Pose(
            position=fx.Vector3(x=0, y=0, z=0), orientation=fx.Quaternion(x=0, y=0, z=0, w=1)
        ),
        point_stride=16,
        fields=[fx.PackedElementField(name=f.name, offset=f.offset, type=F32) for f in fields],
        data=data,
    )
    assert ours == theirs.encode()
    back = msg.decode_point_cloud(ours)
    assert back.timestamp_ns == T and back.point_stride == 16 and bytes(back.data) == data
    assert back.fields == tuple(fields) and back.frame_id == "lidar_top"


def test_decoded_payload_is_a_view_not_a_copy() -> None:
    body = msg.encode_compressed_image(T, "c", b"x" * 1000, "jpeg")
    assert isinstance(msg.decode_compressed_image(body).data, memoryview)


@pytest.mark.parametrize(
    "bad",
    [
        b"\x0a\x05\x08",  # a length running past the end
        b"\x12\xff",  # a truncated varint length
        b"\x0b",  # wire type 3 (groups) is not supported
        b"\x00\x01",  # field number 0
    ],
)
def test_bad_protobuf_bytes_raise_a_decode_error(bad: bytes) -> None:
    with pytest.raises(MessageDecodeError):
        msg.decode_compressed_image(bad)


def test_varints_and_negative_numbers() -> None:
    assert _pb.varint(0) == b"\x00" and _pb.varint(300) == b"\xac\x02"
    assert len(_pb.varint(-1)) == 10
    assert list(_pb.iter_fields(_pb.tag(1, 0) + _pb.varint(-1))) == [(1, 0, (1 << 64) - 1)]
    assert _pb.read_timestamp(memoryview(_pb.field_varint(1, -5))) == -5_000_000_000


def test_imu_protobuf_round_trips_every_float_bit_for_bit() -> None:
    values = [0.1, -9.80665, 1e-310, -0.0, math.inf, -math.inf]
    data = msg.encode_imu(T, "imu", values)
    ts, back = msg.decode_imu(data)
    assert ts == T and struct.pack("<6d", *back) == struct.pack("<6d", *values)  # -0.0 too
    nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_DEAD_BEEF))[0]  # a NaN payload
    ts, back = msg.decode_imu(msg.encode_imu(T, "imu", [nan] * 6))
    assert struct.pack("<6d", *back) == struct.pack("<d", nan) * 6
    with pytest.raises(MessageDecodeError, match="not a double"):
        msg.decode_imu(_pb.len_prefix(3, 2) + _pb.field_varint(1, 5))
    with pytest.raises(MessageDecodeError):
        msg.decode_imu(b"\x0a\x05ab")


def test_imu_descriptor_decodes_with_the_protobuf_runtime() -> None:
    """The hand-built FileDescriptorSet is a valid one: google.protobuf builds the class."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    from google.protobuf import descriptor_pool, message_factory

    from hyperframes.mcap.schemas import IMU_SCHEMA

    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(IMU_SCHEMA.data).file:
        pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("hyperframes.Imu"))
    m = cls.FromString(msg.encode_imu(T, "imu", [1.0, 2.0, 3.0, 4.0, math.nan, -math.inf]))
    assert (m.timestamp.seconds, m.timestamp.nanos, m.frame_id) == (T // 10**9, T % 10**9, "imu")
    assert (m.linear_acceleration.x, m.angular_velocity.x) == (1.0, 4.0)
    assert math.isnan(m.angular_velocity.y) and m.angular_velocity.z == -math.inf


def test_imu_json_of_older_exports_still_decodes() -> None:
    doc = b'{"timestamp": {"sec": 1, "nsec": 2}, "linear_acceleration": {"x": 1, "y": "NaN",'
    doc += b' "z": "-Infinity"}, "angular_velocity": {"x": 0.5, "y": 2, "z": "Infinity"}}'
    ts, back = msg.decode_imu_json(doc)
    assert ts == 1_000_000_002 and back[0] == 1.0 and math.isnan(back[1]) and back[5] == math.inf
    with pytest.raises(MessageDecodeError, match="linear_acceleration"):
        msg.decode_imu_json(b'{"angular_velocity": {"x": 1, "y": 2, "z": 3}}')
    with pytest.raises(MessageDecodeError, match="not JSON"):
        msg.decode_imu_json(b"\x00\x01")


@pytest.mark.parametrize("width", [4, 1])
def test_raw_image_bytes_equal_foxglove_sdk(width: int) -> None:
    pixels = bytes(range(width * 2 * 3))
    ours = msg.encode_raw_image(T, "cam", width, 2, "rgb8", width * 3, pixels)
    theirs = fx.RawImage(timestamp=_ts(T), frame_id="cam", width=width, height=2,
                         encoding="rgb8", step=width * 3, data=pixels)  # fmt: skip
    assert ours == theirs.encode()
    back = msg.decode_raw_image(ours)
    assert (back.timestamp_ns, back.frame_id, back.width, back.height, back.encoding, back.step,
            bytes(back.data)) == (T, "cam", width, 2, "rgb8", width * 3, pixels)  # fmt: skip


def test_raw_json_round_trip_and_bad_base64() -> None:
    payload = bytes(range(256))
    assert msg.decode_raw(msg.encode_raw(T, "can", "bytes", payload)) == (T, payload)
    with pytest.raises(MessageDecodeError, match="base64"):
        msg.decode_raw(b'{"data": "!!!"}')


def test_foxglove_json_image() -> None:
    body = b'{"timestamp": {"sec": 5, "nsec": 7}, "frame_id": "c", "data": "AAEC", "format": "png"}'
    m = msg.decode_foxglove_json("foxglove.CompressedImage", body)
    assert (m.timestamp_ns, bytes(m.data), m.format) == (5_000_000_007, b"\x00\x01\x02", "png")


def test_annexb_keyframes() -> None:
    sc = b"\x00\x00\x00\x01"
    vps, idr, trail = bytes([32 << 1, 1]), bytes([19 << 1, 1]), bytes([1 << 1, 1])
    assert annexb_keyframe(sc + vps + b"\x0c" + sc + idr + b"\xaa", "h265")
    assert not annexb_keyframe(sc + trail + b"\xaa", "h265")
    assert annexb_keyframe(sc + b"\x67\x42" + sc + b"\x65\x88", "h264")
    assert not annexb_keyframe(sc + b"\x41\x9a", "h264")
