"""The durable event log of an output directory: append-only JSON Lines, fsynced, bounded.

Format and reading: :mod:`hyperframes.events` (``events.jsonl``). This is the
writing side, used on the recorder's writer thread only. Every append is
written and fsynced before it returns (an event survives a power loss as soon
as it is logged).

Bounds (docs/OPERATIONS.md, "Events and retention"): the log holds at most
``max_bytes`` and ``max_events`` events, and the events in memory are exactly
the events in the log, so both bound memory too. Events may fill 7/8 of
``max_bytes``; the rest is kept for segment spans. Events from peers
(:data:`PEER_SOURCES`: anyone who may publish) may fill half of that and half
of ``max_events``, so a flood of them never leaves the owner's ``mark`` and
the rules without room. An append that would pass a bound first compacts the
log once (events that still protect a segment on disk, or whose window is
still open, and the spans of segments still on disk, written to a new file
and renamed over it); if it still does not fit, the event is refused and
counted (``refused``): it is still written into its segment, but protects
nothing. A failing or full log never stops the recording.

Every file here is created owner-only and never through a link (O_NOFOLLOW;
compaction with :func:`~hyperframes.storage.local.write_atomic`), whatever the
umask: the log says what is protected, so no group member may rewrite it.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from hyperframes.events import (
    EVENT_LOG_NAME,
    Event,
    EventLog,
    SegmentSpan,
    log_line,
    protection,
    read_event_log,
)
from hyperframes.storage.local import write_atomic

__all__ = ["EventLogWriter", "LOG_MODE", "PEER_SOURCES"]

_log = logging.getLogger(__name__)

PEER_SOURCES: Final = frozenset({"zmq", "mqtt"})
"""Where events come from peers (anyone allowed to publish), not from the recorder's owner."""
LOG_MODE: Final = 0o640
"""The event log's mode: the owner writes, the group (the upload service) reads."""
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_TAIL_CHUNK = 1 << 16


class EventLogWriter:
    """Appends events and segment spans to ``DIR/events.jsonl``; never raises from appends."""

    def __init__(
        self, directory: str | os.PathLike[str], max_bytes: int, max_events: int = 20_000
    ) -> None:
        self.dir = Path(directory)
        self.path = self.dir / EVENT_LOG_NAME
        self.max_bytes = max_bytes
        self.max_events = max_events
        self.errors = 0
        """Appends that failed (I/O error) or were refused (log full)."""
        self.refused = 0
        """Events refused because the log was full even after compaction."""
        self.compactions = 0
        self._full_logged = False
        self._compacted_for: frozenset[str] | None = None
        self._size = 0
        self._peer_bytes = 0
        self._peer_events = 0
        self._repair()
        loaded = read_event_log(self.dir)
        self.events: list[Event] = list(loaded.events)
        self.spans: dict[str, SegmentSpan] = dict(loaded.segments)
        self._size = self._file_size()
        self._count_peers()
        if loaded.bad_lines:
            _log.warning("event log %s: %d unreadable line(s) skipped", self.path,
                         loaded.bad_lines)  # fmt: skip

    def load(self) -> EventLog:
        """What the log holds now (in memory, as appended)."""
        return EventLog(tuple(self.events), dict(self.spans))

    def append_event(self, event: Event, existing: Callable[[], Iterable[str]]) -> bool:
        """Log ``event``; ``existing`` lists the segment names on disk (for compaction).

        False when it was not logged (an I/O error, or the log is full): it is
        then not held in memory either, and protects nothing.
        """
        line = log_line(event)
        event_room = self.max_bytes - self.max_bytes // 8
        peer = event.source in PEER_SOURCES
        if not self._fits(len(line), event_room, 1, existing, peer=peer):
            self.refused += 1
            self._refused(len(line))
            return False
        if not self._write(line):
            return False
        self.events.append(event)
        if peer:
            self._peer_bytes += len(line)
            self._peer_events += 1
        return True

    def append_segment(self, span: SegmentSpan, existing: Callable[[], Iterable[str]]) -> bool:
        """Log a finalized segment's span (held in memory even when the log is full)."""
        self.spans[span.name] = span
        line = log_line(span)
        if not self._fits(len(line), self.max_bytes, 0, existing):
            self._refused(len(line))
            return False
        return self._write(line)

    # --- internals ----------------------------------------------------------

    def _repair(self) -> None:
        """Before the first append: the log is no link, only its owner may write it, and a
        line a crash cut short is cut off."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            _log.error("event log %s: cannot open it (%s): appends will fail", self.path, exc)
            return
        try:
            self._tighten(fd)
            self._cut_torn_tail(fd)
        except OSError as exc:
            _log.error("event log %s: cannot check it: %s", self.path, exc)
        finally:
            os.close(fd)

    def _tighten(self, fd: int) -> None:
        """Older versions' compaction left the log group-writable under the unit's umask."""
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISREG(st.st_mode) and mode & 0o022 and st.st_uid == os.geteuid():
            os.fchmod(fd, mode & ~0o022)
            _log.warning("event log %s was writable by others (mode %o): made %o",
                         self.path, mode, mode & ~0o022)  # fmt: skip

    def _cut_torn_tail(self, fd: int) -> None:
        """A crash can leave the last line without its newline: cut it off before appending.

        The cut goes back to the last newline however far that is (a stored
        event is up to :data:`~hyperframes.events.MAX_LOG_LINE` long), so
        every complete line before it stays.
        """
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        keep, end = 0, size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            cut = os.pread(fd, end - start, start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        os.ftruncate(fd, keep)
        os.fsync(fd)
        _log.warning("event log %s: cut a torn last line (%d bytes)", self.path, size - keep)

    def _file_size(self) -> int:
        try:
            return self.path.lstat().st_size
        except OSError:
            return 0

    def _fits(
        self,
        n: int,
        room: int,
        new_events: int,
        existing: Callable[[], Iterable[str]],
        *,
        peer: bool = False,
    ) -> bool:
        """Whether ``n`` more bytes (and ``new_events``) fit, compacting once if they do not.

        ``peer``: they also fit in the peers' half of the room and of the count.
        """

        def fits() -> bool:
            if peer and not (
                self._peer_bytes + n <= room // 2 and self._peer_events < self.max_events // 2
            ):
                return False
            return self._size + n <= room and len(self.events) + new_events <= self.max_events

        if fits():
            return True
        try:
            names = frozenset(existing())
        except OSError as exc:
            _log.error("event log %s: cannot list the segments to compact: %s", self.path, exc)
            return False
        if names != self._compacted_for:  # nothing new to drop otherwise
            self._compact(names)
        return fits()

    def _count_peers(self) -> None:
        peers = [e for e in self.events if e.source in PEER_SOURCES]
        self._peer_events = len(peers)
        self._peer_bytes = sum(len(log_line(e)) for e in peers)

    def _refused(self, n: int) -> None:
        self.errors += 1
        if not self._full_logged:
            _log.error(
                "event log %s is full (%d bytes of %d, %d events of %d) even after compaction: "
                "new events are still written into their segments but not logged, and protect "
                "nothing, until segments they protect are deleted",
                self.path, self._size, self.max_bytes, len(self.events), self.max_events,
            )  # fmt: skip
            self._full_logged = True

    def _write(self, line: bytes) -> bool:
        try:
            fd = os.open(self.path, _APPEND, LOG_MODE)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self.errors += 1
            _log.error("event log %s: append failed: %s", self.path, exc)
            self._size = self._file_size()
            return False
        self._size += len(line)
        self._full_logged = False
        return True

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
        data = b"".join([*(log_line(s) for s in spans.values()), *(log_line(e) for e in events)])
        try:
            write_atomic(self.path, data, LOG_MODE)
        except OSError as exc:
            _log.error("event log %s: compaction failed: %s", self.path, exc)
            return
        dropped = len(self.events) - len(events)
        self.events, self.spans, self._size = events, spans, len(data)
        self._count_peers()
        self.compactions += 1
        _log.warning("event log %s compacted: %d event(s) whose segments are gone dropped",
                     self.path, dropped)  # fmt: skip
