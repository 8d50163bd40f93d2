"""NVDEC/NVENC paths: run only on a machine with an NVIDIA GPU and its video libraries.

Each test is skipped with the probe's reason elsewhere. ``scripts/gpu-check.sh``
runs these plus the decode benchmark on a GPU machine.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from hyperframes.reader import HyperframeReader
from hyperframes.video import (
    EncoderSettings,
    VideoStream,
    check_access_units,
    create_decoder,
    create_encoder,
    to_yuv420,
)
from hyperframes.video._deps import available
from hyperframes.video._nvprobe import probe
from hyperframes.video.errors import EncoderUnavailableError
from hyperframes.video.testing import moving_scene, psnr, write_h265_stream

pytestmark = pytest.mark.gpu
CAPS = probe()
needs_nvdec = pytest.mark.skipif(not CAPS.can_decode, reason=f"no NVDEC: {CAPS.summary()}")
needs_torch = pytest.mark.skipif(not available("torch"), reason="torch not installed")
W, H, N = 256, 144, 30


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    pytest.importorskip("av", reason="PyAV is needed to make the test stream")
    path = tmp_path_factory.mktemp("gpu") / "cam.hf"
    written = write_h265_stream(
        path, moving_scene(W, H, N, seed=9), EncoderSettings(W, H, max_gop=10), k=10_000
    )
    return path, [f.data for f in written]


def decode_all(name: str, output: str, aus: list[bytes], **kw: object) -> list[object]:
    dec = create_decoder(name, output, **kw)  # type: ignore[arg-type]
    out = []
    for i, au in enumerate(aus):
        pics = dec.decode(au, i)
        assert [p.pts for p in pics] == [i], f"NVDEC must not delay pictures (frame {i})"
        out.append(pics[0].image)
    assert dec.flush() == []
    dec.close()
    return out


def test_probe_sees_a_gpu() -> None:
    if not CAPS.cuda:
        pytest.skip(f"no CUDA driver: {CAPS.summary()}")
    assert CAPS.devices, CAPS.summary()


@needs_nvdec
def test_nvdec_nv12_is_bit_exact_with_the_cpu_decoder(stream: tuple[Path, list[bytes]]) -> None:
    _, aus = stream
    cpu = decode_all("cpu", "nv12", aus)
    gpu = decode_all("nvdec", "nv12", aus, device="cpu")
    for i, (a, b) in enumerate(zip(cpu, gpu, strict=True)):
        assert np.array_equal(a, b), f"frame {i} differs"  # HEVC decoding is exact


@needs_nvdec
@needs_torch
def test_nvdec_torch_tensors_stay_on_the_gpu(stream: tuple[Path, list[bytes]]) -> None:
    _, aus = stream
    cpu = decode_all("cpu", "nv12", aus[:12])
    gpu = decode_all("nvdec", "nv12", aus[:12], device="cuda")
    for a, t in zip(cpu, gpu, strict=True):
        assert t.is_cuda and tuple(t.shape) == (H * 3 // 2, W)  # type: ignore[attr-defined]
        assert np.array_equal(a, t.cpu().numpy())  # type: ignore[attr-defined]


@needs_nvdec
def test_nvdec_rgb_close_to_cpu_rgb(stream: tuple[Path, list[bytes]]) -> None:
    _, aus = stream
    cpu = decode_all("cpu", "rgb", aus[:5])
    gpu = decode_all("nvdec", "rgb", aus[:5], device="cpu")
    for a, b in zip(cpu, gpu, strict=True):
        assert b.shape == (H, W, 3)  # type: ignore[attr-defined]
        assert psnr(a, b) > 35  # type: ignore[arg-type]  # same matrix, different rounding/upsampling


@needs_nvdec
def test_videostream_on_nvdec_random_equals_sequential(stream: tuple[Path, list[bytes]]) -> None:
    path, aus = stream
    reference = decode_all("cpu", "nv12", aus)
    with (
        HyperframeReader(path) as r,
        VideoStream(r, "cam", decoder="nvdec", output="nv12", device="cpu") as vs,
    ):
        for i in [5, 6, 7, 25, 3, 29, 0, 10, 11]:
            assert np.array_equal(vs.frame_at(i).image, reference[i]), i
        assert vs.stats.seeks == 5


@needs_nvdec
def test_auto_decoder_picks_nvdec() -> None:
    assert create_decoder("auto", "nv12").name == "nvdec"


def test_nvenc_encodes_the_convention_or_auto_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    if not CAPS.can_decode:
        pytest.skip(f"no NVIDIA video stack: {CAPS.summary()}")
    pytest.importorskip("av", reason="PyAV is needed for the x265 fallback and the CPU check")
    settings = EncoderSettings(W, H, max_gop=8)
    try:
        enc = create_encoder("nvenc", settings)
    except EncoderUnavailableError as exc:  # A100/H100/H200: no NVENC
        with caplog.at_level(logging.INFO, logger="hyperframes.video"):
            auto = create_encoder("auto", settings)
        assert auto.name == "x265" and "using x265" in caplog.text
        pytest.skip(f"no NVENC on {CAPS.devices}: {exc}")
    frames = moving_scene(W, H, 20, seed=4)
    out = []
    for i, rgb in enumerate(frames):
        out += enc.encode(to_yuv420(rgb), i, idr=i == 5)
    out += enc.flush()
    assert [au.pts for au in out] == list(range(20))
    assert [au.keyframe for au in out][:9] == [i in (0, 5) for i in range(9)]
    assert check_access_units([(au.data, au.keyframe) for au in out], max_gop=8) == []
    decoded = decode_all("cpu", "yuv420p", [au.data for au in out])
    assert min(psnr(d.y, to_yuv420(f).y) for d, f in zip(decoded, frames, strict=True)) > 30  # type: ignore[attr-defined]
