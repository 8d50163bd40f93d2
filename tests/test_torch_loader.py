"""Real DataLoader workers (fork and spawn): every window once per epoch, resume, ranks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402

from hyperframes.torch import HyperframeDataset, WindowSampler, collate  # noqa: E402

from torch_files import tag_pid, write_demo  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("loader")
    return [write_demo(d / "a.hf", 1.0, seed=1), write_demo(d / "b.hf", 0.6, seed=2)]


def loader(
    ds: HyperframeDataset, sampler: WindowSampler, context: str, **kw: Any
) -> DataLoader[Any]:
    return DataLoader(
        ds,
        batch_size=3,
        sampler=sampler,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context=context,
        **kw,
    )


def epoch_of(dl: DataLoader[Any]) -> tuple[list[int], list[tuple[str, int]], set[int]]:
    indices: list[int] = []
    windows: list[tuple[str, int]] = []
    pids: set[int] = set()
    for batch in dl:
        indices += batch["index"].tolist()
        windows += list(zip(batch["file"], batch["window_id"].tolist(), strict=True))
        pids |= set(batch["pid"].tolist())
        assert batch["camera"]["cam_front"]["data"].dtype == torch.uint8
    return indices, windows, pids


def check_epochs(files: list[Path], context: str, epochs: int) -> None:
    ds = HyperframeDataset([str(p) for p in files], streams=["cam_front", "imu"], transform=tag_pid)
    everything = sorted(ds.locate(i) for i in range(len(ds)))
    assert len(everything) == 16 == len(set(everything))
    sampler = WindowSampler(ds, seed=4)
    dl = loader(ds, sampler, context)
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        indices, windows, pids = epoch_of(dl)
        assert indices == sampler.indices(epoch).tolist()  # the sampler's order, kept
        assert sorted(windows) == everything  # every window exactly once
        assert [ds.locate(i) for i in indices] == windows
        assert len(pids) == 2 and os.getpid() not in pids  # two workers did the loading
        orders.append(indices)
    assert ds._state is None  # the main process opened no reader
    if epochs > 1:
        assert orders[0] != orders[1]


def test_fork_workers_see_every_window_once_per_epoch(files: list[Path]) -> None:
    check_epochs(files, "fork", epochs=2)


@pytest.mark.slow
def test_spawn_workers_see_every_window_once(files: list[Path]) -> None:
    check_epochs(files, "spawn", epochs=1)


def test_resume_through_a_loader_mid_epoch(files: list[Path]) -> None:
    ds = HyperframeDataset([str(p) for p in files], streams=["imu"])
    sampler = WindowSampler(ds, seed=8)
    sampler.set_epoch(1)
    dl = loader(ds, sampler, "fork")
    seen: list[int] = []
    for step, batch in enumerate(dl):
        seen += batch["index"].tolist()
        if step == 1:
            state = sampler.state_dict(consumed=len(seen))  # workers drew further ahead
            break
    assert seen == sampler.indices(1).tolist()[:6]
    resumed = WindowSampler(ds, seed=8)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)
    after = [i for b in loader(ds, resumed, "fork") for i in b["index"].tolist()]
    assert seen + after == sampler.indices(1).tolist()


def test_two_ranks_partition_the_windows(files: list[Path]) -> None:
    ds = HyperframeDataset([str(p) for p in files], streams=["imu"])
    got = []
    for rank in (0, 1):
        sampler = WindowSampler(ds, seed=2, rank=rank, world_size=2)
        sampler.set_epoch(5)
        got.append(
            [
                w
                for b in loader(ds, sampler, "fork")
                for w in zip(b["file"], b["window_id"].tolist(), strict=True)
            ]
        )
    assert not set(got[0]) & set(got[1])
    assert sorted(got[0] + got[1]) == sorted(ds.locate(i) for i in range(len(ds)))
    assert len(got[0]) == len(got[1]) == 8


def assert_streams_equal(
    got: dict[str, Any], want: dict[str, Any], groups: tuple[str, ...]
) -> None:
    """Every stream entry of ``groups``: the same keys, tensors of the same shape and values."""
    for group in groups:
        for name, entry in want[group].items():
            assert got[group][name].keys() == entry.keys(), (group, name)
            for key, value in entry.items():
                assert got[group][name][key].shape == value.shape, (group, name, key)
                assert torch.equal(got[group][name][key], value), (group, name, key)


def test_worker_batches_equal_in_process_batches(tmp_path: Path) -> None:
    from torch_files import write_dropout

    ds = HyperframeDataset(write_dropout(tmp_path / "dropout.hf"))
    order = list(range(len(ds)))[::-1]
    dl = DataLoader(
        ds,
        batch_size=4,
        sampler=order,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context="fork",
    )
    for k, got in enumerate(dl):  # collated in workers, in shared memory
        want = collate([ds[i] for i in order[4 * k : 4 * k + 4]])
        assert_streams_equal(got, want, ("camera", "lidar", "imu"))


def test_worker_batch_small_tensors_travel_in_one_storage(files: list[Path]) -> None:
    ds = HyperframeDataset(str(files[0]))  # two 320x240 cameras, a 10k-point lidar, an IMU
    dl = DataLoader(
        ds, batch_size=2, num_workers=1, collate_fn=collate, multiprocessing_context="fork"
    )
    batch = next(iter(dl))
    small = [batch["window_id"], batch["index"], batch["start_ns"]]
    large = []
    for group in ("camera", "lidar", "imu"):
        for entry in batch[group].values():
            small += [entry["is_pad"], entry["timestamp_ns"], entry["missing"]]
            data = entry["data"]
            (large if data.numel() * data.element_size() > 64 << 10 else small).append(data)
    assert len(large) >= 2 and len(small) > len(large) * 3  # both kinds are in this batch
    ptr = {t.untyped_storage().data_ptr() for t in small}
    assert len(ptr) == 1, "each small tensor was sent on its own"
    # a large stream's frames keep their own storage: a kept time stamp never holds the images
    large_ptrs = {t.untyped_storage().data_ptr() for t in large}
    assert len(large_ptrs) == len(large) and not large_ptrs & ptr


def test_worker_clip_batches_equal_in_process_batches(files: list[Path]) -> None:
    from hyperframes.torch import SequenceDataset

    ds = SequenceDataset(str(files[0]), 3, streams=["lidar_top", "imu"])
    order = list(range(len(ds)))[::-1]
    dl = DataLoader(
        ds,
        batch_size=2,
        sampler=order,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context="fork",
    )
    batches = 0
    for k, got in enumerate(dl):  # (B, T, F, ...) views of the worker's shared storages
        want = collate([ds[i] for i in order[2 * k : 2 * k + 2]])
        assert torch.equal(got["index"], want["index"])
        assert torch.equal(got["window_id"], want["window_id"])
        assert_streams_equal(got, want, ("lidar", "imu"))
        batches += 1
    assert batches == -(-len(ds) // 2) > 1
