"""What the encoders accept, made into :class:`~hyperframes.video.color.Yuv420`.

A picture is JPEG bytes (a camera frame as stored with encoding ``jpeg``), an
8-bit R'G'B' array ``(H, W, 3)``, or a ready :class:`Yuv420` (BT.709 limited).
JPEG is decoded with simplejpeg (libjpeg-turbo, releases the GIL) or, when
that is not installed, Pillow; both apply JFIF's full-range BT.601 matrix
(:data:`~hyperframes.video.color.JPEG_YCBCR_TO_RGB`), and
:func:`~hyperframes.video.color.rgb_to_yuv420` then makes BT.709 limited 4:2:0.
"""

from __future__ import annotations

import io
import logging
from typing import TypeAlias

import numpy as np
from PIL import Image, UnidentifiedImageError

from hyperframes.video import _deps
from hyperframes.video.color import Yuv420, rgb_to_yuv420
from hyperframes.video.errors import FrameFormatError

__all__ = ["Picture", "decode_jpeg", "to_yuv420"]

Picture: TypeAlias = bytes | bytearray | memoryview | np.ndarray | Yuv420

log = logging.getLogger(__name__)
_warned_pillow = False


def decode_jpeg(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """Decode a JPEG to an 8-bit R'G'B' ``(H, W, 3)`` array (simplejpeg, else Pillow)."""
    buf = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    if _deps.available("simplejpeg"):
        sj = _deps.require("simplejpeg")
        try:
            rgb: np.ndarray = sj.decode_jpeg(buf, colorspace="RGB")
        except ValueError as exc:
            raise FrameFormatError(f"not a decodable JPEG ({len(buf)} bytes): {exc}") from None
        return rgb
    global _warned_pillow  # noqa: PLW0603 - one log line per process
    if not _warned_pillow:
        _warned_pillow = True
        log.info("simplejpeg not installed; decoding JPEG with Pillow (slower)")
    try:
        with Image.open(io.BytesIO(buf)) as img:
            if img.format != "JPEG":
                raise FrameFormatError(f"expected a JPEG, got {img.format}")
            return np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError) as exc:
        raise FrameFormatError(f"not a decodable JPEG ({len(buf)} bytes): {exc}") from None


def to_yuv420(picture: Picture) -> Yuv420:
    """Any accepted picture as BT.709 limited-range 4:2:0 (a :class:`Yuv420` passes through)."""
    if isinstance(picture, Yuv420):
        return picture
    if isinstance(picture, bytes | bytearray | memoryview):
        return rgb_to_yuv420(decode_jpeg(picture))
    if isinstance(picture, np.ndarray):
        if picture.ndim == 1 and picture.dtype == np.uint8:  # a payload read from a file
            return rgb_to_yuv420(decode_jpeg(picture))
        return rgb_to_yuv420(picture)
    raise FrameFormatError(
        f"cannot encode a {type(picture).__name__}: pass JPEG bytes, an (H, W, 3) uint8 "
        "array or a Yuv420"
    )
