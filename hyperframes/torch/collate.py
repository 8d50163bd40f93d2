"""Batching samples: stack per stream, pad variable frame counts, mark the pads.

A 31 Hz camera gives 3 or 4 frames per 100 ms window and a lidar sweep
holds a varying number of points, so per stream :func:`collate` builds:

- ``data``: ``(B, F, *shape)`` with ``F`` the most frames any sample has,
  zero-filled where a sample has fewer frames (or a pad); records of
  varying length (lidar points) are zero-padded to the longest, with
  ``lengths`` ``(B, F)`` holding the real counts;
- ``is_pad``: ``(B, F)`` bool, True where ``data`` holds no frame;
- ``timestamp_ns``: ``(B, F)`` int64 (0 at pads);
- ``missing``: ``(B,)`` bool, True where the stream delivered nothing in
  the sample's window.

H.265 streams of ``decode="gpu"`` datasets keep ``encoded``: the list of
spans, for :class:`~hyperframes.torch.video.GpuVideoDecoder`. Clips of a
:class:`~hyperframes.torch.dataset.SequenceDataset` collate to
``(B, T, F, ...)``. Per-sample fields (``window_id``, ``start_ns``...)
become tensors, ``file`` a list of paths; fields a transform adds become a
tensor (numbers, same-shaped tensors) or a list.

In a DataLoader worker the batch is built in shared memory, as
``default_collate`` does: each stream's ``data`` over 64 KiB in a storage
of its own, and every smaller tensor of the batch (flags, time stamps,
lengths, ids, the ``data`` of IMU-like streams) as a view of one further
storage. torch hands a batch to the main process one storage at a time
(with its default ``file_descriptor`` strategy a descriptor each, over a
fresh authenticated connection), so a lidar + IMU batch travels as two
storages instead of about fifteen (bench/README.md, "Training input").
Keeping a small tensor after the step keeps only that small storage
alive, never a batch's frames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import get_worker_info

__all__ = ["collate"]

_SCALARS = ("index", "window", "window_id", "start_ns", "end_ns")
_SMALL = 64 << 10  # tensors up to this size share one storage per batch in a worker
_ALIGN = 64


def _empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Uninitialised; in a DataLoader worker allocated in shared memory, as default_collate
    does, so that handing the batch to the main process copies nothing (a small one joins
    the batch's other small tensors later, in :func:`_share_small`)."""
    if get_worker_info() is None or math.prod(shape) * dtype.itemsize <= _SMALL:
        return torch.empty(shape, dtype=dtype)
    proto = torch.empty(0, dtype=dtype)
    storage = proto._typed_storage()._new_shared(math.prod(shape), device=proto.device)  # type: ignore[no-untyped-call]
    return proto.new(storage).resize_(shape)


def _stack_frames(name: str, rows: list[list[torch.Tensor | None]], width: int) -> dict[str, Any]:
    frames = [t for row in rows for t in row if t is not None]
    batch = len(rows)
    if not frames:
        return {"data": torch.zeros((batch, width), dtype=torch.uint8)}
    first = frames[0]
    tail = tuple(first.shape[1:])
    if any(t.dtype != first.dtype or tuple(t.shape[1:]) != tail for t in frames):
        shapes = sorted({(str(t.dtype), tuple(t.shape)) for t in frames})
        raise ValueError(f"stream {name!r}: frames differ in dtype or trailing shape: {shapes}")
    leading = {int(t.shape[0]) if t.dim() else -1 for t in frames}
    ragged = len(leading) > 1  # records of varying length (lidar points): pad, keep lengths
    shape = (max(leading), *tail) if ragged else tuple(first.shape)
    out = _empty((batch, width, *shape), first.dtype)
    lengths = torch.zeros((batch, width), dtype=torch.int64) if ragged else None
    for b, row in enumerate(rows):
        for f in range(width):
            t = row[f] if f < len(row) else None
            if t is None:
                out[b, f].zero_()
            elif lengths is None:
                out[b, f] = t
            else:
                n = int(t.shape[0])
                out[b, f, :n] = t
                out[b, f, n:].zero_()
                lengths[b, f] = n
    return {"data": out} if lengths is None else {"data": out, "lengths": lengths}


def _collate_stream(name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    width = max(len(e["is_pad"]) for e in entries)
    batch = len(entries)
    is_pad = torch.ones((batch, width), dtype=torch.bool)
    stamps = torch.zeros((batch, width), dtype=torch.int64)
    for b, e in enumerate(entries):
        n = len(e["is_pad"])
        is_pad[b, :n] = e["is_pad"]
        stamps[b, :n] = e["timestamp_ns"]
    out: dict[str, Any] = {
        "is_pad": is_pad,
        "timestamp_ns": stamps,
        "missing": torch.tensor([bool(e["missing"]) for e in entries], dtype=torch.bool),
    }
    if "encoded" in entries[0]:
        out["encoded"] = [e["encoded"] for e in entries]
    else:
        out.update(_stack_frames(name, [list(e["data"]) for e in entries], width))
    return out


def _collate_windows(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"file": [s["file"] for s in samples]}
    for key in _SCALARS:
        if key in samples[0]:
            out[key] = torch.tensor([int(s[key]) for s in samples], dtype=torch.int64)
    for key, value in samples[0].items():
        if isinstance(value, dict):
            out[key] = {
                name: _collate_stream(name, [s[key][name] for s in samples]) for name in value
            }
        elif key not in out:  # what a transform added
            out[key] = _collate_extra([s[key] for s in samples])
    return out


def _collate_extra(values: list[Any]) -> Any:
    if all(isinstance(v, bool | int | float) for v in values):
        return torch.tensor(values)
    if all(isinstance(v, torch.Tensor) for v in values) and len({v.shape for v in values}) == 1:
        return torch.stack(values)
    return values


def _unflatten(value: Any, batch: int, steps: int) -> Any:
    if isinstance(value, torch.Tensor):
        return value.reshape(batch, steps, *value.shape[1:])
    if isinstance(value, dict):
        return {k: _unflatten(v, batch, steps) for k, v in value.items()}
    if isinstance(value, list) and len(value) == batch * steps:
        if value and isinstance(value[0], dict):  # encoded spans stay flat, in (B*T) order
            return value
        return [value[b * steps : (b + 1) * steps] for b in range(batch)]
    return value


def collate(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Collate window samples to ``(B, F, ...)``, clip samples to ``(B, T, F, ...)``.

    Pass it as ``DataLoader(..., collate_fn=collate)``; see the module docstring.
    """
    if not samples:
        raise ValueError("nothing to collate")
    if "steps" not in samples[0]:
        out = _collate_windows(samples)
    else:
        steps = len(samples[0]["steps"])
        if any(len(s["steps"]) != steps for s in samples):
            raise ValueError("clips of different lengths in one batch")
        flat = [step for s in samples for step in s["steps"]]
        out = _unflatten(_collate_windows(flat), len(samples), steps)
        out["index"] = torch.tensor([int(s["index"]) for s in samples], dtype=torch.int64)
    if get_worker_info() is not None:
        _share_small(out)
    return out


def _small_tensors(tree: dict[str, Any]) -> list[tuple[dict[str, Any], str, torch.Tensor]]:
    """(dict, key, tensor) of every small CPU tensor in ``tree`` not in shared memory yet."""
    found = []
    for key, value in tree.items():
        if isinstance(value, dict):
            found += _small_tensors(value)
        elif (
            type(value) is torch.Tensor  # a subclass keeps its type: left as it is
            and value.device.type == "cpu"
            and not value.requires_grad
            and value.numel() * value.element_size() <= _SMALL
            and not value.is_shared()  # type: ignore[no-untyped-call]
        ):
            found.append((tree, key, value))
    return found


def _share_small(batch: dict[str, Any]) -> None:
    """Move the small tensors of ``batch`` into one shared-memory storage, in place.

    Each becomes a contiguous view of that storage at a 64-byte boundary.
    """
    small = _small_tensors(batch)
    if len(small) < 2:
        return
    offsets = []
    total = 0
    for _tree, _key, t in small:
        offsets.append(total)
        total += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
    storage = torch.UntypedStorage._new_shared(max(total, _ALIGN))  # type: ignore[no-untyped-call]
    for (tree, key, t), offset in zip(small, offsets, strict=True):
        flat = torch.empty(0, dtype=t.dtype).set_(
            storage, offset // t.element_size(), (t.numel(),), (1,)
        )
        view = flat.view(t.shape)
        view.copy_(t)
        tree[key] = view
