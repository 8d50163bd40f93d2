"""Ingest core: decoded frames, topic routing, drop accounting. Sans-IO.

The transports (:mod:`~hyperframes.recorder.ingest.zmq`,
:mod:`~hyperframes.recorder.ingest.mqtt`) only move bytes: they hand each
received message to a :class:`FrameRouter`, which checks it against the wire
protocol (:mod:`~hyperframes.recorder.ingest.wire`), maps its topic to a
stream, counts it (or the reason it was rejected, per stream and reason, in
the :class:`~hyperframes.recorder.metrics.RecorderStats`), notices sequence
gaps and returns an :class:`IngestFrame` for the daemon's queue. Nothing here
blocks or reads a socket, so it is tested directly.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from hyperframes.format.crc import BytesLike
from hyperframes.recorder.config import StreamConfig
from hyperframes.recorder.ingest.sequence import SeqTracker, SeqVerdict
from hyperframes.recorder.ingest.wire import (
    WireError,
    WireFlags,
    WireHeader,
    decode_message,
    decode_multipart,
)
from hyperframes.recorder.metrics import DropReason, RecorderStats

__all__ = [
    "IngestFrame",
    "FrameRouter",
    "Backoff",
    "RateLimitedLog",
    "UNKNOWN_TOPIC",
    "INGEST_FLAGS",
    "EventReceiver",
]

_log = logging.getLogger(__name__)

UNKNOWN_TOPIC: Final = DropReason.UNKNOWN_TOPIC
"""Drop reason (unattributed) for a well-formed message on a topic of no stream."""

INGEST_FLAGS: Final = int(WireFlags.KEYFRAME | WireFlags.HW_TIMESTAMP)
"""Wire flag bits that go into the file (same positions as the index flags)."""


@dataclass(frozen=True, slots=True)
class IngestFrame:
    """One received frame on its way to the windowing engine and the writer."""

    stream_id: int
    timestamp_ns: int
    payload: memoryview
    flags: int  # KEYFRAME / HW_TIMESTAMP as sent
    seq: int
    receive_ns: int  # host wall clock at receive (time.time_ns)
    duration_ns: int = 0

    @property
    def size(self) -> int:
        """Payload size in bytes."""
        return self.payload.nbytes


class RateLimitedLog:
    """Log at most ``lines`` lines per ``period_s`` per key; counts what it held back."""

    def __init__(self, logger: logging.Logger, period_s: float = 10.0, lines: int = 1) -> None:
        self._logger = logger
        self._period = period_s
        self._lines = lines
        # key -> (start of its period, lines logged in it, lines held back since the last)
        self._last: dict[tuple[str, str], tuple[float, int, int]] = {}

    def warning(self, key: tuple[str, str], msg: str, *args: object) -> None:
        """Log ``msg`` for ``key`` unless its lines of this period are spent."""
        self.log(logging.WARNING, key, msg, *args)

    def log(self, level: int, key: tuple[str, str], msg: str, *args: object) -> None:
        """Log ``msg`` at ``level`` for ``key``, at most ``lines`` times per ``period_s``."""
        now = time.monotonic()
        start, logged, held = self._last.get(key, (-1e18, 0, 0))
        if now - start >= self._period:
            start, logged = now, 0
        if logged >= self._lines:
            self._last[key] = (start, logged, held + 1)
            return
        self._last[key] = (start, logged + 1, 0)
        suffix = f" (+{held} more since last report)" if held else ""
        self._logger.log(level, msg + suffix, *args)


class EventReceiver(Protocol):
    """Where a router hands event messages (:class:`~.events.intake.EventIntake`)."""

    def from_wire(self, header: WireHeader, body: memoryview, mono_ns: int, source: str) -> None:
        """An event message that passed the wire checks."""

    def malformed(self, source: str, problem: str) -> None:
        """An event message that did not."""

    def duplicate(self, source: str) -> None:
        """An exact re-send of an event message."""


class FrameRouter:
    """Turns raw messages into :class:`IngestFrame` objects and counts everything.

    ``streams`` are the streams of one transport; messages on other topics are
    dropped as ``unknown-topic``. Malformed messages are counted per stream
    (or unattributed) under their :data:`hyperframes.recorder.ingest.wire.REASONS` label and
    logged, rate-limited per (stream, reason). Sequence numbers follow
    :mod:`hyperframes.recorder.ingest.sequence`: a number that never arrives (within 1024
    numbers or 5 s) is counted as a ``sequence-gap`` drop, an exact re-send
    (same seq and timestamp) is dropped as ``duplicate``, and a restarted
    counter starts tracking afresh.
    """

    def __init__(
        self,
        streams: Iterable[StreamConfig],
        stats: RecorderStats,
        max_payload: int,
        *,
        log_period_s: float = 10.0,
    ) -> None:
        self._by_topic: dict[bytes, StreamConfig] = {}
        for s in streams:
            self._by_topic[s.topic.encode()] = s
            stats.add_stream(s.id, s.name)
        self._stats = stats
        self._max_payload = max_payload
        self._seq: dict[int, SeqTracker] = {}
        self._names = {s.id: s.name for s in self._by_topic.values()}
        self._log = RateLimitedLog(_log, log_period_s)
        self._event_topic: bytes | None = None
        self._events: EventReceiver | None = None
        self._event_seq = SeqTracker()
        self._source = ""

    def attach_events(self, topic: str, receiver: EventReceiver, source: str) -> None:
        """Route messages on ``topic`` to ``receiver`` as events (docs/INGEST.md, "Events")."""
        self._event_topic, self._events, self._source = topic.encode(), receiver, source

    @property
    def topics(self) -> list[str]:
        """The topics routed, in config order (the event topic last, when attached)."""
        names = [t.decode() for t in self._by_topic]
        return names if self._event_topic is None else [*names, self._event_topic.decode()]

    @property
    def extra_topics(self) -> list[str]:
        """Topics routed that are no stream's (the event topic)."""
        return [] if self._event_topic is None else [self._event_topic.decode()]

    def stream_for(self, topic: bytes) -> StreamConfig | None:
        """The stream of ``topic``, or ``None``."""
        return self._by_topic.get(topic)

    def zmq(self, parts: Sequence[BytesLike], receive_ns: int) -> IngestFrame | None:
        """A ZMQ multipart message ``[topic, header, payload]``; ``None`` if dropped."""
        topic = bytes(parts[0]) if parts else b""
        stream = self._by_topic.get(topic)
        if stream is None and topic == self._event_topic:
            self._event(lambda: decode_multipart(parts, self._max_payload)[1:], receive_ns)
            return None
        try:
            _, header, payload = decode_multipart(parts, self._max_payload)
        except WireError as exc:
            self._reject(stream, topic, exc)
            return None
        if stream is None:
            self._unknown(topic)
            return None
        return self._accept(stream, header.timestamp_ns, header.seq, header.flags,
                            header.duration_ns, payload, receive_ns)  # fmt: skip

    def mqtt(self, topic: str, body: BytesLike, receive_ns: int) -> IngestFrame | None:
        """An MQTT message body ``header + payload``; ``None`` if dropped."""
        raw_topic = topic.encode()
        stream = self._by_topic.get(raw_topic)
        if stream is None and raw_topic == self._event_topic:
            self._event(lambda: decode_message(body, self._max_payload), receive_ns)
            return None
        try:
            header, payload = decode_message(body, self._max_payload)
        except WireError as exc:
            self._reject(stream, raw_topic, exc)
            return None
        if stream is None:
            self._unknown(raw_topic)
            return None
        return self._accept(stream, header.timestamp_ns, header.seq, header.flags,
                            header.duration_ns, payload, receive_ns)  # fmt: skip

    def expire(self, now_ns: int) -> None:
        """Count sequence gaps that have waited past the horizon (call now and then)."""
        for sid, tracker in self._seq.items():
            self._count_lost(sid, tracker.expire(now_ns))

    def flush(self) -> None:
        """Count every open sequence gap as lost (shutdown)."""
        for sid, tracker in self._seq.items():
            self._count_lost(sid, tracker.flush())

    # --- internals ----------------------------------------------------------

    def _event(self, decode: Callable[[], tuple[WireHeader, memoryview]], receive_ns: int) -> None:
        receiver = self._events
        assert receiver is not None
        try:
            header, body = decode()
        except WireError as exc:
            receiver.malformed(self._source, f"{exc.reason}: {exc}")
            return
        verdict = self._event_seq.observe(header.seq, header.timestamp_ns, receive_ns).verdict
        if verdict is SeqVerdict.DUPLICATE:
            receiver.duplicate(self._source)
            return
        receiver.from_wire(header, body, time.monotonic_ns(), self._source)

    def _count_lost(self, stream_id: int, lost: int) -> None:
        if not lost:
            return
        self._stats.streams[stream_id].record_drop(DropReason.SEQUENCE_GAP, lost)
        name = self._names[stream_id]
        self._log.warning(
            (name, "seq-gap"), "stream %s: %d sequence numbers never arrived "
            "(frames lost before the recorder)", name, lost,
        )  # fmt: skip

    def _accept(
        self,
        stream: StreamConfig,
        timestamp_ns: int,
        seq: int,
        flags: int,
        duration_ns: int,
        payload: memoryview,
        receive_ns: int,
    ) -> IngestFrame | None:
        sid = stream.id
        counters = self._stats.streams[sid]
        tracker = self._seq.get(sid)
        if tracker is None:
            tracker = self._seq[sid] = SeqTracker()
        result = tracker.observe(seq, timestamp_ns, receive_ns)
        self._count_lost(sid, result.lost)
        if result.verdict is SeqVerdict.DUPLICATE:
            counters.record_drop(DropReason.DUPLICATE)
            self._log.warning(
                (stream.name, DropReason.DUPLICATE), "stream %s: dropped a duplicate of seq %d "
                "(t=%d ns), already received", stream.name, seq, timestamp_ns,
            )  # fmt: skip
            return None
        if result.verdict is SeqVerdict.RESTART:
            self._log.warning(
                (stream.name, "seq-restart"), "stream %s: seq went back to %d with newer data: "
                "the sender restarted its numbering", stream.name, seq,
            )  # fmt: skip
        counters.record_frame(payload.nbytes)
        return IngestFrame(
            sid, timestamp_ns, payload, flags & INGEST_FLAGS, seq, receive_ns, duration_ns
        )

    def _reject(self, stream: StreamConfig | None, topic: bytes, exc: WireError) -> None:
        if stream is None:
            self._stats.record_drop(exc.reason)
            name = "unknown"
        else:
            self._stats.streams[stream.id].record_drop(exc.reason)
            name = stream.name
        self._log.warning(
            (name, exc.reason), "dropped a malformed message on %r (stream %s): %s",
            topic, name, exc,
        )  # fmt: skip

    def _unknown(self, topic: bytes) -> None:
        self._stats.record_drop(UNKNOWN_TOPIC)
        self._log.warning(
            ("unknown", UNKNOWN_TOPIC), "dropped a message on unknown topic %r", topic
        )


class Backoff:
    """Exponential backoff ``initial * 2**n`` capped at ``maximum``, jittered in its upper half."""

    def __init__(
        self, initial: float = 0.5, maximum: float = 30.0, rng: random.Random | None = None
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(f"need 0 < initial <= maximum, got {initial}, {maximum}")
        self.initial = initial
        self.maximum = maximum
        self._attempt = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        """The delay before the next attempt, in seconds."""
        cap = min(self.maximum, self.initial * (2**self._attempt))
        self._attempt = min(self._attempt + 1, 62)
        return self._rng.uniform(cap / 2, cap)

    def reset(self) -> None:
        """Start over after a success."""
        self._attempt = 0
