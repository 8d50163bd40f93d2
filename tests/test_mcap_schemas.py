"""Pure mapping between streams and MCAP channels, and import window assignment."""

from __future__ import annotations

import json
import struct

import pytest

from hyperframes import FrameFlags, SensorKind, StreamInfo, window_end
from hyperframes.cli.mcap import parse_mapping
from hyperframes.mcap import messages as msg
from hyperframes.mcap.blocks import BlockAssembler, BlockNote, FrameNote
from hyperframes.mcap.errors import MessageDecodeError
from hyperframes.mcap.schemas import (
    IMU_SCHEMA,
    RAW_SCHEMA,
    STREAM_META_KEY,
    Codec,
    Schema,
    channel_for,
    plan_import,
    stream_name_for,
    topic_for,
)
from hyperframes.mcap.windowing import PendingFrame, WindowAssembler

L = 100_000_000
K = 17_356_896_000
T0 = 1_735_689_600_000_000_000


def test_stream_kinds_map_to_foxglove_schemas() -> None:
    cam = channel_for(StreamInfo(0, "cam_front", SensorKind.CAMERA, "jpeg"))
    assert (cam.topic, cam.codec, cam.schema and cam.schema.name, cam.format) == (
        "/cam_front",
        Codec.IMAGE,
        "foxglove.CompressedImage",
        "jpeg",
    )
    video = channel_for(StreamInfo(1, "cam", SensorKind.CAMERA, "h265"))
    assert video.codec is Codec.VIDEO and video.format == "h265"
    assert video.encode(T0, b"au") == msg.encode_compressed_video(T0, "cam", b"au", "h265")
    lidar = channel_for(StreamInfo(2, "lidar_top", SensorKind.LIDAR, "xyzi-f32"))
    assert lidar.codec is Codec.POINT_CLOUD and lidar.point_stride == 16
    assert [(f.name, f.offset, f.type) for f in lidar.point_fields] == [
        ("x", 0, 7),
        ("y", 4, 7),
        ("z", 8, 7),
        ("intensity", 12, 7),
    ]
    imu = channel_for(StreamInfo(3, "imu", SensorKind.IMU, "imu-f64"))
    assert imu.codec is Codec.IMU and imu.schema == IMU_SCHEMA
    assert (imu.message_encoding, IMU_SCHEMA.encoding) == ("protobuf", "protobuf")
    assert msg.decode_imu(imu.encode(T0, struct.pack("<6d", *range(6)))) == (T0, [0, 1, 2, 3, 4, 5])
    raw = channel_for(StreamInfo(4, "can", SensorKind.OTHER, "bytes"))
    assert raw.codec is Codec.RAW and raw.schema == RAW_SCHEMA
    plain = channel_for(StreamInfo(5, "notes", SensorKind.OTHER, "json"))
    assert plain.codec is Codec.JSON and plain.schema is None
    assert plain.encode(T0, b'{"a": 1}') == b'{"a": 1}'
    # the stream table travels in the channel metadata
    assert json.loads(cam.metadata[STREAM_META_KEY])["encoding"] == "jpeg"


def test_point_stride_comes_from_the_stream_shape() -> None:
    s = StreamInfo(0, "radar", SensorKind.RADAR, "radar-f64", dtype="<f8", shape=(-1, 5),
                   extra={"fields": ["x", "y", "z", "doppler", "rcs"]})  # fmt: skip
    spec = channel_for(s)
    assert spec.point_stride == 40
    assert [(f.name, f.offset, f.type) for f in spec.point_fields] == [
        ("x", 0, 8),
        ("y", 8, 8),
        ("z", 16, 8),
        ("doppler", 24, 8),
        ("rcs", 32, 8),
    ]
    # a lidar without an array layout is not a point cloud
    assert channel_for(StreamInfo(1, "l", SensorKind.LIDAR, "bytes")).codec is Codec.RAW


def test_topic_and_stream_names() -> None:
    assert topic_for("cam") == "/cam" and topic_for("/already") == "/already"
    assert stream_name_for("/camera/front/image:compressed") == "camera/front/image_compressed"
    assert stream_name_for("/.hidden") == "_hidden"
    StreamInfo(0, stream_name_for("/a b/ü"))  # always a valid stream name


def _pc(fields: list[tuple[str, int, int]], stride: int) -> bytes:
    return msg.encode_point_cloud(
        T0, "l", stride, [msg.PackedField(*f) for f in fields], bytes(stride * 2)
    )


def test_import_plans_for_foxglove_point_clouds() -> None:
    xyzi = [("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 12, 7)]
    schema = Schema("foxglove.PointCloud", "protobuf", b"")
    plan = plan_import("points", schema, "protobuf", {}, _pc(xyzi, 16))
    s = plan.stream
    assert (s.kind, s.encoding, s.dtype, s.shape) == (SensorKind.LIDAR, "xyzi-f32", "<f4", (-1, 4))
    assert not s.hardware_timestamps  # a foreign stamp is never taken for a sensor clock
    # x, y, z float32 plus a uint16 ring and padding: kept as bytes with the layout
    ring = [("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("ring", 12, 3)]
    plan = plan_import("ring", schema, "protobuf", {}, _pc(ring, 16))
    assert plan.stream.dtype is None and plan.stream.extra["pointcloud"]["point_stride"] == 16
    assert channel_for(plan.stream).point_fields == tuple(msg.PackedField(*f) for f in ring)
    # a later message with another layout is refused
    with pytest.raises(MessageDecodeError, match="layout differs"):
        plan.decode(_pc(xyzi, 16))


def test_import_plan_keeps_unknown_schemas_as_raw_bytes() -> None:
    schema = Schema("sensor_msgs/msg/NavSatFix", "ros2msg", b"float64 latitude\n")
    plan = plan_import("gps", schema, "cdr", {}, b"\x00\x01\x02")
    assert plan.codec is Codec.PASSTHROUGH and plan.decode(b"\x05\x06") == (None, b"\x05\x06")
    back = channel_for(plan.stream)  # an export restores the schema
    assert back.schema == schema and back.message_encoding == "cdr"


def test_import_plan_restores_our_stream_table() -> None:
    original = StreamInfo(7, "cam_front", SensorKind.CAMERA, "jpeg", rate_hz=30.0,
                          extra={"width": 320})  # fmt: skip
    spec = channel_for(original)
    plan = plan_import("front", spec.schema, "protobuf", spec.metadata, spec.encode(T0, b"\xff"))
    assert plan.ours and plan.stream == StreamInfo.from_dict(
        {**original.to_dict(), "name": "front"}
    )


def test_parse_mapping() -> None:
    assert parse_mapping(["/a/b=cam", "/x=y=z"]) == {"/a/b": "cam", "/x=y": "z"}
    for bad in (["nope"], ["=cam"], ["/a="]):
        with pytest.raises(ValueError, match="TOPIC=STREAM"):
            parse_mapping(bad)
    with pytest.raises(ValueError, match="twice"):
        parse_mapping(["/a=b", "/a=c"])


# --- window assignment ---------------------------------------------------------------


def _f(sid: int, ts: int) -> PendingFrame:
    return PendingFrame(sid, ts, b"")


def test_a_frame_stamped_on_a_window_end_belongs_to_that_window() -> None:
    a = WindowAssembler(L, [0, 1], max_delay_ns=10**9)
    end = window_end(K, L)
    assert a.add(_f(0, end), end) == []
    assert a.add(_f(1, end + 1), end + 1) == []
    closed = a.finish()
    assert [(w.window_id, [f.timestamp_ns for f in w.frames], w.missing) for w in closed] == [
        (K, [end], (1,)),
        (K + 1, [end + 1], (0,)),
    ]


def test_windows_close_when_the_arrival_clock_passes_their_end_plus_the_delay() -> None:
    a = WindowAssembler(L, [0], max_delay_ns=50_000_000)
    t = K * L + 10
    assert a.add(_f(0, t), t) == []
    assert a.add(_f(0, t + L), window_end(K, L) + 50_000_000) == []  # not yet past the delay
    ready = a.add(_f(0, t + 2 * L), window_end(K, L) + 50_000_001)
    assert [w.window_id for w in ready] == [K]


def test_a_frame_later_than_the_delay_is_written_late_in_the_next_window() -> None:
    a = WindowAssembler(L, [0, 1], max_delay_ns=0)
    a.add(_f(0, K * L + 5), K * L + 5)
    assert [w.window_id for w in a.add(_f(0, (K + 1) * L + 5), (K + 1) * L + 5)] == [K]
    a.add(_f(1, K * L + 7), (K + 1) * L + 6)  # window K is already written
    ready = a.finish()
    (w,) = ready
    assert w.window_id == K + 1 and a.late_frames == 1
    late = [f for f in w.frames if f.flags & FrameFlags.LATE]
    assert [f.timestamp_ns for f in late] == [K * L + 7]
    assert w.missing == (1,)  # a late frame is not an on-time frame


def test_late_frames_after_the_last_window_get_a_window_of_their_own() -> None:
    a = WindowAssembler(L, [0])
    a.add(_f(0, K * L + 5), (K + 3) * L)
    a.add(_f(0, K * L + 6), (K + 3) * L + 1)
    (w,) = a.finish()
    assert w.window_id == K + 1 and len(w.frames) == 1 and w.frames[0].flags & FrameFlags.LATE


def test_assembler_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="window length"):
        WindowAssembler(0, [0])
    with pytest.raises(ValueError, match="max_delay_ns"):
        WindowAssembler(L, [0], max_delay_ns=-1)


@pytest.mark.parametrize(
    ("encoding", "size", "codec", "fmt"),
    [
        ("raw-rgb", (4, 2), Codec.RAW_IMAGE, "rgb8"),
        ("raw-gray8", (4, 2), Codec.RAW_IMAGE, "mono8"),
        ("raw-nv12", (4, 2), Codec.RAW_IMAGE, "uyvy"),
        ("raw-nv12", (3, 2), Codec.RAW, "raw-nv12"),  # NV12 needs even sizes
        ("raw-rgb", None, Codec.RAW, "raw-rgb"),  # no width/height: no RawImage
    ],
)
def test_raw_cameras_become_raw_images_when_their_size_is_known(
    encoding: str, size: tuple[int, int] | None, codec: Codec, fmt: str
) -> None:
    extra = {"width": size[0], "height": size[1]} if size else {}
    spec = channel_for(StreamInfo(0, "cam", SensorKind.CAMERA, encoding, extra=extra))
    assert (spec.codec, spec.format) == (codec, fmt)
    if codec is Codec.RAW_IMAGE:
        assert spec.schema is not None and spec.schema.name == "foxglove.RawImage"


def test_quarantined_frames_are_placed_by_arrival_and_never_late() -> None:
    a = WindowAssembler(L, [0], max_delay_ns=0)
    q = int(FrameFlags.QUARANTINED)
    ready = a.add(PendingFrame(0, T0 + 5 * L + 1, b"a"), T0 + 5 * L + 1)
    ready += a.add(PendingFrame(0, 1_000, b"q", q), T0 + 5 * L + 2)  # a 1970 stamp
    ready += a.add(PendingFrame(0, T0 + 7 * L + 1, b"b"), T0 + 7 * L + 1)
    ready += a.add(PendingFrame(0, 2_000, b"r", q), T0 + 5 * L + 3)  # arrives after its window
    ready += a.finish()
    frames = {f.payload: (w.window_id, f.flags) for w in ready for f in w.frames}
    assert frames[b"q"] == (K + 5, q)
    assert frames[b"r"] == (K + 7, q)  # the next window written, not LATE
    assert a.late_frames == 0


def test_block_notes_round_trip_and_rebuild_blocks_in_any_arrival_order() -> None:
    late = FrameNote("/imu", T0 + 3 * L - 5, 7, 6, T0 + 4 * L, 0)  # HW | LATE
    own = FrameNote("/imu", T0 + 4 * L + 1, 8, 2, 0, 1234)
    q = FrameNote("/hyperframes/quarantined/imu", T0 + 4 * L + 9 * L, 99, 10, T0 + 13 * L)
    note = BlockNote(K + 4, L, "seg.hf", ("cam",), (late, own, q))
    assert BlockNote.decode(note.encode()) == note and note.log_time == T0 + 5 * L
    assert json.loads(note.encode())["frames"][0]["flag_names"] == ["HW_TIMESTAMP", "LATE"]
    with pytest.raises(MessageDecodeError, match=r"hyperframes\.Block"):
        BlockNote.decode(b'{"window_id": 1}')
    streams = {"/imu": 2, "/hyperframes/quarantined/imu": 2}
    b = BlockAssembler(streams, {"imu": 2, "cam": 0})
    assert b.add_frame(late.key, PendingFrame(2, late.log_time, b"l")) == []
    assert b.add_frame(own.key, PendingFrame(2, own.log_time, b"o")) == []
    assert b.add_note(note) == []  # the quarantined frame arrives after the note
    (w,) = b.add_frame(q.key, PendingFrame(2, 1_000, b"q"))
    assert (w.window_id, w.missing) == (K + 4, (0,))
    got = [(f.payload, f.flags, f.stream_index, f.receive_ns, f.duration_ns) for f in w.frames]
    assert got == [
        (b"l", 6, 7, T0 + 4 * L, 0), (b"o", 2, 8, 0, 1234), (b"q", 10, 99, T0 + 13 * L, 0)
    ]  # fmt: skip
    assert b.late_frames == 1
    # a listed frame that never comes, and a frame no note lists, are both accounted for
    b.add_note(BlockNote(K + 5, L, "seg.hf", (), (FrameNote("/imu", T0 + 5 * L + 1, 9, 2),)))
    b.add_frame(("/imu", T0 + 6 * L, 10), PendingFrame(2, T0 + 6 * L, b"x"))
    (w,) = b.finish()
    assert w.frames == () and b.not_found == {"/imu": 1}
    assert [(t, f.payload) for t, f in b.unlisted] == [("/imu", b"x")]
