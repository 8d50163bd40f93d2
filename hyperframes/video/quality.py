"""Picture quality measures: pure numpy, no optional dependency.

:func:`psnr` is the one definition used by the converter's ``psnr_floor``
check (docs/CONVERTER.md), the tests and the benchmarks.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["psnr"]


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio in dB of two same-shaped images.

    ``10 * log10(peak**2 / MSE)`` over every sample (all planes or channels
    alike), computed in float64; ``peak`` is the largest sample value (255 for
    8-bit pictures). Identical images give ``inf``. Raises ``ValueError`` when
    the shapes differ.
    """
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    d = np.subtract(a, b, dtype=np.float64).ravel()
    mse = float(np.dot(d, d)) / d.size
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)
