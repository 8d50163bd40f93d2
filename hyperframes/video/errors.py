"""Errors of the video layer, rooted at :class:`VideoError` (itself a :class:`HyperframesError`).

Each error carries what it is about as attributes (the rule and frame of a
bitstream violation, the missing package and the extra that provides it), so
callers can act on them without parsing the message.
"""

from __future__ import annotations

from hyperframes._install import install_hint
from hyperframes.errors import HyperframesError

__all__ = [
    "VideoError",
    "MissingDependencyError",
    "FrameFormatError",
    "BitstreamError",
    "EncoderUnavailableError",
    "DecoderUnavailableError",
    "DecodeError",
    "NotVideoStreamError",
]


class VideoError(HyperframesError):
    """Root of every error raised by :mod:`hyperframes.video`."""


class MissingDependencyError(VideoError, ImportError):
    """An optional package the video layer needs is not installed."""

    def __init__(self, package: str, extra: str = "video", why: str = "") -> None:
        self.package = package
        self.extra = extra
        because = f" ({why})" if why else ""
        super().__init__(
            f"{package} is not installed{because}; install it with {install_hint(extra)}"
        )


class FrameFormatError(VideoError, ValueError):
    """A picture handed to the video layer has the wrong shape, dtype or dimensions."""


class BitstreamError(VideoError, ValueError):
    """An access unit breaks the H.265 bitstream convention (docs/VIDEO.md).

    ``rule`` names the broken rule (one of :data:`hyperframes.video.rules.RULES`)
    and ``frame`` the 0-based position of the access unit in the sequence
    checked (``None`` when the problem is not tied to one frame).
    """

    def __init__(self, rule: str, frame: int | None, detail: str) -> None:
        self.rule = rule
        self.frame = frame
        self.detail = detail
        where = f"frame {frame}" if frame is not None else "stream"
        super().__init__(f"{where}: rule {rule!r} broken: {detail}")


class EncoderUnavailableError(VideoError, RuntimeError):
    """An encoder cannot run here (no GPU, no NVENC on this GPU, driver libraries missing)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"encoder {name!r} is not available: {reason}")


class DecoderUnavailableError(VideoError, RuntimeError):
    """A decoder cannot run here (no GPU, driver video libraries missing)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"decoder {name!r} is not available: {reason}")


class DecodeError(VideoError, ValueError):
    """A decoder rejected an access unit or produced no picture for it."""


class NotVideoStreamError(VideoError, ValueError):
    """A stream asked for as video does not hold H.265 access units."""
