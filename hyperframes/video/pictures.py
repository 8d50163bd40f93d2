"""What the encoders accept, made into :class:`~hyperframes.video.color.Yuv420`.

A picture is JPEG bytes (a camera frame as stored with encoding ``jpeg``), an
8-bit R'G'B' array ``(H, W, 3)``, or a ready :class:`Yuv420` (BT.709 limited).

A 4:2:0 JPEG (what cameras and libjpeg write by default) becomes a
:class:`Yuv420` without a detour through R'G'B': libavcodec's MJPEG decoder
(PyAV) gives its full-range BT.601 Y'CbCr planes and
:func:`jpeg_planes_to_yuv420` maps them to BT.709 limited range in the
Y'CbCr domain (:func:`~hyperframes.video.color.jpeg_ycbcr_to_bt709_limited`;
chroma needs only chroma, luma gets a chroma term per 2x2 block), about a
third of the CPU time of decoding to R'G'B' and converting back, as the
``ffmpeg`` CLI does. Other JPEGs (4:2:2, 4:4:4, grey, odd sizes) and
:func:`decode_jpeg` go through R'G'B': simplejpeg (libjpeg-turbo, releases
the GIL) or, when that is not installed, Pillow; both apply JFIF's
full-range BT.601 matrix (:data:`~hyperframes.video.color.JPEG_YCBCR_TO_RGB`),
and :func:`~hyperframes.video.color.rgb_to_yuv420` then makes BT.709 limited
4:2:0. The two ways agree to within one code value on camera content (~55 dB).
"""

from __future__ import annotations

import io
import logging
import threading
from typing import Any, Final, TypeAlias

import numpy as np
from PIL import Image, UnidentifiedImageError

# not `from hyperframes.video import _deps`: the package imports this module (a cycle);
# the module object, because tests patch _deps.available
import hyperframes.video._deps as _deps  # noqa: PLR0402
from hyperframes.video._pyav_decoder import plane_views
from hyperframes.video.color import Yuv420, jpeg_ycbcr_to_bt709_limited, rgb_to_yuv420
from hyperframes.video.errors import FrameFormatError

__all__ = ["Picture", "decode_jpeg", "jpeg_planes_to_yuv420", "to_yuv420"]

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


# JPEG Y'CbCr -> BT.709 limited Y'CbCr (float32: within ~1e-4 of a code value of the exact
# float64 result, so rounding matches it except at exact ties)
_J2L = jpeg_ycbcr_to_bt709_limited()
_KY: Final = np.float32(_J2L.m[0, 0])
_M: Final = _J2L.m.astype(np.float32)
_POST: Final = (_J2L.post + 0.5).astype(np.float32)  # + 0.5: truncation rounds to nearest


def _chroma_term(cbs: np.ndarray, crs: np.ndarray, k: int) -> np.ndarray:
    """Row ``k`` of the matrix on the centred chroma, plus its offset and 0.5 (float32)."""
    out: np.ndarray = cbs * _M[k, 1]
    out += crs * _M[k, 2]
    out += _POST[k]
    return out


def _to_u8(x: np.ndarray) -> np.ndarray:
    """Clip a float32 array (offset by 0.5) to 0..255 in place and truncate to uint8."""
    np.clip(x, 0, 255, out=x)
    return x.astype(np.uint8)


def jpeg_planes_to_yuv420(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> Yuv420:
    """JPEG's full-range BT.601 4:2:0 planes (uint8) as BT.709 limited :class:`Yuv420`.

    The luma of each 2x2 block takes the chroma term of that block's chroma
    sample; chroma depends on chroma alone (the matrices' luma terms cancel).
    Rounded to nearest, clipped to 0..255. Every full-resolution step runs
    along whole rows (the chroma term is repeated across a row pair first), in
    float32: a few passes over the picture, no integer widening.
    """
    h, w = y.shape
    cbs = cb.astype(np.float32)
    cbs -= 128
    crs = cr.astype(np.float32)
    crs -= 128
    luma = np.multiply(y, _KY, dtype=np.float32)
    luma.reshape(h // 2, 2, w)[...] += np.repeat(_chroma_term(cbs, crs, 0), 2, axis=1)[:, None]
    return Yuv420(
        _to_u8(luma), _to_u8(_chroma_term(cbs, crs, 1)), _to_u8(_chroma_term(cbs, crs, 2))
    )


_mjpeg = threading.local()  # one libavcodec MJPEG decoder per thread


def _jpeg_to_yuv420(buf: bytes) -> Yuv420 | None:
    """A 4:2:0 JPEG straight to :class:`Yuv420`; None when it needs the R'G'B' way."""
    if not _deps.available("av"):
        return None
    av: Any = _deps.require("av")
    ctx = getattr(_mjpeg, "ctx", None)
    if ctx is None:
        ctx = _mjpeg.ctx = av.CodecContext.create("mjpeg", "r")
        ctx.thread_count = 1
    try:
        frames = ctx.decode(av.Packet(buf))
    except av.error.FFmpegError:
        _mjpeg.ctx = None  # the R'G'B' way reports the error
        return None
    if len(frames) != 1:
        return None
    f = frames[0]
    if f.format.name != "yuvj420p" or f.height % 2 or f.width % 2:
        return None
    return jpeg_planes_to_yuv420(*plane_views(f))


def _jpeg(data: bytes | bytearray | memoryview | np.ndarray) -> Yuv420:
    buf = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    picture = _jpeg_to_yuv420(buf)
    return picture if picture is not None else rgb_to_yuv420(decode_jpeg(buf))


def to_yuv420(picture: Picture) -> Yuv420:
    """Any accepted picture as BT.709 limited-range 4:2:0 (a :class:`Yuv420` passes through)."""
    if isinstance(picture, Yuv420):
        return picture
    if isinstance(picture, bytes | bytearray | memoryview):
        return _jpeg(picture)
    if isinstance(picture, np.ndarray):
        if picture.ndim == 1 and picture.dtype == np.uint8:  # a payload read from a file
            return _jpeg(picture)
        return rgb_to_yuv420(picture)
    raise FrameFormatError(
        f"cannot encode a {type(picture).__name__}: pass JPEG bytes, an (H, W, 3) uint8 "
        "array or a Yuv420"
    )
