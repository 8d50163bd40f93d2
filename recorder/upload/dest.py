"""What every destination takes: one segment to put under one key."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hyperframes.recorder.upload.sums import FileSums

__all__ = ["Job", "Destination", "mark_doc"]


@dataclass(frozen=True, slots=True)
class Job:
    """One segment to upload: the open file, its digests, where it goes, how fast."""

    segment: Path
    fd: int
    sums: FileSums
    key: str
    pace: Callable[[int], None]
    """Called before sending each chunk of ``n`` bytes: sleeps for the bandwidth cap,
    raises when the service is stopping."""


class Destination(Protocol):
    """A place segments go: a bucket or a directory."""

    def url(self, key: str) -> str:
        """Where ``key`` ends up, for logs and marks."""
        ...

    def upload(self, job: Job) -> dict[str, Any]:
        """Put the segment under ``job.key``, verified; the facts for its mark.

        Raises :class:`~hyperframes.recorder.upload.errors.UploadError`. Safe to call again
        after any failure or a kill: it resumes or finds the finished object.
        """
        ...


def mark_doc(job: Job, url: str, **store: Any) -> dict[str, Any]:
    """The mark of an uploaded segment: where, how big, SHA-256, what the store said."""
    return {
        "url": url,
        "size": job.sums.size,
        "sha256": job.sums.sha256.hex(),
        "uploaded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **store,
    }
