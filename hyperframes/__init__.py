"""hyperframes: multi-sensor recordings stored as time-windowed, indexed container files.

A file holds every frame of several sensor streams (cameras, lidar, IMU,
radar), grouped into fixed time windows (*hyperframes*) and indexed by
stream and timestamp. Write one with :class:`HyperframeWriter`, read it with
:class:`HyperframeReader`::

    from hyperframes import HyperframeReader, HyperframeWriter, StreamInfo

    streams = [StreamInfo(0, "cam_front", "camera", "jpeg", rate_hz=30)]
    with HyperframeWriter("seg.hf", streams, window_ns=100_000_000) as w:
        w.append(0, t_ns, jpeg_bytes)      # a clean exit finalizes (an exception
                                           # leaves seg.hf.tmp for `recover`)
    with HyperframeReader("seg.hf") as r:
        f = r.read("cam_front", t_ns)      # the nearest frame: a Frame
        rgb = f.image()                    # JPEG/PNG to (H, W, 3) uint8; arrays: f.array()
        len(r)                             # number of windows
        for hf in r:                       # each window, a Hyperframe
            hf["cam_front"]                # that stream's frames in the window

Errors derive from :class:`HyperframesError` and name the file. Also here:
:func:`verify_file`, :func:`decode_image` and the window-grid helpers
(recovery: ``hyperframes.recover.recover``). Subpackages: ``hyperframes.video`` (H.265),
``hyperframes.torch`` (datasets), ``hyperframes.sync``, ``hyperframes.mcap``,
``hyperframes.viz``; the distribution to install is ``hyperframes-sensors``
with extras (README). The reader, writer and the rest are imported on first
use, so ``import hyperframes`` stays cheap.
"""

from typing import TYPE_CHECKING, Any

from hyperframes.errors import (
    ChecksumError,
    CorruptFileError,
    DriveError,
    FrameNotFoundError,
    HyperframesError,
    NotFinalizedError,
    RecoveryError,
    UnsupportedVersionError,
)
from hyperframes.format.codecs import CodecSpec
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, SensorKind, StreamInfo, TimestampSource
from hyperframes.format.windows import window_end, window_of, window_start

if TYPE_CHECKING:
    from hyperframes.drive import Drive, open_drive
    from hyperframes.images import decode_image
    from hyperframes.reader import Frame, Hyperframe, HyperframeReader
    from hyperframes.verify import verify_file
    from hyperframes.writer import HyperframeWriter

__version__ = "0.3.0"

# imported on first use (module __getattr__): name -> module
_LAZY = {
    "Drive": "hyperframes.drive",
    "open_drive": "hyperframes.drive",
    "HyperframeReader": "hyperframes.reader",
    "Frame": "hyperframes.reader",
    "Hyperframe": "hyperframes.reader",
    "HyperframeWriter": "hyperframes.writer",
    "verify_file": "hyperframes.verify",
    "decode_image": "hyperframes.images",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hyperframes' has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "HyperframeReader",
    "HyperframeWriter",
    "Frame",
    "Hyperframe",
    "verify_file",
    "decode_image",
    "CodecSpec",
    "Drive",
    "open_drive",
    "DriveError",
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
