"""x265's own per-frame PSNR (EncoderSettings.measure): what it reports, that it costs the
bitstream nothing, and that x265's info-level chatter stays out of stderr."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from hyperframes.video import EncoderSettings, Yuv420, create_decoder, create_encoder
from hyperframes.video._cstderr import keep_line
from hyperframes.video._x265_stats import parse_rows
from hyperframes.video.encode import EncodedAU
from hyperframes.video.quality import plane_mse, psnr_of_mse
from hyperframes.video.testing import synth_jpegs

pytest.importorskip("av")

HEADER = "Layer , Encode Order, Type, POC, QP, Bits, Scenecut, RateFactor, Y PSNR, U PSNR, V PSNR, YUV PSNR, Latency"  # noqa: E501


def pictures(width: int, height: int, n: int) -> list[Yuv420]:
    from hyperframes.video import to_yuv420

    return [to_yuv420(j) for j in synth_jpegs(width, height, n, seed=11)]


def encode(pics: list[Yuv420], *, measure: bool, quality: int = 30) -> list[EncodedAU]:
    h, w = pics[0].y.shape
    settings = EncoderSettings(
        w, h, max_gop=6, quality=quality, preset="ultrafast", measure=measure
    )
    enc = create_encoder("x265", settings)
    out = []
    for i, p in enumerate(pics):
        out += enc.encode(p, i, idr=i % 6 == 0)
    out += enc.flush()
    enc.close()
    return out


def decoded_psnr(aus: list[EncodedAU], pics: list[Yuv420]) -> list[tuple[float, ...]]:
    dec = create_decoder("cpu", "yuv420p", threads=1)
    out = []
    for au, p in zip(aus, pics, strict=True):
        (picture,) = dec.decode(au.data, au.pts)
        out.append(tuple(psnr_of_mse(m) for m in plane_mse(picture.image, p)))
    return out


def test_parse_rows_by_encode_order() -> None:
    lines = [
        "0, 0, I-SLICE,    0, 29.00, 4908, 0,25.087,33.191, 32.595, 32.571, 33.039,0",
        "0, 1, P-SLICE,    0, 36.00,  192, 0,28.000,inf, 40.000, 41.500, inf,0",
        "0, 2, P-SLICE,    1, 36.00,  192, 0,28.000,-nan, 40.000, 41.500, 40.1,0",
    ]
    rows = parse_rows(HEADER, lines)
    assert rows == {0: (33.191, 32.595, 32.571), 1: (math.inf, 40.0, 41.5)}  # NaN: left out
    with pytest.raises(ValueError, match="Y PSNR"):
        parse_rows("Layer , Encode Order, Type, POC, QP", lines)  # x265 did not measure
    with pytest.raises(ValueError, match="fields"):
        parse_rows(HEADER, ["0, 3, P-SLICE"])


@pytest.mark.parametrize(
    ("line", "previous_blank", "decision"),
    [
        (b"x265 [info]: HEVC encoder version 4.2\n", False, (False, False)),
        (b"x265 [warning]: --psnr used with psy on: results invalid!\n", False, (False, False)),
        (b"x265 [error]: malloc of size 4 failed\n", False, (True, False)),
        (b"encoded 12 frames in 0.22s (53.35 fps), 3733.18 kb/s\n", True, (False, False)),
        (b"encoded 0 frames\n", True, (False, False)),
        (b"encoded 3 frames of something else\n", False, (True, False)),
        (b"\n", False, (False, True)),  # held: x265's summary starts with a blank line
        (b"\n", True, (True, False)),
        (b"[hevc @ 0x55] a libavcodec warning\n", False, (True, False)),
    ],
)
def test_which_c_stderr_lines_are_kept(
    line: bytes, previous_blank: bool, decision: tuple[bool, bool]
) -> None:
    assert keep_line(line, previous_blank) == decision


def test_x265_reports_the_psnr_a_decoder_sees() -> None:
    """On a picture that fills x265's 8-pixel grid, x265's PSNR of each plane is the decoded
    picture's, to its 3 printed decimals."""
    pics = pictures(320, 192, 8)
    aus = encode(pics, measure=True)
    assert all(au.psnr is not None for au in aus)
    for au, want in zip(aus, decoded_psnr(aus, pics), strict=True):
        assert au.psnr == pytest.approx(want, abs=6e-4)


def test_x265_psnr_is_never_above_the_decoded_one() -> None:
    """900 rows are coded as 904: x265 adds the padding rows' errors and divides by the visible
    size, so its PSNR is a lower bound (here 0.01-0.05 dB under)."""
    pics = pictures(160, 90, 8)  # 90 rows: coded as 96
    aus = encode(pics, measure=True)
    for au, want in zip(aus, decoded_psnr(aus, pics), strict=True):
        assert au.psnr is not None
        for got, true in zip(au.psnr, want, strict=True):
            assert got <= true + 6e-4
            assert true - got < 0.5


def test_measuring_leaves_the_bitstream_alone() -> None:
    pics = pictures(160, 96, 8)
    plain, measured = encode(pics, measure=False), encode(pics, measure=True)
    assert [a.data for a in plain] == [a.data for a in measured]
    assert all(a.psnr is None for a in plain)


def test_no_log_file_is_left_behind() -> None:
    before = {p.name for p in Path(tempfile.gettempdir()).glob("hf-x265-*")}
    pics = pictures(160, 96, 2)
    enc = create_encoder(
        "x265", EncoderSettings(160, 96, max_gop=6, preset="ultrafast", measure=True)
    )
    enc.encode(pics[0], 0)  # open and encoding: the log's path is already gone
    assert {p.name for p in Path(tempfile.gettempdir()).glob("hf-x265-*")} == before
    enc.close()


def test_x265_chatter_stays_out_of_stderr_and_the_rest_gets_through() -> None:
    """In a fresh process: x265 at log level info (needed to measure) prints a banner at open
    and a summary at close on C stderr; only lines of other C code and Python reach fd 2."""
    script = """
import ctypes
from hyperframes.video import EncoderSettings, create_encoder, to_yuv420
from hyperframes.video.testing import synth_jpegs
pic = to_yuv420(synth_jpegs(160, 96, 1)[0])
for _ in range(2):
    enc = create_encoder("x265", EncoderSettings(160, 96, preset="ultrafast", measure=True))
    assert enc.encode(pic, 0)[0].psnr is not None
    enc.close()
enc = create_encoder("x265", EncoderSettings(160, 96, preset="ultrafast", measure=True))
enc.close()  # no frame: x265 says "encoded 0 frames"
libc = ctypes.CDLL(None)
libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
libc.fputs(b"a C library line\\n", ctypes.c_void_p.in_dll(libc, "stderr"))
import os
os.write(2, b"a Python line\\n")
"""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=120, env=env, check=False
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert sorted(err.splitlines()) == ["a C library line", "a Python line"], err


def test_encoder_without_the_filter_reports_no_psnr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where C stderr cannot be filtered (not glibc), x265 stays at log level error and
    reports nothing; callers measure by decoding."""
    from hyperframes.video import _cstderr

    monkeypatch.setattr(_cstderr, "quiet_x265", lambda: False)
    aus = encode(pictures(160, 96, 3), measure=True)
    assert len(aus) == 3 and all(a.psnr is None for a in aus)


def test_psnr_of_a_frame_is_its_own() -> None:
    """Each access unit gets its own frame's row: a GOP of still pictures then a cut."""
    pics = pictures(160, 96, 1) * 3 + pictures(160, 96, 3)[1:]
    noisy = Yuv420(
        np.random.default_rng(1).integers(0, 256, (96, 160), dtype=np.uint8),
        pics[0].u.copy(),
        pics[0].v.copy(),
    )
    pics.append(noisy)
    aus = encode(pics, measure=True, quality=40)
    got = [a.psnr for a in aus]
    want = decoded_psnr(aus, pics)
    assert [a.pts for a in aus] == list(range(len(pics)))
    assert got[-1] is not None and got[-1][0] < 20  # noise at CRF 40
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, abs=6e-4)


def test_without_a_writable_temporary_directory_nothing_is_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """x265's log needs a file: with TMPDIR unwritable the encoder still encodes."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setattr(tempfile, "tempdir", str(locked))
    if os.access(locked, os.W_OK):  # root ignores the mode
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    aus = encode(pictures(160, 96, 2), measure=True)
    assert len(aus) == 2 and all(a.psnr is None for a in aus)
