"""Reading the frames at given positions of one stream with few ``pread`` calls."""

from __future__ import annotations

from collections.abc import Iterable

from hyperframes.reader import Frame, HyperframeReader

__all__ = ["read_frames"]


def read_frames(reader: HyperframeReader, base: int, positions: Iterable[int]) -> dict[int, Frame]:
    """Frames at stream-relative ``positions`` (``base``: the stream's first index position).

    One :meth:`~HyperframeReader.read_positions` call: payloads that lie close
    together in the file are read at once.
    """
    wanted = sorted(set(positions))
    frames = reader.read_positions([base + p for p in wanted])
    return dict(zip(wanted, frames, strict=True))
