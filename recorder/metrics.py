"""Live recorder counters, a one-line summary for ``STATUS=``, an optional Prometheus endpoint.

The daemon owns one :class:`RecorderStats` holding a :class:`StreamCounters`
per stream and updates plain attributes as frames arrive, are dropped or are
written. Nothing here does I/O except :func:`start_prometheus_exporter`, whose
collector reads the same objects at scrape time (no second set of counters).

Threading: each field has one writer (the event loop for ingest counters, the
writer thread for stored bytes and segments); readers (the status line, a
scrape on the exporter's thread) only read ints and copy dicts, which is safe
under the GIL.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hyperframes._install import install_hint
from hyperframes.recorder.events.stats import EventStats, event_families

__all__ = [
    "DropReason",
    "LiveStats",
    "StreamCounters",
    "RecorderStats",
    "PrometheusExporter",
    "MetricsUnavailableError",
    "start_prometheus_exporter",
]

_INSTALL_HINT = install_hint("recorder")


class DropReason(enum.StrEnum):
    """Why a frame was not written; the ``reason`` label of the drop counters.

    Any string is accepted as a reason; these are the ones the daemon adds to
    the malformed-message reasons of :data:`hyperframes.recorder.ingest.wire.REASONS`
    (``bad-magic``, ``truncated``, ``oversized``, ...), in the same spelling.
    """

    QUEUE_FULL = "queue-full"
    """A bounded queue between ingest and writer was full."""
    UNKNOWN_TOPIC = "unknown-topic"
    """Message on a topic no stream is configured for."""
    DISK_FULL = "disk-full"
    """Recording stopped by the disk policy."""
    SEQUENCE_GAP = "sequence-gap"
    """Frames the sensor numbered but never delivered (seen as a sequence gap)."""
    DUPLICATE = "duplicate"
    """An exact re-send (same stream, seq and timestamp): not stored twice, and no data lost."""
    WRITE_ERROR = "write-error"
    """The segment file could not be written (I/O error); the segment was aborted."""
    SHUTDOWN = "shutdown"
    """Received but not written because shutdown ran out of time."""


@dataclass(slots=True)
class StreamCounters:
    """Live counters of one stream; counters only grow, gauges are set.

    ``bytes_in`` counts payload bytes received; ``stored_raw_bytes`` and
    ``stored_bytes`` count payload bytes handed to the codec and what it wrote,
    so :attr:`compression_ratio` covers exactly the frames written.
    """

    stream_id: int
    name: str
    frames: int = 0
    bytes_in: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    late: int = 0
    quarantined: int = 0
    stale: bool = False
    stale_events: int = 0
    queue_depth: int = 0
    frames_written: int = 0
    stored_raw_bytes: int = 0
    stored_bytes: int = 0

    def record_frame(self, nbytes: int) -> None:
        """Count one received frame of ``nbytes`` payload bytes."""
        self.frames += 1
        self.bytes_in += nbytes

    def record_drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` frames dropped for ``reason`` (see :class:`DropReason`)."""
        key = str(reason)
        self.drops[key] = self.drops.get(key, 0) + count

    def record_stored(self, raw_bytes: int, stored_bytes: int, frames: int = 1) -> None:
        """Count frames written: ``raw_bytes`` before the codec, ``stored_bytes`` after."""
        self.frames_written += frames
        self.stored_raw_bytes += raw_bytes
        self.stored_bytes += stored_bytes

    def set_stale(self, stale: bool) -> None:
        """Mark the stream stale (no frames within the grace period) or live again."""
        if stale and not self.stale:
            self.stale_events += 1
        self.stale = stale

    @property
    def dropped(self) -> int:
        """Frames lost, whatever the reason (duplicates are not lost data: not counted)."""
        return sum(n for r, n in dict(self.drops).items() if r != DropReason.DUPLICATE)

    @property
    def duplicates(self) -> int:
        """Exact re-sends that were dropped."""
        return self.drops.get(DropReason.DUPLICATE, 0)

    @property
    def compression_ratio(self) -> float | None:
        """Raw over stored bytes of the frames written (2.6 means 2.6:1); ``None`` before any."""
        if self.stored_bytes <= 0:
            return None
        return self.stored_raw_bytes / self.stored_bytes


@dataclass(slots=True)
class LiveStats:
    """Counters of the live view (``live:``): what went to the Foxglove server, what did not.

    ``dropped`` is by reason: ``queue_full`` (the bounded hand-off was full: the
    live thread is behind), ``rate_cap`` (over the stream's ``max_hz``). Counted
    on the event loop; ``sent`` and the rest on the live thread. A drop here
    costs the viewer a frame, never the recording.
    """

    sent: int = 0
    """Frames handed to the server (each to every subscribed client)."""
    sent_by_stream: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    events_sent: int = 0
    status_sent: int = 0
    publish_errors: int = 0
    clients: int = 0
    """Clients subscribed to at least one channel (a gauge, updated once a second)."""

    def drop(self, reason: str) -> None:
        """Count one live copy not sent for ``reason``."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    @property
    def dropped_total(self) -> int:
        """Live copies not sent, every reason."""
        return sum(dict(self.dropped).values())


@dataclass(frozen=True, slots=True)
class _Sample:
    t: float
    frames: int
    bytes_in: int


@dataclass(slots=True)
class RecorderStats:
    """Every live counter of one recorder: per-stream counters plus daemon-wide ones.

    ``drops`` holds messages that cannot be attributed to a stream (unknown
    topic, unreadable header); ``disk_free_bytes`` is ``None`` until measured;
    ``recording`` goes ``False`` when the disk policy stops the recording.
    """

    vehicle: str = ""
    streams: dict[int, StreamCounters] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    windows_closed: int = 0
    incomplete_windows: int = 0
    segments_written: int = 0
    segments_deleted: int = 0
    segments_recovered: int = 0
    segments_damaged: int = 0
    clock_reanchors: int = 0
    mqtt_sessions_lost: int = 0
    mqtt_connected: dict[str, bool] = field(default_factory=dict)
    """Per MQTT broker (``host:port``): connected and subscribed now."""
    mqtt_problem: dict[str, str] = field(default_factory=dict)
    """Per MQTT broker: why the last connection attempt failed (short), while not connected."""
    mqtt_auth_failures: dict[str, int] = field(default_factory=dict)
    """Per MQTT broker: connections refused for a bad username or password, or not authorised."""
    zmq_events: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per ZMQ socket: peers ``disconnected``, ``auth-failed`` (CURVE), ``handshake-failed``,
    ``over-limit`` (shut down for ``zmq.max_connections``)."""
    write_queue_depth: int = 0
    disk_free_bytes: int | None = None
    recording: bool = True
    events: EventStats = field(default_factory=EventStats)
    live: LiveStats | None = None
    """The live view's counters (``None`` while ``live`` is off)."""
    started_monotonic: float = field(default_factory=time.monotonic)
    _last: _Sample | None = field(default=None, init=False, repr=False, compare=False)

    def add_stream(self, stream_id: int, name: str) -> StreamCounters:
        """Register a stream (or return the one already registered under ``stream_id``)."""
        counters = self.streams.get(stream_id)
        if counters is None:
            counters = StreamCounters(stream_id=stream_id, name=name)
            self.streams[stream_id] = counters
        return counters

    def record_drop(self, reason: str, count: int = 1) -> None:
        """Count messages dropped before they could be attributed to a stream."""
        key = str(reason)
        self.drops[key] = self.drops.get(key, 0) + count

    def iter_streams(self) -> Iterator[StreamCounters]:
        """The streams in id order (a snapshot of the registry, safe while it grows)."""
        return iter(sorted(self.streams.values(), key=lambda s: s.stream_id))

    @property
    def frames(self) -> int:
        """Frames received over all streams."""
        return sum(s.frames for s in self.iter_streams())

    @property
    def bytes_in(self) -> int:
        """Payload bytes received over all streams."""
        return sum(s.bytes_in for s in self.iter_streams())

    @property
    def dropped(self) -> int:
        """Every dropped frame or message, per stream and unattributed."""
        return sum(s.dropped for s in self.iter_streams()) + sum(dict(self.drops).values())

    @property
    def compression_ratio(self) -> float | None:
        """Raw over stored bytes over all streams; ``None`` before anything was written."""
        stored = sum(s.stored_bytes for s in self.iter_streams())
        if stored <= 0:
            return None
        return sum(s.stored_raw_bytes for s in self.iter_streams()) / stored

    def status_line(self, now: float | None = None) -> str:
        """One line for ``STATUS=`` / ``systemctl status`` with live rates.

        Rates are over the time since the previous call (since start on the
        first), so call it at a steady period. ``now`` is a
        :func:`time.monotonic` value, for tests.
        """
        t = time.monotonic() if now is None else now
        streams = list(self.iter_streams())
        frames = sum(s.frames for s in streams)
        bytes_in = sum(s.bytes_in for s in streams)
        last = self._last or _Sample(self.started_monotonic, 0, 0)
        self._last = _Sample(t, frames, bytes_in)
        dt = t - last.t
        fps = (frames - last.frames) / dt if dt > 0 else 0.0
        mbps = (bytes_in - last.bytes_in) / dt / 1e6 if dt > 0 else 0.0

        parts = [
            "recording" if self.recording else "STOPPED",
            *(
                f"MQTT {broker} NOT CONNECTED ({self.mqtt_problem.get(broker, 'connecting')})"
                for broker, up in sorted(dict(self.mqtt_connected).items())
                if not up
            ),
            f"{len(streams)} streams",
            f"{fps:.0f} frames/s",
            f"{mbps:.1f} MB/s",
        ]
        ratio = self.compression_ratio
        if ratio is not None:
            parts.append(f"ratio {ratio:.2f}:1")
        parts.append(f"dropped {self.dropped}")
        duplicates = sum(s.duplicates for s in streams)
        if duplicates:
            parts.append(f"duplicates {duplicates}")
        late = sum(s.late for s in streams)
        quarantined = sum(s.quarantined for s in streams)
        if late:
            parts.append(f"late {late}")
        if quarantined:
            parts.append(f"quarantined {quarantined}")
        stale = [s.name for s in streams if s.stale]
        if stale:
            parts.append("stale " + ",".join(stale))
        parts.append(f"segments {self.segments_written}")
        if self.disk_free_bytes is not None:
            parts.append(f"disk free {_human_bytes(self.disk_free_bytes)}")
        return ", ".join(parts)


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


class MetricsUnavailableError(ImportError):
    """prometheus-client is not installed but the Prometheus endpoint was asked for."""

    def __init__(self) -> None:
        super().__init__(
            f"the Prometheus endpoint needs prometheus-client: {_INSTALL_HINT}",
            name="prometheus_client",
        )


def _collect(stats: RecorderStats) -> Iterable[Any]:
    """Build the metric families from ``stats``; runs on the exporter's thread per scrape."""
    from prometheus_client.core import (  # noqa: PLC0415 - optional dependency
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    streams = list(stats.iter_streams())
    labels = ["stream"]

    def counter(name: str, doc: str, attr: str) -> Any:
        fam = CounterMetricFamily(f"hyperframes_stream_{name}", doc, labels=labels)
        for s in streams:
            fam.add_metric([s.name], float(getattr(s, attr)))
        return fam

    def gauge(name: str, doc: str, attr: str) -> Any:
        fam = GaugeMetricFamily(f"hyperframes_stream_{name}", doc, labels=labels)
        for s in streams:
            value = getattr(s, attr)
            if value is not None:
                fam.add_metric([s.name], float(value))
        return fam

    yield counter("frames", "Frames received.", "frames")
    yield counter("received_bytes", "Payload bytes received.", "bytes_in")
    yield counter("late_frames", "Frames that arrived after their window closed.", "late")
    yield counter("quarantined_frames", "Frames with an implausible timestamp jump.", "quarantined")
    yield counter("stale_events", "Times the stream went stale.", "stale_events")
    yield counter("written_frames", "Frames written to segments.", "frames_written")
    yield counter("stored_raw_bytes", "Payload bytes handed to the codec.", "stored_raw_bytes")
    yield counter("stored_bytes", "Payload bytes written after compression.", "stored_bytes")
    yield gauge("stale", "1 while the stream delivers nothing within the grace period.", "stale")
    yield gauge("queue_depth", "Frames queued for the stream.", "queue_depth")
    yield gauge("compression_ratio", "Raw over stored payload bytes written.", "compression_ratio")

    drops = CounterMetricFamily(
        "hyperframes_stream_dropped_frames",
        "Frames dropped, by reason.",
        labels=[*labels, "reason"],
    )
    for s in streams:
        for reason, count in sorted(dict(s.drops).items()):
            drops.add_metric([s.name, reason], float(count))
    yield drops

    unattributed = CounterMetricFamily(
        "hyperframes_dropped_messages",
        "Messages dropped before they could be attributed to a stream, by reason.",
        labels=["reason"],
    )
    for reason, count in sorted(dict(stats.drops).items()):
        unattributed.add_metric([reason], float(count))
    yield unattributed

    yield CounterMetricFamily(
        "hyperframes_windows_closed", "Hyperframe windows closed.", value=stats.windows_closed
    )
    yield CounterMetricFamily(
        "hyperframes_incomplete_windows",
        "Windows closed with at least one stream missing.",
        value=stats.incomplete_windows,
    )
    yield CounterMetricFamily(
        "hyperframes_segments_written", "Segments finalized.", value=stats.segments_written
    )
    yield CounterMetricFamily(
        "hyperframes_segments_deleted",
        "Old segments deleted by the disk policy.",
        value=stats.segments_deleted,
    )
    yield CounterMetricFamily(
        "hyperframes_segments_recovered",
        "Segments left unfinalized by a crash and recovered at start.",
        value=stats.segments_recovered,
    )
    yield CounterMetricFamily(
        "hyperframes_segments_damaged",
        "Unfinalized segments with nothing recoverable, moved to damaged/ at start.",
        value=stats.segments_damaged,
    )
    yield CounterMetricFamily(
        "hyperframes_clock_reanchors",
        "Times every sensor clock moved at once and the recorder re-anchored on it.",
        value=stats.clock_reanchors,
    )
    yield CounterMetricFamily(
        "hyperframes_mqtt_sessions_lost",
        "MQTT reconnects where the broker had lost the session (queued QoS 1 frames lost).",
        value=stats.mqtt_sessions_lost,
    )
    up = GaugeMetricFamily(
        "hyperframes_mqtt_connected",
        "1 while connected and subscribed to the MQTT broker.",
        labels=["broker"],
    )
    refused = CounterMetricFamily(
        "hyperframes_mqtt_auth_failures",
        "MQTT connections refused: bad username or password, or not authorised.",
        labels=["broker"],
    )
    for broker, connected in sorted(dict(stats.mqtt_connected).items()):
        up.add_metric([broker], float(connected))
        refused.add_metric([broker], float(stats.mqtt_auth_failures.get(broker, 0)))
    yield up
    yield refused
    zmq = CounterMetricFamily(
        "hyperframes_zmq_peer_events",
        "ZMQ peer events by socket: disconnected (also a message over max_payload_mb), "
        "auth-failed (a CURVE key not allowed), handshake-failed, over-limit (a connection "
        "shut down for zmq.max_connections).",
        labels=["socket", "event"],
    )
    for sock, events in sorted(dict(stats.zmq_events).items()):
        for event, count in sorted(dict(events).items()):
            zmq.add_metric([sock, event], float(count))
    yield zmq
    yield GaugeMetricFamily(
        "hyperframes_write_queue_depth",
        "Closed windows waiting for the writer.",
        value=stats.write_queue_depth,
    )
    yield GaugeMetricFamily(
        "hyperframes_recording", "1 while recording, 0 once stopped.", value=int(stats.recording)
    )
    yield from event_families(stats.events)
    if stats.live is not None:
        yield from _live_families(stats.live)
    if stats.disk_free_bytes is not None:
        yield GaugeMetricFamily(
            "hyperframes_disk_free_bytes",
            "Free bytes on the data directory's filesystem.",
            value=stats.disk_free_bytes,
        )


def _live_families(live: LiveStats) -> Iterable[Any]:
    from prometheus_client.core import (  # noqa: PLC0415 - optional dependency
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    sent = CounterMetricFamily(
        "hyperframes_live_sent_frames", "Frames sent to the live view, by stream.",
        labels=["stream"],
    )  # fmt: skip
    for name, n in sorted(dict(live.sent_by_stream).items()):
        sent.add_metric([name], float(n))
    yield sent
    dropped = CounterMetricFamily(
        "hyperframes_live_dropped_frames",
        "Live copies of frames not sent (the recording keeps them), by reason: queue_full, "
        "rate_cap.",
        labels=["reason"],
    )
    for reason, n in sorted(dict(live.dropped).items()):
        dropped.add_metric([reason], float(n))
    yield dropped
    yield CounterMetricFamily(
        "hyperframes_live_events_sent", "Events sent to the live view.", value=live.events_sent
    )
    yield CounterMetricFamily(
        "hyperframes_live_publish_errors",
        "Live messages the server failed to encode or send.",
        value=live.publish_errors,
    )
    yield GaugeMetricFamily(
        "hyperframes_live_clients", "Live view clients subscribed to a channel.",
        value=live.clients,
    )  # fmt: skip


class _StatsCollector:
    """A prometheus-client custom collector: ``collect(source)`` at every scrape."""

    def __init__(self, source: Any, collect: Any = None) -> None:
        self._source = source
        self._collect = collect or _collect

    def collect(self) -> Iterable[Any]:
        result: Iterable[Any] = self._collect(self._source)
        return result

    def describe(self) -> list[Any]:
        # An empty description keeps registration from calling collect() early.
        return []


class PrometheusExporter:
    """A running ``/metrics`` HTTP endpoint; stop it with :meth:`close` or ``with``."""

    def __init__(self, server: Any, thread: Any, registry: Any) -> None:
        self._server = server
        self._thread = thread
        self.registry = registry
        """The prometheus-client ``CollectorRegistry`` served (recorder, process, platform)."""

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``; the port is the real one when 0 was asked for."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The scrape URL, ``http://host:port/metrics``."""
        host, port = self.address
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        """Stop serving and wait for the server thread.

        The server loop checks for shutdown every 0.5 s (prometheus-client's
        default poll interval); a connection of ours wakes it at once, so that
        stopping the daemon does not wait for that poll.
        """
        stopper = threading.Thread(target=self._server.shutdown, name="hf-metrics-stop")
        stopper.start()
        host, port = self.address
        if host in ("0.0.0.0", "::", ""):
            host = "::1" if ":" in host else "127.0.0.1"
        while stopper.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection((host, port), timeout=0.2).close()
            stopper.join(0.02)
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> PrometheusExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_prometheus_exporter(
    stats: Any, port: int = 9108, host: str = "127.0.0.1", collect: Any = None
) -> PrometheusExporter:
    """Serve ``stats`` at ``http://host:port/metrics`` on a daemon thread.

    Off unless the daemon calls this (the config enables it); bound to
    loopback by default so that nothing is reachable from the vehicle network
    unless configured. ``port=0`` picks a free port (see
    :attr:`PrometheusExporter.address`). Uses its own registry, so several
    exporters can live in one process (tests). Raises
    :class:`MetricsUnavailableError` when prometheus-client is missing.
    ``collect(stats)`` builds the metric families (default: the recorder's, for a
    :class:`RecorderStats`; the uploader passes its own).
    """
    try:
        from prometheus_client import (  # noqa: PLC0415 - optional dependency
            CollectorRegistry,
            PlatformCollector,
            ProcessCollector,
            start_http_server,
        )
    except ImportError as exc:
        raise MetricsUnavailableError() from exc

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StatsCollector(stats, collect))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    server, thread = start_http_server(port, addr=host, registry=registry)
    return PrometheusExporter(server, thread, registry)
