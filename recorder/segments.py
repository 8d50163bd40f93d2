"""Segment files: names, sequence numbers and when to rotate. Pure, no I/O but one listing.

A recording is a series of segment files in ``output_dir``, named

    {vehicle}_{YYYYmmddTHHMMSS}Z_{seq:06d}.hf

(:mod:`hyperframes.format.naming`, which drives also use to read names back)

with the UTC start of the segment's first window and a sequence number that
keeps growing across daemon restarts. Names sort by time (same vehicle), and
the sequence number breaks ties and reveals a missing segment. While being
written a segment is ``NAME.hf.tmp`` (see :mod:`hyperframes.writer`).

Rotation happens only between windows: before a window is written the daemon
asks :meth:`RotationPolicy.should_rotate`. By duration, segments sit on the
global grid of ``segment_ns`` (a 60 s segment covers ``[k*60 s, (k+1)*60 s)``
of sensor time, so the first one after start is shorter); by size, a segment
is closed once its file has reached ``max_bytes``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hyperframes.format.naming import SUFFIX, SegmentName, parse_segment_name, segment_name

__all__ = [
    "SUFFIX",
    "SegmentName",
    "segment_name",
    "parse_segment_name",
    "next_sequence",
    "list_segments",
    "RotationPolicy",
]

_TMP: Final = ".tmp"


def next_sequence(names: Iterable[str], vehicle: str) -> int:
    """The sequence number after the highest one of ``vehicle`` in ``names`` (0 if none).

    ``.tmp`` files count too: a crashed segment's number is never reused.
    """
    seqs = [p.seq for p in map(parse_segment_name, names) if p is not None and p.vehicle == vehicle]
    return max(seqs) + 1 if seqs else 0


def list_segments(
    directory: str | os.PathLike[str], vehicle: str, *, unfinished: bool = False
) -> list[Path]:
    """Finalized segments of ``vehicle`` in ``directory``, oldest first (by seq).

    With ``unfinished`` the ``.tmp`` segments instead (what a crash left behind).
    """
    found = []
    with os.scandir(directory) as it:
        for entry in it:
            p = parse_segment_name(entry.name)
            if p is not None and p.vehicle == vehicle and p.tmp == unfinished and entry.is_file():
                found.append((p.seq, Path(entry.path)))
    return [path for _, path in sorted(found)]


@dataclass(frozen=True, slots=True)
class RotationPolicy:
    """When to start a new segment: by data time (``segment_ns``) and/or file size."""

    segment_ns: int | None = 60_000_000_000
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.segment_ns is None and self.max_bytes is None:
            raise ValueError("rotation needs segment_ns, max_bytes or both")
        if self.segment_ns is not None and self.segment_ns <= 0:
            raise ValueError(f"segment_ns must be > 0, got {self.segment_ns}")
        if self.max_bytes is not None and self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {self.max_bytes}")

    def slot(self, start_ns: int) -> int | None:
        """The duration slot of a window starting at ``start_ns`` (``None``: size only)."""
        return None if self.segment_ns is None else start_ns // self.segment_ns

    def should_rotate(self, first_start_ns: int, window_start_ns: int, bytes_written: int) -> bool:
        """Whether the window starting at ``window_start_ns`` goes into a new segment.

        ``first_start_ns`` is the start of the current segment's first window
        and ``bytes_written`` its file size so far.
        """
        if self.max_bytes is not None and bytes_written >= self.max_bytes:
            return True
        return self.segment_ns is not None and self.slot(window_start_ns) != self.slot(
            first_start_ns
        )
