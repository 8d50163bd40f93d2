"""hyperframes: multi-sensor recordings stored as time-windowed, indexed container files."""

from hyperframes.codecs import CodecSpec
from hyperframes.errors import (
    ChecksumError,
    CorruptFileError,
    FrameNotFoundError,
    HyperframesError,
    NotFinalizedError,
    RecoveryError,
    UnsupportedVersionError,
)
from hyperframes.layout import FrameFlags
from hyperframes.streams import FileMetadata, SensorKind, StreamInfo, TimestampSource
from hyperframes.windows import window_end, window_of, window_start

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "CodecSpec",
    "FrameFlags",
    "StreamInfo",
    "FileMetadata",
    "SensorKind",
    "TimestampSource",
    "window_of",
    "window_start",
    "window_end",
    "HyperframesError",
    "CorruptFileError",
    "ChecksumError",
    "NotFinalizedError",
    "UnsupportedVersionError",
    "FrameNotFoundError",
    "RecoveryError",
]
