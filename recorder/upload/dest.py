"""What every destination takes: one segment to put under one key; what proves it got there."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from hyperframes.recorder.upload.sums import FileSums

__all__ = ["Job", "Destination", "mark_doc", "PROOFS"]

PROOFS: Final = {
    "etag-md5": "the object's ETag is the MD5 of the whole file",
    "etag-md5-of-parts": "the object's ETag is md5(part MD5s)-N of the file's parts",
    "sha256": "AWS S3 computed the object's SHA-256 and it is the file's",
    "sha256-composite": "AWS S3 computed the multipart object's composite SHA-256 and it is ours",
    "reread-sha256": "the object, read back, has the file's SHA-256",
}
"""What a mark's ``verified`` names: each is computed by the destination from what it holds,
never a value it repeats from the request (docs/OPERATIONS.md, Upload)."""


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
    pace_in: Callable[[int], None] | None = None
    """The same before reading ``n`` bytes back from the destination (a re-read)."""


class Destination(Protocol):
    """A place segments go: a bucket or a directory."""

    def url(self, key: str) -> str:
        """Where ``key`` ends up, for logs and marks."""
        ...

    def upload(self, job: Job) -> dict[str, Any]:
        """Put the segment under ``job.key``, proven there; the facts for its mark, whose
        ``verified`` is one of :data:`PROOFS`.

        Raises :class:`~hyperframes.recorder.upload.errors.UploadError`. Safe to call again
        after any failure or a kill: it resumes or finds the finished object.
        """
        ...


def mark_doc(job: Job, url: str, verified: str, **store: Any) -> dict[str, Any]:
    """The mark of an uploaded segment: where, how big, SHA-256, the proof (one of
    :data:`PROOFS`) and what the store said."""
    if verified not in PROOFS:
        raise ValueError(f"{verified!r} is not a proof")
    return {
        "url": url,
        "size": job.sums.size,
        "sha256": job.sums.sha256.hex(),
        "uploaded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "verified": verified,
        **store,
    }
