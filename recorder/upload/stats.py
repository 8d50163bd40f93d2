"""The uploader's counters: a status line for ``STATUS=`` and Prometheus families.

Costs are named per class (:data:`~hyperframes.recorder.upload.plan.CLASSES`:
clips, requested files, segments): what waits (files, bytes), what went up
(files, bytes) and what the link delivered lately (bytes per second of upload
time over the last :data:`RATE_WINDOW_S`).

One writer (the upload loop), readers only copy ints (safe under the GIL).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from hyperframes.recorder.upload.errors import REASONS
from hyperframes.recorder.upload.plan import CLASSES

__all__ = ["UploadStats", "ClassStats", "collect", "RATE_WINDOW_S"]

RATE_WINDOW_S: Final = 300.0
"""How far back :meth:`ClassStats.rate_bytes_s` looks: the uploads that ended this recently."""
_LABELS: Final = {"clip": "clips", "requested": "requested", "segment": "segments"}


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


@dataclass(slots=True)
class ClassStats:
    """One class's costs: what waits, what went up, what the link delivered lately."""

    waiting_files: int = 0
    waiting_bytes: int = 0
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    _recent: deque[tuple[float, int, float]] = field(default_factory=deque, repr=False)
    """``(ended, bytes, seconds)`` of the uploads that ended within :data:`RATE_WINDOW_S`."""

    def delivered(self, n: int, seconds: float | None, now: float | None = None) -> None:
        """Count one file of ``n`` bytes uploaded and proven in ``seconds`` (``None``: nothing
        was sent, an object already there was adopted: no rate sample)."""
        now = time.monotonic() if now is None else now
        self.uploaded_files += 1
        self.uploaded_bytes += n
        if seconds is not None:
            self._recent.append((now, n, max(seconds, 1e-6)))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._recent and now - self._recent[0][0] > RATE_WINDOW_S:
            self._recent.popleft()

    def rate_bytes_s(self, now: float | None = None) -> float | None:
        """Bytes per second of upload time over the uploads that ended within
        :data:`RATE_WINDOW_S` (``None``: none did)."""
        now = time.monotonic() if now is None else now
        recent = [r for r in self._recent if now - r[0] <= RATE_WINDOW_S]
        if not recent:
            return None
        return sum(r[1] for r in recent) / sum(r[2] for r in recent)

    def summary(self, label: str, now: float | None = None) -> str | None:
        """``clips 2 waiting (1.0 MB), 5 up (2.5 MB, 0.4 MB/s)``; ``None`` when idle."""
        if not (self.waiting_files or self.uploaded_files):
            return None
        text = f"{label} {self.waiting_files} waiting ({_mb(self.waiting_bytes)})"
        if self.uploaded_files:
            rate = self.rate_bytes_s(now)
            at = f", {_mb(rate)}/s" if rate else ""
            text += f", {self.uploaded_files} up ({_mb(self.uploaded_bytes)}{at})"
        return text


def _classes() -> dict[str, ClassStats]:
    return {k: ClassStats() for k in CLASSES}


@dataclass(slots=True)
class UploadStats:
    """What the uploader has done and what is left."""

    backlog_segments: int = 0  # files waiting to go up, every class (historical name)
    backlog_bytes: int = 0
    oldest_pending_start: float | None = None  # Unix seconds of the oldest segment not uploaded
    uploaded_segments: int = 0  # files uploaded and verified, every class (historical name)
    uploaded_bytes: int = 0
    sent_bytes: int = 0  # bytes sent (a resumed or repeated upload counts what it sent again)
    read_back_bytes: int = 0  # bytes read back from the store to prove an upload (re-reads)
    last_rate_bytes_s: float | None = None
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    vanished: int = 0  # segments deleted (disk policy) before their turn
    unreadable_segments: int = 0  # segments that cannot be read, each in its own backoff now
    held: dict[str, int] = field(default_factory=dict)  # segments on their own backoff, by reason
    deleted_after_upload: int = 0
    cataloged_segments: int = 0  # segments whose rows went to upload.catalog
    catalog_failures: int = 0  # segments the catalog could not take (logged; retried in events)
    catalog_waiting: int = 0  # mode events: finalized segments whose rows are not sent yet
    kept_segments: int = 0  # mode events: finalized segments staying on the vehicle
    kept_bytes: int = 0
    classes: dict[str, ClassStats] = field(default_factory=_classes)
    """Costs per class (:data:`~hyperframes.recorder.upload.plan.CLASSES`)."""
    clip_failures: int = 0  # passes whose clip cutting failed (logged)
    requests_answered: int = 0  # results written (delivered, partial, missing, refused...)
    request_failures: int = 0  # polls or request answers that failed (logged)
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
        now = time.monotonic()
        per = [c.summary(_LABELS[k], now) for k, c in self.classes.items()]
        if any(per):
            parts.append("; ".join(p for p in per if p))
        if self.kept_segments:
            parts.append(f"kept on the vehicle {self.kept_segments} ({_mb(self.kept_bytes)})")
        if self.catalog_waiting:
            parts.append(f"{self.catalog_waiting} catalog rows waiting")
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
        if self.clip_failures:
            parts.append(f"{self.clip_failures} clip passes failed")
        if self.request_failures:
            parts.append(f"{self.request_failures} request failures")
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
    yield from _per_class(stats)
    yield gauge("kept_segments", "Mode events: finalized segments kept on the vehicle.",
                stats.kept_segments)  # fmt: skip
    yield gauge("kept_bytes", "Mode events: bytes of segments kept on the vehicle.",
                stats.kept_bytes)  # fmt: skip
    yield gauge("catalog_waiting_segments", "Segments whose catalog rows are not sent yet.",
                stats.catalog_waiting)  # fmt: skip
    yield counter("cataloged_segments", "Segments whose catalog rows were sent.",
                  stats.cataloged_segments)  # fmt: skip
    yield counter("catalog_failures", "Segments the catalog could not take (retried).",
                  stats.catalog_failures)  # fmt: skip
    yield counter("clip_failures", "Passes whose clip cutting failed.", stats.clip_failures)
    yield counter("requests_answered", "Requests answered (a result written).",
                  stats.requests_answered)  # fmt: skip
    yield counter("request_failures", "Request polls or answers that failed.",
                  stats.request_failures)  # fmt: skip


def _per_class(stats: UploadStats) -> Iterable[Any]:
    """The families labelled by ``class`` (clip, requested, segment)."""
    from prometheus_client.core import (  # noqa: PLC0415 - optional dependency
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    now = time.monotonic()
    waiting = GaugeMetricFamily(
        "hyperframes_upload_waiting_files", "Files waiting to go up, by class.", labels=["class"]
    )
    waiting_b = GaugeMetricFamily(
        "hyperframes_upload_waiting_bytes", "Bytes waiting to go up, by class.", labels=["class"]
    )
    files = CounterMetricFamily(
        "hyperframes_upload_class_files", "Files uploaded and verified, by class.",
        labels=["class"],
    )  # fmt: skip
    sent = CounterMetricFamily(
        "hyperframes_upload_class_bytes", "Bytes uploaded and verified, by class.",
        labels=["class"],
    )  # fmt: skip
    rate = GaugeMetricFamily(
        "hyperframes_upload_delivered_bytes_per_second",
        f"What the link delivered, by class: bytes per second of upload time over the "
        f"uploads of the last {RATE_WINDOW_S:g} s (0: none).",
        labels=["class"],
    )
    for k, c in stats.classes.items():
        waiting.add_metric([k], float(c.waiting_files))
        waiting_b.add_metric([k], float(c.waiting_bytes))
        files.add_metric([k], float(c.uploaded_files))
        sent.add_metric([k], float(c.uploaded_bytes))
        rate.add_metric([k], float(c.rate_bytes_s(now) or 0.0))
    yield from (waiting, waiting_b, files, sent, rate)
