"""SequenceDataset: clips of consecutive windows that never cross a gap or a file unless asked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hyperframes.torch import HyperframeDataset, SequenceDataset, collate  # noqa: E402

from torch_files import GAP, T0, WINDOW_NS, write_dropout  # noqa: E402

W0 = T0 // WINDOW_NS


@pytest.fixture(scope="module")
def dropout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # windows 0..15 minus the gap 10, 11: runs 0..9 and 12..15
    return write_dropout(tmp_path_factory.mktemp("seq") / "dropout.hf")


def clip_windows(ds: SequenceDataset) -> list[list[int]]:
    return [[w - W0 for _, w in ds.windows_of(i)] for i in range(len(ds))]


def test_clips_never_cross_the_gap(dropout: Path) -> None:
    ds = SequenceDataset(dropout, 3, streams=["imu"])
    clips = clip_windows(ds)
    assert clips == [[s, s + 1, s + 2] for s in (*range(8), 12, 13)]
    assert all(not set(c) & set(GAP) for c in clips)
    strided = SequenceDataset(dropout, 4, stride=3, streams=["imu"])
    assert clip_windows(strided) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9], [12, 13, 14, 15]]
    assert len(SequenceDataset(dropout, 11, streams=["imu"])) == 0
    across = SequenceDataset(dropout, 3, stride=2, allow_gaps=True, streams=["imu"])
    assert [8, 9, 12] in clip_windows(across)


def test_clips_stay_in_their_file_unless_asked(dropout: Path) -> None:
    two = [str(dropout), str(dropout)]  # the same windows twice: never continuous
    assert len(SequenceDataset(two, 3, streams=["imu"])) == 2 * 10
    assert len(SequenceDataset(two, 3, streams=["imu"], cross_files=True)) == 2 * 10
    assert (
        len(SequenceDataset(two, 3, streams=["imu"], cross_files=True, allow_gaps=True)) == 2 * 12
    )


def test_clips_cross_continuing_files_when_asked(tmp_path: Path) -> None:
    from hyperframes.writer import HyperframeWriter

    from torch_files import DROPOUT_STREAMS, dropout_frames

    frames = [f for f in dropout_frames() if f[0] == 2]  # the IMU alone: no dropouts
    cut = T0 + 5 * WINDOW_NS
    for name, part in (
        ("a.hf", [f for f in frames if f[1] <= cut]),
        ("b.hf", [f for f in frames if f[1] > cut]),
    ):
        with HyperframeWriter(tmp_path / name, DROPOUT_STREAMS[2:], WINDOW_NS) as w:
            for sid, t, payload in part:
                w.append(sid, t, payload)
    paths = [str(tmp_path / "a.hf"), str(tmp_path / "b.hf")]
    alone = SequenceDataset(paths, 4)
    crossing = SequenceDataset(paths, 4, cross_files=True)
    assert [4, 5, 6, 7] not in clip_windows(alone)
    assert [4, 5, 6, 7] in clip_windows(crossing)
    files = [f for f, _ in crossing.windows_of(clip_windows(crossing).index([4, 5, 6, 7]))]
    assert files == [paths[0], paths[1], paths[1], paths[1]]
    i = clip_windows(crossing).index([4, 5, 6, 7])
    clip = crossing[i]
    ts = torch.cat([s["imu"]["imu"]["timestamp_ns"] for s in clip["steps"]])
    assert (ts[1:] > ts[:-1]).all() and len(ts) == 80  # 4 windows of 20 IMU samples, in order


def test_clip_samples_match_window_samples_and_collate(dropout: Path) -> None:
    seq = SequenceDataset(dropout, 3, stride=2, streams=["cam", "lidar"])
    win = HyperframeDataset(dropout, streams=["cam", "lidar"])
    clip = seq[2]  # windows 4, 5, 6: camera missing in 4, lidar in 6
    assert [w - W0 for w in clip["window_id"]] == [4, 5, 6]
    for step, w in zip(clip["steps"], (4, 5, 6), strict=True):
        ref = win[w]
        assert step["window_id"] == ref["window_id"]
        for group, name in (("camera", "cam"), ("lidar", "lidar")):
            a, b = step[group][name], ref[group][name]
            assert a["missing"] == b["missing"] and torch.equal(
                a["timestamp_ns"], b["timestamp_ns"]
            )
            assert all(torch.equal(x, y) for x, y in zip(a["data"], b["data"], strict=True))
    batch = collate([seq[0], seq[2]])
    cam = batch["camera"]["cam"]
    assert cam["data"].shape == (2, 3, 4, 32, 48, 3) and cam["is_pad"].shape == (2, 3, 4)
    assert cam["missing"].tolist() == [[False, False, False], [True, False, False]]
    assert batch["lidar"]["lidar"]["missing"].tolist() == [[False] * 3, [False, False, True]]
    assert (batch["window_id"] - W0).tolist() == [[0, 1, 2], [4, 5, 6]]
    assert batch["index"].tolist() == [0, 2] and len(batch["file"]) == 2
    assert np.array_equal(
        cam["data"][1, 1, 0].numpy(), clip["steps"][1]["camera"]["cam"]["data"][0].numpy()
    )
