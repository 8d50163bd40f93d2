"""Segment file names: ``{vehicle}_{YYYYmmddTHHMMSS}Z_{seq:06d}.hf``. Pure, no I/O.

The recorder names its segments so (:mod:`hyperframes.recorder.segments` rotates them);
drives (:mod:`hyperframes.drive`) read the vehicle, the start second and the
sequence number back from the name, so a directory is sorted into drives
without opening a file. The UTC stamp is the start of the segment's first
window; the sequence number keeps growing across daemon restarts, so a jump
in it means a segment is missing. While being written a segment is
``NAME.hf.tmp``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["SUFFIX", "SegmentName", "segment_name", "parse_segment_name"]

SUFFIX: Final = ".hf"
_NAME_RE = re.compile(r"(?P<vehicle>.+)_(?P<stamp>\d{8}T\d{6})Z_(?P<seq>\d{6,})\.hf(?P<tmp>\.tmp)?")


@dataclass(frozen=True, slots=True)
class SegmentName:
    """The parts of a segment file name."""

    vehicle: str
    start: dt.datetime  # UTC, whole seconds
    seq: int
    tmp: bool = False


def segment_name(vehicle: str, start_ns: int, seq: int) -> str:
    """The file name of segment ``seq`` of ``vehicle`` whose data starts at ``start_ns``."""
    if seq < 0:
        raise ValueError(f"segment seq must be >= 0, got {seq}")
    start = dt.datetime.fromtimestamp(max(0, start_ns) // 1_000_000_000, dt.UTC)
    return f"{vehicle}_{start:%Y%m%dT%H%M%S}Z_{seq:06d}{SUFFIX}"


def parse_segment_name(name: str) -> SegmentName | None:
    """The parts of ``name``, or ``None`` when it is not a segment file name."""
    m = _NAME_RE.fullmatch(name)
    if m is None:
        return None
    try:
        start = dt.datetime.strptime(m["stamp"], "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)
    except ValueError:  # digits that are no date (month 13): not one of ours
        return None
    return SegmentName(m["vehicle"], start, int(m["seq"]), m["tmp"] is not None)
