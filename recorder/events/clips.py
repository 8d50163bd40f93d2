"""Event clips: which are due, what they are named, what the budget allows. Pure, no I/O.

With ``events.clips`` on, every event gets one self-describing file holding
the frames of ``[t - pre_s, t + post_s]`` (clipped to what is on disk), cut
from finalized segments by the upload service
(:mod:`hyperframes.recorder.upload.clipper`) and uploaded before anything
else. This module decides; the clipper reads the event log and the
directories and writes.

- **When**: an event is due once its window is wholly in finalized
  segments: the newest finalized segment ends at or after ``t + post_s``
  (the recorder has moved past it) and ``now`` is past it too. A recorder
  that stopped before the window closed (no segment being written) leaves
  the window as it is: the clip is cut from what exists once ``now`` is
  ``grace_ns`` past its end.
- **Name**: ``{vehicle}_{YYYYmmddTHHMMSS.mmm}Z_{event name}.hf`` with the
  event's time in UTC to the millisecond (:func:`clip_name`); two events of
  one name in one millisecond share one clip.
- **Evicted**: an event whose window no finalized segment on disk overlaps
  (deleted by the disk policy, or never recorded) gets no clip; it is counted.
- **Budget** (:func:`plan_budget`): ``clips.max_mb`` bounds the clips
  directory. A clip that would pass it deletes the oldest clips already
  uploaded, oldest first, and only when that makes room; otherwise it is
  skipped (counted, tried again at the next pass). A clip not yet uploaded is
  never deleted: that is what protects clips until they are uploaded (the
  recorder's disk policy deletes segments only, never a clip).
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from hyperframes.events import Event, SegmentSpan
from hyperframes.format.naming import SUFFIX
from hyperframes.recorder.events.config import ClipsConfig

__all__ = [
    "ClipPlan",
    "DueClips",
    "BudgetDecision",
    "clip_name",
    "parse_clip_name",
    "safe_event_name",
    "due_clips",
    "plan_budget",
    "DEFAULT_GRACE_NS",
]

DEFAULT_GRACE_NS: Final = 120 * 1_000_000_000
"""With no segment being written, a window this far behind ``now`` is cut from what exists."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_CLIP_RE = re.compile(r"(?P<vehicle>.+)_(?P<stamp>\d{8}T\d{6}\.\d{3})Z_(?P<event>[^/]+)\.hf")


@dataclass(frozen=True, slots=True)
class ClipPlan:
    """One clip to cut: its file name, its event, the range, the segments and streams.

    ``start_ns``/``end_ns`` are the event's window clipped to the finalized
    segments that hold it (``segments``, oldest first); ``streams`` ``None``:
    every stream.
    """

    name: str
    event: Event
    start_ns: int
    end_ns: int
    segments: tuple[str, ...]
    streams: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class DueClips:
    """What :func:`due_clips` found: the clips to cut now (oldest event first), and the rest.

    ``waiting``: windows not yet wholly finalized; ``evicted``: windows with no
    finalized segment on disk; ``done``: clips already made (or uploaded);
    ``quarantined``: events off the sensor clock, which keep nothing.
    """

    due: tuple[ClipPlan, ...] = ()
    waiting: int = 0
    evicted: int = 0
    done: int = 0
    quarantined: int = 0


@dataclass(frozen=True, slots=True)
class BudgetDecision:
    """Whether a new clip fits the budget, and the uploaded clips to delete first for it."""

    fits: bool
    delete: tuple[str, ...] = ()


def safe_event_name(name: str) -> str:
    """``name`` made safe for a file name and an object key (``:`` and the like become ``-``)."""
    return _UNSAFE.sub("-", name).strip(".") or "event"


def clip_name(vehicle: str, event: Event) -> str:
    """``{vehicle}_{YYYYmmddTHHMMSS.mmm}Z_{event name}.hf``: the event's time in UTC, in ms."""
    ms = max(0, event.t_ns) // 1_000_000
    secs, rest = divmod(ms, 1000)
    stamp = dt.datetime.fromtimestamp(secs, dt.UTC)
    return f"{vehicle}_{stamp:%Y%m%dT%H%M%S}.{rest:03d}Z_{safe_event_name(event.name)}{SUFFIX}"


def parse_clip_name(name: str) -> tuple[str, str, str] | None:
    """``(vehicle, stamp, event name)`` of a clip file name, or ``None`` (not a finished clip)."""
    m = _CLIP_RE.fullmatch(name)
    return None if m is None else (m["vehicle"], m["stamp"], m["event"])


def due_clips(
    events: Iterable[Event],
    spans: Iterable[SegmentSpan],
    made: Collection[str],
    *,
    vehicle: str,
    clips: ClipsConfig,
    now_ns: int,
    recording: bool = True,
    grace_ns: int = DEFAULT_GRACE_NS,
) -> DueClips:
    """The clips due now, from the event log's events and the finalized segments on disk.

    ``spans``: the finalized segments still on disk (name and sensor time);
    ``made``: names of clips that exist or were uploaded (never cut twice);
    ``now_ns``: the host clock; ``recording``: whether a segment is being
    written (a ``.tmp``). Events ``clips`` does not want are left out.
    """
    on_disk = sorted(spans, key=lambda s: (s.start_ns, s.name))
    starts = [s.start_ns for s in on_disk]
    reach = list(itertools.accumulate((s.end_ns for s in on_disk), max))  # non-decreasing
    newest = reach[-1] if reach else None
    due: dict[str, ClipPlan] = {}
    waiting = evicted = done = quarantined = 0
    for ev in sorted(events, key=lambda e: (e.t_ns, e.name)):
        if not clips.wants(ev.name):
            continue
        if ev.quarantined:
            quarantined += 1
            continue
        name = clip_name(vehicle, ev)
        if name in made or name in due:
            done += 1
            continue
        lo, hi = ev.start_ns, ev.end_ns
        closed = newest is not None and newest >= hi and now_ns >= hi
        stopped = not recording and now_ns >= hi + grace_ns
        if not (closed or stopped):
            waiting += 1
            continue
        first = bisect.bisect_left(reach, lo)  # the spans before it all end before lo
        stop = bisect.bisect_right(starts, hi)
        holding = [s for s in on_disk[first:stop] if s.overlaps(lo, hi)]
        if not holding:
            evicted += 1
            continue
        start = max(lo, min(s.start_ns for s in holding))
        end = min(hi, max(s.end_ns for s in holding))
        due[name] = ClipPlan(name, ev, start, end, tuple(s.name for s in holding),
                             clips.streams_for(ev.name))  # fmt: skip
    return DueClips(tuple(due.values()), waiting, evicted, done, quarantined)


def plan_budget(
    clips: Sequence[tuple[str, int]], uploaded: Collection[str], new_bytes: int, max_bytes: int
) -> BudgetDecision:
    """Whether a clip of ``new_bytes`` fits beside ``clips`` (``(name, bytes)``, oldest first).

    If the total would pass ``max_bytes``, the oldest clips named in
    ``uploaded`` are deleted, oldest first, until it fits; when even deleting
    every uploaded clip would not make room, nothing is deleted and the clip
    does not fit. A clip not in ``uploaded`` is never deleted.
    """
    total = sum(size for _, size in clips) + new_bytes
    if total <= max_bytes:
        return BudgetDecision(True)
    delete: list[str] = []
    for name, size in clips:
        if name not in uploaded:
            continue
        delete.append(name)
        total -= size
        if total <= max_bytes:
            return BudgetDecision(True, tuple(delete))
    return BudgetDecision(False)
