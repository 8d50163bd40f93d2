"""Why an upload failed: one typed error with a reason label for the counters."""

from __future__ import annotations

from typing import Final

from hyperframes.recorder.errors import RecorderError

__all__ = ["UploadError", "REASONS"]

REASONS: Final = (
    "network",  # connection refused/reset, timeout, DNS: retried with backoff
    "server",  # 5xx, throttling: retried with backoff
    "auth",  # wrong or expired credentials, access denied: retried at the longest backoff
    "no-bucket",  # the bucket does not exist: retried at the longest backoff
    "checksum-mismatch",  # what the store holds differs from the file: re-uploaded
    "conflict",  # another object/file already sits under the final name
    "io",  # writing the destination failed locally
    "unreadable",  # the segment cannot be opened or read (a link, its mode): it waits alone
)


class UploadError(RecorderError):
    """An upload of one segment failed; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    @property
    def persistent(self) -> bool:
        """Failures that retrying soon cannot fix (credentials, a missing bucket)."""
        return self.reason in ("auth", "no-bucket", "conflict")
