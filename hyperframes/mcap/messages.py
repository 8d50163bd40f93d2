"""Message bodies: Foxglove protobuf types and hyperframes' JSON types, encode and decode.

Pure functions on bytes. Protobuf field numbers are those of the Foxglove
schemas (``foxglove.CompressedImage``: timestamp 1, data 2, format 3,
frame_id 4; ``foxglove.CompressedVideo``: timestamp 1, frame_id 2, data 3,
format 4; ``foxglove.PointCloud``: timestamp 1, frame_id 2, pose 3,
point_stride 4 (fixed32), fields 5, data 6; ``foxglove.PackedElementField``:
name 1, offset 2 (fixed32), type 3; ``foxglove.RawImage``: see
:func:`encode_raw_image`). The encoders produce the same bytes as
foxglove-sdk (checked in tests/test_mcap_messages.py). ``hyperframes.Imu`` is
protobuf too (:func:`encode_imu`); ``hyperframes.Raw`` and the annotation
records are JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hyperframes.mcap import _pb
from hyperframes.mcap.errors import MessageDecodeError

__all__ = [
    "NUMERIC_TYPES",
    "NUMERIC_DTYPES",
    "PackedField",
    "CompressedMessage",
    "PointCloudMessage",
    "encode_compressed_image",
    "encode_compressed_video",
    "encode_point_cloud",
    "decode_compressed_image",
    "decode_compressed_video",
    "decode_point_cloud",
    "decode_foxglove_json",
    "encode_imu",
    "decode_imu",
    "decode_imu_json",
    "RawImageMessage",
    "encode_raw_image",
    "decode_raw_image",
    "encode_raw",
    "decode_raw",
    "encode_json",
    "json_timestamp",
]

# foxglove.PackedElementField.NumericType by numpy dtype string (little-endian only)
NUMERIC_TYPES: dict[str, int] = {
    "|u1": 1, "|i1": 2, "<u2": 3, "<i2": 4, "<u4": 5, "<i4": 6, "<f4": 7, "<f8": 8,
}  # fmt: skip
NUMERIC_DTYPES: dict[int, str] = {v: k for k, v in NUMERIC_TYPES.items()}
# the identity pose (position 0, orientation w = 1), as foxglove-sdk encodes it
_IDENTITY_POSE = _pb.len_prefix(1, 0) + _pb.field_bytes(2, _pb.field_double(4, 1.0))


@dataclass(frozen=True, slots=True)
class PackedField:
    """One field of a point (``foxglove.PackedElementField``)."""

    name: str
    offset: int
    type: int  # NumericType: 1 uint8 ... 7 float32, 8 float64

    @property
    def dtype(self) -> str | None:
        """The numpy dtype string of the type, None for an unknown type."""
        return NUMERIC_DTYPES.get(self.type)


@dataclass(frozen=True, slots=True)
class CompressedMessage:
    """A decoded ``foxglove.CompressedImage`` or ``foxglove.CompressedVideo``."""

    timestamp_ns: int | None  # None: the message has no timestamp
    frame_id: str
    data: bytes | memoryview
    format: str


@dataclass(frozen=True, slots=True)
class PointCloudMessage:
    """A decoded ``foxglove.PointCloud`` (the pose is not kept)."""

    timestamp_ns: int | None
    frame_id: str
    point_stride: int
    fields: tuple[PackedField, ...]
    data: bytes | memoryview


def _message(field: int, body: bytes) -> bytes:
    """A sub-message field: present even when its body is empty (message presence)."""
    return _pb.len_prefix(field, len(body)) + body


def _join(*parts: bytes | memoryview) -> bytes:
    return b"".join(parts)


def encode_compressed_image(
    timestamp_ns: int, frame_id: str, data: bytes | memoryview, fmt: str
) -> bytes:
    """A ``foxglove.CompressedImage`` (``fmt``: ``jpeg``, ``png``, ``webp``, ``avif``)."""
    return _join(
        _message(1, _pb.timestamp(timestamp_ns)),
        _pb.len_prefix(2, len(data)) if len(data) else b"",
        data,
        _pb.field_bytes(3, fmt.encode()),
        _pb.field_bytes(4, frame_id.encode()),
    )


def encode_compressed_video(
    timestamp_ns: int, frame_id: str, data: bytes | memoryview, fmt: str
) -> bytes:
    """A ``foxglove.CompressedVideo``: one access unit (``fmt``: ``h264``, ``h265``, ``av1``)."""
    return _join(
        _message(1, _pb.timestamp(timestamp_ns)),
        _pb.field_bytes(2, frame_id.encode()),
        _pb.len_prefix(3, len(data)) if len(data) else b"",
        data,
        _pb.field_bytes(4, fmt.encode()),
    )


def _encode_field(f: PackedField) -> bytes:
    return _message(
        5,
        _pb.field_bytes(1, f.name.encode())
        + _pb.field_fixed32(2, f.offset)
        + _pb.field_varint(3, f.type),
    )


def encode_point_cloud(
    timestamp_ns: int,
    frame_id: str,
    point_stride: int,
    fields: Sequence[PackedField],
    data: bytes | memoryview,
) -> bytes:
    """A ``foxglove.PointCloud`` at the identity pose of ``frame_id``."""
    return _join(
        _message(1, _pb.timestamp(timestamp_ns)),
        _pb.field_bytes(2, frame_id.encode()),
        _message(3, _IDENTITY_POSE),
        _pb.field_fixed32(4, point_stride),
        *(_encode_field(f) for f in fields),
        _pb.len_prefix(6, len(data)) if len(data) else b"",
        data,
    )


def _text(value: int | memoryview, what: str) -> str:
    if not isinstance(value, memoryview):
        raise MessageDecodeError(f"{what}: expected a string")
    try:
        return bytes(value).decode()
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"{what}: not UTF-8 ({exc})") from None


def _view(value: int | memoryview, what: str) -> memoryview:
    if not isinstance(value, memoryview):
        raise MessageDecodeError(f"{what}: expected bytes")
    return value


def _decode_compressed(
    data: bytes | memoryview, numbers: tuple[int, int, int, int], schema: str
) -> CompressedMessage:
    ts_no, frame_no, data_no, format_no = numbers
    ts: int | None = None
    frame_id, fmt = "", ""
    payload: bytes | memoryview = b""
    for number, _wire, value in _pb.iter_fields(data):
        if number == ts_no:
            ts = _pb.read_timestamp(_view(value, f"{schema}.timestamp"))
        elif number == frame_no:
            frame_id = _text(value, f"{schema}.frame_id")
        elif number == data_no:
            payload = _view(value, f"{schema}.data")
        elif number == format_no:
            fmt = _text(value, f"{schema}.format")
    return CompressedMessage(ts, frame_id, payload, fmt)


def decode_compressed_image(data: bytes | memoryview) -> CompressedMessage:
    """Decode a ``foxglove.CompressedImage``; ``data`` of the result is a view into ``data``."""
    return _decode_compressed(data, (1, 4, 2, 3), "foxglove.CompressedImage")


def decode_compressed_video(data: bytes | memoryview) -> CompressedMessage:
    """Decode a ``foxglove.CompressedVideo``; ``data`` of the result is a view into ``data``."""
    return _decode_compressed(data, (1, 2, 3, 4), "foxglove.CompressedVideo")


def _decode_packed_field(body: memoryview) -> PackedField:
    name, offset, kind = "", 0, 0
    for number, _wire, value in _pb.iter_fields(body):
        if number == 1:
            name = _text(value, "foxglove.PackedElementField.name")
        elif number == 2 and isinstance(value, int):
            offset = value
        elif number == 3 and isinstance(value, int):
            kind = value
    return PackedField(name, offset, kind)


def decode_point_cloud(data: bytes | memoryview) -> PointCloudMessage:
    """Decode a ``foxglove.PointCloud``; ``data`` of the result is a view into ``data``."""
    ts: int | None = None
    frame_id = ""
    stride = 0
    fields: list[PackedField] = []
    payload: bytes | memoryview = b""
    for number, _wire, value in _pb.iter_fields(data):
        if number == 1:
            ts = _pb.read_timestamp(_view(value, "foxglove.PointCloud.timestamp"))
        elif number == 2:
            frame_id = _text(value, "foxglove.PointCloud.frame_id")
        elif number == 4 and isinstance(value, int):
            stride = value
        elif number == 5:
            fields.append(_decode_packed_field(_view(value, "foxglove.PointCloud.fields")))
        elif number == 6:
            payload = _view(value, "foxglove.PointCloud.data")
    return PointCloudMessage(ts, frame_id, stride, tuple(fields), payload)


# --- JSON ------------------------------------------------------------------------


def json_timestamp(ns: int) -> dict[str, int]:
    """``{"sec", "nsec"}``: the time shape Foxglove recognises in JSON messages."""
    sec, nsec = divmod(ns, 1_000_000_000)
    return {"sec": sec, "nsec": nsec}


def _read_json_timestamp(value: Any) -> int | None:
    if not isinstance(value, dict):
        return None
    sec, nsec = value.get("sec"), value.get("nsec")
    if not isinstance(sec, int) or not isinstance(nsec, int):
        return None
    return sec * 1_000_000_000 + nsec


def encode_json(doc: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON (no NaN literals: they are not JSON)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


def _loads(data: bytes | memoryview, schema: str) -> dict[str, Any]:
    try:
        doc = json.loads(bytes(data))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MessageDecodeError(f"{schema}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise MessageDecodeError(f"{schema}: expected a JSON object")
    return doc


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise MessageDecodeError(f"{what}: expected a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise MessageDecodeError(f"{what}: bad base64 ({exc})") from None


_F64 = struct.Struct("<d")
_U64 = struct.Struct("<Q")


def _double(field: int, value: float) -> bytes:
    """A double field written even when it is 0.0, so that -0.0 keeps its sign bit."""
    return _pb.tag(field, _pb.FIXED64) + _F64.pack(value)


def _vector3(field: int, x: float, y: float, z: float) -> bytes:
    return _message(field, _double(1, x) + _double(2, y) + _double(3, z))


def encode_imu(timestamp_ns: int, frame_id: str, values: Sequence[float]) -> bytes:
    """A ``hyperframes.Imu`` protobuf message from 6 values: accel x, y, z (m/s²), gyro x, y, z.

    Field numbers: timestamp 1, frame_id 2, linear_acceleration 3, angular_velocity 4
    (``hyperframes.Vector3``: x 1, y 2, z 3, doubles). Doubles carry NaN and
    ±Infinity bit for bit, which JSON cannot.
    """
    ax, ay, az, gx, gy, gz = (float(v) for v in values)
    return _join(
        _message(1, _pb.timestamp(timestamp_ns)),
        _pb.field_bytes(2, frame_id.encode()),
        _vector3(3, ax, ay, az),
        _vector3(4, gx, gy, gz),
    )


def _decode_vector3(body: memoryview, what: str) -> list[float]:
    out = [0.0, 0.0, 0.0]
    for number, wire, value in _pb.iter_fields(body):
        if 1 <= number <= 3:
            if wire != _pb.FIXED64 or not isinstance(value, int):
                raise MessageDecodeError(f"{what}: field {number} is not a double")
            out[number - 1] = _F64.unpack(_U64.pack(value))[0]
    return out


def decode_imu(data: bytes | memoryview) -> tuple[int | None, list[float]]:
    """``(timestamp_ns, [ax, ay, az, gx, gy, gz])`` of a protobuf ``hyperframes.Imu`` message."""
    ts: int | None = None
    accel, gyro = [0.0] * 3, [0.0] * 3
    for number, _wire, value in _pb.iter_fields(data):
        if number == 1:
            ts = _pb.read_timestamp(_view(value, "hyperframes.Imu.timestamp"))
        elif number == 3:
            accel = _decode_vector3(_view(value, "hyperframes.Imu"), "linear_acceleration")
        elif number == 4:
            gyro = _decode_vector3(_view(value, "hyperframes.Imu"), "angular_velocity")
    return ts, accel + gyro


def decode_imu_json(data: bytes | memoryview) -> tuple[int | None, list[float]]:
    """The same from the JSON ``hyperframes.Imu`` that exports before 0.3 wrote
    (NaN/Infinity as the strings ``NaN``, ``Infinity``, ``-Infinity``)."""
    doc = _loads(data, "hyperframes.Imu")
    out: list[float] = []
    try:
        for key in ("linear_acceleration", "angular_velocity"):
            vec = doc[key]
            for axis in "xyz":
                v = vec[axis]
                if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                    raise TypeError(f"{key}.{axis} is {type(v).__name__}")
                out.append(float(v))
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageDecodeError(f"hyperframes.Imu: {exc}") from None
    return _read_json_timestamp(doc.get("timestamp")), out


@dataclass(frozen=True, slots=True)
class RawImageMessage:
    """A decoded ``foxglove.RawImage``."""

    timestamp_ns: int | None
    frame_id: str
    width: int
    height: int
    encoding: str
    step: int
    data: bytes | memoryview


def encode_raw_image(
    timestamp_ns: int,
    frame_id: str,
    width: int,
    height: int,
    encoding: str,
    step: int,
    data: bytes | memoryview,
) -> bytes:
    """A ``foxglove.RawImage`` (timestamp 1, frame_id 7, width 2, height 3 (fixed32),
    encoding 4, step 5 (fixed32), data 6), field-number order as foxglove-sdk writes it."""
    return _join(
        _message(1, _pb.timestamp(timestamp_ns)),
        _pb.field_fixed32(2, width),
        _pb.field_fixed32(3, height),
        _pb.field_bytes(4, encoding.encode()),
        _pb.field_fixed32(5, step),
        _pb.len_prefix(6, len(data)) if len(data) else b"",
        data,
        _pb.field_bytes(7, frame_id.encode()),
    )


def decode_raw_image(data: bytes | memoryview) -> RawImageMessage:
    """Decode a ``foxglove.RawImage``; ``data`` of the result is a view into ``data``."""
    ts: int | None = None
    frame_id = encoding = ""
    width = height = step = 0
    payload: bytes | memoryview = b""
    for number, _wire, value in _pb.iter_fields(data):
        if number == 1:
            ts = _pb.read_timestamp(_view(value, "foxglove.RawImage.timestamp"))
        elif number == 7:
            frame_id = _text(value, "foxglove.RawImage.frame_id")
        elif number == 4:
            encoding = _text(value, "foxglove.RawImage.encoding")
        elif number == 6:
            payload = _view(value, "foxglove.RawImage.data")
        elif number in (2, 3, 5) and isinstance(value, int):
            if number == 2:
                width = value
            elif number == 3:
                height = value
            else:
                step = value
    return RawImageMessage(ts, frame_id, width, height, encoding, step, payload)


def encode_raw(timestamp_ns: int, frame_id: str, encoding: str, payload: bytes) -> bytes:
    """A ``hyperframes.Raw`` JSON message: any payload, base64, with its encoding name."""
    return encode_json(
        {
            "timestamp": json_timestamp(timestamp_ns),
            "frame_id": frame_id,
            "encoding": encoding,
            "data": base64.b64encode(payload).decode(),
        }
    )


def decode_raw(data: bytes | memoryview) -> tuple[int | None, bytes]:
    """``(timestamp_ns, payload)`` of a ``hyperframes.Raw`` message."""
    doc = _loads(data, "hyperframes.Raw")
    return _read_json_timestamp(doc.get("timestamp")), _b64(doc.get("data"), "hyperframes.Raw")


def decode_foxglove_json(schema: str, data: bytes | memoryview) -> CompressedMessage:
    """A JSON-encoded ``foxglove.CompressedImage``/``CompressedVideo`` (``data`` in base64)."""
    doc = _loads(data, schema)
    return CompressedMessage(
        _read_json_timestamp(doc.get("timestamp")),
        str(doc.get("frame_id", "")),
        _b64(doc.get("data", ""), f"{schema}.data"),
        str(doc.get("format", "")),
    )
