"""Why an upload failed: one typed error with a reason label for the counters."""

from __future__ import annotations

from typing import Final

from hyperframes.recorder.errors import RecorderError

__all__ = ["UploadError", "Stopping", "REASONS", "SEGMENT_REASONS"]

REASONS: Final = (
    "network",  # connection refused/reset, timeout, DNS: the pass ends, retried with backoff
    "server",  # 5xx, throttling: the pass ends, retried with backoff
    "auth",  # wrong or expired credentials, access denied: the pass ends, longest backoff
    "no-bucket",  # the bucket does not exist: the pass ends, longest backoff
    "io",  # writing the destination directory failed locally: the pass ends
    # one segment's own failures: it waits on its own backoff, the pass goes on
    "checksum-mismatch",  # what reached the store is not the file (refused, or disproved)
    "conflict",  # another object/file with other bytes sits under the final name
    "unverifiable",  # nothing proves the object holds the file, and re-reading is off
    "refused",  # the store refused this segment's request (another 4xx)
    "unreadable",  # the segment cannot be opened or read (a link, its mode)
)

SEGMENT_REASONS: Final = frozenset(
    {"checksum-mismatch", "conflict", "unverifiable", "refused", "unreadable"}
)
"""Failures of one segment, not of the link or the store: the others go on."""


class UploadError(RecorderError):
    """An upload of one segment failed; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    @property
    def persistent(self) -> bool:
        """Failures that retrying soon cannot fix (credentials, a missing bucket, a conflict)."""
        return self.reason in ("auth", "no-bucket", "conflict")

    @property
    def per_segment(self) -> bool:
        """A failure of this segment alone (:data:`SEGMENT_REASONS`): the pass goes on."""
        return self.reason in SEGMENT_REASONS


class Stopping(Exception):
    """The service was asked to stop in the middle of an upload (raised by its pacing)."""
