"""Which MCAP channel carries which stream, both ways: pure mapping, no I/O.

Export (:func:`channel_for`): JPEG/PNG cameras become ``foxglove.CompressedImage``,
H.264/H.265/AV1 cameras ``foxglove.CompressedVideo`` (one access unit per
message, unchanged), raw cameras ``foxglove.RawImage``, point arrays (lidar,
radar) ``foxglove.PointCloud``, ``imu-f64`` the protobuf ``hyperframes.Imu``
(doubles: NaN and infinities exactly), ``json`` payloads schemaless JSON,
anything else the JSON ``hyperframes.Raw`` (base64). A stream that came from
an MCAP file goes back with its original schema and encoding.

Import (:func:`plan_import`): the reverse, plus raw message bytes for any
schema this module does not know.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from hyperframes.format.streams import SensorKind, StreamInfo, TimestampSource
from hyperframes.mcap import _pb
from hyperframes.mcap import messages as msg
from hyperframes.mcap._foxglove_schemas import DESCRIPTORS
from hyperframes.mcap.errors import MessageDecodeError

__all__ = [
    "EVENTS_TOPIC",
    "STREAM_META_KEY",
    "IMAGE_FORMATS",
    "VIDEO_FORMATS",
    "Schema",
    "Codec",
    "ChannelSpec",
    "ImportPlan",
    "IMU_SCHEMA",
    "RAW_SCHEMA",
    "EVENT_SCHEMA",
    "BLOCK_SCHEMA",
    "BLOCKS_TOPIC",
    "QUARANTINE_PREFIX",
    "QUARANTINED_META_KEY",
    "ANNOTATION_TOPICS",
    "RAW_IMAGE_ENCODINGS",
    "flag_names",
    "quarantine_topic",
    "nv12_to_uyvy",
    "uyvy_to_nv12",
    "topic_for",
    "stream_name_for",
    "channel_for",
    "plan_import",
    "default_point_fields",
    "annexb_keyframe",
]

EVENTS_TOPIC = "/hyperframes/events"
STREAM_META_KEY = "hyperframes.stream"  # channel metadata: the stream's StreamInfo as JSON
IMAGE_FORMATS = frozenset({"jpeg", "png", "webp", "avif"})
VIDEO_FORMATS = frozenset({"h264", "h265", "av1", "vp9"})
_MAX_SCHEMA_KEEP = 64 << 10  # foreign schemas up to this size are kept for re-export
_IMU = struct.Struct("<6d")


@dataclass(frozen=True, slots=True)
class Schema:
    """An MCAP schema record: name, encoding (``protobuf``, ``jsonschema``...) and data."""

    name: str
    encoding: str
    data: bytes


def _json_schema(title: str, properties: dict[str, Any]) -> Schema:
    doc = {"title": title, "type": "object", "properties": properties}
    return Schema(title, "jsonschema", json.dumps(doc, indent=1).encode())


_TIME = {
    "type": "object",
    "title": "time",
    "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer", "minimum": 0}},
}


def _field(name: str, number: int, kind: int, type_name: str = "") -> bytes:
    """A ``FieldDescriptorProto``: optional, of wire ``kind`` (1 double, 9 string, 11 message)."""
    head, *rest = name.split("_")
    json_name = head + "".join(p.title() for p in rest)
    return _pb.field_bytes(
        2,
        _pb.field_bytes(1, name.encode())
        + _pb.field_varint(3, number)
        + _pb.field_varint(4, 1)
        + _pb.field_varint(5, kind)
        + _pb.field_bytes(6, type_name.encode())
        + _pb.field_bytes(10, json_name.encode()),
    )


def _imu_descriptor() -> bytes:
    """The FileDescriptorSet of ``hyperframes.Imu`` (protobuf), built by hand::

        syntax = "proto3"; package hyperframes;
        import "google/protobuf/timestamp.proto";
        message Vector3 { double x = 1; double y = 2; double z = 3; }
        message Imu { google.protobuf.Timestamp timestamp = 1; string frame_id = 2;
                      Vector3 linear_acceleration = 3; Vector3 angular_velocity = 4; }

    ``google/protobuf/timestamp.proto`` is taken from the vendored Foxglove set.
    """
    timestamp_file = next(
        bytes(v) for n, _w, v in _pb.iter_fields(DESCRIPTORS["foxglove.CompressedImage"])
        if n == 1 and isinstance(v, memoryview)
    )  # fmt: skip
    vector3 = _pb.field_bytes(1, b"Vector3") + b"".join(
        _field(axis, i + 1, 1) for i, axis in enumerate("xyz")
    )
    imu = (
        _pb.field_bytes(1, b"Imu")
        + _field("timestamp", 1, 11, ".google.protobuf.Timestamp")
        + _field("frame_id", 2, 9)
        + _field("linear_acceleration", 3, 11, ".hyperframes.Vector3")
        + _field("angular_velocity", 4, 11, ".hyperframes.Vector3")
    )
    ours = (
        _pb.field_bytes(1, b"hyperframes/Imu.proto")
        + _pb.field_bytes(2, b"hyperframes")
        + _pb.field_bytes(3, b"google/protobuf/timestamp.proto")
        + _pb.field_bytes(4, vector3)
        + _pb.field_bytes(4, imu)
        + _pb.field_bytes(12, b"proto3")
    )
    return _pb.field_bytes(1, timestamp_file) + _pb.field_bytes(1, ours)


IMU_SCHEMA = Schema("hyperframes.Imu", "protobuf", _imu_descriptor())
RAW_SCHEMA = _json_schema(
    "hyperframes.Raw",
    {
        "timestamp": {**_TIME, "description": "capture time"},
        "frame_id": {"type": "string"},
        "encoding": {"type": "string", "description": "the hyperframes stream encoding"},
        "data": {"type": "string", "contentEncoding": "base64"},
    },
)
EVENT_SCHEMA = _json_schema(
    "hyperframes.Event",
    {
        "timestamp": _TIME,
        "kind": {
            "type": "string",
            "enum": ["window", "missing", "stale", "gap", "dropped", "late", "quarantined"],
        },
        "stream": {"type": "string"},
        "start_ns": {"type": "integer"},
        "end_ns": {"type": "integer"},
        "count": {"type": "integer"},
        "detail": {"type": "string"},
        "file": {"type": "string"},
    },
)

_FLAG_NAMES = ["KEYFRAME", "HW_TIMESTAMP", "LATE", "QUARANTINED"]
BLOCK_SCHEMA = _json_schema(
    "hyperframes.Block",
    {
        "timestamp": {**_TIME, "description": "the window's end (the block is complete)"},
        "window_id": {"type": "integer", "description": "k: the window (k*L, (k+1)*L] ns"},
        "window_ns": {"type": "integer", "description": "L, the window length in ns"},
        "file": {"type": "string", "description": "the hyperframe file the block is from"},
        "missing": {
            "type": "array",
            "items": {"type": "string"},
            "description": "streams that delivered nothing in this window",
        },
        "frames": {
            "type": "array",
            "description": "every frame stored in the block, in the block's order",
            "items": {
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "description": "the message's topic"},
                    "log_time": {**_TIME, "description": "the message's log time"},
                    "sequence": {"type": "integer", "minimum": 0},
                    "flags": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "bits: 1 KEYFRAME, 2 HW_TIMESTAMP, 4 LATE, 8 QUARANTINED",
                    },
                    "flag_names": {"type": "array", "items": {"type": "string"}},
                    "receive": {**_TIME, "description": "host receive time; 0 = unknown"},
                    "duration_ns": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
)
BLOCKS_TOPIC = "/hyperframes/blocks"
QUARANTINE_PREFIX = "/hyperframes/quarantined"  # + a stream's topic: its quarantined frames
QUARANTINED_META_KEY = "hyperframes.quarantined"  # channel metadata: the stream's own topic
#: The annotation topics an export writes besides the streams' topics, and their schemas.
#: An import recognises them by topic and schema name and does not make streams of them;
#: a new annotation topic is one more entry here (and its messages in export.py).
ANNOTATION_TOPICS: dict[str, Schema] = {
    EVENTS_TOPIC: EVENT_SCHEMA,
    BLOCKS_TOPIC: BLOCK_SCHEMA,
}


def flag_names(flags: int) -> list[str]:
    """The names of the frame flags set in ``flags`` (KEYFRAME, HW_TIMESTAMP, LATE, QUARANTINED)."""
    return [name for i, name in enumerate(_FLAG_NAMES) if flags >> i & 1]


def quarantine_topic(topic: str) -> str:
    """The topic of a stream's quarantined frames: ``/hyperframes/quarantined`` + its topic."""
    return QUARANTINE_PREFIX + topic


class Codec(Enum):
    """How a stream's payloads are carried in messages."""

    IMAGE = "foxglove.CompressedImage"
    VIDEO = "foxglove.CompressedVideo"
    POINT_CLOUD = "foxglove.PointCloud"
    RAW_IMAGE = "foxglove.RawImage"
    IMU = "hyperframes.Imu"
    RAW = "hyperframes.Raw"
    JSON = "json"  # the payload is the JSON message itself (no schema)
    PASSTHROUGH = "passthrough"  # the payload is the message itself, foreign schema


def _protobuf(name: str) -> Schema:
    return Schema(name, "protobuf", DESCRIPTORS[name])


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """Everything needed to register a stream's channel and encode its messages."""

    topic: str
    codec: Codec
    schema: Schema | None
    message_encoding: str
    metadata: dict[str, str]
    frame_id: str
    format: str = ""
    point_stride: int = 0
    point_fields: tuple[msg.PackedField, ...] = ()
    width: int = 0
    height: int = 0

    def encode(self, timestamp_ns: int, payload: bytes | memoryview) -> bytes:
        """The message body for one frame."""
        c = self.codec
        if c is Codec.IMAGE:
            return msg.encode_compressed_image(timestamp_ns, self.frame_id, payload, self.format)
        if c is Codec.VIDEO:
            return msg.encode_compressed_video(timestamp_ns, self.frame_id, payload, self.format)
        if c is Codec.POINT_CLOUD:
            return msg.encode_point_cloud(
                timestamp_ns, self.frame_id, self.point_stride, self.point_fields, payload
            )
        if c is Codec.RAW_IMAGE:
            return _encode_raw_image(self, timestamp_ns, payload)
        if c is Codec.IMU:
            return msg.encode_imu(timestamp_ns, self.frame_id, _IMU.unpack(payload))
        if c is Codec.RAW:
            return msg.encode_raw(timestamp_ns, self.frame_id, self.format, bytes(payload))
        return bytes(payload)  # JSON, PASSTHROUGH: the payload is the message


def topic_for(stream_name: str) -> str:
    """The MCAP topic of a stream: its name with a leading ``/``."""
    return stream_name if stream_name.startswith("/") else "/" + stream_name


def stream_name_for(topic: str) -> str:
    """A valid stream name from a topic: no leading ``/``, other characters as ``_``."""
    name = "".join(
        c if (c.isascii() and c.isalnum()) or c in "_./-" else "_" for c in topic.lstrip("/")
    )
    name = name[:128] or "topic"
    return "_" + name[1:] if name[0] in "./-" else name


def default_point_fields(columns: int, names: list[str] | None = None) -> list[str]:
    """Field names of an ``(N, columns)`` point array: x, y, z, intensity, then f4, f5..."""
    if names is not None and len(names) == columns:
        return [str(n) for n in names]
    base = ["x", "y", "z", "intensity"]
    return base[:columns] + [f"f{i}" for i in range(4, columns)]


def _point_layout(stream: StreamInfo) -> tuple[int, tuple[msg.PackedField, ...]] | None:
    stored = stream.extra.get("pointcloud")
    if isinstance(stored, dict):  # a layout kept from an imported PointCloud
        try:
            fields = tuple(
                msg.PackedField(str(f["name"]), int(f["offset"]), int(f["type"]))
                for f in stored["fields"]
            )
            return int(stored["point_stride"]), fields
        except (KeyError, TypeError, ValueError):
            return None
    if stream.dtype not in msg.NUMERIC_TYPES or stream.shape is None or len(stream.shape) != 2:
        return None
    if stream.shape[0] != -1 or stream.shape[1] < 2:
        return None
    cols, size = stream.shape[1], stream.itemsize
    names = stream.extra.get("fields")
    fields = tuple(
        msg.PackedField(name, i * size, msg.NUMERIC_TYPES[stream.dtype])
        for i, name in enumerate(
            default_point_fields(cols, names if isinstance(names, list) else None)
        )
    )
    return cols * size, fields


#: hyperframes raw camera encodings -> the foxglove.RawImage encoding they are written as
#: (raw-nv12 as 4:2:2 uyvy, each chroma row twice: Studio has no NV12 decoder; lossless back)
RAW_IMAGE_ENCODINGS = {"raw-rgb": "rgb8", "raw-gray8": "mono8", "raw-nv12": "uyvy"}
_RAW_BYTES_PER_PIXEL = {"rgb8": 3, "mono8": 1, "uyvy": 2}


def _image_size(stream: StreamInfo) -> tuple[int, int] | None:
    """(width, height) of a raw camera stream that can be a RawImage, else None."""
    if stream.encoding not in RAW_IMAGE_ENCODINGS:
        return None
    try:
        w, h = int(stream.extra.get("width", 0)), int(stream.extra.get("height", 0))
    except (TypeError, ValueError):
        return None
    if w <= 0 or h <= 0 or (stream.encoding == "raw-nv12" and (w % 2 or h % 2)):
        return None
    return w, h


def _encode_raw_image(spec: ChannelSpec, timestamp_ns: int, payload: bytes | memoryview) -> bytes:
    w, h, enc = spec.width, spec.height, spec.format
    data: bytes | memoryview = payload
    if enc == "uyvy":
        data = nv12_to_uyvy(payload, w, h)
    return msg.encode_raw_image(
        timestamp_ns, spec.frame_id, w, h, enc, w * _RAW_BYTES_PER_PIXEL[enc], data
    )


def nv12_to_uyvy(data: bytes | memoryview, width: int, height: int) -> bytes:
    """NV12 (Y plane, then UV pairs of 2x2 blocks) as UYVY: each chroma row used twice."""
    buf = np.frombuffer(data, np.uint8)
    if buf.size != width * height * 3 // 2:
        raise ValueError(f"raw-nv12 frame of {buf.size} bytes is not {width}x{height}x1.5")
    y = buf[: width * height].reshape(height, width)
    uv = np.repeat(buf[width * height :].reshape(height // 2, width // 2, 2), 2, axis=0)
    out = np.empty((height, width // 2, 4), np.uint8)
    out[..., 0], out[..., 2] = uv[..., 0], uv[..., 1]
    out[..., 1], out[..., 3] = y[:, 0::2], y[:, 1::2]
    return out.tobytes()


def uyvy_to_nv12(data: bytes | memoryview, width: int, height: int) -> bytes:
    """The reverse of :func:`nv12_to_uyvy` (chroma of the even rows)."""
    buf = np.frombuffer(data, np.uint8)
    if buf.size != width * height * 2:
        raise MessageDecodeError(f"uyvy image of {buf.size} bytes is not {width}x{height}x2")
    px = buf.reshape(height, width // 2, 4)
    y = np.empty((height, width), np.uint8)
    y[:, 0::2], y[:, 1::2] = px[..., 1], px[..., 3]
    uv = px[0::2, :, 0::2]  # U, V of the even rows
    return y.tobytes() + np.ascontiguousarray(uv).tobytes()


def channel_for(stream: StreamInfo, topic: str | None = None) -> ChannelSpec:
    """The channel of a stream (see the module docstring for the rules)."""
    topic = topic or topic_for(stream.name)
    meta = {STREAM_META_KEY: json.dumps(stream.to_dict(), separators=(",", ":"))}
    frame_id = stream.name
    enc = stream.encoding
    foreign = stream.extra.get("mcap")
    if isinstance(foreign, dict) and "message_encoding" in foreign:
        schema = None
        if foreign.get("schema_name"):
            data = base64.b64decode(str(foreign.get("schema_data", "")))
            schema = Schema(
                str(foreign["schema_name"]), str(foreign.get("schema_encoding", "")), data
            )
        return ChannelSpec(
            topic, Codec.PASSTHROUGH, schema, str(foreign["message_encoding"]), meta, frame_id
        )
    if enc in IMAGE_FORMATS:
        return ChannelSpec(
            topic, Codec.IMAGE, _protobuf(Codec.IMAGE.value), "protobuf", meta, frame_id, enc
        )
    if enc in VIDEO_FORMATS:
        return ChannelSpec(
            topic, Codec.VIDEO, _protobuf(Codec.VIDEO.value), "protobuf", meta, frame_id, enc
        )
    size = _image_size(stream)
    if size is not None:
        return ChannelSpec(topic, Codec.RAW_IMAGE, _protobuf(Codec.RAW_IMAGE.value), "protobuf",
                           meta, frame_id, RAW_IMAGE_ENCODINGS[enc], width=size[0],
                           height=size[1])  # fmt: skip
    layout = None
    if stream.kind in (SensorKind.LIDAR, SensorKind.RADAR) or enc in ("xyzi-f32", "radar-f32"):
        layout = _point_layout(stream)
    if layout is not None:
        stride, fields = layout
        return ChannelSpec(
            topic,
            Codec.POINT_CLOUD,
            _protobuf(Codec.POINT_CLOUD.value),
            "protobuf",
            meta,
            frame_id,
            point_stride=stride,
            point_fields=fields,
        )
    if enc == "imu-f64" and stream.dtype == "<f8" and stream.shape == (6,):
        return ChannelSpec(topic, Codec.IMU, IMU_SCHEMA, "protobuf", meta, frame_id)
    if enc == "json":
        return ChannelSpec(topic, Codec.JSON, None, "json", meta, frame_id)
    return ChannelSpec(topic, Codec.RAW, RAW_SCHEMA, "json", meta, frame_id, enc)


# --- import ----------------------------------------------------------------------

Decoded = tuple[int | None, bytes | memoryview]  # (capture time if the message has one, payload)


@dataclass(frozen=True)
class ImportPlan:
    """How one topic becomes one stream: the stream and a message decoder."""

    stream: StreamInfo
    codec: Codec
    decode: Callable[[bytes], Decoded] = field(repr=False)
    keyframes: Callable[[bytes | memoryview], bool] = field(repr=False)
    ours: bool = False  # the channel was written by hyperframes (sequence = stream index)


def annexb_keyframe(data: bytes | memoryview, fmt: str) -> bool:
    """True when an Annex-B access unit holds an IDR slice (``fmt``: ``h264`` or ``h265``)."""
    buf = bytes(data[:65536])  # parameter sets and the first slice come first
    i = buf.find(b"\x00\x00\x01")
    while 0 <= i < len(buf) - 3:
        b0 = buf[i + 3]
        if fmt == "h265" and ((b0 >> 1) & 0x3F) in (19, 20):
            return True
        if fmt == "h264" and (b0 & 0x1F) == 5:
            return True
        i = buf.find(b"\x00\x00\x01", i + 3)
    return False


def _always(_data: bytes | memoryview) -> bool:
    return True


def _never(_data: bytes | memoryview) -> bool:
    return False


def _video_keyframes(fmt: str) -> Callable[[bytes | memoryview], bool]:
    if fmt in ("h264", "h265"):
        return lambda data: annexb_keyframe(data, fmt)
    return _never


def _decode_image(data: bytes) -> Decoded:
    m = msg.decode_compressed_image(data)
    return m.timestamp_ns, m.data


def _decode_video(data: bytes) -> Decoded:
    m = msg.decode_compressed_video(data)
    return m.timestamp_ns, m.data


def _decode_imu(data: bytes) -> Decoded:
    ts, values = msg.decode_imu(data)
    return ts, _IMU.pack(*values)


def _decode_imu_json(data: bytes) -> Decoded:
    ts, values = msg.decode_imu_json(data)
    return ts, _IMU.pack(*values)


_FROM_RAW_IMAGE = {v: k for k, v in RAW_IMAGE_ENCODINGS.items()}


def _raw_image_stream(
    name: str, first: msg.RawImageMessage, known: StreamInfo | None
) -> StreamInfo | None:
    """The camera stream of a RawImage topic; None for a layout hyperframes has no encoding
    for (then the messages are kept whole, with their schema)."""
    if known is not None:
        return known
    enc = _FROM_RAW_IMAGE.get(first.encoding)
    if enc is None or enc == "raw-nv12":  # a foreign uyvy image is not NV12
        return None
    if first.step != first.width * _RAW_BYTES_PER_PIXEL[first.encoding] or first.height <= 0:
        return None  # padded rows
    extra: dict[str, Any] = {"width": first.width, "height": first.height}
    return StreamInfo(0, name, SensorKind.CAMERA, enc, timestamp_source=TimestampSource.HOST,
                      extra=extra)  # fmt: skip


def _raw_image_decoder(stream: StreamInfo) -> Callable[[bytes], Decoded]:
    """Frames of a RawImage topic: the pixels (raw-nv12 back from uyvy), rows unpadded."""
    nv12 = stream.encoding == "raw-nv12"
    size = _image_size(stream)

    def decode(data: bytes) -> Decoded:
        m = msg.decode_raw_image(data)
        if size is not None and (m.width, m.height) != size:
            raise MessageDecodeError(
                f"foxglove.RawImage: {m.width}x{m.height}, the stream is {size[0]}x{size[1]}"
            )
        if nv12:
            return m.timestamp_ns, uyvy_to_nv12(m.data, m.width, m.height)
        return m.timestamp_ns, m.data

    return decode


def _decode_raw(data: bytes) -> Decoded:
    return msg.decode_raw(data)


def _decode_whole(data: bytes) -> Decoded:
    return None, data


def _point_stream(name: str, first: msg.PointCloudMessage) -> StreamInfo:
    layout = {
        "point_stride": first.point_stride,
        "fields": [{"name": f.name, "offset": f.offset, "type": f.type} for f in first.fields],
    }
    types = {f.type for f in first.fields}
    dtype = msg.NUMERIC_DTYPES.get(types.pop()) if len(types) == 1 else None
    names = [f.name for f in first.fields]
    extra: dict[str, Any] = {"pointcloud": layout}
    if dtype is not None:
        size = StreamInfo(0, "x", dtype=dtype).itemsize
        offsets = [f.offset for f in first.fields]
        if (
            offsets == [i * size for i in range(len(offsets))]
            and first.point_stride == len(offsets) * size
        ):
            enc = (
                "xyzi-f32" if dtype == "<f4" and names == ["x", "y", "z", "intensity"] else "points"
            )
            return StreamInfo(
                0, name, SensorKind.LIDAR, enc, dtype=dtype, shape=(-1, len(offsets)),
                timestamp_source=TimestampSource.HOST, extra=extra,
            )  # fmt: skip
    return StreamInfo(
        0, name, SensorKind.LIDAR, "points", timestamp_source=TimestampSource.HOST, extra=extra
    )


def _check_point_layout(expected: msg.PointCloudMessage) -> Callable[[bytes], Decoded]:
    def decode(data: bytes) -> Decoded:
        m = msg.decode_point_cloud(data)
        if m.fields != expected.fields or m.point_stride != expected.point_stride:
            raise MessageDecodeError(
                "foxglove.PointCloud: point layout differs from the topic's first message "
                f"({[f.name for f in m.fields]}, stride {m.point_stride})"
            )
        return m.timestamp_ns, m.data

    return decode


def plan_import(
    name: str,
    schema: Schema | None,
    message_encoding: str,
    metadata: Mapping[str, str],
    first_message: bytes,
) -> ImportPlan:
    """How messages of one channel become frames of a stream called ``name``.

    Channels written by :func:`channel_for` carry their :class:`StreamInfo`
    in the channel metadata and get it back (with the new name). Foxglove
    image, video and point cloud messages become camera and lidar streams;
    any other schema is kept as raw message bytes, with the schema remembered
    in the stream's ``extra["mcap"]`` so an export restores it. Foreign
    streams are marked host-clock (nothing says their stamps are sensor
    capture times). Raises :class:`MessageDecodeError` when ``first_message``
    does not decode as its schema says.
    """
    own = metadata.get(STREAM_META_KEY)
    known: StreamInfo | None = None
    if own is not None:
        try:
            known = StreamInfo.from_dict({**json.loads(own), "name": name})
        except (ValueError, KeyError, TypeError) as exc:
            raise MessageDecodeError(f"channel metadata {STREAM_META_KEY}: {exc}") from None
    sname = schema.name if schema is not None else ""
    sencoding = schema.encoding if schema is not None else ""

    def ours_or(stream: StreamInfo) -> StreamInfo:
        return known if known is not None else stream

    host = TimestampSource.HOST
    if sname == Codec.IMAGE.value and message_encoding in ("protobuf", "json"):
        decode = _decode_image if message_encoding == "protobuf" else _json_decoder(sname)
        fmt = msg.decode_compressed_image(first_message).format if (
            message_encoding == "protobuf"
        ) else msg.decode_foxglove_json(sname, first_message).format  # fmt: skip
        stream = StreamInfo(0, name, SensorKind.CAMERA, fmt or "bytes", timestamp_source=host)
        return ImportPlan(ours_or(stream), Codec.IMAGE, decode, _always, known is not None)
    if sname == Codec.VIDEO.value and message_encoding in ("protobuf", "json"):
        decode = _decode_video if message_encoding == "protobuf" else _json_decoder(sname)
        fmt = msg.decode_compressed_video(first_message).format if (
            message_encoding == "protobuf"
        ) else msg.decode_foxglove_json(sname, first_message).format  # fmt: skip
        stream = StreamInfo(0, name, SensorKind.CAMERA, fmt or "bytes", timestamp_source=host)
        plan_stream = ours_or(stream)
        return ImportPlan(
            plan_stream, Codec.VIDEO, decode, _video_keyframes(plan_stream.encoding), bool(known)
        )
    if sname == Codec.POINT_CLOUD.value and message_encoding == "protobuf":
        first = msg.decode_point_cloud(first_message)
        return ImportPlan(
            ours_or(_point_stream(name, first)),
            Codec.POINT_CLOUD,
            _check_point_layout(first),
            _never,
            known is not None,
        )
    if sname == Codec.IMU.value and message_encoding in ("protobuf", "json"):
        decode = _decode_imu if message_encoding == "protobuf" else _decode_imu_json
        decode(first_message)
        stream = StreamInfo(0, name, SensorKind.IMU, "imu-f64", timestamp_source=host)
        return ImportPlan(ours_or(stream), Codec.IMU, decode, _never, known is not None)
    if sname == Codec.RAW_IMAGE.value and message_encoding == "protobuf":
        image_stream = _raw_image_stream(name, msg.decode_raw_image(first_message), known)
        if image_stream is not None:
            return ImportPlan(image_stream, Codec.RAW_IMAGE, _raw_image_decoder(image_stream),
                              _always, known is not None)  # fmt: skip
    if sname == Codec.RAW.value and message_encoding == "json":
        msg.decode_raw(first_message)
        stream = StreamInfo(0, name, timestamp_source=host)
        return ImportPlan(ours_or(stream), Codec.RAW, _decode_raw, _never, known is not None)
    if known is not None and known.encoding == "json" and message_encoding == "json":
        return ImportPlan(known, Codec.JSON, _decode_whole, _never, True)
    foreign: dict[str, Any] = {
        "schema_name": sname,
        "schema_encoding": sencoding,
        "message_encoding": message_encoding,
    }
    if schema is not None and len(schema.data) <= _MAX_SCHEMA_KEEP:
        foreign["schema_data"] = base64.b64encode(schema.data).decode()
    stream = StreamInfo(0, name, SensorKind.OTHER, "bytes", timestamp_source=host,
                        extra={"mcap": foreign})  # fmt: skip
    return ImportPlan(ours_or(stream), Codec.PASSTHROUGH, _decode_whole, _never, bool(known))


def _json_decoder(schema: str) -> Callable[[bytes], Decoded]:
    def decode(data: bytes) -> Decoded:
        m = msg.decode_foxglove_json(schema, data)
        return m.timestamp_ns, m.data

    return decode
