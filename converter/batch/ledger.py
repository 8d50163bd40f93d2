"""The JSON Lines ledger: one line per result, appended and fsynced line by line.

A directory batch's ``OUT/ledger.jsonl`` (or ``--ledger FILE``), and a bucket
batch's ``--ledger FILE`` when it names a local file; a bucket's own ledger is
one object per result (:mod:`hyperframes.converter.bucket.ledger`). Both
stand behind :class:`Ledger`.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

__all__ = ["LEDGER_FILE", "Ledger", "JsonLinesLedger", "ledger_records", "now_iso"]

LEDGER_FILE: Final = "ledger.jsonl"


class Ledger(Protocol):
    """Where a batch's results go, one record each."""

    def write(self, doc: dict[str, Any]) -> None:
        """Store one record."""
        ...

    def close(self) -> None:
        """Release whatever the ledger holds."""
        ...


class JsonLinesLedger:
    """Append-only JSON Lines, one line per result, flushed and fsynced per line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(path, flags, 0o644)

    def write(self, doc: dict[str, Any]) -> None:
        """Append one line and fsync it."""
        os.write(self._fd, (json.dumps(doc, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def ledger_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a ledger file (for tools and tests)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def now_iso() -> str:
    """The time of a record (UTC, ISO 8601, milliseconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
