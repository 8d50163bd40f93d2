"""Events in the daemon: intake on the event loop, storage on the writer thread.

:class:`EventIntake` takes events from every source (the wire, ``mark`` over
the control socket, the rules), judges their clock like a frame's (an event
stamped more than ``clock_max_jump_s`` from the sensors' consensus is
*quarantined*: stored and logged, flagged, protecting nothing), counts them
and queues them for the writer. Nothing it does can stop the recording: a
malformed message is counted and logged (rate-limited), a full queue drops
the event with a count.

Events from the wire come from peers (anyone who may publish): they are
bounded by ``events.peers`` (a token bucket drops what is over the rate; a
window longer than ``max_pre_s``/``max_post_s`` is cut, counted), and one
that arrives while the sensors' clock settles is judged against the anchor
the frames held so far give, and one that comes before any frame waits (at
most :data:`MAX_UNJUDGED` of them) until there is one: an event stamped in
the year 2554 at start is quarantined like any other.

:class:`EventStore` lives in the :class:`~hyperframes.recorder.daemon.SegmentSink` on the
writer thread: it appends each event to the durable event log
(:mod:`hyperframes.recorder.events.log`) as soon as it arrives, holds it until the window
that contains its time is written, and then writes it into that window as a
frame of the event stream (``LATE`` when its window was already written). It
logs each finalized segment's span and answers which segments are protected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Final, cast

from hyperframes.events import (
    EVENT_STREAM_ID,
    Event,
    EventError,
    SegmentSpan,
    parse_event_body,
    protection,
)
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import TimestampSource
from hyperframes.recorder.events.config import EventsConfig
from hyperframes.recorder.events.log import PEER_SOURCES, EventLogWriter
from hyperframes.recorder.events.retention import OnDisk, read_span
from hyperframes.recorder.events.stats import EventStats
from hyperframes.recorder.ingest.common import RateLimitedLog
from hyperframes.recorder.ingest.wire import WireFlags, WireHeader
from hyperframes.writer import WriteFrame

__all__ = ["EventIntake", "EventStore", "TokenBucket", "MAX_UNJUDGED", "MAX_PENDING_BYTES"]

_log = logging.getLogger(__name__)

MAX_UNJUDGED: Final = 1000
"""Peer events held until the first frame gives a clock; more are quarantined at once."""
_PEER_INFO_PER_10S: Final = 20
MAX_PENDING_BYTES: Final = 16 << 20
"""Events (as stored) waiting for the window that holds their time; more are not held."""


class TokenBucket:
    """``per_s`` tokens a second, at most ``burst`` saved up; pure (time is passed in)."""

    def __init__(self, per_s: float, burst: int) -> None:
        self.per_s = per_s
        self.burst = float(burst)
        self._tokens = float(burst)
        self._t: int | None = None

    def take(self, now_ns: int) -> bool:
        """Spend one token at ``now_ns`` (monotonic); False when none is left."""
        if self._t is not None:
            self._tokens = min(self.burst, self._tokens + (now_ns - self._t) * self.per_s / 1e9)
        self._t = now_ns
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class EventIntake:
    """Events from every source into one bounded queue; runs on the event loop only.

    ``anchor`` returns the engine's clock anchor (``timestamp - monotonic``
    offset the sensors agree on, ``None`` while settling); ``max_jump_ns`` is
    the quarantine bound (docs/INGEST.md). Events go into the daemon's ingest
    queue when :attr:`ingest` accepts them (so they reach the writer in order
    with the frames that arrived around them, before the windows those frames
    close), else into :attr:`queue` (drained by the daemon's events task).
    """

    def __init__(
        self,
        config: EventsConfig,
        stats: EventStats,
        anchor: Callable[[], int | None],
        max_jump_ns: int,
        queue_size: int = 10_000,
    ) -> None:
        self.config = config
        self.stats = stats
        self.queue: asyncio.Queue[Event] = asyncio.Queue(queue_size)
        self.ingest: Callable[[Event], bool] = lambda _e: False
        """Try to put an event on the ingest queue; False when full (set by the daemon)."""
        self._anchor = anchor
        self._max_jump = max_jump_ns
        self._log = RateLimitedLog(_log)
        self._bucket = TokenBucket(config.peers.per_s, config.peers.burst)
        self._unjudged: list[tuple[Event, int]] = []
        self._info_log = RateLimitedLog(_log, 10.0, lines=_PEER_INFO_PER_10S)

    def from_wire(self, header: WireHeader, body: memoryview, mono_ns: int, source: str) -> None:
        """An event message (header + JSON body) received over ``source`` (zmq, mqtt)."""
        clock = TimestampSource.HARDWARE if header.flags & WireFlags.HW_TIMESTAMP else (
            TimestampSource.HOST)  # fmt: skip
        try:
            event = parse_event_body(
                body, header.timestamp_ns, clock=clock.value, source=source,
                defaults=self.config.names, default=(self.config.pre_s, self.config.post_s),
                raw_payload=True,  # held as its JSON text: memory a byte per byte
            )  # fmt: skip
        except EventError as exc:
            self.malformed(source, str(exc))
            return
        if not self._bucket.take(mono_ns):
            self.stats.rate_limited += 1
            self._log.warning(("events", "rate"), "peer events over events.peers (%g/s, burst "
                              "%d): dropped %r from %s", self.config.peers.per_s,
                              self.config.peers.burst, event.name, source)  # fmt: skip
            return
        peers = self.config.peers
        if event.pre_s > peers.max_pre_s or event.post_s > peers.max_post_s:
            self.stats.clamped += 1
            self._log.warning(("events", "clamped"), "event %r from %s asks to keep -%g s/+%g s; "
                              "cut to events.peers (-%g s/+%g s)", event.name, source,
                              event.pre_s, event.post_s, peers.max_pre_s,
                              peers.max_post_s)  # fmt: skip
            event = replace(event, pre_s=min(event.pre_s, peers.max_pre_s),
                            post_s=min(event.post_s, peers.max_post_s))  # fmt: skip
        if self._max_jump > 0 and self._anchor() is None:  # no frame yet to judge it by
            if len(self._unjudged) < MAX_UNJUDGED:
                self._unjudged.append((event, mono_ns))
                return
            event = replace(event, quarantined=True)
        self.submit(event, mono_ns)

    def release(self, final: bool = False) -> None:
        """Judge and queue the peer events held for a first frame (all, when ``final``).

        Called on every tick; ``final`` at the end of ingest, when what still
        cannot be judged is quarantined.
        """
        if not self._unjudged or (self._anchor() is None and not final):
            return
        held, self._unjudged = self._unjudged, []
        for event, mono_ns in held:
            self.submit(event if self._anchor() is not None else replace(
                event, quarantined=True), mono_ns, in_order=not final)  # fmt: skip

    def malformed(self, source: str, problem: str) -> None:
        """Count and log an event message that could not be accepted."""
        self.stats.count(self.stats.malformed, source)
        self._log.warning(("events", source), "dropped a malformed event message (%s): %s",
                          source, problem)  # fmt: skip

    def duplicate(self, source: str) -> None:
        """Count an exact re-send of an event message (MQTT QoS 1 redelivery)."""
        self.stats.duplicates += 1

    def accept(self, event: Event, mono_ns: int) -> Event:
        """Judge the clock of ``event``, count and log it; returns it as it will be stored."""
        anchor = self._anchor()
        if event.quarantined or (
            anchor is not None and abs(event.t_ns - mono_ns - anchor) > self._max_jump
        ):
            event = replace(event, quarantined=True)
            self.stats.quarantined += 1
            why = (
                "the sensors' clock had not settled"
                if anchor is None
                else f"{(event.t_ns - mono_ns - anchor) / 1e9:.1f} s from the sensors' clock"
            )
            self._log.warning(("events", "quarantined"), "event %r from %s at t=%d ns: %s: "
                              "quarantined (logged, protects nothing)", event.name,
                              event.source, event.t_ns, why)  # fmt: skip
        self.stats.count(self.stats.received, event.source)
        args = (event.name, event.source, event.t_ns, event.pre_s, event.post_s,
                " QUARANTINED" if event.quarantined else "")  # fmt: skip
        line = "event %s from %s at t=%d ns (keep -%g s / +%g s)%s"
        if event.source in PEER_SOURCES:  # at most _PEER_INFO_PER_10S lines per 10 s
            self._info_log.log(logging.INFO, ("events", "accepted"), line, *args)
        else:
            _log.info(line, *args)
        return event

    def submit(self, event: Event, mono_ns: int, *, in_order: bool = True) -> Event:
        """:meth:`accept` ``event`` and queue it for the writer; returns it as queued.

        ``in_order``: through the ingest queue when it has room (not once
        ingest has ended). A full queue drops it (counted in ``queue_full``, logged).
        """
        event = self.accept(event, mono_ns)
        try:
            if not (in_order and self.ingest(event)):
                self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.stats.queue_full += 1
            self._log.warning(("events", "queue-full"), "event queue full: dropped %r",
                              event.name)  # fmt: skip
        return event


class EventStore:
    """The writer thread's side: event log, pending events, segment spans, protection."""

    def __init__(self, directory: Path, config: EventsConfig, stats: EventStats) -> None:
        self.dir = directory
        self.config = config
        self.stats = stats
        self.log = EventLogWriter(directory, config.log_max_bytes, config.log_max_events)
        self.pending: list[Event] = []
        self._pending_bytes = 0
        self._unreadable: set[str] = set()
        self._log = RateLimitedLog(_log)

    def add(self, event: Event, existing: Callable[[], Iterable[str]]) -> None:
        """Log ``event`` durably now; it waits for the window that holds its time.

        At most :data:`MAX_PENDING_BYTES` of events wait; past that an event is
        logged (it protects what it should) but not written into a segment.
        """
        refused = self.log.refused
        if not self.log.append_event(event, existing):
            self.stats.log_errors += 1
            self.stats.log_full += self.log.refused - refused
        size = len(event.to_json())
        if self._pending_bytes + size > MAX_PENDING_BYTES:
            self.stats.pending_full += 1
            self._log.warning(("events", "pending-full"), "%d bytes of events wait for their "
                              "windows already: %r at t=%d ns is not written into a segment",
                              self._pending_bytes, event.name, event.t_ns)  # fmt: skip
            return
        self.pending.append(event)
        self._pending_bytes += size

    def frames_for(self, start_ns: int, end_ns: int) -> list[WriteFrame]:
        """The pending events that go into window ``(start_ns, end_ns]``, as frames."""
        if not self.pending:
            return []
        take = [e for e in self.pending if e.t_ns <= end_ns or e.quarantined]
        if not take:
            return []
        self.pending = [e for e in self.pending if not (e.t_ns <= end_ns or e.quarantined)]
        frames = [self._frame(e, start_ns) for e in take]
        self._pending_bytes -= sum(len(cast(bytes, f.payload)) for f in frames)  # to_json()
        return frames

    def drain(self) -> list[Event]:
        """Every pending event (stamped after the last window), oldest first."""
        out, self.pending, self._pending_bytes = sorted(self.pending, key=lambda e: e.t_ns), [], 0
        return out

    def frame_of(self, event: Event, window_start_ns: int) -> WriteFrame:
        """``event`` as a frame of a window starting at ``window_start_ns``."""
        return self._frame(event, window_start_ns)

    def segment_done(self, span: SegmentSpan, existing: Callable[[], Iterable[str]]) -> None:
        """Log a finalized segment's span."""
        if not self.log.append_segment(span, existing):
            self.stats.log_errors += 1

    def on_disk(self, paths: Iterable[tuple[Path, int]]) -> list[OnDisk]:
        """Finalized segments with their spans (from the log, else read once from the file)."""
        out = []
        for path, size in paths:
            span = self.log.spans.get(path.name)
            if span is None and path.name not in self._unreadable:
                span = read_span(path)  # a recovered leftover, or a segment of an older run
                if span is None:
                    self._unreadable.add(path.name)
                else:
                    self.segment_done(span, lambda: ())
            if span is not None:
                out.append(OnDisk(path, size, span))
        return out

    def protected(self, segments: Iterable[OnDisk]) -> dict[str, list[Event]]:
        """Segment name -> the events protecting it, for the protected ones of ``segments``."""
        return protection(self.log.events, [s.span for s in segments])

    def _frame(self, e: Event, window_start_ns: int) -> WriteFrame:
        flags = FrameFlags.HW_TIMESTAMP if e.clock == TimestampSource.HARDWARE.value else 0
        if e.quarantined:
            flags |= FrameFlags.QUARANTINED
        elif e.t_ns <= window_start_ns:
            flags |= FrameFlags.LATE
        self.stats.written += 1
        return WriteFrame(EVENT_STREAM_ID, e.t_ns, e.to_json(), int(flags))
