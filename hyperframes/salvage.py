"""Finish an unfinalized ``NAME.tmp`` where it lies: the recorder's recovery after a crash.

:func:`hyperframes.recover.recover` copies the intact windows into a new
file and leaves the source alone, which is right for a person looking at a
damaged file. A recorder restarting after a power cut wants something else:
its own segment finished with no second copy (a segment is gigabytes and the
disk may be nearly full) and no second write of the same bytes. So
:func:`finish_in_place` runs the same scan (:func:`~hyperframes.recover.scan_blocks`:
every block record, entry table and payload CRC checked) and appends the
same trailer (:func:`~hyperframes.writer.write_trailer`) as ``recover``, but
to the ``.tmp`` itself, after the last intact block; then verifies the file
completely and only then renames it to ``NAME``.

Bytes after the last intact block (a block cut short by the power loss) are
copied to ``tail_to`` first when given, so nothing is thrown away unseen. A
crash during this is harmless: the next attempt scans the same blocks and
writes the same trailer.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hyperframes.errors import RecoveryError
from hyperframes.recover import RecoveryReport, default_output, scan_recoverable
from hyperframes.storage.local import (
    UnsafePathError,
    create_new,
    fsync_dir,
    rename_noreplace,
    safe_dir,
    write_all,
)
from hyperframes.verify import verify_file
from hyperframes.writer import TMP_SUFFIX, write_trailer

__all__ = ["finish_in_place"]

_CHUNK = 8 << 20


def finish_in_place(
    tmp: str | os.PathLike[str], tail_to: Path | None = None, *, owned: bool = False
) -> RecoveryReport:
    """Finalize ``NAME.tmp`` in place from its intact windows and rename it to ``NAME``.

    Raises :class:`RecoveryError` when not one window is intact or the result
    does not verify (the ``.tmp`` is then left for the caller to move aside),
    and ``FileExistsError`` when ``NAME`` exists already (also when it appears
    meanwhile: the rename never replaces). The ``.tmp`` is never followed if
    it is a symbolic link, nor written if it has a second hard link or (with
    ``owned``) belongs to another user: :class:`~hyperframes.storage.local.UnsafePathError`.
    The tail is written to a new file: ``tail_to``, or ``tail_to.1``, ...
    when that name is taken; never through a link.
    """
    src = Path(tmp)
    if not src.name.endswith(TMP_SUFFIX):
        raise RecoveryError(src, f"not a {TMP_SUFFIX} file")
    out = default_output(src)
    if out.exists():
        raise FileExistsError(f"{out}: already exists; not overwriting it with {src.name}")
    try:
        fd = os.open(src, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if src.is_symlink():
            raise UnsafePathError(src, "is a symbolic link") from None
        raise exc
    try:
        _check_own_file(fd, src, owned)
        scan = scan_recoverable(fd, src)
        size = os.fstat(fd).st_size
        report = RecoveryReport.from_scan(scan, src, out, size)
        if report.lost_bytes and tail_to is not None:
            _copy_range(fd, scan.end, size, tail_to)
        write_trailer(
            fd, scan.end, scan.data_offset, scan.entries, scan.aux, scan.windows, scan.meta
        )
    finally:
        os.close(fd)
    result = verify_file(src)
    if not result.ok:
        raise RecoveryError(src, "the finished file does not verify: " + "; ".join(result.problems))
    rename_noreplace(src, out)
    fsync_dir(out.parent)
    return report


def _check_own_file(fd: int, path: Path, owned: bool) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, "is not a regular file")
    if st.st_nlink != 1:
        raise UnsafePathError(path, f"has {st.st_nlink} hard links")
    if owned and st.st_uid != os.geteuid():
        raise UnsafePathError(path, f"belongs to uid {st.st_uid}, not to this user")


def _copy_range(fd: int, start: int, end: int, dest: Path) -> Path:
    """Copy bytes ``[start, end)`` of ``fd`` to a new file ``dest`` (or ``dest.N``), fsynced."""
    safe_dir(dest.parent)
    target, n = dest, 0
    while True:
        try:
            out = create_new(target, 0o640)
            break
        except FileExistsError:
            n += 1
            if n > 100:
                raise
            target = dest.with_name(f"{dest.name}.{n}")
    try:
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            write_all(out, [chunk])
            pos += len(chunk)
        os.fsync(out)
    finally:
        os.close(out)
    fsync_dir(target.parent)
    return target
