"""Camera payloads to pixels: the one public image decoder.

:func:`decode_image` turns a stored ``jpeg`` or ``png`` payload into an
``(H, W, 3)`` uint8 RGB array; :func:`raw_image` turns a raw camera payload
(:data:`RAW_IMAGE_ENCODINGS`: ``raw-rgb``, ``raw-bgr`` (swapped to RGB),
``raw-gray8``, ``raw-gray16``, ``raw-f32``) into an array of its size;
:meth:`hyperframes.reader.Frame.image` calls them for a frame.
:func:`point_columns` gives a point payload (``xyzi-f32``, ``points-f32``,
the structured ``points``) as ``(N, k)`` float32 columns. JPEG goes through
simplejpeg (libjpeg-turbo, releases the GIL; the ``video`` extra brings it)
when that is installed, else Pillow (a core dependency), both with JFIF's
full-range BT.601 colours.
"""

from __future__ import annotations

import importlib
import io
import logging
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = [
    "IMAGE_ENCODINGS",
    "RAW_IMAGE_ENCODINGS",
    "ImageLayoutError",
    "decode_image",
    "jpeg_backend",
    "point_columns",
    "raw_image",
    "raw_size",
]

#: The stream encodings :func:`decode_image` decodes.
IMAGE_ENCODINGS = frozenset({"jpeg", "png"})

#: Raw camera encodings :func:`raw_image` reads: encoding -> (sample dtype, channels).
#: Rows unpadded, samples little endian, ``width``/``height`` in the stream's ``extra``.
RAW_IMAGE_ENCODINGS: dict[str, tuple[str, int]] = {
    "raw-rgb": ("|u1", 3),
    "raw-bgr": ("|u1", 3),  # B, G, R per pixel: raw_image swaps it to R, G, B
    "raw-gray8": ("|u1", 1),
    "raw-gray16": ("<u2", 1),
    "raw-f32": ("<f4", 1),
}


class ImageLayoutError(ValueError):
    """A raw image stream without a usable size, or a payload that is not that size."""


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


def raw_size(
    encoding: str, extra: Mapping[str, Any], shape: tuple[int, ...] | None = None
) -> tuple[int, int]:
    """``(width, height)`` of a raw image stream: ``extra["width"]``/``["height"]``, else
    its shape ``(H, W[, C])``. Raises :class:`ImageLayoutError` when neither says."""
    width, height = extra.get("width"), extra.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    channels = RAW_IMAGE_ENCODINGS.get(encoding, ("", 1))[1]
    fits = shape is not None and len(shape) in (2, 3) and min(shape) > 0
    if shape is not None and fits and (len(shape) == 2 or shape[2] == channels):
        return int(shape[1]), int(shape[0])
    raise ImageLayoutError(
        f"{encoding} stream has no size: it needs extra.width and extra.height "
        f"(or a shape (H, W{', 3' if channels == 3 else ''})) in its stream table"
    )


def raw_image(
    data: bytes | bytearray | memoryview | np.ndarray, encoding: str, width: int, height: int
) -> np.ndarray:
    """A raw camera payload as an array: ``(H, W, 3)`` uint8 R, G, B for ``raw-rgb`` (a
    view) and ``raw-bgr`` (channels swapped, a contiguous copy); ``(H, W)`` for
    ``raw-gray8`` (uint8), ``raw-gray16`` (uint16) and ``raw-f32`` (float32).

    Raises :class:`ImageLayoutError` for a payload that is not ``width`` x ``height``,
    ValueError for an encoding not in :data:`RAW_IMAGE_ENCODINGS`.
    """
    if encoding not in RAW_IMAGE_ENCODINGS:
        known = ", ".join(sorted(RAW_IMAGE_ENCODINGS))
        raise ValueError(f"{encoding!r} is not a raw image encoding ({known})")
    sample, channels = RAW_IMAGE_ENCODINGS[encoding]
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    dt = np.dtype(sample)
    if buf.size != width * height * channels * dt.itemsize:
        raise ImageLayoutError(
            f"{buf.size} bytes do not match width x height {width}x{height} of a {encoding} "
            f"image ({width * height * channels * dt.itemsize} bytes)"
        )
    pixels = buf.view(dt)
    if channels == 1:
        return pixels.reshape(height, width)
    rgb = pixels.reshape(height, width, 3)
    return np.ascontiguousarray(rgb[..., ::-1]) if encoding == "raw-bgr" else rgb


def point_columns(array: np.ndarray, fields: Sequence[str] | None = None) -> np.ndarray:
    """A point payload as ``(N, k)`` float32 columns.

    ``array`` is a frame's :meth:`~hyperframes.reader.Frame.array`: ``(N, k)`` already
    (``xyzi-f32``, ``points-f32``: returned as it is) or a structured ``(N,)`` array
    (``points``: fields ``f0..``, their names in ``fields``). A structured array gives
    one float32 column per scalar field (``x``, ``y``, ``z`` first where ``fields``
    names them, then the others in stored order; sub-arrays one column per element).
    """
    if array.dtype.names is None:
        return array.reshape(len(array), -1) if array.ndim != 2 else array
    stored = list(array.dtype.names)
    names = list(fields) if fields is not None and len(fields) == len(stored) else stored
    first = [names.index(a) for a in ("x", "y", "z") if a in names]
    order = first + [i for i in range(len(stored)) if i not in first]
    cols = [array[stored[i]].astype(np.float32).reshape(len(array), -1) for i in order]
    if not cols:
        return np.zeros((len(array), 0), np.float32)
    return np.concatenate(cols, axis=1)
