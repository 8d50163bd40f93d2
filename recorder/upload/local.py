"""A directory destination (local disk, NFS): copy, fsync, link into place, verify.

The copy grows as ``KEY.part`` beside its final name; a restarted upload
continues it once its bytes match the segment's. The final name is created
with ``link()``, which never replaces an existing file; then the copy is read
back and its SHA-256 compared with the segment's (the proof ``reread-sha256``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from hyperframes.recorder.upload.dest import Job, mark_doc
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.storage.local import fsync_dir

__all__ = ["LocalDest"]

_CHUNK = 1 << 20
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _sha256_fd(fd: int, size: int, digest: Any = None) -> bytes:
    h = digest or hashlib.sha256()
    off = 0
    while off < size:
        chunk = os.pread(fd, min(_CHUNK, size - off), off)
        if not chunk:
            break
        h.update(chunk)
        off += len(chunk)
    out: bytes = h.digest()
    return out


class LocalDest:
    """Segments copied under ``root`` (which must exist: a mount point, usually)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def url(self, key: str) -> str:
        """The final path of ``key``."""
        return str(self.root / key)

    def _parent(self, key: str) -> Path:
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            self.root.mkdir(mode=0o750)  # its parent must exist: a mount point, a share
        if not self.root.is_dir():
            raise UploadError("io", f"destination {self.root} is not a directory (not mounted?)")
        d = self.root
        for part in key.split("/")[:-1]:
            d = d / part
            with contextlib.suppress(FileExistsError):
                d.mkdir(mode=0o750)
            if not stat.S_ISDIR(d.lstat().st_mode):
                raise UploadError("conflict", f"{d} is not a directory (a link or a file)")
        return d

    def upload(self, job: Job) -> dict[str, Any]:
        """Copy the segment to ``root/key``; see the module docstring."""
        try:
            return self._upload(job)
        except OSError as exc:
            raise UploadError("io", f"{self.url(job.key)}: {exc.strerror or exc}") from None

    def _upload(self, job: Job) -> dict[str, Any]:
        final = self._parent(job.key) / job.key.rsplit("/", 1)[-1]
        size = job.sums.size
        if os.path.lexists(final):
            if self._matches(final, job):
                return mark_doc(job, str(final), "reread-sha256", found="already there")
            raise UploadError("conflict", f"{final} exists and differs from {job.segment.name}")
        part = final.with_name(final.name + ".part")
        fd = os.open(part, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o640)
        try:
            have = os.fstat(fd).st_size
            if have > size or _sha256_fd(fd, have) != _sha256_fd(job.fd, have):
                os.ftruncate(fd, 0)
                have = 0
            off = have
            while off < size:
                n = min(_CHUNK, size - off)
                job.pace(n)
                chunk = os.pread(job.fd, n, off)
                if len(chunk) != n:
                    raise UploadError("unreadable", f"{job.segment} shrank while uploading it")
                os.pwrite(fd, chunk, off)
                off += n
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(part, final)  # fails if the name appeared meanwhile: never replaces
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            part.rename(final)  # a filesystem without hard links
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
        fsync_dir(final.parent)
        if not self._matches(final, job):
            final.unlink()
            raise UploadError("checksum-mismatch", f"{final} reads back different from the segment")
        return mark_doc(job, str(final), "reread-sha256")

    @staticmethod
    def _matches(path: Path, job: Job) -> bool:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        try:
            if os.fstat(fd).st_size != job.sums.size:
                return False
            return _sha256_fd(fd, job.sums.size) == job.sums.sha256
        finally:
            os.close(fd)
