"""Event counters of one recorder and their Prometheus families. No I/O.

One writer per field, like :mod:`hyperframes.recorder.metrics`: the event loop counts
what arrives (per source, malformed, quarantined), the writer thread what is
stored, logged and deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EventStats", "event_families"]


@dataclass(slots=True)
class EventStats:
    """Counters of events and of what retention kept or discarded."""

    received: dict[str, int] = field(default_factory=dict)
    """Events accepted, by source (zmq, mqtt, mark, rule)."""
    malformed: dict[str, int] = field(default_factory=dict)
    """Event messages rejected, by source."""
    duplicates: int = 0
    quarantined: int = 0
    queue_full: int = 0
    rate_limited: int = 0
    """Peer events over ``events.peers`` per_s/burst, dropped."""
    clamped: int = 0
    """Peer events whose pre_s/post_s were cut to ``events.peers`` max_pre_s/max_post_s."""
    log_full: int = 0
    """Events the event log had no room for (after compaction): stored, not logged."""
    pending_full: int = 0
    """Events not held for their segment's event stream (the pending set was full)."""
    written: int = 0
    log_errors: int = 0
    protected_deleted: int = 0
    """Protected segments the disk policy deleted as a last resort."""
    snapshot_deleted: int = 0
    discarded_bytes: int = 0
    """Bytes of segments snapshot mode deleted (out of the buffer, unprotected)."""
    discarded_ns: int = 0
    """Sensor time those segments covered, in ns."""
    control_errors: int = 0

    def count(self, table: dict[str, int], source: str) -> None:
        """Add one to ``table[source]``."""
        table[source] = table.get(source, 0) + 1

    @property
    def total(self) -> int:
        """Events accepted, every source."""
        return sum(dict(self.received).values())


def event_families(st: EventStats) -> Iterator[Any]:
    """The Prometheus metric families of ``st`` (prometheus-client imported by the caller)."""
    from prometheus_client.core import CounterMetricFamily  # noqa: PLC0415 - optional

    received = CounterMetricFamily(
        "hyperframes_events", "Events accepted, by source.", labels=["source"]
    )
    for source, n in sorted(dict(st.received).items()):
        received.add_metric([source], float(n))
    yield received
    malformed = CounterMetricFamily(
        "hyperframes_events_malformed", "Event messages rejected, by source.", labels=["source"]
    )
    for source, n in sorted(dict(st.malformed).items()):
        malformed.add_metric([source], float(n))
    yield malformed
    for name, doc, value in (
        ("events_duplicate", "Event messages received twice (same seq and time).", st.duplicates),
        ("events_quarantined", "Events stamped far from the sensors' clock.", st.quarantined),
        ("events_queue_full", "Events dropped because the event queue was full.", st.queue_full),
        ("events_rate_limited", "Peer events over events.peers per_s/burst, dropped.",
         st.rate_limited),
        ("events_clamped", "Peer events whose window was cut to events.peers.", st.clamped),
        ("event_log_full", "Events the full event log could not take (stored, protect nothing).",
         st.log_full),
        ("events_pending_full", "Events not held for their window (pending set full).",
         st.pending_full),
        ("events_written", "Events written into segments.", st.written),
        ("event_log_errors", "Event log appends that failed or were refused.", st.log_errors),
        ("protected_segments_deleted",
         "Segments protected by an event that the disk policy deleted (last resort).",
         st.protected_deleted),
        ("snapshot_segments_deleted", "Segments snapshot mode deleted.", st.snapshot_deleted),
        ("snapshot_discarded_bytes", "Bytes snapshot mode deleted.", st.discarded_bytes),
        ("snapshot_discarded_seconds", "Sensor seconds snapshot mode deleted.",
         st.discarded_ns / 1e9),
        ("control_errors", "Control socket requests that failed.", st.control_errors),
    ):  # fmt: skip
        yield CounterMetricFamily(f"hyperframes_{name}", doc, value=value)
