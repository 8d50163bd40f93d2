"""H.265 cameras in datasets: cpu decode in workers, and the demux/decode split (``gpu`` mode)
run here with the CPU decoder in the main process. Pixels are compared with a direct decode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av", reason="PyAV (the video extra) encodes and decodes the test streams")

from torch.utils.data import DataLoader  # noqa: E402

from hyperframes.reader import HyperframeReader  # noqa: E402
from hyperframes.torch import (  # noqa: E402
    GpuVideoDecoder,
    HyperframeDataset,
    SampleError,
    SequenceDataset,
    collate,
)
from hyperframes.video import create_decoder  # noqa: E402
from hyperframes.writer import HyperframeWriter  # noqa: E402

from torch_files import HW, T0, WINDOW_NS, write_h265  # noqa: E402

Video = tuple[Path, dict[int, list[np.ndarray]]]
N = 30  # 1 s at 30 Hz: 10 windows, IDR every 3rd window


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Video:
    path, aus = write_h265(tmp_path_factory.mktemp("h265") / "cams.hf", frames=N)
    direct = {}
    for cam, units in aus.items():  # a direct decode of every access unit, in order
        dec = create_decoder("cpu", "rgb")
        direct[cam] = [dec.decode(au, i)[0].image for i, au in enumerate(units)]
    return path, direct


def positions(path: Path, cam: int, sample: dict[str, Any]) -> list[int]:
    with HyperframeReader(path) as r:
        ts = r.timestamps(cam).tolist()
    return [ts.index(t) for t in sample["camera"][f"cam_{cam}"]["timestamp_ns"].tolist()]


def test_cpu_decode_matches_a_direct_decode(video: Video) -> None:
    path, direct = video
    ds = HyperframeDataset(path)
    assert ds.decode_threads == 2  # one thread per camera
    for i in (5, 0, 9, 4, 3):  # random access: seeks back to IDRs
        s = ds[i]
        for cam in (0, 1):
            entry = s["camera"][f"cam_{cam}"]
            pos = positions(path, cam, s)
            assert len(pos) == 3
            for p, img in zip(pos, entry["data"], strict=True):
                assert img.shape == (96, 128, 3) and np.array_equal(img.numpy(), direct[cam][p])


def test_clips_decode_forward_with_one_seek(video: Video) -> None:
    path, direct = video
    ds = SequenceDataset(path, 2, stride=2, streams=["cam_0"])
    clip = ds[2]  # windows 4, 5: frames 12..17 (IDRs at 0, 9, 18, 27)
    vs = ds._state.videos[(str(path), 0)] if ds._state is not None else None
    assert vs is not None
    got = [p for step in clip["steps"] for p in positions(path, 0, step)]
    assert got == list(range(12, 18))
    assert (vs.stats.seeks, vs.stats.fed) == (1, 17 - 9 + 1)  # from the IDR, forward once
    for step in clip["steps"]:
        for p, img in zip(positions(path, 0, step), step["camera"]["cam_0"]["data"], strict=True):
            assert np.array_equal(img.numpy(), direct[0][p])
    nxt = ds[3]  # windows 6, 7: frames 18..23 continue where the decoder stopped
    assert (vs.stats.seeks, vs.stats.fed) == (1, 9 + 6)
    last = nxt["steps"][-1]
    assert np.array_equal(last["camera"]["cam_0"]["data"][-1].numpy(), direct[0][23])
    ds[1]  # back to windows 2, 3: a seek to the IDR at frame 0
    assert vs.stats.seeks == 2


def spans_are_cpu_bytes(batch: dict[str, Any], path: Path) -> None:
    with HyperframeReader(path) as r:
        for cam in (0, 1):
            entry = batch["camera"][f"cam_{cam}"]
            assert "data" not in entry
            for span in entry["encoded"]:
                assert span["au"].device.type == "cpu" and span["au"].dtype == torch.uint8
                first = span["first"]
                assert r.frame_at(first + r.index["stream_id"].tolist().index(cam)).keyframe
                stored = b"".join(
                    r.read(cam, int(t), mode="after").tobytes()
                    for t in r.timestamps(cam)[first : first + len(span["offsets"]) - 1]
                )
                assert span["au"].numpy().tobytes() == stored


def test_gpu_split_decodes_in_the_main_process(video: Video) -> None:
    path, _ = video
    order = [5, 0, 9, 4, 3, 6]
    cpu = HyperframeDataset(path)
    split = HyperframeDataset(path, decode="gpu")
    dl = DataLoader(
        split,
        batch_size=3,
        sampler=order,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context="fork",
    )
    decoder = GpuVideoDecoder("cpu")  # the NVDEC code path with the CPU backend
    batches = list(dl)
    for b in batches:
        spans_are_cpu_bytes(b, path)
    for k, b in enumerate(batches):
        want = collate([cpu[i] for i in order[3 * k : 3 * k + 3]])
        got = decoder(b)
        for name in ("cam_0", "cam_1"):
            assert "encoded" not in got["camera"][name]
            assert got["camera"][name]["data"].shape == (3, 3, 96, 128, 3)
            assert torch.equal(got["camera"][name]["data"], want["camera"][name]["data"])
            assert torch.equal(got["camera"][name]["is_pad"], want["camera"][name]["is_pad"])
        assert torch.equal(got["lidar"]["lidar"]["data"], want["lidar"]["lidar"]["data"])
    assert sorted(decoder.cameras) == ["cam_0", "cam_1"]
    # every step of this order jumps back or past the next IDR: one reset per window and camera
    assert decoder.reset_count == 2 * 6


def test_gpu_split_streams_forward_through_clips(
    video: Video,
) -> None:
    path, _ = video
    cpu = collate([SequenceDataset(path, 3, stride=3)[i] for i in (0, 2)])
    seq = SequenceDataset(path, 3, stride=3, decode="gpu")
    decoder = GpuVideoDecoder("cpu")
    batch = decoder(collate([seq[0], seq[2]]))
    for cam in (0, 1):
        name = f"cam_{cam}"
        assert batch["camera"][name]["data"].shape == cpu["camera"][name]["data"].shape
        assert torch.equal(batch["camera"][name]["data"], cpu["camera"][name]["data"])
    # one reset per clip and camera; every access unit decoded once: clip 0 (windows 0-2,
    # frames 0..8) and clip 2 (windows 6-8: frames 18..26 from the IDR at 18)
    assert decoder.reset_count == 2 * 2
    assert decoder.fed_count == 2 * (9 + 9)
    following = GpuVideoDecoder("cpu")
    batch = following(collate([seq[0], seq[1]]))  # clip 1 starts on the IDR after clip 0
    assert (following.reset_count, following.fed_count) == (2, 2 * 18)  # one reset per camera
    want = collate([SequenceDataset(path, 3, stride=3)[i] for i in (0, 1)])
    assert torch.equal(batch["camera"]["cam_1"]["data"], want["camera"]["cam_1"]["data"])


def test_video_frames_are_cached(video: Video) -> None:
    path, direct = video
    ds = HyperframeDataset(path, streams=["cam_1"], cache_mb=5)
    a = ds[7]
    b = ds[7]
    stats = ds.cache_stats()
    n = len(a["camera"]["cam_1"]["data"])
    assert stats is not None and (stats.hits, stats.misses) == (n, n)
    for x, y, p in zip(
        a["camera"]["cam_1"]["data"],
        b["camera"]["cam_1"]["data"],
        positions(path, 1, a),
        strict=True,
    ):
        assert torch.equal(x, y) and np.array_equal(y.numpy(), direct[1][p])


def test_a_stream_without_idr_names_file_and_stream(video: Video, tmp_path: Path) -> None:
    path, _ = video
    bad = tmp_path / "noidr.hf"
    with HyperframeReader(path) as r:
        info = r.stream("cam_0")
        frames = list(r.frames("cam_0"))
        with HyperframeWriter(bad, [info], WINDOW_NS) as w:
            for f in frames:
                w.append(info.id, f.timestamp_ns, f.tobytes(), flags=HW)  # KEYFRAME lost
    with pytest.raises(
        SampleError,
        match=rf"noidr.hf: stream 'cam_0', frame at .* \(window "
        rf"{T0 // WINDOW_NS}\): no IDR",
    ):
        HyperframeDataset(bad, decode="gpu")[0]
    with pytest.raises(SampleError, match=r"noidr.hf: stream 'cam_0'"):
        HyperframeDataset(bad)[0]
