"""Durable marks in the output directory: what was uploaded, and uploads in progress.

``OUTPUT_DIR/.uploaded/NAME.json`` says segment ``NAME`` reached its
destination and was verified there (where, its size and SHA-256, the store's
checksum). The disk policy deletes marked segments before unmarked ones.
``OUTPUT_DIR/.uploading/NAME.json`` holds a multipart upload in progress (its
id and the parts the store confirmed), so that a killed uploader continues
where it stopped. Both are small JSON documents written whole: a temporary
file created exclusively without following links, fsynced, renamed, and the
directory fsynced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Final

from hyperframes.storage.local import fsync_dir, safe_dir, write_atomic

__all__ = ["UPLOADED_DIR", "STATE_DIR", "MarkStore", "uploaded_names"]

UPLOADED_DIR: Final = ".uploaded"
STATE_DIR: Final = ".uploading"
_MAX_DOC: Final = 1 << 20  # a mark is a few hundred bytes; a state some KB per 1,000 parts
_log = logging.getLogger(__name__)


def _write_doc(directory: Path, name: str, doc: dict[str, Any]) -> None:
    # a new file created without following links, fsynced, renamed, the directory fsynced
    write_atomic(safe_dir(directory) / name, json.dumps(doc, sort_keys=True).encode(), 0o640)


def _read_doc(path: Path) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log.warning("ignoring %s: %s", path, exc.strerror or exc)
        return None
    try:
        data = os.read(fd, _MAX_DOC + 1)
    finally:
        os.close(fd)
    try:
        doc = json.loads(data) if len(data) <= _MAX_DOC else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        _log.warning("ignoring %s: not a mark written by hyperframes upload", path)
        return None
    return doc


def _doc_name(segment: str) -> str:
    if "/" in segment or segment.startswith("."):
        raise ValueError(f"{segment!r} is not a segment file name")
    return f"{segment}.json"


class MarkStore:
    """Marks and resume states of one output directory."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.output_dir = Path(output_dir)

    def mark_uploaded(self, segment: str, doc: dict[str, Any]) -> None:
        """Durably record that ``segment`` was uploaded and verified (``doc``: where, sums)."""
        _write_doc(self.output_dir / UPLOADED_DIR, _doc_name(segment), doc)

    def uploaded(self, segment: str) -> dict[str, Any] | None:
        """The mark of ``segment``, or ``None``."""
        return _read_doc(self.output_dir / UPLOADED_DIR / _doc_name(segment))

    def uploaded_names(self) -> set[str]:
        """Names of the segments marked uploaded."""
        return uploaded_names(self.output_dir)

    def forget(self, segment: str) -> None:
        """Drop the mark of a segment that no longer exists (deleted after upload)."""
        with contextlib.suppress(FileNotFoundError):
            (self.output_dir / UPLOADED_DIR / _doc_name(segment)).unlink()

    def save_state(self, segment: str, doc: dict[str, Any]) -> None:
        """Durably record a multipart upload in progress."""
        _write_doc(self.output_dir / STATE_DIR, _doc_name(segment), doc)

    def state(self, segment: str) -> dict[str, Any] | None:
        """The saved multipart state of ``segment``, or ``None``."""
        return _read_doc(self.output_dir / STATE_DIR / _doc_name(segment))

    def clear_state(self, segment: str) -> None:
        """Forget the multipart state (the upload completed or was abandoned)."""
        path = self.output_dir / STATE_DIR / _doc_name(segment)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            fsync_dir(path.parent)


def uploaded_names(output_dir: str | os.PathLike[str]) -> set[str]:
    """Names of segments in ``output_dir`` marked uploaded (for the disk policy)."""
    marks = Path(output_dir) / UPLOADED_DIR
    try:
        if not stat.S_ISDIR(marks.lstat().st_mode):
            return set()
        with os.scandir(marks) as it:
            return {
                e.name.removesuffix(".json")
                for e in it
                if e.name.endswith(".json")
                and not e.name.startswith(".")
                and e.is_file(follow_symlinks=False)
            }
    except FileNotFoundError:
        return set()
