"""The contract between the encoder and decoder registries and their backends.

What a backend implements (:class:`Encoder`, :class:`Decoder`), what it is
given and returns (:class:`EncoderSettings`, :class:`EncodedAU`,
:class:`DecodedPicture`, :data:`Output`) and the checks every backend shares
(:class:`OutputCheck`, :func:`check_output`). :mod:`hyperframes.video.encode`
and :mod:`hyperframes.video.decode` choose a backend by name; the backends
(``_x265``, ``_nvenc``, ``_pyav_decoder``, ``_nvdec``) import only this
module, never the registry that creates them, so neither side imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from hyperframes.video.color import Yuv420, check_dimensions
from hyperframes.video.errors import FrameFormatError, VideoError
from hyperframes.video.gop import DEFAULT_MAX_GOP
from hyperframes.video.rules import StreamChecker, au_is_idr

__all__ = [
    "Output",
    "OUTPUTS",
    "DecodedPicture",
    "Decoder",
    "DecoderFactory",
    "check_output",
    "EncoderSettings",
    "EncodedAU",
    "Encoder",
    "EncoderFactory",
    "OutputCheck",
]

# --- decoders ---------------------------------------------------------------------

Output = Literal["rgb", "nv12", "yuv420p"]
OUTPUTS: tuple[Output, ...] = ("rgb", "nv12", "yuv420p")


@dataclass(frozen=True, slots=True)
class DecodedPicture:
    """A decoded picture with the ``pts`` its access unit was fed with."""

    pts: int
    image: Any  # np.ndarray, Yuv420, or a torch tensor (NVDEC); None: not converted


class Decoder(Protocol):
    """The decoder interface (see :mod:`hyperframes.video.decode`)."""

    name: str
    output: Output

    def decode(
        self, au: bytes | np.ndarray, pts: int, *, convert: bool = True
    ) -> list[DecodedPicture]:
        """Feed one access unit; returns the pictures that came out.

        ``convert=False``: the picture is only decoded (a reference on the way
        to a later frame); it comes back with ``image`` None, unconverted.
        """
        ...

    def flush(self) -> list[DecodedPicture]:
        """Drain the pictures still held; the decoder then expects an IDR."""
        ...

    def reset(self) -> None:
        """Drop every held picture and reference (before a seek); expects an IDR next."""
        ...

    def close(self) -> None:
        """Release the decoder."""
        ...


DecoderFactory = Callable[..., Decoder]


def check_output(output: str) -> None:
    """Raise ValueError unless ``output`` is one of :data:`OUTPUTS`."""
    if output not in OUTPUTS:
        raise ValueError(f"unknown output {output!r}; choose from {', '.join(OUTPUTS)}")


# --- encoders ---------------------------------------------------------------------


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
    """The encoder interface (see :mod:`hyperframes.video.encode`)."""

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
        keyframe = au_is_idr(data)
        if idr_asked and not keyframe:
            raise VideoError(f"frame {frame_number}: an IDR was requested, the encoder made none")
        return EncodedAU(pts, data, keyframe, psnr)
