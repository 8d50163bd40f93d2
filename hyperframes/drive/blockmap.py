"""Which frames each window block of a finalized file holds, in write order. No payload read.

The reader lists a window's frames by timestamp; a LATE frame stored in a
later block, and every QUARANTINED frame, are not where a time lookup puts
them. Whoever copies blocks (the converter, ``hyperframes cat`` and
``slice``) writes each frame into the block it was stored in, so it needs
block membership, which the window table gives by payload offsets
(:attr:`HyperframeReader.window_table`, checked against WindowsCrc on open).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from hyperframes.errors import CorruptFileError
from hyperframes.reader import HyperframeReader

__all__ = ["Block", "source_blocks"]


@dataclass(frozen=True, slots=True)
class Block:
    """One window block of the input.

    ``entries`` lists the block's frames in write (offset) order: a value
    ``p >= 0`` is index position ``p``; ``-(q + 1)`` is quarantine row ``q``.
    """

    window_id: int
    flags: int
    missing: tuple[int, ...]
    entries: np.ndarray  # int64
    payload_offset: int = 0  # the block's payload bytes: [payload_offset, + payload_size)
    payload_size: int = 0


def source_blocks(reader: HyperframeReader) -> list[Block]:
    """Every block of the input in file order, each with its frames in write order."""
    path = os.fspath(reader.path)
    windows = reader.window_table
    windows = windows[np.argsort(windows["payload_offset"], kind="stable")]
    quarantine = reader.quarantine()
    offsets = np.concatenate(
        [reader.index["offset"].astype(np.int64), quarantine["offset"].astype(np.int64)]
    )
    ids = np.concatenate(
        [np.arange(len(reader.index), dtype=np.int64), -np.arange(1, len(quarantine) + 1)]
    )
    order = np.argsort(offsets, kind="stable")
    offsets, ids = offsets[order], ids[order]
    starts = windows["payload_offset"].astype(np.int64)
    ends = starts + windows["payload_size"].astype(np.int64)
    which = np.searchsorted(starts, offsets, "right") - 1
    outside = (which < 0) | (offsets >= ends[np.maximum(which, 0)])
    if np.any(outside):
        bad = int(np.flatnonzero(outside)[0])
        raise CorruptFileError(
            path, f"a frame at offset {int(offsets[bad])} lies in no window block"
        )
    bounds = np.searchsorted(which, np.arange(len(windows) + 1), "left")
    blocks = []
    for b, row in enumerate(windows):
        entries = ids[bounds[b] : bounds[b + 1]]
        if len(entries) != int(row["frame_count"]):
            raise CorruptFileError(
                path,
                f"window {int(row['window_id'])}: block holds {len(entries)} indexed and "
                f"quarantined frames, the window table says {int(row['frame_count'])}",
            )
        wid = int(row["window_id"])
        blocks.append(
            Block(
                wid,
                int(row["flags"]),
                reader.missing.get(wid, ()),
                entries,
                int(row["payload_offset"]),
                int(row["payload_size"]),
            )
        )
    return blocks
