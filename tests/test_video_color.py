"""Colour maths of hyperframes.video.color: pure, no codec involved."""

from __future__ import annotations

import numpy as np
import pytest

from hyperframes.video.color import (
    BT601,
    BT709,
    BT709_LIMITED_TO_RGB,
    JPEG_YCBCR_TO_RGB,
    RGB_TO_BT709_LIMITED,
    Yuv420,
    jpeg_ycbcr_to_bt709_limited,
    rgb_to_yuv420,
    ycbcr_matrix,
    yuv420_to_rgb,
)
from hyperframes.video.errors import FrameFormatError
from hyperframes.video.pictures import decode_jpeg, to_yuv420
from hyperframes.video.testing import BAR_COLOURS, colour_bars, psnr, synth_jpegs


def test_luma_rows_sum_to_one_and_chroma_rows_to_zero() -> None:
    for coeffs in (BT601, BT709):
        m = ycbcr_matrix(*coeffs)
        assert m[0].sum() == pytest.approx(1.0)
        assert m[1].sum() == pytest.approx(0.0, abs=1e-12)
        assert m[2].sum() == pytest.approx(0.0, abs=1e-12)
        assert m[1, 2] == m[2, 0] == 0.5  # B-Y and R-Y scaled to +-0.5


@pytest.mark.parametrize(
    ("rgb", "ycbcr"),
    [
        ((255, 255, 255), (235, 128, 128)),
        ((0, 0, 0), (16, 128, 128)),
        # BT.709 primaries at full intensity (ITU-R BT.709-6 table, 8-bit, rounded)
        ((255, 0, 0), (63, 102, 240)),
        ((0, 255, 0), (173, 42, 26)),
        ((0, 0, 255), (32, 240, 118)),
    ],
)
def test_bt709_limited_reference_values(rgb: tuple[int, ...], ycbcr: tuple[int, ...]) -> None:
    assert tuple(np.rint(RGB_TO_BT709_LIMITED.apply(rgb)).astype(int)) == ycbcr


def test_inverse_is_exact() -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (100, 3)).astype(np.float64)
    back = BT709_LIMITED_TO_RGB.apply(RGB_TO_BT709_LIMITED.apply(rgb))
    np.testing.assert_allclose(back, rgb, atol=1e-9)


def test_jpeg_composite_matrix() -> None:
    """JPEG's full-range BT.601 white/black/grey map to BT.709 limited codes."""
    m = jpeg_ycbcr_to_bt709_limited()
    np.testing.assert_allclose(m.apply([255, 128, 128]), [235, 128, 128], atol=1e-9)
    np.testing.assert_allclose(m.apply([0, 128, 128]), [16, 128, 128], atol=1e-9)
    # a saturated JPEG red goes through RGB (255, 0, 0) to the BT.709 red above
    jpeg_red = np.rint(np.linalg.inv(JPEG_YCBCR_TO_RGB.m) @ [255, 0, 0] + [0, 128, 128])
    np.testing.assert_allclose(m.apply(jpeg_red), [63, 102, 240], atol=1.0)
    # BT.601 and BT.709 differ: the same JPEG code gives a different luma
    assert abs(m.apply(jpeg_red)[0] - (16 + 219 * jpeg_red[0] / 255)) > 10


def test_rgb_to_yuv420_matches_the_matrix_on_flat_colours() -> None:
    for colour in BAR_COLOURS:
        img = np.broadcast_to(colour, (4, 6, 3)).copy()
        pic = rgb_to_yuv420(img)
        want = np.rint(RGB_TO_BT709_LIMITED.apply(colour)).astype(int)
        assert (int(pic.y[0, 0]), int(pic.u[0, 0]), int(pic.v[0, 0])) == tuple(want)
        assert np.all(pic.y == pic.y[0, 0]) and np.all(pic.u == pic.u[0, 0])


def test_chroma_is_the_mean_of_its_2x2_block() -> None:
    img = np.zeros((2, 2, 3), np.uint8)
    img[0, 0] = (255, 0, 0)  # one red pixel of four
    pic = rgb_to_yuv420(img)
    cb_red, cr_red = RGB_TO_BT709_LIMITED.apply([255, 0, 0])[1:]
    assert int(pic.u[0, 0]) == round(128 + (cb_red - 128) / 4)
    assert int(pic.v[0, 0]) == round(128 + (cr_red - 128) / 4)


def test_round_trip_colour_bars_within_one_level() -> None:
    bars = colour_bars(64, 16)
    back = yuv420_to_rgb(rgb_to_yuv420(bars))
    assert int(np.abs(back.astype(int) - bars.astype(int)).max()) <= 1


def test_i420_and_nv12_layouts_round_trip() -> None:
    rng = np.random.default_rng(1)
    pic = Yuv420(
        rng.integers(0, 256, (6, 8), dtype=np.uint8),
        rng.integers(0, 256, (3, 4), dtype=np.uint8),
        rng.integers(0, 256, (3, 4), dtype=np.uint8),
    )
    i420 = pic.to_i420()
    assert i420.shape == (9, 8)
    assert i420.reshape(-1)[48:60].tolist() == pic.u.reshape(-1).tolist()
    nv12 = pic.to_nv12()
    assert nv12[6, :4].tolist() == [pic.u[0, 0], pic.v[0, 0], pic.u[0, 1], pic.v[0, 1]]
    for back in (Yuv420.from_i420(i420, 8, 6), Yuv420.from_nv12(nv12, 8, 6)):
        assert np.array_equal(back.y, pic.y)
        assert np.array_equal(back.u, pic.u)
        assert np.array_equal(back.v, pic.v)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: rgb_to_yuv420(np.zeros((5, 4, 3), np.uint8)), "even"),
        (lambda: rgb_to_yuv420(np.zeros((4, 7, 3), np.uint8)), "even"),
        (lambda: rgb_to_yuv420(np.zeros((4, 4, 3), np.float32)), "uint8"),
        (lambda: rgb_to_yuv420(np.zeros((4, 4, 4), np.uint8)), "3 channels"),
        (
            lambda: Yuv420(
                np.zeros((4, 4), np.uint8), np.zeros((2, 3), np.uint8), np.zeros((2, 2), np.uint8)
            ),
            r"expected \(2, 2\)",
        ),
        (lambda: Yuv420.from_nv12(np.zeros(10, np.uint8), 4, 4), "does not hold"),
        (lambda: to_yuv420(b"not a jpeg"), "JPEG"),
        (lambda: to_yuv420("a string"), "cannot encode"),  # type: ignore[arg-type]
    ],
)
def test_bad_pictures_raise_frame_format_error(make: object, message: str) -> None:
    with pytest.raises(FrameFormatError, match=message):
        make()  # type: ignore[operator]


def test_jpeg_decode_simplejpeg_and_pillow_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    jpeg = synth_jpegs(64, 48, 1)[0]
    fast = decode_jpeg(jpeg)
    from hyperframes.video import _deps

    monkeypatch.setattr(_deps, "available", lambda name: False)
    slow = decode_jpeg(jpeg)
    assert fast.shape == slow.shape == (48, 64, 3)
    assert psnr(fast, slow) > 40  # both libjpeg(-turbo); IDCT details may differ slightly


@pytest.mark.parametrize("subsampling", [2, 0])  # Pillow: 2 is 4:2:0, 0 is 4:4:4
def test_jpeg_straight_to_yuv420_agrees_with_the_rgb_way(subsampling: int) -> None:
    """A 4:2:0 JPEG goes to Y'CbCr without R'G'B' (libavcodec planes, one matrix); other
    JPEGs take the R'G'B' way. Both give the same picture to within a few code values."""
    import io

    from PIL import Image

    from hyperframes.video import pictures

    rgb = decode_jpeg(synth_jpegs(160, 96, 1)[0])
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90, subsampling=subsampling)
    jpeg = buf.getvalue()
    straight = pictures._jpeg_to_yuv420(jpeg)
    assert (straight is not None) == (subsampling == 2)
    ours, rgb_way = to_yuv420(jpeg), rgb_to_yuv420(decode_jpeg(jpeg))
    for a, b in ((ours.y, rgb_way.y), (ours.u, rgb_way.u), (ours.v, rgb_way.v)):
        assert np.abs(a.astype(int) - b).max() <= 4
        assert psnr(a, b) > 48
    flat = np.zeros((16, 16, 3), np.uint8)
    flat[:] = (200, 30, 90)
    buf = io.BytesIO()
    Image.fromarray(flat).save(buf, "JPEG", quality=100)
    got = to_yuv420(buf.getvalue())
    want = RGB_TO_BT709_LIMITED.apply(decode_jpeg(buf.getvalue())[0, 0].astype(float))
    assert abs(int(got.y[8, 8]) - want[0]) <= 1 and abs(int(got.u[4, 4]) - want[1]) <= 1


def _rounded(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 0, 255).astype(np.uint8)


def _equal_but_near_ties(got: np.ndarray, exact: np.ndarray) -> None:
    """``got`` is ``exact`` rounded to nearest, except within 1e-4 of a tie (float32)."""
    off = got != _rounded(exact)
    assert np.all(np.abs(exact[off] % 1.0 - 0.5) < 1e-4), exact[off]
    assert np.abs(got.astype(int) - _rounded(exact)).max(initial=0) <= 1


def test_jpeg_planes_to_yuv420_rounds_the_exact_matrix() -> None:
    """The float32 row-wise conversion is the float64 matrix rounded (random planes and the
    corners of the code space, where luma leaves 0..255 and is clipped)."""
    from hyperframes.video.pictures import jpeg_planes_to_yuv420

    rng = np.random.default_rng(7)
    h, w = 96, 160
    y = rng.integers(0, 256, (h, w), dtype=np.uint8)
    cb = rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8)
    cr = rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8)
    y[:2, :2], cb[0, 0], cr[0, 0] = 255, 0, 0  # Y' above 255 before clipping
    y[:2, 2:4], cb[0, 1], cr[0, 1] = 0, 255, 255  # below 0
    m = jpeg_ycbcr_to_bt709_limited()
    up = lambda c: np.repeat(np.repeat(c.astype(np.float64), 2, 0), 2, 1)  # noqa: E731
    want = m.apply(np.stack([y.astype(np.float64), up(cb), up(cr)], axis=-1))
    got = jpeg_planes_to_yuv420(y, cb, cr)
    _equal_but_near_ties(got.y, want[..., 0])
    assert got.y[0, 0] == 255 and got.y[0, 2] == 0
    _equal_but_near_ties(got.u, want[::2, ::2, 1])
    _equal_but_near_ties(got.v, want[::2, ::2, 2])


def test_yuv420_to_rgb_rounds_the_exact_matrix() -> None:
    rng = np.random.default_rng(8)
    h, w = 64, 96
    pic = Yuv420(
        rng.integers(0, 256, (h, w), dtype=np.uint8),
        rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8),
        rng.integers(0, 256, (h // 2, w // 2), dtype=np.uint8),
    )
    up = lambda c: np.repeat(np.repeat(c.astype(np.float64), 2, 0), 2, 1)  # noqa: E731
    want = BT709_LIMITED_TO_RGB.apply(np.stack([pic.y, up(pic.u), up(pic.v)], -1))
    got = yuv420_to_rgb(pic)
    assert got.shape == (h, w, 3) and got.dtype == np.uint8
    _equal_but_near_ties(got, want)
