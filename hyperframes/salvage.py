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
from pathlib import Path

from hyperframes._io import fsync_dir
from hyperframes.errors import RecoveryError
from hyperframes.recover import RecoveryReport, default_output, scan_recoverable
from hyperframes.verify import verify_file
from hyperframes.writer import TMP_SUFFIX, write_trailer

__all__ = ["finish_in_place"]

_CHUNK = 8 << 20


def finish_in_place(tmp: str | os.PathLike[str], tail_to: Path | None = None) -> RecoveryReport:
    """Finalize ``NAME.tmp`` in place from its intact windows and rename it to ``NAME``.

    Raises :class:`RecoveryError` when not one window is intact or the result
    does not verify (the ``.tmp`` is then left for the caller to move aside),
    and ``FileExistsError`` when ``NAME`` exists already.
    """
    src = Path(tmp)
    if not src.name.endswith(TMP_SUFFIX):
        raise RecoveryError(src, f"not a {TMP_SUFFIX} file")
    out = default_output(src)
    if out.exists():
        raise FileExistsError(f"{out}: already exists; not overwriting it with {src.name}")
    fd = os.open(src, os.O_RDWR)
    try:
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
    os.replace(src, out)
    fsync_dir(out.parent)
    return report


def _copy_range(fd: int, start: int, end: int, dest: Path) -> None:
    """Copy bytes ``[start, end)`` of ``fd`` to a new file ``dest``, fsynced."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as f:
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            f.write(chunk)
            pos += len(chunk)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(dest.parent)
