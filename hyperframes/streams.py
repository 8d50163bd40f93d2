"""The self-description stored in every file: stream table and file metadata.

Both travel as one JSON document in the file (no pickle); these dataclasses
convert to and from plain dicts and validate what they are given.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

__all__ = [
    "SensorKind",
    "TimestampSource",
    "PRECOMPRESSED_ENCODINGS",
    "KNOWN_ENCODINGS",
    "StreamInfo",
    "FileMetadata",
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
    "xyzi-f32": ("<f4", (-1, 4)),
    "imu-f64": ("<f8", (6,)),
    "radar-f32": ("<f4", (-1, 4)),
    "bytes": (None, None),
    "json": (None, None),
}

_KINDS = {k.value: k for k in SensorKind}
_SOURCES = {s.value: s for s in TimestampSource}


@functools.lru_cache(maxsize=256)
def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}$")


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One sensor stream of a file.

    ``codec``/``level``/``shuffle`` record how the writer stored this stream's
    frames; readers decode from each frame's flags and do not depend on them.
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
        if not (isinstance(self.id, int) and 0 <= self.id <= 0xFFFF):
            raise ValueError(f"stream id must be an integer 0..65535, got {self.id!r}")
        if not (isinstance(self.name, str) and _NAME_RE.match(self.name)):
            raise ValueError(
                f"stream {self.id}: name {self.name!r} must be 1-128 characters of "
                "letters, digits, '_', '.', '/', '-'"
            )
        if not isinstance(self.kind, SensorKind):
            object.__setattr__(self, "kind", SensorKind(self.kind))
        if not isinstance(self.timestamp_source, TimestampSource):
            object.__setattr__(self, "timestamp_source", TimestampSource(self.timestamp_source))
        default_dtype, default_shape = KNOWN_ENCODINGS.get(self.encoding, (None, None))
        if self.dtype is None and default_dtype is not None:
            object.__setattr__(self, "dtype", default_dtype)
        if self.shape is None and default_shape is not None:
            object.__setattr__(self, "shape", default_shape)
        if self.dtype is not None:
            try:
                _itemsize(self.dtype)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"stream {self.id}: invalid dtype {self.dtype!r}") from exc
        if self.shape is not None:
            shape = tuple(map(int, self.shape))
            if (shape and min(shape) < -1) or 0 in shape or shape.count(-1) > 1:
                raise ValueError(
                    f"stream {self.id}: shape {self.shape!r} must hold positive sizes and "
                    "at most one -1"
                )
            object.__setattr__(self, "shape", shape)
        if self.rate_hz is not None and not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"stream {self.id}: rate_hz must be > 0, got {self.rate_hz!r}")
        if self.shuffle and self.dtype is None:
            raise ValueError(
                f"stream {self.id}: shuffle needs a dtype (its item size is the shuffle width)"
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
        """Inverse of :meth:`to_dict`; unknown keys are ignored (newer writers)."""
        shape = d.get("shape")
        kind = d.get("kind", "other")
        source = d.get("timestamp_source", "hardware")
        return cls(
            id=d["id"],
            name=d["name"],
            # a sensor kind from a newer writer is still readable: treat it as "other"
            kind=_KINDS.get(kind, SensorKind.OTHER) if isinstance(kind, str) else kind,
            encoding=d.get("encoding", "bytes"),
            dtype=d.get("dtype"),
            shape=tuple(shape) if shape is not None else None,
            timestamp_source=_SOURCES.get(source, source) if isinstance(source, str) else source,
            rate_hz=d.get("rate_hz"),
            codec=d.get("codec"),
            level=d.get("level"),
            shuffle=bool(d.get("shuffle", False)),
            extra=dict(d.get("extra") or {}),
        )


@dataclass(frozen=True, slots=True)
class FileMetadata:
    """Who wrote a file, and where it sits in a recording."""

    vehicle_id: str = "unknown"
    recorder_version: str = ""
    segment_seq: int = 0
    created_ns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

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
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        return cls(
            vehicle_id=str(d.get("vehicle_id", "unknown")),
            recorder_version=str(d.get("recorder_version", "")),
            segment_seq=int(d.get("segment_seq", 0)),
            created_ns=int(d.get("created_ns", 0)),
            extra=dict(d.get("extra") or {}),
        )
