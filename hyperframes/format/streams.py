"""The self-description stored in every file: stream table and file metadata.

Both travel as one JSON document in the file (no pickle); these dataclasses
convert to and from plain dicts and validate what they are given.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

import numpy as np

from hyperframes.format.jsontext import MAX_JSON_DEPTH, brief, check_json_value

__all__ = [
    "SensorKind",
    "TimestampSource",
    "PRECOMPRESSED_ENCODINGS",
    "KNOWN_ENCODINGS",
    "StreamInfo",
    "FileMetadata",
    "MAX_JSON_DEPTH",
    "check_json_value",
]


class SensorKind(StrEnum):
    """What produced a stream."""

    CAMERA = "camera"
    LIDAR = "lidar"
    IMU = "imu"
    RADAR = "radar"
    EVENT = "event"
    GNSS = "gnss"
    CAN = "can"
    OTHER = "other"


class TimestampSource(StrEnum):
    """Which clock stamped a stream's frames."""

    HARDWARE = "hardware"  # capture time from the sensor's (PTP/PPS-disciplined) clock
    HOST = "host"  # the recording host's clock, typically at driver receive time


# Encodings that are already compressed by their codec: the container never
# compresses them again (gain ~1%, cost a full pass over the bytes).
PRECOMPRESSED_ENCODINGS = frozenset({"jpeg", "png", "h264", "h265", "av1"})

# Encoding name -> (dtype, per-frame shape) where the payload is an array.
# A leading -1 in a shape means "any number of records".
KNOWN_ENCODINGS: dict[str, tuple[str | None, tuple[int, ...] | None]] = {
    "jpeg": (None, None),
    "png": (None, None),
    "h264": (None, None),
    "h265": (None, None),
    "av1": (None, None),
    "raw-rgb": ("|u1", None),
    "raw-gray8": ("|u1", None),
    # from ROS sensor_msgs/Image (bgr8, mono16/16UC1, 32FC1): rows unpadded, little endian,
    # width/height in the stream's extra as for raw-rgb; bgr keeps its channel order
    "raw-bgr": ("|u1", None),
    "raw-gray16": ("<u2", None),
    "raw-f32": ("<f4", None),
    # NV12 (4:2:0): the full-resolution Y plane, then the half-resolution U and V samples
    # interleaved (UVUV...); width * height * 3 / 2 bytes, width/height in the stream's extra.
    "raw-nv12": ("|u1", None),
    "xyzi-f32": ("<f4", (-1, 4)),
    "imu-f64": ("<f8", (6,)),
    "radar-f32": ("<f4", (-1, 4)),
    "bytes": (None, None),
    "json": (None, None),
}

_KINDS = {k.value: k for k in SensorKind}
_SOURCES = {s.value: s for s in TimestampSource}


MAX_DTYPE_TEXT = 256  # characters of a dtype string a reader parses
MAX_ITEMSIZE = 1 << 16  # bytes per array element (the byte-shuffle width)
MAX_NDIM = 32
MAX_RECORD_BYTES = 1 << 32  # one record of a stream can never exceed a payload (u32 size)
_LEVEL_RANGE = 1 << 31


@functools.lru_cache(maxsize=256)
def _parse_dtype(text: str) -> np.dtype[Any]:
    """``text`` as a numpy dtype, or ValueError: plain data, item size 1..MAX_ITEMSIZE.

    Allowed are numpy's fixed-size, object-free dtypes (numbers, bool, bytes,
    records, datetimes); refused are object dtypes (a view could forge
    pointers), zero-sized ones ("S", "V", "(0,)f4": nothing to shuffle by) and
    anything numpy only parses with a warning (deprecated aliases).
    """
    if len(text) > MAX_DTYPE_TEXT:
        raise ValueError(f"dtype text of {len(text)} characters (at most {MAX_DTYPE_TEXT})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dt = np.dtype(text)
    except (TypeError, ValueError, SyntaxError, Warning) as exc:
        raise ValueError(f"{text!r} is not a numpy dtype ({type(exc).__name__})") from None
    if dt.hasobject:
        raise ValueError(f"dtype {text!r} holds Python objects")
    if not 0 < dt.itemsize <= MAX_ITEMSIZE:
        raise ValueError(f"dtype {text!r} has item size {dt.itemsize} (1..{MAX_ITEMSIZE})")
    return dt


def _itemsize(dtype: str) -> int:
    return _parse_dtype(dtype).itemsize


def _is_int(v: object) -> bool:
    if type(v) is int:  # the common case, first: this runs for every stream of every open
        return True
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _check_shape(sid: int, shape: object, itemsize: int) -> tuple[int, ...]:
    """A shape as a tuple of ints: 1..MAX_NDIM sizes > 0, at most one -1, bounded records."""
    if isinstance(shape, str | bytes) or not isinstance(shape, tuple | list):
        raise ValueError(f"stream {sid}: shape must be a list of integers, got {brief(shape, 40)}")
    dims = []
    for d in shape:
        if not _is_int(d):
            break
        dims.append(int(d))
    if not 0 < len(dims) == len(shape) <= MAX_NDIM:
        raise ValueError(
            f"stream {sid}: shape {brief(list(shape), 60)} must be 1..{MAX_NDIM} integers"
        )
    if min(dims) < -1 or 0 in dims or dims.count(-1) > 1:
        raise ValueError(
            f"stream {sid}: shape {brief(list(dims), 60)} must hold positive sizes "
            "and at most one -1"
        )
    record = itemsize
    for d in dims:
        if d != -1:
            record *= d
            if record > MAX_RECORD_BYTES:
                raise ValueError(
                    f"stream {sid}: shape {brief(list(dims), 60)} makes records over 4 GiB"
                )
    return tuple(dims)


_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}")
_TEXT_MAX = 64  # encoding and codec names


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One sensor stream of a file.

    ``codec``/``level``/``shuffle`` record how the writer stored this stream's
    frames; readers decode from each frame's flags and do not depend on them.
    Every field is validated on construction (``ValueError`` naming the
    stream), so a stream table read from a file is as sound as one written.
    """

    id: int
    name: str
    kind: SensorKind | str = SensorKind.OTHER  # a str is converted on construction
    encoding: str = "bytes"
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    timestamp_source: TimestampSource | str = TimestampSource.HARDWARE
    rate_hz: float | None = None
    codec: str | None = None
    level: int | None = None
    shuffle: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sid = self.id
        if not (_is_int(sid) and 0 <= sid <= 0xFFFF):
            raise ValueError(f"stream id must be an integer 0..65535, got {brief(sid, 40)}")
        if type(sid) is not int:
            sid = int(sid)
            object.__setattr__(self, "id", sid)
        if not (type(self.name) is str and _NAME_RE.fullmatch(self.name)):
            raise ValueError(
                f"stream {sid}: name {brief(self.name, 140)} must be 1-128 characters of "
                "letters, digits, '_', '.', '/', '-'"
            )
        if type(self.kind) is not SensorKind:
            kind = _KINDS.get(self.kind) if isinstance(self.kind, str) else None
            if kind is None:
                raise ValueError(f"stream {sid}: unknown sensor kind {brief(self.kind, 40)}")
            object.__setattr__(self, "kind", kind)
        if type(self.timestamp_source) is not TimestampSource:
            source = self.timestamp_source
            known = _SOURCES.get(source) if isinstance(source, str) else None
            if known is None:
                raise ValueError(f"stream {sid}: unknown timestamp source {brief(source, 40)}")
            object.__setattr__(self, "timestamp_source", known)
        if not (type(self.encoding) is str and 0 < len(self.encoding) <= _TEXT_MAX):
            raise ValueError(
                f"stream {sid}: encoding must be a name of 1..{_TEXT_MAX} characters, "
                f"got {brief(self.encoding, 40)}"
            )
        codec = self.codec
        if codec is not None and not (type(codec) is str and 0 < len(codec) <= _TEXT_MAX):
            raise ValueError(
                f"stream {sid}: codec must be a name of 1..{_TEXT_MAX} characters, "
                f"got {brief(codec, 40)}"
            )
        level = self.level
        if level is not None and not (_is_int(level) and -_LEVEL_RANGE <= level < _LEVEL_RANGE):
            raise ValueError(f"stream {sid}: level must be an integer, got {brief(level, 40)}")
        if type(self.shuffle) is not bool:
            raise ValueError(f"stream {sid}: shuffle must be true or false")
        if type(self.extra) is not dict and not isinstance(self.extra, dict):
            raise ValueError(f"stream {sid}: extra must be a mapping, got {brief(self.extra, 40)}")
        if self.extra:
            check_json_value(self.extra, f"stream {sid} extra")
        if self.dtype is None or self.shape is None:
            default_dtype, default_shape = KNOWN_ENCODINGS.get(self.encoding, (None, None))
            if self.dtype is None and default_dtype is not None:
                object.__setattr__(self, "dtype", default_dtype)
            if self.shape is None and default_shape is not None:
                object.__setattr__(self, "shape", default_shape)
        itemsize = 1
        if self.dtype is not None:
            if type(self.dtype) is not str:
                raise ValueError(
                    f"stream {sid}: dtype must be a string, got {brief(self.dtype, 40)}"
                )
            try:
                itemsize = _itemsize(self.dtype)
            except ValueError as exc:
                raise ValueError(f"stream {sid}: invalid dtype: {exc}") from None
        if self.shape is not None:
            object.__setattr__(self, "shape", _check_shape(sid, self.shape, itemsize))
        rate = self.rate_hz
        if rate is not None:
            try:
                ok = type(rate) is float or (
                    isinstance(rate, int | float) and type(rate) is not bool
                )
                ok = ok and math.isfinite(rate) and rate > 0
            except OverflowError:  # an integer too large for a float
                ok = False
            if not ok:
                raise ValueError(f"stream {sid}: rate_hz must be > 0, got {brief(rate, 40)}")
        if self.shuffle and self.dtype is None:
            raise ValueError(
                f"stream {sid}: shuffle needs a dtype (its item size is the shuffle width)"
            )

    @property
    def precompressed(self) -> bool:
        """True for encodings such as JPEG or H.265 that the container stores as is."""
        return self.encoding in PRECOMPRESSED_ENCODINGS

    @property
    def hardware_timestamps(self) -> bool:
        """True when frames carry sensor capture time rather than host time."""
        return self.timestamp_source is TimestampSource.HARDWARE

    @property
    def itemsize(self) -> int:
        """Bytes per array element (the byte-shuffle width); 1 without a dtype."""
        return _itemsize(self.dtype) if self.dtype is not None else 1

    def size_problem(self, nbytes: int) -> str | None:
        """Why a payload of ``nbytes`` cannot be this stream's array, or None if it can.

        Streams without a dtype take any size. With a dtype the size must be a
        whole number of records: ``itemsize`` times the product of the fixed
        dimensions of ``shape`` (exactly that product when the shape has no -1).
        """
        if self.dtype is None:
            return None
        record = self.itemsize
        fixed = 1
        for dim in self.shape or ():
            if dim != -1:
                fixed *= dim
        record *= fixed
        if self.shape is not None and -1 not in self.shape:
            if nbytes != record:
                return (
                    f"payload of {nbytes} bytes, stream {self.id} ({self.name}) needs exactly "
                    f"{record} ({self.dtype} x {list(self.shape)})"
                )
            return None
        if record and nbytes % record:
            return (
                f"payload of {nbytes} bytes is not a whole number of {record}-byte records "
                f"of stream {self.id} ({self.name}, {self.dtype} x {list(self.shape or ())})"
            )
        return None

    def as_array(self, data: np.ndarray) -> np.ndarray:
        """``data`` (contiguous uint8) viewed with this stream's dtype and shape, no copy.

        Raises ``TypeError`` for a stream without a dtype (JPEG, bytes...) and
        ``ValueError`` (from :meth:`size_problem`) when the size does not fit.
        """
        if self.dtype is None:
            raise TypeError(
                f"stream {self.id} ({self.name}) has encoding {self.encoding!r}, not an array"
            )
        problem = self.size_problem(data.size)
        if problem is not None:
            raise ValueError(problem)
        dt = _parse_dtype(self.dtype)
        if dt.subdtype is not None:  # "(3,)f4": records of 3 floats
            base, sub = dt.subdtype
            return data.view(base).reshape((*(self.shape or (-1,)), *sub))
        arr = data.view(dt)
        return arr.reshape(self.shape) if self.shape is not None else arr

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": str(self.kind),
            "encoding": self.encoding,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
            "timestamp_source": str(self.timestamp_source),
            "rate_hz": self.rate_hz,
            "codec": self.codec,
            "level": self.level,
            "shuffle": self.shuffle,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamInfo:
        """Inverse of :meth:`to_dict`; unknown keys are ignored (newer writers).

        Raises ``ValueError`` for a field of the wrong type or out of range.
        """
        if not isinstance(d, dict):
            raise ValueError(f"a stream must be a JSON object, got {type(d).__name__}")
        shape = d.get("shape")
        extra: Any = d.get("extra")
        kind = d.get("kind", "other")
        if isinstance(kind, str) and kind not in _KINDS:
            kind = SensorKind.OTHER  # a sensor kind from a newer writer is read as "other"
        values = (  # in field order
            d.get("id", -1),
            d.get("name"),
            kind,
            d.get("encoding", "bytes"),
            d.get("dtype"),
            shape if shape is None or isinstance(shape, tuple) else _listlike(shape),
            d.get("timestamp_source", "hardware"),
            d.get("rate_hz"),
            d.get("codec"),
            d.get("level"),
            d.get("shuffle", False),
            {} if extra is None else extra,
        )
        if cls is not StreamInfo:
            return cls(*values)  # type: ignore[arg-type]  # validated on construction
        # the slot setters and the same validation, without the frozen dataclass's
        # __init__ (12 object.__setattr__ calls: half the cost, on every open)
        info: StreamInfo = _new_object(StreamInfo)
        for setter, value in zip(_STREAM_SETTERS, values, strict=True):
            setter(info, value)
        info.__post_init__()
        return info


_new_object = object.__new__
_STREAM_SETTERS = tuple(StreamInfo.__dict__[f.name].__set__ for f in fields(StreamInfo))


def _listlike(value: object) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise ValueError(f"shape must be a list of integers, got {brief(value, 40)}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class FileMetadata:
    """Who wrote a file, and where it sits in a recording."""

    vehicle_id: str = "unknown"
    recorder_version: str = ""
    segment_seq: int = 0
    created_ns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.extra, dict):
            raise ValueError(f"file metadata: extra must be a mapping, got {brief(self.extra, 40)}")
        if self.extra:
            check_json_value(self.extra, "file metadata extra")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "vehicle_id": self.vehicle_id,
            "recorder_version": self.recorder_version,
            "segment_seq": self.segment_seq,
            "created_ns": self.created_ns,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileMetadata:
        """Inverse of :meth:`to_dict`; unknown keys are ignored.

        Raises ``ValueError`` for numbers that are not integers in -2**63..2**64-1.
        """
        if not isinstance(d, dict):
            raise ValueError(f"file metadata must be a JSON object, got {type(d).__name__}")
        extra = d.get("extra") if d.get("extra") is not None else {}
        if not isinstance(extra, dict):
            raise ValueError("file metadata: extra must be a mapping")
        return cls(
            vehicle_id=str(d.get("vehicle_id", "unknown")),
            recorder_version=str(d.get("recorder_version", "")),
            segment_seq=_int_field(d, "segment_seq"),
            created_ns=_int_field(d, "created_ns"),
            extra=extra,
        )


def _int_field(d: dict[str, Any], key: str) -> int:
    v = d.get(key, 0)
    if not _is_int(v) or not -(1 << 63) <= v < 1 << 64:
        raise ValueError(f"file metadata: {key} must be an integer, got {brief(v, 40)}")
    return int(v)
