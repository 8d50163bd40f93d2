"""The pure logic of drives: which segment to ask, gaps between segments, stream changes.

No I/O: :mod:`hyperframes.drive` reads headers and indexes and asks these
functions what to do with them, so the rules are tested on plain numbers.

A segment's *span* is its header's ``[start_ns, end_ns]``: every window of
its window table and the window of every frame it indexes, late ones
included (docs/FORMAT.md), so a frame stamped ``t`` can only be in a segment
with ``start_ns < t <= end_ns``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Gap", "StreamChange", "SpanIndex", "find_gaps", "stream_changes"]

Mode = Literal["nearest", "before", "after"]


@dataclass(frozen=True, slots=True)
class Gap:
    """Time no segment of the drive covers: the recorder was not running (or a segment is gone).

    ``start_ns`` is the end of the segment before, ``end_ns`` the start of
    the one after (positions ``after`` and ``after + 1`` in the drive).
    ``missing_segments`` counts the sequence numbers skipped between them
    (a deleted or lost segment; 0 for a restart or an outage).
    """

    start_ns: int
    end_ns: int
    after: int
    missing_segments: int = 0

    @property
    def duration_ns(self) -> int:
        """Length of the gap in ns."""
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class StreamChange:
    """What changed in the stream table at segment position ``segment``.

    ``change`` is ``"added"``, ``"removed"`` or ``"changed"``; ``fields``
    names the stream-table fields that differ for ``"changed"``.
    """

    segment: int
    stream: str
    change: Literal["added", "removed", "changed"]
    fields: tuple[str, ...] = ()


def find_gaps(
    spans: Sequence[tuple[int, int]], seqs: Sequence[int | None], min_gap_ns: int = 0
) -> list[Gap]:
    """Gaps between consecutive segments (in drive order) longer than ``min_gap_ns``.

    Spans of consecutive segments touch (rotation) or overlap (late frames);
    time after the latest end seen so far and before the next start is a gap.
    """
    gaps = []
    reach: int | None = None
    for i, (start, end) in enumerate(spans):
        if reach is not None and start - reach > min_gap_ns:
            a, b = seqs[i - 1], seqs[i]
            skipped = b - a - 1 if a is not None and b is not None and b > a + 1 else 0
            gaps.append(Gap(reach, start, i - 1, skipped))
        reach = end if reach is None else max(reach, end)
    return gaps


def stream_changes(tables: Sequence[Sequence[dict[str, Any]]]) -> list[StreamChange]:
    """Stream-table differences between consecutive segments, by stream name.

    ``tables[i]`` is segment ``i``'s stream table as ``StreamInfo.to_dict()``
    rows. A stream that keeps its name but changes any field (id, encoding,
    codec, rate, shape...) is ``"changed"`` with the fields named.
    """
    out: list[StreamChange] = []
    prev: dict[str, dict[str, Any]] | None = None
    for i, rows in enumerate(tables):
        cur = {r["name"]: r for r in rows}
        if prev is not None:
            for name in sorted(cur.keys() - prev.keys()):
                out.append(StreamChange(i, name, "added"))
            for name in sorted(prev.keys() - cur.keys()):
                out.append(StreamChange(i, name, "removed"))
            for name in sorted(cur.keys() & prev.keys()):
                a, b = prev[name], cur[name]
                fields = tuple(sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)))
                if fields:
                    out.append(StreamChange(i, name, "changed", fields))
        prev = cur
    return out


class SpanIndex:
    """Segments' spans, searchable by time: which segments may hold a frame near ``t``.

    Positions are into the sequence given; spans need not be disjoint or
    sorted (they are sorted here by start).
    """

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        order = sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i))
        self.order = order
        self.starts = [spans[i][0] for i in order]
        self.ends = [spans[i][1] for i in order]
        self.maxend: list[int] = []
        m = -1
        for e in self.ends:
            m = max(m, e)
            self.maxend.append(m)

    def __len__(self) -> int:
        return len(self.order)

    def overlapping(self, start_ns: int, end_ns: int) -> list[int]:
        """Positions of segments whose span meets ``[start_ns, end_ns]``, by start."""
        hi = bisect.bisect_right(self.starts, end_ns)
        lo = bisect.bisect_left(self.maxend, start_ns)  # before lo every span ends too early
        return [self.order[j] for j in range(lo, hi) if self.ends[j] >= start_ns]

    def candidates(self, t: int, mode: Mode) -> Iterator[tuple[int, int, int]]:
        """Segments to search for the frame matching ``(t, mode)``, nearest first.

        Yields ``(position, own, frontier)``: ``own`` is the least distance
        from ``t`` a frame of that segment can have, ``frontier`` the least
        any segment not yet yielded (nor this one) can have; it never
        decreases. Stop once ``frontier`` exceeds the best distance found;
        skip a segment whose ``own`` exceeds it.
        """
        k = bisect.bisect_right(self.starts, t) - 1
        left, right = k, k + 1
        n = len(self.starts)
        if mode == "before":
            right = n  # segments starting after t hold only frames after t
        while True:
            lb_left = None
            if left >= 0 and not (mode == "after" and self.maxend[left] < t):
                lb_left = max(0, t - self.maxend[left])
            lb_right = self.starts[right] - t if right < n else None
            if lb_left is None and lb_right is None:
                return
            if lb_right is None or (lb_left is not None and lb_left <= lb_right):
                j = left
                left -= 1
                frontier = lb_left
                if mode == "after" and self.ends[j] < t:
                    continue
                own = max(0, t - self.ends[j])
            else:
                j = right
                right += 1
                frontier = lb_right
                own = lb_right
            assert frontier is not None
            yield self.order[j], own, frontier
