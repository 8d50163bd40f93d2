"""Colour conversion: the one place where camera pictures become BT.709 limited-range 4:2:0.

JPEG (JFIF) stores full-range BT.601 Y'CbCr; a JPEG decoder turns it into
R'G'B' with the inverse BT.601 matrix (:data:`JPEG_YCBCR_TO_RGB`). Every
encoder of this package then takes pictures as BT.709 limited range ("TV
range": Y' 16..235, Cb/Cr 16..240) with 4:2:0 chroma, which is what the H.265
streams signal in their VUI (docs/VIDEO.md). This module holds the matrices
(pure functions of the luma coefficients, tested directly) and the numpy
conversions both ways; :class:`Yuv420` is the picture type the encoders take
and the CPU decoder returns.

Chroma siting: each 4:2:0 chroma sample is the mean of its 2x2 block of
R'G'B' pixels converted to Cb/Cr (the conversion is linear, so this equals
averaging after the matrix), i.e. centred siting; on the way back chroma is
repeated over its 2x2 block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from hyperframes.video.errors import FrameFormatError

__all__ = [
    "BT601",
    "BT709",
    "Matrix",
    "ycbcr_matrix",
    "rgb_to_ycbcr_8bit",
    "ycbcr_to_rgb_8bit",
    "RGB_TO_BT709_LIMITED",
    "BT709_LIMITED_TO_RGB",
    "JPEG_YCBCR_TO_RGB",
    "jpeg_ycbcr_to_bt709_limited",
    "Yuv420",
    "rgb_to_yuv420",
    "yuv420_to_rgb",
    "check_dimensions",
]

# (Kr, Kb) luma coefficients; Kg = 1 - Kr - Kb
BT601: Final = (0.299, 0.114)
BT709: Final = (0.2126, 0.0722)


@dataclass(frozen=True, slots=True)
class Matrix:
    """An affine map between 8-bit code values: ``out = m @ (x - pre) + post``."""

    m: np.ndarray  # (3, 3) float64
    pre: np.ndarray  # (3,) subtracted from the input
    post: np.ndarray  # (3,) added to the output

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Apply to ``(..., 3)`` code values; returns float64 (unrounded, unclipped)."""
        out: np.ndarray = (np.asarray(x, np.float64) - self.pre) @ self.m.T + self.post
        return out

    def then(self, other: Matrix) -> Matrix:
        """The composition: first ``self``, then ``other``."""
        m = other.m @ self.m
        post = other.m @ (self.post - other.pre) + other.post
        return Matrix(m, self.pre, post)


def ycbcr_matrix(kr: float, kb: float) -> np.ndarray:
    """R'G'B' in 0..1 to Y' in 0..1 and Cb, Cr in -0.5..0.5, for luma coefficients Kr, Kb."""
    kg = 1.0 - kr - kb
    return np.array(
        [
            [kr, kg, kb],
            [-kr / (2 * (1 - kb)), -kg / (2 * (1 - kb)), 0.5],
            [0.5, -kg / (2 * (1 - kr)), -kb / (2 * (1 - kr))],
        ]
    )


def _range_scale(full_range: bool) -> tuple[np.ndarray, np.ndarray]:
    if full_range:
        return np.array([255.0, 255.0, 255.0]), np.array([0.0, 128.0, 128.0])
    return np.array([219.0, 224.0, 224.0]), np.array([16.0, 128.0, 128.0])


def rgb_to_ycbcr_8bit(coeffs: tuple[float, float], full_range: bool) -> Matrix:
    """8-bit R'G'B' codes (0..255) to 8-bit Y'CbCr codes, full or limited range."""
    scale, offset = _range_scale(full_range)
    m = ycbcr_matrix(*coeffs) * (scale / 255.0)[:, None]
    return Matrix(m, np.zeros(3), offset)


def ycbcr_to_rgb_8bit(coeffs: tuple[float, float], full_range: bool) -> Matrix:
    """8-bit Y'CbCr codes to 8-bit R'G'B' codes (the inverse of :func:`rgb_to_ycbcr_8bit`)."""
    fwd = rgb_to_ycbcr_8bit(coeffs, full_range)
    return Matrix(np.linalg.inv(fwd.m), fwd.post, np.zeros(3))


RGB_TO_BT709_LIMITED: Final = rgb_to_ycbcr_8bit(BT709, full_range=False)
BT709_LIMITED_TO_RGB: Final = ycbcr_to_rgb_8bit(BT709, full_range=False)
JPEG_YCBCR_TO_RGB: Final = ycbcr_to_rgb_8bit(BT601, full_range=True)


def jpeg_ycbcr_to_bt709_limited() -> Matrix:
    """JPEG's full-range BT.601 Y'CbCr straight to BT.709 limited Y'CbCr (before clipping)."""
    return JPEG_YCBCR_TO_RGB.then(RGB_TO_BT709_LIMITED)


def check_dimensions(width: int, height: int) -> None:
    """Raise :class:`FrameFormatError` unless both dimensions are positive and even (4:2:0)."""
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise FrameFormatError(
            f"picture is {width}x{height}: 4:2:0 H.265 needs positive, even width and height"
        )


@dataclass(frozen=True, slots=True)
class Yuv420:
    """One 8-bit 4:2:0 picture as three C-contiguous planes (BT.709 limited range)."""

    y: np.ndarray  # (H, W) uint8
    u: np.ndarray  # (H/2, W/2) uint8, Cb
    v: np.ndarray  # (H/2, W/2) uint8, Cr

    def __post_init__(self) -> None:
        for name in ("y", "u", "v"):
            plane = getattr(self, name)
            if not isinstance(plane, np.ndarray) or plane.dtype != np.uint8 or plane.ndim != 2:
                raise FrameFormatError(f"Yuv420.{name} must be a 2-D uint8 array")
        h, w = self.y.shape
        check_dimensions(w, h)
        for name in ("u", "v"):
            if getattr(self, name).shape != (h // 2, w // 2):
                raise FrameFormatError(
                    f"Yuv420.{name} is {getattr(self, name).shape}, expected {(h // 2, w // 2)} "
                    f"for a {w}x{h} picture"
                )

    @property
    def width(self) -> int:
        """Width in pixels."""
        return int(self.y.shape[1])

    @property
    def height(self) -> int:
        """Height in pixels."""
        return int(self.y.shape[0])

    def to_i420(self) -> np.ndarray:
        """Planar I420 as one ``(H*3/2, W)`` array: Y, then Cb, then Cr (each chroma row-packed)."""
        h, w = self.y.shape
        out = np.empty((h * 3 // 2, w), np.uint8)
        out[:h] = self.y
        out[h:].reshape(-1)[: self.u.size] = self.u.reshape(-1)
        out[h:].reshape(-1)[self.u.size :] = self.v.reshape(-1)
        return out

    def to_nv12(self) -> np.ndarray:
        """Semi-planar NV12 as one ``(H*3/2, W)`` array: Y, then interleaved Cb/Cr rows."""
        h, w = self.y.shape
        out = np.empty((h * 3 // 2, w), np.uint8)
        out[:h] = self.y
        uv = out[h:].reshape(h // 2, w // 2, 2)
        uv[..., 0] = self.u
        uv[..., 1] = self.v
        return out

    @classmethod
    def from_i420(cls, data: np.ndarray, width: int, height: int) -> Yuv420:
        """Inverse of :meth:`to_i420` (copies)."""
        flat = _frame_bytes(data, width, height, "I420")
        y = flat[: width * height].reshape(height, width)
        q = width * height // 4
        u = flat[width * height : width * height + q].reshape(height // 2, width // 2)
        v = flat[width * height + q :].reshape(height // 2, width // 2)
        return cls(y.copy(), u.copy(), v.copy())

    @classmethod
    def from_nv12(cls, data: np.ndarray, width: int, height: int) -> Yuv420:
        """Inverse of :meth:`to_nv12` (copies)."""
        flat = _frame_bytes(data, width, height, "NV12")
        y = flat[: width * height].reshape(height, width)
        uv = flat[width * height :].reshape(height // 2, width // 2, 2)
        return cls(y.copy(), np.ascontiguousarray(uv[..., 0]), np.ascontiguousarray(uv[..., 1]))


def _frame_bytes(data: np.ndarray, width: int, height: int, what: str) -> np.ndarray:
    check_dimensions(width, height)
    flat = np.ascontiguousarray(data, np.uint8).reshape(-1)
    if flat.size != width * height * 3 // 2:
        raise FrameFormatError(
            f"{what} buffer of {flat.size} bytes does not hold a {width}x{height} picture "
            f"({width * height * 3 // 2} bytes)"
        )
    return flat


def _check_rgb(rgb: np.ndarray) -> None:
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3:
        raise FrameFormatError("an RGB picture must be a (H, W, 3) uint8 array")
    if rgb.shape[2] != 3:
        raise FrameFormatError(f"an RGB picture must have 3 channels, got shape {rgb.shape}")
    check_dimensions(rgb.shape[1], rgb.shape[0])


# Fixed point with 16 fractional bits: exact to ~0.01 of a code value, and integer SIMD
# loops in numpy (no BLAS call, whose thread pool competes with the encoder's threads).
_SHIFT = 16
_FWD_Y = np.round(RGB_TO_BT709_LIMITED.m[0] * (1 << _SHIFT)).astype(np.uint32)
_FWD_C = np.round(RGB_TO_BT709_LIMITED.m[1:] / 4 * (1 << _SHIFT)).astype(np.int32)  # 2x2 sums
_HALF = 1 << (_SHIFT - 1)
_INV = BT709_LIMITED_TO_RGB.m.astype(np.float32)
# Y' weighs the same in R', G' and B' (Cb = Cr = 0 is grey)
assert np.allclose(BT709_LIMITED_TO_RGB.m[:, 0], BT709_LIMITED_TO_RGB.m[0, 0])
_INV_Y = _INV[0, 0]
_INV_Y_OFFSET = np.float32(0.5 - 16 * float(BT709_LIMITED_TO_RGB.m[0, 0]))


def rgb_to_yuv420(rgb: np.ndarray) -> Yuv420:
    """8-bit R'G'B' ``(H, W, 3)`` to BT.709 limited-range :class:`Yuv420` (rounded to nearest)."""
    _check_rgb(rgb)
    y = rgb[..., 0] * _FWD_Y[0]
    y += rgb[..., 1] * _FWD_Y[1]
    y += rgb[..., 2] * _FWD_Y[2]
    y += (16 << _SHIFT) + _HALF  # stays within 16..235.5 << _SHIFT: no clipping needed
    y >>= _SHIFT
    s = rgb[0::2, 0::2].astype(np.int32)
    s += rgb[1::2, 0::2]
    s += rgb[0::2, 1::2]
    s += rgb[1::2, 1::2]
    planes = []
    for k in (0, 1):  # Cb, Cr: within 16..240.5 << _SHIFT
        c = s[..., 0] * _FWD_C[k, 0]
        c += s[..., 1] * _FWD_C[k, 1]
        c += s[..., 2] * _FWD_C[k, 2]
        c += (128 << _SHIFT) + _HALF
        c >>= _SHIFT
        planes.append(c.astype(np.uint8))
    return Yuv420(y.astype(np.uint8), planes[0], planes[1])


def yuv420_to_rgb(picture: Yuv420) -> np.ndarray:
    """BT.709 limited-range :class:`Yuv420` to 8-bit R'G'B' ``(H, W, 3)``, clipped to 0..255.

    In float32, along whole rows: each channel is the scaled luma plus that
    channel's chroma term, repeated across the 2x2 block.
    """
    h, w = picture.height, picture.width
    luma = np.multiply(picture.y, _INV_Y, dtype=np.float32)
    luma += _INV_Y_OFFSET
    cb = picture.u.astype(np.float32)
    cb -= np.float32(128)
    cr = picture.v.astype(np.float32)
    cr -= np.float32(128)
    out = np.empty((h, w, 3), np.uint8)
    rows = luma.reshape(h // 2, 2, w)
    for ch in range(3):
        term = cb * _INV[ch, 1]
        term += cr * _INV[ch, 2]
        plane = rows + np.repeat(term, 2, axis=1)[:, None]
        np.clip(plane, 0, 255, out=plane)
        out[..., ch] = plane.reshape(h, w)  # truncation of value + 0.5: rounds to nearest
    return out
