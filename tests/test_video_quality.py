"""hyperframes.video.quality.psnr: the one PSNR of the converter, tests and benches."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hyperframes.converter.verify
import hyperframes.video
import hyperframes.video.testing
from hyperframes.video.quality import psnr


def test_identical_images_are_infinite() -> None:
    img = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    assert psnr(img, img.copy()) == math.inf


def test_known_values() -> None:
    a = np.zeros((8, 8), np.uint8)
    assert psnr(a, a + 1) == pytest.approx(10 * math.log10(255.0**2))  # MSE 1
    assert psnr(a, a + 255) == pytest.approx(0.0)  # no uint8 wrap-around either way
    assert psnr(a + 255, a) == pytest.approx(0.0)
    assert psnr(a, a + 1, peak=1.0) == pytest.approx(0.0)
    half = np.zeros((8, 8), np.uint8)
    half[:4] = 2  # MSE 2
    assert psnr(a, half) == pytest.approx(10 * math.log10(255.0**2 / 2))


def test_matches_mean_squared_error_on_noise() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    b = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    assert psnr(a, b) == pytest.approx(10 * math.log10(255.0**2 / mse), rel=1e-12)
    f = a.astype(np.float32) / 255
    assert psnr(f, f + np.float32(0.5), peak=1.0) == pytest.approx(10 * math.log10(4.0))


def test_shapes_must_match() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        psnr(np.zeros((4, 4), np.uint8), np.zeros((4, 5), np.uint8))


def test_one_definition() -> None:
    assert hyperframes.video.psnr is psnr
    assert hyperframes.video.testing.psnr is psnr
    assert hyperframes.converter.verify.psnr is psnr


@pytest.mark.parametrize("shape", [(7,), (16384,), (16385,), (3, 16384), (900, 1600), (45, 80, 3)])
def test_sum_of_squared_differences_is_exact(shape: tuple[int, ...]) -> None:
    """Row sums in int32, the total in int64: exact at every size, even with every
    difference at 255 (the largest row sum)."""
    from hyperframes.video.quality import _sse_u8, mse_u8

    rng = np.random.default_rng(len(shape))
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    b = rng.integers(0, 256, shape, dtype=np.uint8)
    assert _sse_u8(a, b) == int(((a.astype(np.int64) - b) ** 2).sum())
    full, zero = np.full(shape, 255, np.uint8), np.zeros(shape, np.uint8)
    assert _sse_u8(full, zero) == full.size * 255**2
    assert mse_u8(full, zero) == 255.0**2


def test_mse_of_psnr_inverts_psnr_of_mse() -> None:
    from hyperframes.video.quality import mse_of_psnr, psnr_of_mse

    for mse in (0.01, 1.0, 6.5, 1000.0):
        assert mse_of_psnr(psnr_of_mse(mse)) == pytest.approx(mse, rel=1e-12)
    assert mse_of_psnr(float("inf")) == 0.0
