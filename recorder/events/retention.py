"""Which segments events protect, and what snapshot mode discards. Pure but for :func:`read_span`.

A segment is **protected** while any event's window ``[t - pre_s, t + post_s]``
overlaps the sensor time it covers (:func:`hyperframes.events.protection`).
The events and the segments' spans come from the output directory's event
log, which survives restarts: a post window still open when the recorder
stopped or crashed protects the segments recorded after the restart too.

``disk.retention``:

- ``all`` (default): every segment is kept until the disk policy needs room;
  then unprotected segments go first (:func:`hyperframes.recorder.diskpolicy.decide`).
- ``events`` (snapshot mode): only what events protect is kept, plus a
  rolling buffer of the last ``buffer_s`` seconds on disk. A finalized
  segment whose end is more than ``buffer_s`` behind the newest data written
  and that no event protects is deleted (:func:`snapshot_expired`); the
  daemon counts the bytes and the seconds discarded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hyperframes.events import Event, SegmentSpan, protection

__all__ = ["OnDisk", "protected_names", "snapshot_expired", "read_span"]


@dataclass(frozen=True, slots=True)
class OnDisk:
    """A finalized segment on disk: its path, size in bytes and the time it covers."""

    path: Path
    size: int
    span: SegmentSpan

    @property
    def seconds(self) -> float:
        """The sensor time the segment covers, in seconds."""
        return max(0, self.span.end_ns - self.span.start_ns) / 1e9


def protected_names(events: Iterable[Event], spans: Iterable[SegmentSpan]) -> set[str]:
    """The names of the segments that at least one event protects."""
    return set(protection(events, spans))


def snapshot_expired(
    segments: Sequence[OnDisk],
    protected: set[str],
    latest_ns: int,
    buffer_ns: int,
    current: Path | None = None,
) -> list[OnDisk]:
    """The segments snapshot mode deletes now: out of the buffer and unprotected, oldest first.

    ``latest_ns`` is the end of the newest window written; a segment is out of
    the buffer once its end is before ``latest_ns - buffer_ns``.
    """
    horizon = latest_ns - buffer_ns
    return [
        s
        for s in segments
        if s.span.end_ns < horizon
        and s.path.name not in protected
        and (current is None or s.path != current)
    ]


def read_span(path: str | os.PathLike[str]) -> SegmentSpan | None:
    """The time a finalized segment covers, from its header and index; None if unreadable."""
    from hyperframes.reader import HyperframeReader  # noqa: PLC0415 - the one I/O helper

    try:
        with HyperframeReader(path, verify=False) as r:
            if r.frame_count == 0:
                return None
            start = r.window_ids[0] * r.window_ns if len(r.window_ids) else r.start_ns
            return SegmentSpan(Path(path).name, int(min(start, r.start_ns)), int(r.end_ns))
    except Exception:  # any unreadable file simply has no known span
        return None
