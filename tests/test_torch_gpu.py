"""The ``gpu`` decode mode on NVDEC: run only where an NVIDIA GPU and its video stack are present.

Skipped elsewhere with the probe's reason; the same code path runs on the CPU
decoder in test_torch_video.py. ``scripts/gpu-check.sh``-style runs pick these up
with ``-m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av", reason="PyAV (the video extra) encodes the test stream")

from torch.utils.data import DataLoader  # noqa: E402

from hyperframes.torch import GpuVideoDecoder, HyperframeDataset, SequenceDataset, collate  # noqa: E402
from hyperframes.video._nvprobe import probe  # noqa: E402
from hyperframes.video.testing import psnr  # noqa: E402

from torch_files import collate_without_cuda, write_h265  # noqa: E402

CAPS = probe()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (CAPS.can_decode and torch.cuda.is_available()),
        reason=f"needs NVDEC and a CUDA build of torch: {CAPS.summary()}; "
        f"torch {torch.__version__} cuda={torch.cuda.is_available()}",
    ),
]


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, _ = write_h265(
        tmp_path_factory.mktemp("gpu") / "cams.hf", frames=60, width=256, height=144
    )
    return path


def test_nvdec_batches_are_cuda_tensors_close_to_cpu(video: Path) -> None:
    order = [7, 2, 3, 12, 0, 19]
    cpu = HyperframeDataset(video)
    split = HyperframeDataset(video, decode="gpu")
    decoder = GpuVideoDecoder("nvdec")
    for k in range(0, len(order), 3):
        idx = order[k : k + 3]
        got = decoder(collate([split[i] for i in idx]))
        want = collate([cpu[i] for i in idx])
        for name in ("cam_0", "cam_1"):
            data = got["camera"][name]["data"]
            assert data.is_cuda and data.dtype == torch.uint8
            assert data.shape == want["camera"][name]["data"].shape
            a, b = data.cpu().numpy(), want["camera"][name]["data"].numpy()
            mask = ~want["camera"][name]["is_pad"].numpy()
            for x, y in zip(a[mask], b[mask], strict=True):
                assert psnr(x, y) > 35  # same pictures; RGB conversion rounds differently
    decoder.close()


def test_spawn_workers_never_touch_cuda(video: Path) -> None:
    torch.cuda.init()  # the main process uses CUDA; workers (spawned) must not
    ds = SequenceDataset(video, 3, stride=3, decode="gpu")
    dl = DataLoader(
        ds,
        batch_size=2,
        num_workers=2,
        multiprocessing_context="spawn",
        collate_fn=collate_without_cuda,
    )
    decoder = GpuVideoDecoder("nvdec")
    cpu = SequenceDataset(video, 3, stride=3)
    for k, batch in enumerate(dl):
        assert batch["cuda_in_worker"] is False
        for entry in batch["camera"].values():
            assert all(not s["au"].is_cuda for s in entry["encoded"])
        got = decoder(batch)
        want = collate([cpu[i] for i in range(2 * k, min(2 * k + 2, len(cpu)))])
        x = got["camera"]["cam_0"]["data"].cpu().numpy()
        y = want["camera"]["cam_0"]["data"].numpy()
        assert x.shape == y.shape and psnr(x, y) > 35
    # consecutive clips continue where the camera's decoder stopped: one reset per camera
    assert decoder.reset_count == 2 and decoder.fed_count == 2 * 54
