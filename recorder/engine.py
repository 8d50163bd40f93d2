"""The windowing engine: timestamped frames in, closed hyperframe windows out.

Pure and synchronous: no I/O, no asyncio, no threads, and no clock is read
here. The caller passes the host time (``host_ns``, a *monotonic* clock such
as :func:`time.monotonic_ns`) with every call; frame timestamps are capture
times on the global epoch grid of :mod:`hyperframes.format.windows` (window ``k``
holds ``(k*L, (k+1)*L]``).

Rules, in the order the engine applies them to a pushed frame:

1. **Plausibility** (:mod:`hyperframes.recorder.clock`). The frame's offset from the host
   clock (``timestamp_ns - host_ns``) is judged against the offset the
   sensors agree on, never against a single frame: at start the engine holds
   frames for ``settle_ns`` (default: ``grace_ns``) and anchors on the
   freshest offset two streams agree on, so a backlog delivered at start
   (minutes old) is quarantined and the fresh frames are windowed. Later, a
   frame more than ``max_jump_ns`` from the anchor is held until the next
   plausible frame condemns it (quarantined), or, if for ``reanchor_ns``
   (default: ``grace_ns``) no frame agrees with the anchor, every clock moved
   and the engine re-anchors.
   Quarantined frames open no window, move no watermark, do not count as a
   sign of life, and come out in the ``quarantined`` bucket of the next
   window to close.
2. **Late.** A good frame whose window is already closed is kept and comes
   out in the ``late`` bucket of the next window to close (windows must leave
   in strictly increasing order, so it cannot go back to its own).
3. Otherwise the frame joins its window, ``window_of(timestamp_ns)``, and
   raises its stream's watermark (highest on-time timestamp). If the stream
   was stale it is live again.

Closing:

- All windows ending before ``min(watermark of every live stream) -
  reorder_ns`` close at once, oldest first: every live stream has delivered a
  frame past their end (with ``reorder_ns`` of slack for frames that arrive
  slightly out of order across a boundary).
- **Grace.** A window closes at the latest ``grace_ns`` of host time after it
  became the oldest open window (the earliest moment the engine could have
  closed it, since windows close in order). Live streams that still have not
  passed its end are then marked stale and stop holding windows open until a
  frame of theirs is on time again. Pick ``grace_ns`` above the window length
  plus the slowest stream's period plus its delivery latency, or healthy
  slow streams will be marked stale.
- If no window is open, late or quarantined frames that have waited
  ``grace_ns`` leave in a window of their own, the one after the last closed
  window, so that nothing waits unboundedly.
- Windows holding no frame at all are never emitted.
- :meth:`WindowEngine.flush` closes every open window, oldest first, at
  shutdown.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from hyperframes.format.windows import window_end, window_of, window_start
from hyperframes.recorder.clock import ClockAnchor
from hyperframes.recorder.errors import UnknownStreamError

__all__ = [
    "TimedFrame",
    "WindowEngine",
    "ClosedWindow",
    "WindowStats",
    "StreamCounters",
    "UnknownStreamError",
    "DEFAULT_MAX_JUMP_NS",
]

DEFAULT_MAX_JUMP_NS = 10 * 1_000_000_000
"""Default plausibility bound for a timestamp jump: 10 s."""


class TimedFrame(Protocol):
    """What the engine needs to know about a frame; anything else rides along."""

    @property
    def stream_id(self) -> int:
        """The stream the frame belongs to."""
        ...

    @property
    def timestamp_ns(self) -> int:
        """Capture time in ns since the Unix epoch."""
        ...

    @property
    def size(self) -> int:
        """Payload size in bytes (for statistics only)."""
        ...


FrameT = TypeVar("FrameT", bound=TimedFrame)


@dataclass(slots=True)
class StreamCounters:
    """Running totals for one stream since the engine was created.

    ``frames`` and ``nbytes`` count every frame pushed (on time, late and
    quarantined alike); ``late`` and ``quarantined`` count those subsets;
    ``stale_events`` counts how often the stream was declared stale.
    """

    frames: int = 0
    nbytes: int = 0
    late: int = 0
    quarantined: int = 0
    stale_events: int = 0


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Per-stream statistics of one closed window; every known stream is a key.

    ``frames`` and ``nbytes`` cover the window's own (on-time) frames;
    ``late`` and ``quarantined`` count the frames carried in those buckets.
    """

    frames: Mapping[int, int]
    nbytes: Mapping[int, int]
    late: Mapping[int, int]
    quarantined: Mapping[int, int]

    @property
    def total_frames(self) -> int:
        """Every frame the window carries, buckets included."""
        return sum(self.frames.values()) + sum(self.late.values()) + sum(self.quarantined.values())


@dataclass(frozen=True, slots=True)
class ClosedWindow(Generic[FrameT]):
    """One closed window, ready for the writer.

    ``frames`` are the frames stamped inside ``(start_ns, end_ns]``, in
    arrival order (the file index sorts them). ``late`` and ``quarantined``
    are frames of other times that are carried here; the writer flags them
    LATE and QUARANTINED. ``missing`` lists the streams without an on-time
    frame in this window and ``stale`` the streams that were stale when it
    closed (a missing stream that is not stale merely had no frame here).
    """

    window_id: int
    start_ns: int
    end_ns: int
    frames: tuple[FrameT, ...]
    late: tuple[FrameT, ...]
    quarantined: tuple[FrameT, ...]
    missing: frozenset[int]
    stale: frozenset[int]
    stats: WindowStats


@dataclass(slots=True)
class _Stream:
    counters: StreamCounters
    live: bool = True
    watermark: int | None = None  # highest on-time timestamp


class WindowEngine(Generic[FrameT]):
    """Assigns frames to fixed time windows and decides when each window closes.

    ``stream_ids`` are every stream the engine will see; ``window_ns`` the
    window length ``L``; ``grace_ns`` the longest host time a window waits as
    the oldest open window; ``max_jump_ns`` the plausibility bound for
    timestamps (``None`` turns quarantine off); ``settle_ns`` how long frames
    wait at start before the engine anchors on the clock the sensors agree on,
    and ``reanchor_ns`` how long every frame may disagree with that clock
    before it re-anchors (both default to ``grace_ns``); ``reorder_ns`` the
    slack for frames arriving slightly out of order across a window boundary.
    See the module docstring for the rules.

    Every method that may close windows returns them as a list, oldest
    first; across all calls window ids are strictly increasing.
    """

    def __init__(
        self,
        stream_ids: Iterable[int],
        *,
        window_ns: int,
        grace_ns: int,
        max_jump_ns: int | None = DEFAULT_MAX_JUMP_NS,
        reorder_ns: int = 0,
        settle_ns: int | None = None,
        reanchor_ns: int | None = None,
    ) -> None:
        ids = list(stream_ids)
        if not ids:
            raise ValueError("at least one stream id is required")
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"duplicate stream ids: {dupes}")
        if window_ns <= 0:
            raise ValueError(f"window_ns must be > 0, got {window_ns}")
        if grace_ns < 0:
            raise ValueError(f"grace_ns must be >= 0, got {grace_ns}")
        if max_jump_ns is not None and max_jump_ns <= 0:
            raise ValueError(f"max_jump_ns must be > 0 or None, got {max_jump_ns}")
        if reorder_ns < 0:
            raise ValueError(f"reorder_ns must be >= 0, got {reorder_ns}")
        self._window_ns = window_ns
        self._grace_ns = grace_ns
        self._clock: ClockAnchor[FrameT] | None = (
            None
            if max_jump_ns is None
            else ClockAnchor(
                max_jump_ns,
                grace_ns if settle_ns is None else settle_ns,
                grace_ns if reanchor_ns is None else reanchor_ns,
            )
        )
        self._reorder_ns = reorder_ns
        self._streams: dict[int, _Stream] = {i: _Stream(StreamCounters()) for i in ids}
        self._open: dict[int, list[FrameT]] = {}
        self._heap: list[int] = []  # ids of self._open, min-heap
        self._closed_through: int | None = None
        self._head_since: int | None = None  # host time the oldest open window became oldest
        self._late: list[FrameT] = []
        self._quarantined: list[FrameT] = []
        self._pending_since: int | None = None  # host time the oldest carried frame arrived
        self._host_ns: int | None = None
        self._latest: int | None = None  # highest good timestamp

    # -- public API ----------------------------------------------------------

    @property
    def window_ns(self) -> int:
        """The window length in ns."""
        return self._window_ns

    @property
    def stream_ids(self) -> tuple[int, ...]:
        """The configured stream ids, in configuration order."""
        return tuple(self._streams)

    @property
    def stale_streams(self) -> frozenset[int]:
        """Streams currently stale (not holding windows open)."""
        return frozenset(i for i, s in self._streams.items() if not s.live)

    @property
    def counters(self) -> dict[int, StreamCounters]:
        """A snapshot of every stream's running counters."""
        return {i: replace(s.counters) for i, s in self._streams.items()}

    @property
    def closed_through(self) -> int | None:
        """The highest closed window id; frames stamped at or before its end are late."""
        return self._closed_through

    @property
    def latest_ns(self) -> int | None:
        """The highest non-quarantined timestamp seen: the engine's notion of time."""
        return self._latest

    @property
    def clock(self) -> ClockAnchor[FrameT] | None:
        """The plausibility judge (``None`` when quarantine is off)."""
        return self._clock

    @property
    def open_window_ids(self) -> tuple[int, ...]:
        """Ids of the windows holding frames and not yet closed, oldest first."""
        return tuple(sorted(self._open))

    def push(self, frame: FrameT, host_ns: int) -> list[ClosedWindow[FrameT]]:
        """Take one frame received at host time ``host_ns``; return windows it closed.

        Raises :class:`UnknownStreamError` (a ``ValueError``) for a stream id
        not given to the constructor; the engine's state is then unchanged.
        """
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            raise UnknownStreamError(frame.stream_id, self._streams)
        host = self._advance_host(host_ns)
        stream.counters.frames += 1
        stream.counters.nbytes += frame.size
        if self._clock is None:
            self._place(frame, True, host)
        else:
            for item, plausible in self._clock.offer(frame, frame.stream_id, frame.timestamp_ns,
                                                     host):  # fmt: skip
                self._place(item, plausible, host)
        return self._close_ready(host)

    def tick(self, host_ns: int) -> list[ClosedWindow[FrameT]]:
        """Let host time pass without a frame; return windows whose grace expired."""
        host = self._advance_host(host_ns)
        if self._clock is not None:
            for item, plausible in self._clock.poll(host):
                self._place(item, plausible, host)
        return self._close_ready(host)

    def flush(self) -> list[ClosedWindow[FrameT]]:
        """Close every open window, oldest first, and emit every carried frame (shutdown).

        The engine stays usable; frames stamped at or before the last closed
        window are late from then on.
        """
        out: list[ClosedWindow[FrameT]] = []
        if self._clock is not None:
            host = self._host_ns or 0
            for item, plausible in self._clock.drain():
                self._place(item, plausible, host)
        if self._heap:
            self._close_through(max(self._heap), out)
        if self._late or self._quarantined:
            out.append(self._emit(self._carry_window_id()))
        return out

    # -- internals -----------------------------------------------------------

    def _advance_host(self, host_ns: int) -> int:
        # A host clock that steps back (a caller bug) must not stretch grace.
        if self._host_ns is None or host_ns > self._host_ns:
            self._host_ns = host_ns
        return self._host_ns

    def _place(self, frame: FrameT, plausible: bool, host: int) -> None:
        """Put a judged frame in its window, or in the late or quarantined bucket."""
        stream = self._streams[frame.stream_id]
        ts = frame.timestamp_ns
        if not plausible:
            stream.counters.quarantined += 1
            self._carry(self._quarantined, frame, host)
            return
        if self._latest is None or ts > self._latest:
            self._latest = ts
        wid = window_of(ts, self._window_ns)
        if self._closed_through is not None and wid <= self._closed_through:
            stream.counters.late += 1
            self._carry(self._late, frame, host)
            return
        stream.live = True
        if stream.watermark is None or ts > stream.watermark:
            stream.watermark = ts
        bucket = self._open.get(wid)
        if bucket is None:
            self._open[wid] = [frame]
            heapq.heappush(self._heap, wid)
        else:
            bucket.append(frame)

    def _carry(self, bucket: list[FrameT], frame: FrameT, host: int) -> None:
        bucket.append(frame)
        if self._pending_since is None:
            self._pending_since = host

    def _carry_window_id(self) -> int:
        if self._closed_through is not None:
            return self._closed_through + 1
        # Unreachable in practice (the first frame is always good and opens a
        # window), but keep the output well formed regardless.
        first = (self._late or self._quarantined)[0]
        return window_of(first.timestamp_ns, self._window_ns)

    def _passed(self, stream: _Stream, window_id: int) -> bool:
        if stream.watermark is None:
            return False
        return stream.watermark - self._reorder_ns > window_end(window_id, self._window_ns)

    def _frontier_limit(self) -> int | None:
        """The highest window id that every live stream has passed, if any."""
        live = [s for s in self._streams.values() if s.live]
        if not live:
            return max(self._heap) if self._heap else None
        marks = [s.watermark for s in live]
        if any(m is None for m in marks):
            return None
        frontier = min(m for m in marks if m is not None) - self._reorder_ns
        return window_of(frontier, self._window_ns) - 1

    def _close_ready(self, host: int) -> list[ClosedWindow[FrameT]]:
        out: list[ClosedWindow[FrameT]] = []
        while True:
            limit = self._frontier_limit()
            if limit is not None:
                self._close_through(limit, out)
            if not self._heap:
                break
            if self._head_since is None:
                self._head_since = host
            if host - self._head_since < self._grace_ns:
                break
            head = self._heap[0]
            for s in self._streams.values():
                if s.live and not self._passed(s, head):
                    s.live = False
                    s.counters.stale_events += 1
            self._close_through(head, out)
        if (
            not self._heap
            and self._pending_since is not None
            and host - self._pending_since >= self._grace_ns
        ):
            out.append(self._emit(self._carry_window_id()))
        return out

    def _close_through(self, limit: int, out: list[ClosedWindow[FrameT]]) -> None:
        if self._closed_through is not None and limit <= self._closed_through:
            return
        while self._heap and self._heap[0] <= limit:
            out.append(self._emit(heapq.heappop(self._heap)))
            self._head_since = None
        self._closed_through = limit

    def _emit(self, window_id: int) -> ClosedWindow[FrameT]:
        frames = self._open.pop(window_id, [])
        late, self._late = self._late, []
        quarantined, self._quarantined = self._quarantined, []
        self._pending_since = None
        if self._closed_through is None or window_id > self._closed_through:
            self._closed_through = window_id
        zero = dict.fromkeys(self._streams, 0)
        n_frames, n_bytes, n_late, n_quar = dict(zero), dict(zero), dict(zero), dict(zero)
        for f in frames:
            n_frames[f.stream_id] += 1
            n_bytes[f.stream_id] += f.size
        for f in late:
            n_late[f.stream_id] += 1
        for f in quarantined:
            n_quar[f.stream_id] += 1
        return ClosedWindow(
            window_id=window_id,
            start_ns=window_start(window_id, self._window_ns),
            end_ns=window_end(window_id, self._window_ns),
            frames=tuple(frames),
            late=tuple(late),
            quarantined=tuple(quarantined),
            missing=frozenset(i for i, n in n_frames.items() if n == 0),
            stale=self.stale_streams,
            stats=WindowStats(frames=n_frames, nbytes=n_bytes, late=n_late, quarantined=n_quar),
        )
