"""The durable event log of an output directory: append-only JSON Lines, fsynced, bounded.

Format and reading: :mod:`hyperframes.events` (``events.jsonl``). This is the
writing side, used on the recorder's writer thread only. Every append is
written and fsynced before it returns (an event survives a power loss as soon
as it is logged); a log over ``max_bytes`` is compacted once (events that
still protect an existing segment, or whose window is still open, and the
spans of segments still on disk, written to a ``.tmp`` and renamed over it);
if it is still too big, appends are refused and counted. A failing or full
log never stops the recording: the event is still written into its segment.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from hyperframes.events import (
    EVENT_LOG_NAME,
    Event,
    EventLog,
    SegmentSpan,
    log_line,
    protection,
    read_event_log,
)

__all__ = ["EventLogWriter"]

_log = logging.getLogger(__name__)


class EventLogWriter:
    """Appends events and segment spans to ``DIR/events.jsonl``; never raises from appends."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int) -> None:
        self.dir = Path(directory)
        self.path = self.dir / EVENT_LOG_NAME
        self.max_bytes = max_bytes
        self.errors = 0
        """Appends that failed (I/O error) or were refused (log full)."""
        self.compactions = 0
        self._full_logged = False
        self._compacted_for: frozenset[str] | None = None
        self._truncate_torn_tail()
        loaded = read_event_log(self.dir)
        self.events: list[Event] = list(loaded.events)
        self.spans: dict[str, SegmentSpan] = dict(loaded.segments)
        if loaded.bad_lines:
            _log.warning("event log %s: %d unreadable line(s) skipped", self.path,
                         loaded.bad_lines)  # fmt: skip

    def load(self) -> EventLog:
        """What the log holds now (in memory, as appended)."""
        return EventLog(tuple(self.events), dict(self.spans))

    def append_event(self, event: Event, existing: Callable[[], Iterable[str]]) -> bool:
        """Log ``event``; ``existing`` lists the segment names on disk (for compaction)."""
        self.events.append(event)
        return self._append(log_line(event), existing)

    def append_segment(self, span: SegmentSpan, existing: Callable[[], Iterable[str]]) -> bool:
        """Log a finalized segment's span."""
        self.spans[span.name] = span
        return self._append(log_line(span), existing)

    # --- internals ----------------------------------------------------------

    def _truncate_torn_tail(self) -> None:
        """A crash can leave the last line without its newline: cut it off before appending."""
        try:
            with open(self.path, "rb+") as f:
                size = f.seek(0, os.SEEK_END)
                if size == 0:
                    return
                f.seek(max(0, size - 65536))
                tail = f.read()
                if tail.endswith(b"\n"):
                    return
                cut = tail.rfind(b"\n")
                keep = size - len(tail) + cut + 1 if cut >= 0 else 0
                f.truncate(keep)
                os.fsync(f.fileno())
                _log.warning("event log %s: cut a torn last line (%d bytes)", self.path,
                             size - keep)  # fmt: skip
        except FileNotFoundError:
            return
        except OSError as exc:
            _log.error("event log %s: cannot check its end: %s", self.path, exc)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _append(self, line: bytes, existing: Callable[[], Iterable[str]]) -> bool:
        try:
            if self._size() + len(line) > self.max_bytes:
                names = frozenset(existing())
                if names != self._compacted_for:  # nothing new to drop otherwise
                    self._compact(names)
                if self._size() + len(line) > self.max_bytes:
                    self.errors += 1
                    if not self._full_logged:
                        _log.error(
                            "event log %s is full (%d bytes, limit %d) even after compaction: "
                            "events are still written into their segments but not logged",
                            self.path, self._size(), self.max_bytes,
                        )  # fmt: skip
                        self._full_logged = True
                    return False
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._full_logged = False
            return True
        except OSError as exc:
            self.errors += 1
            _log.error("event log %s: append failed: %s", self.path, exc)
            return False

    def _compact(self, existing: frozenset[str]) -> None:
        """Keep what still matters: events protecting a segment on disk, and those spans.

        The newest span is always kept, and so is every event whose window
        reaches past it (a post window still open, an event not yet written).
        """
        self._compacted_for = existing
        latest = max((s.end_ns for s in self.spans.values()), default=0)
        spans = {n: s for n, s in self.spans.items() if n in existing or s.end_ns >= latest}
        protects = protection(self.events, spans.values())
        keep_ids = {id(e) for evs in protects.values() for e in evs}
        events = [e for e in self.events if id(e) in keep_ids or e.end_ns >= latest]
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                for s in spans.values():
                    f.write(log_line(s))
                for e in events:
                    f.write(log_line(e))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            _log.error("event log %s: compaction failed: %s", self.path, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        dropped = len(self.events) - len(events)
        self.events, self.spans = events, spans
        self.compactions += 1
        _log.warning("event log %s compacted: %d event(s) whose segments are gone dropped",
                     self.path, dropped)  # fmt: skip
