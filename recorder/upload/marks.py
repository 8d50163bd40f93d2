"""Durable marks in the output directory: what was uploaded, and uploads in progress.

``OUTPUT_DIR/.uploaded/NAME.json`` says segment ``NAME`` reached its
destination and was verified there (where, its size and SHA-256, the store's
checksum). The disk policy deletes marked segments before unmarked ones.
Other files the service uploads are marked by their path relative to
``OUTPUT_DIR``: ``.uploaded/clips/NAME.hf.json`` for a clip,
``.uploaded/.requests/ID/FILE.json`` for a requested file (a segment's
relative path is its name: marks written before there were classes still
count). ``OUTPUT_DIR/.cataloged/NAME.json`` says the catalog rows of segment
``NAME`` were sent (``upload.mode: events``).
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

__all__ = ["UPLOADED_DIR", "STATE_DIR", "CATALOGED_DIR", "MarkStore", "uploaded_names"]

UPLOADED_DIR: Final = ".uploaded"
STATE_DIR: Final = ".uploading"
CATALOGED_DIR: Final = ".cataloged"
_MAX_DEPTH: Final = 4  # .requests/ID/FILE is the deepest mark written
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


def _rel_parts(rel: str) -> list[str]:
    """The components of a mark's relative path; ``ValueError`` for one that could leave
    the marks directory (``..``, empty parts, a leading ``/``) or is too deep."""
    parts = rel.split("/")
    if (
        len(parts) > _MAX_DEPTH
        or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts)
        or parts[-1].startswith(".")
    ):
        raise ValueError(f"{rel!r} is not a path relative to the output directory")
    return parts


def _mark_dir(base: Path, rel: str, *, create: bool) -> tuple[Path, str]:
    """The directory holding the mark of ``rel`` under ``base`` (each level made a real
    directory, never a link, with ``create``) and the mark's file name."""
    parts = _rel_parts(rel)
    directory = base
    if create:
        safe_dir(directory)
    for p in parts[:-1]:
        directory = directory / p
        if create:
            safe_dir(directory)
    return directory, f"{parts[-1]}.json"


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

    def mark_path(self, rel: str, doc: dict[str, Any]) -> None:
        """Durably record that the file at ``rel`` (relative to the output directory, ``/``
        separators) was uploaded and verified; a segment's ``rel`` is its name."""
        directory, name = _mark_dir(self.output_dir / UPLOADED_DIR, rel, create=True)
        write_atomic(directory / name, json.dumps(doc, sort_keys=True).encode(), 0o640)

    def uploaded_path(self, rel: str) -> dict[str, Any] | None:
        """The mark of the file at ``rel``, or ``None``."""
        directory, name = _mark_dir(self.output_dir / UPLOADED_DIR, rel, create=False)
        return _read_doc(directory / name)

    def uploaded_paths(self) -> set[str]:
        """Relative paths of every file marked uploaded (segments: their names)."""
        return _walk(self.output_dir / UPLOADED_DIR)

    def mark_cataloged(self, segment: str, doc: dict[str, Any]) -> None:
        """Durably record that the catalog rows of ``segment`` were sent."""
        _write_doc(self.output_dir / CATALOGED_DIR, _doc_name(segment), doc)

    def cataloged_names(self) -> set[str]:
        """Names of the segments whose catalog rows were sent."""
        return _walk(self.output_dir / CATALOGED_DIR, depth=1)

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


def _walk(base: Path, depth: int = _MAX_DEPTH) -> set[str]:
    """Relative paths (``/`` separators, ``.json`` dropped) of the marks under ``base``;
    links are never followed, temporary files skipped."""
    found: set[str] = set()

    def visit(directory: Path, prefix: str, left: int) -> None:
        try:
            if not stat.S_ISDIR(directory.lstat().st_mode):
                return
            with os.scandir(directory) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if left > 1 and e.name not in (".", ".."):
                    visit(Path(e.path), f"{prefix}{e.name}/", left - 1)
            elif (
                e.name.endswith(".json")
                and not e.name.startswith(".")
                and e.is_file(follow_symlinks=False)
            ):
                found.add(prefix + e.name.removesuffix(".json"))

    visit(base, "", depth)
    return found


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
