"""collate and FrameCache on hand-made samples: padding rules, eviction order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hyperframes.torch import FrameCache, collate  # noqa: E402


def entry(frames: list[torch.Tensor | None], missing: bool = False) -> dict[str, object]:
    return {
        "data": frames,
        "timestamp_ns": torch.tensor([0 if f is None else 100 + i for i, f in enumerate(frames)]),
        "is_pad": torch.tensor([f is None for f in frames], dtype=torch.bool),
        "missing": missing,
    }


def sample(i: int, **streams: dict[str, object]) -> dict[str, object]:
    return {
        "file": f"f{i}.hf",
        "window": i,
        "window_id": 10 + i,
        "start_ns": 0,
        "end_ns": 1,
        "index": i,
        "lidar": streams,
    }


def test_pads_frames_and_records() -> None:
    a = torch.ones((3, 4))
    b = torch.full((5, 4), 2.0)
    batch = collate([sample(0, l=entry([a, None, b])), sample(1, l=entry([], missing=True))])
    out = batch["lidar"]["l"]
    assert out["data"].shape == (2, 3, 5, 4)
    assert out["lengths"].tolist() == [[3, 0, 5], [0, 0, 0]]
    assert out["is_pad"].tolist() == [[False, True, False], [True, True, True]]
    assert out["missing"].tolist() == [False, True]
    assert out["timestamp_ns"].tolist() == [[100, 0, 102], [0, 0, 0]]
    assert (out["data"][0, 0, :3] == 1).all() and not out["data"][0, 0, 3:].any()
    assert not out["data"][0, 1].any() and (out["data"][0, 2] == 2).all()
    assert batch["window_id"].tolist() == [10, 11] and batch["file"] == ["f0.hf", "f1.hf"]


def test_nothing_to_stack_and_mismatches() -> None:
    empty = collate([sample(0, l=entry([], missing=True))])["lidar"]["l"]
    assert empty["data"].shape == (1, 0) and empty["is_pad"].shape == (1, 0)
    with pytest.raises(ValueError, match="stream 'l': frames differ in dtype or trailing shape"):
        collate([sample(0, l=entry([torch.zeros((2, 4)), torch.zeros((2, 3))]))])
    with pytest.raises(ValueError, match="nothing to collate"):
        collate([])


def test_frame_cache_evicts_least_recently_used() -> None:
    cache = FrameCache(max_mb=0.0003)  # 300 bytes
    blocks = {k: np.full(100, k, np.uint8) for k in range(4)}
    for k in range(3):
        cache.put(k, blocks[k])
    assert cache.get(0) is not None  # 0 is now the most recent
    cache.put(3, blocks[3])  # evicts 1, the least recently used
    assert 1 not in cache and all(k in cache for k in (0, 2, 3))
    got = cache.get(2)
    assert got is not None and (got == 2).all()
    got[:] = 9  # a copy: the cached frame is unchanged
    again = cache.get(2)
    assert again is not None and (again == 2).all()
    cache.put(5, np.zeros(400, np.uint8))  # larger than the whole cache: not stored
    assert 5 not in cache and cache.stats.nbytes == 300
    assert (cache.stats.hits, cache.stats.misses) == (3, 0)
    with pytest.raises(ValueError, match="cache size"):
        FrameCache(-1)


def test_share_small_packs_small_tensors_into_one_shared_storage() -> None:
    from hyperframes.torch.collate import _share_small

    big = torch.arange(20_000, dtype=torch.float32)  # 80 KB: over the 64 KiB limit
    grad = torch.ones(3, requires_grad=True)
    param = torch.nn.Parameter(torch.ones(2), requires_grad=False)  # a subclass
    inner: dict[str, Any] = {
        "is_pad": torch.tensor([[False, True, False]]),
        "timestamp_ns": torch.tensor([[5, 0, 7]]).t(),  # not contiguous
        "lengths": torch.zeros((1, 0), dtype=torch.int64),  # no elements
        "scale": torch.tensor(2.5, dtype=torch.float16),  # 0-d
        "data": big,
        "grad": grad,
        "param": param,
    }
    batch: dict[str, Any] = {
        "window_id": torch.tensor([10, 11]),
        "file": ["a.hf", "b.hf"],
        "lidar": {"l": inner},
    }
    want = {k: v.clone() for k, v in inner.items()}
    _share_small(batch)
    keys = ("is_pad", "timestamp_ns", "lengths", "scale")
    small = [batch["window_id"], *(inner[k] for k in keys)]
    assert len({t.untyped_storage().data_ptr() for t in small}) == 1 and small[0].is_shared()
    assert all(t.is_contiguous() and t.data_ptr() % 64 == 0 for t in small)
    assert batch["window_id"].tolist() == [10, 11]
    for k, v in want.items():
        got = inner[k]
        assert got.dtype == v.dtype and got.shape == v.shape and torch.equal(got, v), k
    assert inner["data"] is big and not big.is_shared()  # large: its own storage (torch shares it)
    assert inner["grad"] is grad and inner["param"] is param
    assert batch["file"] == ["a.hf", "b.hf"]
