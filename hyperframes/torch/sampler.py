"""WindowSampler: an order that is a pure function of (seed, epoch), resumable, sharded by rank.

- ``order(epoch)`` is the same on every rank and every run for one seed: a
  permutation from ``numpy.random.default_rng([seed, epoch])`` (or the
  identity when ``shuffle=False``). ``block > 1`` shuffles runs of ``block``
  consecutive windows instead of single ones, keeping each run in order:
  neighbouring windows then meet in the same worker's frame cache and H.265
  decoder (decoding forward instead of seeking) while the epoch still
  visits runs at random.
- Ranks get disjoint, contiguous slices of that order; together they cover
  it exactly once (no padding, so no window is seen twice). ``drop_last=True``
  trims the order to a multiple of the world size so every rank has the same
  number of samples, which DistributedDataParallel needs.
- ``state_dict()`` / ``load_state_dict()`` resume mid-epoch: the next
  iteration continues with the rest of that epoch's slice. A DataLoader with
  workers draws indices ahead of the training loop, so pass the number of
  samples actually consumed: ``sampler.state_dict(consumed=steps * batch_size)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from hyperframes.torch.errors import SamplerStateError

__all__ = ["WindowSampler", "shuffled_order", "rank_slice"]


def shuffled_order(
    n: int, seed: int, epoch: int, *, shuffle: bool = True, block: int = 1
) -> np.ndarray:
    """The visiting order of ``n`` samples for (seed, epoch): a pure function (int64)."""
    if n < 0 or block < 1:
        raise ValueError(f"need n >= 0 and block >= 1, got n={n}, block={block}")
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng([seed, epoch])
    if block == 1:
        return rng.permutation(n).astype(np.int64)
    blocks = -(-n // block)
    rank_of_block = np.empty(blocks, np.int64)
    rank_of_block[rng.permutation(blocks)] = np.arange(blocks)
    within: np.ndarray = np.argsort(rank_of_block[np.arange(n) // block], kind="stable")
    return within.astype(np.int64)


def rank_slice(total: int, rank: int, world_size: int, *, drop_last: bool) -> slice:
    """The contiguous part of an order of ``total`` samples that ``rank`` takes."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of size {world_size}")
    n = total - total % world_size if drop_last else total
    return slice(n * rank // world_size, n * (rank + 1) // world_size)


def _distributed() -> tuple[int, int]:
    import torch.distributed as dist  # noqa: PLC0415 - only when rank/world are not given

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class WindowSampler(Sampler[int]):
    """Sample indices of a dataset of ``data`` (a Sized or a length); see the module docstring.

    ``rank``/``world_size`` default to ``torch.distributed``'s when it is
    initialised, else 0 and 1. Call :meth:`set_epoch` before each epoch.
    """

    def __init__(
        self,
        data: Sized | int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        block: int = 1,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
    ) -> None:
        self.total = data if isinstance(data, int) else len(data)
        if rank is None or world_size is None:
            auto_rank, auto_world = _distributed()
            rank = auto_rank if rank is None else rank
            world_size = auto_world if world_size is None else world_size
        rank_slice(self.total, rank, world_size, drop_last=drop_last)  # validates
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        self.shuffle = shuffle
        self.seed = seed
        self.block = block
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        self.epoch = 0
        self._start = 0  # where the next iteration starts in this epoch's slice
        self._yielded = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (its order); forgets a resume position of another epoch."""
        if epoch != self.epoch:
            self._start = 0
        self.epoch = epoch

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The order of all ranks for ``epoch`` (default: the current one)."""
        e = self.epoch if epoch is None else epoch
        return shuffled_order(self.total, self.seed, e, shuffle=self.shuffle, block=self.block)

    def indices(self, epoch: int | None = None) -> np.ndarray:
        """This rank's indices for ``epoch``, from the start of the epoch."""
        part = rank_slice(self.total, self.rank, self.world_size, drop_last=self.drop_last)
        return self.order(epoch)[part]

    def __iter__(self) -> Iterator[int]:
        todo = self.indices()[self._start :]
        self._yielded = self._start
        self._start = 0  # a resume applies to one iteration
        for i in todo:
            self._yielded += 1
            yield int(i)

    def __len__(self) -> int:
        part = rank_slice(self.total, self.rank, self.world_size, drop_last=self.drop_last)
        return len(range(self.total)[part]) - self._start

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Where this rank stands: ``consumed`` samples of the current epoch (default: yielded)."""
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "position": self._yielded if consumed is None else consumed,
            "total": self.total,
            "shuffle": self.shuffle,
            "block": self.block,
            "rank": self.rank,
            "world_size": self.world_size,
            "drop_last": self.drop_last,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration yields the rest of the saved epoch's slice."""
        for key in ("seed", "total", "shuffle", "block", "world_size", "rank", "drop_last"):
            mine = getattr(self, key)
            if key in state and state[key] != mine:
                raise SamplerStateError(
                    f"sampler state has {key}={state[key]!r}, this sampler {key}={mine!r}: "
                    "resume with the same dataset, seed and world"
                )
        position = int(state["position"])
        size = len(self.indices(int(state["epoch"])))
        if not 0 <= position <= size:
            raise SamplerStateError(f"position {position} outside this rank's {size} samples")
        self.epoch = int(state["epoch"])
        self._start = position
        self._yielded = position
