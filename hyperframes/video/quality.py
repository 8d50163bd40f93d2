"""Picture quality measures: pure numpy, no optional dependency.

:func:`psnr` is the one definition used by the converter's ``psnr_floor``
check (docs/CONVERTER.md), the tests and the benchmarks. :func:`plane_mse`
and :func:`rgb_mse_estimate` are the converter's cheap per-frame measure: a
decoded picture against the encoder's input, in Y'CbCr, carried to R'G'B'.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from hyperframes.video.color import BT709_LIMITED_TO_RGB, Yuv420

__all__ = ["mse_of_psnr", "mse_u8", "plane_mse", "psnr", "psnr_of_mse", "rgb_mse_estimate"]


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio in dB of two same-shaped images.

    ``10 * log10(peak**2 / MSE)`` over every sample (all planes or channels
    alike), computed in float64 (8-bit images: exactly, in integers);
    ``peak`` is the largest sample value (255 for 8-bit pictures). Identical
    images give ``inf``. Raises ``ValueError`` when the shapes differ.
    """
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if a.dtype == b.dtype == np.uint8:
        mse = mse_u8(a, b)
    else:
        d = np.subtract(a, b, dtype=np.float64).ravel()
        mse = float(np.dot(d, d)) / d.size
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


# a row of this many squared 8-bit differences sums within int32 (16384 * 255**2 < 2**31)
_SSE_ROW: Final = 16384


def _sse_u8(a: np.ndarray, b: np.ndarray) -> int:
    """Sum of squared differences of two same-shaped uint8 arrays, exact.

    Rows of :data:`_SSE_ROW` differences are summed in int32 (SIMD, half the
    work of int64 sums), the row sums in int64.
    """
    d = np.subtract(a, b, dtype=np.int16).reshape(-1)
    whole = d.size - d.size % _SSE_ROW
    rows = d[:whole].reshape(-1, _SSE_ROW)
    tail = d[whole:]
    total = int(np.einsum("ij,ij->i", rows, rows, dtype=np.int32).sum(dtype=np.int64))
    return total + int(np.einsum("i,i->", tail, tail, dtype=np.int64))


def mse_u8(a: np.ndarray, b: np.ndarray) -> float:
    """Mean squared error of two same-shaped uint8 arrays (exact sum, one division)."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return _sse_u8(a, b) / a.size


def plane_mse(a: Yuv420, b: Yuv420) -> tuple[float, float, float]:
    """Mean squared error of each plane (Y', Cb, Cr) of two same-sized pictures, exact."""
    out = []
    for pa, pb in ((a.y, b.y), (a.u, b.u), (a.v, b.v)):
        if pa.shape != pb.shape:
            raise ValueError(f"shapes differ: {pa.shape} vs {pb.shape}")
        out.append(_sse_u8(pa, pb) / pa.size)
    return out[0], out[1], out[2]


# how an error in each BT.709 limited plane reaches R', G' and B' (chroma repeated per 2x2)
_TO_RGB_SQUARED: Final = np.square(BT709_LIMITED_TO_RGB.m).mean(axis=0)


def rgb_mse_estimate(mse_y: float, mse_cb: float, mse_cr: float) -> float:
    """The R'G'B' mean squared error that per-plane Y'CbCr errors become (8-bit, 0..255).

    Each plane's error goes through the BT.709 limited-to-R'G'B' matrix;
    errors of different planes are taken as uncorrelated (a codec's are, to
    first order). Clipping to 0..255 only lowers the true value.
    """
    w = _TO_RGB_SQUARED
    return float(w[0] * mse_y + w[1] * mse_cb + w[2] * mse_cr)


def psnr_of_mse(mse: float, peak: float = 255.0) -> float:
    """PSNR in dB of a mean squared error (``inf`` for 0)."""
    return math.inf if mse <= 0 else 10.0 * math.log10(peak * peak / mse)


def mse_of_psnr(db: float, peak: float = 255.0) -> float:
    """The mean squared error a PSNR in dB stands for (0 for ``inf``)."""
    return 0.0 if math.isinf(db) and db > 0 else peak * peak / 10.0 ** (db / 10.0)
