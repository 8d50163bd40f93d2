"""Encoders behind one interface, chosen by name: ``x265`` (CPU), ``nvenc`` (GPU), ``auto``.

Every encoder takes :class:`~hyperframes.video.color.Yuv420` pictures (BT.709
limited, see :mod:`hyperframes.video.pictures` for JPEG and RGB input), a
caller ``pts`` and a per-frame ``idr`` decision (see
:class:`~hyperframes.video.gop.IdrPlanner`), and returns
:class:`EncodedAU` objects: one Annex-B access unit per picture, matched back
to the caller's ``pts`` even when the encoder delays its output (NVENC holds
about 3 frames; x265 with ``tune=zerolatency`` none). Every access unit is
checked against the bitstream convention on its way out
(:class:`~hyperframes.video.rules.StreamChecker`), so a misconfigured encoder
fails loudly instead of writing a stream readers cannot use.

``auto`` tries NVENC and falls back to x265, logging why; the encoder's
``name`` says which one runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hyperframes.video.color import Yuv420, check_dimensions
from hyperframes.video.errors import EncoderUnavailableError, FrameFormatError, VideoError
from hyperframes.video.gop import DEFAULT_MAX_GOP
from hyperframes.video.rules import StreamChecker

__all__ = [
    "EncoderSettings",
    "EncodedAU",
    "Encoder",
    "EncoderFactory",
    "OutputCheck",
    "ENCODERS",
    "register_encoder",
    "create_encoder",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EncoderSettings:
    """What every encoder is configured with.

    ``quality`` is x265's CRF or NVENC's constant QP (0..51, lower is better);
    ``preset`` an x265 preset (default ``"fast"``) or NVENC preset
    (``"P1"``..``"P7"``, default ``"P4"``); ``max_gop`` caps the frames from
    one IDR to the next (the encoder inserts one itself at the cap).
    """

    width: int
    height: int
    rate_hz: float = 30.0
    max_gop: int = DEFAULT_MAX_GOP
    quality: int = 28
    preset: str | None = None
    threads: int | None = None  # x265 worker threads; None: x265's default
    gpu_id: int = 0
    #: ask for each picture's PSNR from the encoder's own reconstruction
    #: (:attr:`EncodedAU.psnr`); encoders that cannot measure leave it None
    measure: bool = False

    def __post_init__(self) -> None:
        check_dimensions(self.width, self.height)
        if not self.rate_hz > 0:
            raise ValueError(f"rate_hz must be > 0, got {self.rate_hz}")
        if self.max_gop < 1:
            raise ValueError(f"max_gop must be >= 1, got {self.max_gop}")
        if not 0 <= self.quality <= 51:
            raise ValueError(f"quality must be 0..51, got {self.quality}")


@dataclass(frozen=True, slots=True)
class EncodedAU:
    """One encoded access unit: the caller's ``pts``, its Annex-B bytes, whether it is an IDR.

    ``psnr``: with :attr:`EncoderSettings.measure`, where the encoder measures
    (x265), the PSNR in dB of each plane (Y', Cb, Cr) of the picture a decoder
    outputs for this access unit against the picture the encoder was given.
    """

    pts: int
    data: bytes
    keyframe: bool
    psnr: tuple[float, float, float] | None = None


class Encoder(Protocol):
    """The encoder interface (see the module docstring)."""

    name: str
    settings: EncoderSettings

    def encode(self, picture: Yuv420, pts: int, *, idr: bool = False) -> list[EncodedAU]:
        """Submit one picture; returns the access units that came out (maybe none, maybe older)."""
        ...

    def flush(self) -> list[EncodedAU]:
        """Drain the encoder at the end of the stream."""
        ...

    def close(self) -> None:
        """Release the encoder."""
        ...


EncoderFactory = Callable[[EncoderSettings], Encoder]


class OutputCheck:
    """Shared bookkeeping for encoders: input checks, pts matching, convention checks."""

    def __init__(self, settings: EncoderSettings) -> None:
        self.settings = settings
        self._checker = StreamChecker(settings.max_gop)
        self._pending: dict[int, tuple[int, bool]] = {}  # frame number -> (caller pts, idr asked)
        self._since_idr = 0
        self.submitted = 0

    def submit(self, picture: Yuv420, pts: int, idr: bool) -> tuple[int, bool]:
        """Check a picture against the settings; returns its frame number and whether it
        must be an IDR (asked for, the first frame, or ``max_gop`` frames since the last)."""
        if not isinstance(picture, Yuv420):
            raise FrameFormatError(
                f"encoders take Yuv420 pictures, got {type(picture).__name__}; "
                "see hyperframes.video.pictures.to_yuv420"
            )
        s = self.settings
        if (picture.width, picture.height) != (s.width, s.height):
            raise FrameFormatError(
                f"picture is {picture.width}x{picture.height}, the encoder was set up for "
                f"{s.width}x{s.height}"
            )
        n = self.submitted
        idr = idr or n == 0 or self._since_idr >= s.max_gop
        self._since_idr = 1 if idr else self._since_idr + 1
        self._pending[n] = (pts, idr)
        self.submitted += 1
        return n, idr

    def emit(
        self, frame_number: int, data: bytes, psnr: tuple[float, float, float] | None = None
    ) -> EncodedAU:
        """Match an output access unit to its input and check it against the convention."""
        try:
            pts, idr_asked = self._pending.pop(frame_number)
        except KeyError:
            raise VideoError(f"encoder returned frame {frame_number}, never submitted") from None
        found = self._checker.check(data)
        if found:
            raise found[0].error()
        keyframe = any(True for _ in _idr_units(data))
        if idr_asked and not keyframe:
            raise VideoError(f"frame {frame_number}: an IDR was requested, the encoder made none")
        return EncodedAU(pts, data, keyframe, psnr)


def _idr_units(data: bytes) -> list[int]:
    from hyperframes.video import nal  # noqa: PLC0415 - tiny, but keeps this module's imports flat

    return [u.type for u in nal.split_nal_units(data) if nal.is_idr(u.type)]


def _x265(settings: EncoderSettings) -> Encoder:
    from hyperframes.video._x265 import X265Encoder  # noqa: PLC0415 - optional backend

    return X265Encoder(settings)


def _nvenc(settings: EncoderSettings) -> Encoder:
    from hyperframes.video._nvenc import NvencEncoder  # noqa: PLC0415 - optional backend

    return NvencEncoder(settings)


ENCODERS: dict[str, EncoderFactory] = {"x265": _x265, "nvenc": _nvenc}


def register_encoder(name: str, factory: EncoderFactory) -> None:
    """Make an encoder available to :func:`create_encoder` under ``name``."""
    if name == "auto":
        raise ValueError("'auto' is reserved")
    ENCODERS[name] = factory


def create_encoder(name: str, settings: EncoderSettings) -> Encoder:
    """The encoder called ``name`` (``x265``, ``nvenc``, ``auto``, or a registered one).

    ``auto`` returns NVENC where it works and x265 otherwise, logging the
    reason at INFO; check ``encoder.name`` for the one chosen.
    """
    if name == "auto":
        try:
            enc = ENCODERS["nvenc"](settings)
        except EncoderUnavailableError as exc:
            log.info("encoder auto: %s; using x265", exc)
            return ENCODERS["x265"](settings)
        log.info("encoder auto: using nvenc")
        return enc
    factory = ENCODERS.get(name)
    if factory is None:
        raise ValueError(f"unknown encoder {name!r}; choose from auto, {', '.join(ENCODERS)}")
    return factory(settings)
