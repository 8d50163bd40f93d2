"""The uploader's counters: a status line for ``STATUS=`` and Prometheus families.

One writer (the upload loop), readers only copy ints (safe under the GIL).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hyperframes.recorder.upload.errors import REASONS

__all__ = ["UploadStats", "collect"]


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


@dataclass(slots=True)
class UploadStats:
    """What the uploader has done and what is left."""

    backlog_segments: int = 0
    backlog_bytes: int = 0
    oldest_pending_start: float | None = None  # Unix seconds of the oldest segment not uploaded
    uploaded_segments: int = 0
    uploaded_bytes: int = 0
    sent_bytes: int = 0  # bytes sent (a resumed or repeated upload counts what it sent again)
    read_back_bytes: int = 0  # bytes read back from the store to prove an upload (re-reads)
    last_rate_bytes_s: float | None = None
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    vanished: int = 0  # segments deleted (disk policy) before their turn
    unreadable_segments: int = 0  # segments that cannot be read, each in its own backoff now
    held: dict[str, int] = field(default_factory=dict)  # segments on their own backoff, by reason
    deleted_after_upload: int = 0
    cataloged_segments: int = 0  # uploaded segments added to upload.catalog
    catalog_failures: int = 0  # uploaded segments the catalog could not take (logged)
    allowed: bool = True  # the upload.when condition, last checked
    last_error: str | None = None
    started: float = field(default_factory=time.time)

    def failed(self, reason: str, message: str) -> None:
        """Count one failure by reason and remember its message."""
        self.failures[reason] = self.failures.get(reason, 0) + 1
        self.last_error = message

    def status_line(self) -> str:
        """One line for ``systemctl status``."""
        parts = [
            f"uploaded {self.uploaded_segments} ({_mb(self.uploaded_bytes)})",
            f"backlog {self.backlog_segments} ({_mb(self.backlog_bytes)})",
        ]
        if self.last_rate_bytes_s:
            parts.append(f"{_mb(self.last_rate_bytes_s)}/s")
        if not self.allowed:
            parts.append("waiting: upload.when says not now")
        if self.unreadable_segments:
            parts.append(f"{self.unreadable_segments} unreadable (skipped)")
        others = {r: n for r, n in sorted(self.held.items()) if r != "unreadable" and n}
        if others:
            why = ", ".join(f"{n} {r}" for r, n in others.items())
            parts.append(f"{sum(others.values())} held back ({why})")
        failed = sum(self.failures.values())
        if failed:
            parts.append(f"{failed} failures")
        if self.catalog_failures:
            parts.append(f"{self.catalog_failures} not cataloged")
        if self.last_error:
            parts.append(f"last error: {self.last_error[:120]}")
        return ", ".join(parts)


def collect(stats: UploadStats) -> Iterable[Any]:
    """Prometheus metric families of ``stats`` (called at scrape time)."""
    from prometheus_client.core import (  # noqa: PLC0415 - optional dependency
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    def gauge(name: str, doc: str, value: float | None) -> Any:
        fam = GaugeMetricFamily(f"hyperframes_upload_{name}", doc)
        if value is not None:
            fam.add_metric([], float(value))
        return fam

    def counter(name: str, doc: str, value: float) -> Any:
        return CounterMetricFamily(f"hyperframes_upload_{name}", doc, value=float(value))

    yield gauge("backlog_segments", "Finalized segments not uploaded yet.", stats.backlog_segments)
    yield gauge(
        "backlog_bytes", "Bytes of finalized segments not uploaded yet.", stats.backlog_bytes
    )
    yield gauge(
        "oldest_pending_start_seconds",
        "Start (Unix time) of the oldest segment not uploaded.",
        stats.oldest_pending_start,
    )
    yield gauge("allowed", "1 when upload.when allows uploading now.", int(stats.allowed))
    yield gauge(
        "unreadable_segments",
        "Segments that cannot be read (a link, their mode), each waiting on its own backoff.",
        stats.unreadable_segments,
    )
    held = GaugeMetricFamily(
        "hyperframes_upload_held_segments",
        "Segments that failed alone, each waiting on its own backoff, by reason.",
        labels=["reason"],
    )
    for reason in REASONS:
        held.add_metric([reason], float(stats.held.get(reason, 0)))
    yield held
    yield gauge(
        "last_rate_bytes_per_second", "Throughput of the last upload.", stats.last_rate_bytes_s
    )
    yield counter("segments", "Segments uploaded and verified.", stats.uploaded_segments)
    yield counter("bytes", "Bytes of segments uploaded and verified.", stats.uploaded_bytes)
    yield counter("sent_bytes", "Bytes sent, repeats included.", stats.sent_bytes)
    yield counter(
        "read_back_bytes", "Bytes read back from the store to prove uploads.", stats.read_back_bytes
    )
    yield counter("vanished_segments", "Segments deleted before their upload.", stats.vanished)
    yield counter(
        "deleted_segments", "Segments deleted after a verified upload.", stats.deleted_after_upload
    )
    fam = CounterMetricFamily(
        "hyperframes_upload_failures", "Failed attempts, by reason.", labels=["reason"]
    )
    for reason, n in sorted(stats.failures.items()):
        fam.add_metric([reason], float(n))
    yield fam
