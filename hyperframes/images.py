"""Camera payloads to pixels: the one public image decoder.

:func:`decode_image` turns a stored ``jpeg`` or ``png`` payload into an
``(H, W, 3)`` uint8 RGB array; :meth:`hyperframes.reader.Frame.image` calls
it for a frame. JPEG goes through simplejpeg (libjpeg-turbo, releases the
GIL; the ``video`` extra brings it) when that is installed, else Pillow (a
core dependency), both with JFIF's full-range BT.601 colours.
"""

from __future__ import annotations

import importlib
import io
import logging
from types import ModuleType
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = ["IMAGE_ENCODINGS", "decode_image", "jpeg_backend"]

#: The stream encodings :func:`decode_image` decodes.
IMAGE_ENCODINGS = frozenset({"jpeg", "png"})

log = logging.getLogger(__name__)
_simplejpeg: ModuleType | Literal[False] | None = False  # False: not looked up yet


def _sj() -> ModuleType | None:
    global _simplejpeg  # noqa: PLW0603 - one import attempt per process
    if _simplejpeg is False:
        try:
            _simplejpeg = importlib.import_module("simplejpeg")
        except ImportError:
            _simplejpeg = None
            log.info("simplejpeg not installed: decoding JPEG with Pillow (slower)")
    return _simplejpeg


def jpeg_backend() -> str:
    """``"simplejpeg"`` or ``"pillow"``: what :func:`decode_image` uses for JPEG here."""
    return "simplejpeg" if _sj() is not None else "pillow"


def decode_image(
    data: bytes | bytearray | memoryview | np.ndarray, encoding: str = "jpeg"
) -> np.ndarray:
    """Decode JPEG or PNG bytes to a writable ``(H, W, 3)`` uint8 RGB array.

    Raises ValueError for another encoding or bytes that do not decode.
    """
    if encoding not in IMAGE_ENCODINGS:
        known = ", ".join(sorted(IMAGE_ENCODINGS))
        raise ValueError(f"cannot decode {encoding!r} as an image (decodes: {known})")
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
    sj = _sj() if encoding == "jpeg" else None
    if sj is not None:
        try:
            rgb: np.ndarray = sj.decode_jpeg(buf, colorspace="RGB")
        except ValueError as exc:
            raise ValueError(f"not a decodable JPEG ({buf.size} bytes): {exc}") from None
        return rgb
    try:
        with Image.open(io.BytesIO(buf.tobytes())) as img:
            return np.array(img.convert("RGB"))  # a writable copy (asarray is read-only)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"not a decodable {encoding.upper()} ({buf.size} bytes): {exc}") from None
