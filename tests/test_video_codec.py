"""Real libx265 encoding, decoded by PyAV and by the ffmpeg command-line tool."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hyperframes.video import (
    EncoderSettings,
    FrameFormatError,
    IdrPlanner,
    MissingDependencyError,
    Yuv420,
    create_decoder,
    create_encoder,
    encode_pictures,
    rgb_to_yuv420,
    to_yuv420,
    yuv420_to_rgb,
)
from hyperframes.video.errors import EncoderUnavailableError
from hyperframes.video.testing import camera_timestamps, colour_bars, psnr, synth_jpegs

W, H, N = 320, 192, 24
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg CLI not installed")


@pytest.fixture(scope="module")
def jpegs() -> list[bytes]:
    return synth_jpegs(W, H, N, seed=3)


@pytest.fixture(scope="module")
def encoded(jpegs: list[bytes]) -> list[tuple[int, bytes, bool]]:
    settings = EncoderSettings(W, H, max_gop=10, quality=20, preset="ultrafast")
    enc = create_encoder("x265", settings)
    stamps = camera_timestamps(N)
    frames = encode_pictures(zip(stamps, jpegs, strict=True), enc, IdrPlanner(100_000_000, k=3))
    return [(f.timestamp_ns, f.data, f.keyframe) for f in frames]


def pyav_decode(aus: list[bytes], output: str = "yuv420p") -> list[object]:
    dec = create_decoder("cpu", output)  # type: ignore[arg-type]
    out = []
    for i, au in enumerate(aus):
        pics = dec.decode(au, i)
        assert [p.pts for p in pics] == [i]  # one picture per access unit, no delay
        out.append(pics[0].image)
    assert dec.flush() == []
    return out


def ffmpeg_decode(aus: list[bytes], tmp: Path) -> np.ndarray:
    path = tmp / "stream.hevc"
    path.write_bytes(b"".join(aus))
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "hevc", "-i", str(path), "-f", "rawvideo",
         "-pix_fmt", "yuv420p", "-"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    return np.frombuffer(raw, np.uint8).reshape(-1, H * 3 // 2, W)


def test_one_access_unit_per_frame_in_order(encoded: list[tuple[int, bytes, bool]]) -> None:
    stamps = camera_timestamps(N)
    assert [t for t, _, _ in encoded] == stamps
    # k=3 at 100 ms windows, 30 Hz from just after a boundary: a new group of 3 windows
    # (300 ms) starts at frames 10 and 19 (frame 9 is stamped 299.999998 ms)
    assert [i for i, (_, _, key) in enumerate(encoded) if key] == [0, 10, 19]


Encoded = list[tuple[int, bytes, bool]]


def test_pyav_decode_matches_source(jpegs: list[bytes], encoded: Encoded) -> None:
    pictures = pyav_decode([au for _, au, _ in encoded])
    assert len(pictures) == N
    for jpeg, pic in zip(jpegs, pictures, strict=True):
        assert isinstance(pic, Yuv420) and (pic.width, pic.height) == (W, H)
        source = to_yuv420(jpeg)
        assert psnr(pic.y, source.y) > 30  # CRF 20
        assert psnr(pic.u, source.u) > 30
    # the synth camera pans: frame order survives the round trip (frame 1 is the nearest
    # to frame 0, ~28 dB apart at the source; frame 8 ~21 dB)
    y0 = pictures[0].y  # type: ignore[attr-defined]
    assert psnr(pictures[1].y, y0) > psnr(pictures[8].y, y0) + 4  # type: ignore[attr-defined]


@needs_ffmpeg
def test_ffmpeg_cli_decodes_bit_identically(
    encoded: list[tuple[int, bytes, bool]], tmp_path: Path
) -> None:
    aus = [au for _, au, _ in encoded]
    cli = ffmpeg_decode(aus, tmp_path)
    assert cli.shape[0] == N
    for frame, pic in zip(cli, pyav_decode(aus), strict=True):
        assert np.array_equal(frame, pic.to_i420())  # type: ignore[attr-defined]


@needs_ffmpeg
def test_ffprobe_sees_the_convention(encoded: Encoded, tmp_path: Path) -> None:
    path = tmp_path / "s.hevc"
    path.write_bytes(b"".join(au for _, au, _ in encoded))
    info = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-of", "json", str(path)],
        capture_output=True, check=True, text=True,
    ).stdout)["streams"][0]  # fmt: skip
    assert (info["codec_name"], info["profile"], info["pix_fmt"]) == ("hevc", "Main", "yuv420p")
    assert (info["width"], info["height"], info["has_b_frames"]) == (W, H, 0)
    assert (info["color_range"], info["color_space"], info["color_primaries"]) == (
        "tv", "bt709", "bt709"
    )  # fmt: skip


def test_colour_bars_round_trip() -> None:
    bars = colour_bars(W, H)
    enc = create_encoder("x265", EncoderSettings(W, H, quality=12, preset="ultrafast"))
    aus = enc.encode(rgb_to_yuv420(bars), 0, idr=True) + enc.flush()
    assert len(aus) == 1 and aus[0].keyframe
    rgb = create_decoder("cpu", "rgb").decode(aus[0].data, 0)[0].image
    assert rgb.shape == (H, W, 3) and rgb.dtype == np.uint8
    edges = [2 * round(i * W / 16) for i in range(9)]
    for i in range(8):  # the middle of each bar, away from chroma edges
        patch = rgb[8:-8, edges[i] + 6 : edges[i + 1] - 6].reshape(-1, 3).astype(int)
        assert np.abs(patch - bars[0, edges[i]].astype(int)).max() <= 6, i
    assert psnr(rgb, bars) > 30
    # the numpy reference conversion agrees with the decoder's (swscale) one
    yuv = create_decoder("cpu", "yuv420p").decode(aus[0].data, 0)[0].image
    assert np.abs(yuv420_to_rgb(yuv)[8:-8].astype(int) - rgb[8:-8].astype(int)).mean() < 1.0


def test_nv12_output_and_decoder_reset() -> None:
    enc = create_encoder("x265", EncoderSettings(64, 48, max_gop=4, preset="ultrafast"))
    pics = [rgb_to_yuv420(np.full((48, 64, 3), v, np.uint8)) for v in (30, 90, 150, 210)]
    aus = [au for i, p in enumerate(pics) for au in enc.encode(p, i)] + enc.flush()
    nv12 = create_decoder("cpu", "nv12")
    planar = create_decoder("cpu", "yuv420p")
    for i, au in enumerate(aus):
        a = nv12.decode(au.data, i)[0].image
        b = planar.decode(au.data, i)[0].image
        assert a.shape == (72, 64) and np.array_equal(a, b.to_nv12())
    nv12.reset()  # a seek: the decoder starts again at the IDR
    again = nv12.decode(aus[0].data, 7)
    assert [p.pts for p in again] == [7]
    assert np.array_equal(again[0].image, planar.decode(aus[0].data, 0)[0].image.to_nv12())


@pytest.mark.parametrize(
    ("picture", "message"),
    [
        (Yuv420(np.zeros((48, 62), np.uint8), np.zeros((24, 31), np.uint8),
                np.zeros((24, 31), np.uint8)), "62x48"),
        (np.zeros((48, 64, 3), np.uint8), "Yuv420"),
    ],
)  # fmt: skip
def test_encoder_rejects_wrong_pictures(picture: object, message: str) -> None:
    enc = create_encoder("x265", EncoderSettings(64, 48, preset="ultrafast"))
    with pytest.raises(FrameFormatError, match=message):
        enc.encode(picture, 0)  # type: ignore[arg-type]


def test_settings_are_validated() -> None:
    with pytest.raises(FrameFormatError, match="even"):
        EncoderSettings(63, 48)
    with pytest.raises(ValueError, match="quality"):
        EncoderSettings(64, 48, quality=60)
    with pytest.raises(ValueError, match="unknown encoder"):
        create_encoder("h264", EncoderSettings(64, 48))
    with pytest.raises(ValueError, match="unknown output"):
        create_decoder("cpu", "bgr")  # type: ignore[arg-type]


def test_auto_falls_back_to_x265_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    from hyperframes.video import _nvprobe

    if _nvprobe.probe().can_try_encode:
        pytest.skip("this machine may have NVENC; the GPU tests cover auto there")
    with caplog.at_level(logging.INFO, logger="hyperframes.video"):
        enc = create_encoder("auto", EncoderSettings(64, 48, preset="ultrafast"))
        dec = create_decoder("auto", "rgb")
    assert enc.name == "x265" and dec.name == "cpu"
    assert "using x265" in caplog.text and "encoder 'nvenc' is not available" in caplog.text
    assert "using cpu" in caplog.text
    with pytest.raises(EncoderUnavailableError, match="nvenc"):
        create_encoder("nvenc", EncoderSettings(64, 48))


def test_missing_pyav_gives_a_typed_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['av'] = None\n"
        "import hyperframes, hyperframes.reader, hyperframes.video as v\n"
        "try:\n"
        "    v.create_encoder('x265', v.EncoderSettings(64, 48))\n"
        "except v.MissingDependencyError as e:\n"
        "    assert isinstance(e, ImportError); print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'hyperframes-sensors[video]'" in out.stdout
    assert issubclass(MissingDependencyError, ImportError)


def test_decoding_without_conversion_still_advances_the_references(
    encoded: list[tuple[int, bytes, bool]],
) -> None:
    """convert=False (a reference on the way to the frame wanted) returns no image, and the
    frames after it decode exactly as in a plain forward pass."""
    aus = [au for _, au, _ in encoded]
    want = pyav_decode(aus[:6], "rgb")
    dec = create_decoder("cpu", "rgb")
    for i in range(5):
        (pic,) = dec.decode(aus[i], i, convert=False)
        assert pic.pts == i and pic.image is None
    (last,) = dec.decode(aus[5], 5)
    assert np.array_equal(last.image, want[5])
