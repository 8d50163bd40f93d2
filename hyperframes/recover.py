"""Salvage an unfinalized ``.tmp`` file (power cut, kill -9) into a valid file.

Recovery hops from window block to window block using the checksummed block
records (docs/FORMAT.md, "Crash recovery"; :func:`scan_blocks` proves each
block: record, entries, CRC32C and decoding of every payload), and stops at
the first block that is missing, truncated, damaged or inconsistent: all
windows before it are kept, byte for byte, and a fresh index, tables and
finalized header are appended. Payload bytes are never scanned blindly. The
result is verified before it is renamed into place, so ``recover`` never
leaves a file that ``verify`` rejects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hyperframes._blocks import END_OF_FILE, BlockScan, scan_blocks
from hyperframes.errors import CorruptFileError, RecoveryError
from hyperframes.format.times import format_utc
from hyperframes.storage.local import create_new, fsync_dir, rename_noreplace
from hyperframes.verify import verify_file
from hyperframes.writer import TMP_SUFFIX, write_trailer

__all__ = [
    "RecoveryReport",
    "BlockScan",
    "scan_blocks",
    "scan_recoverable",
    "recover",
    "default_output",
]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What :func:`recover` kept and what it had to drop."""

    source: Path
    output: Path
    windows: int
    frames: int
    good_bytes: int  # bytes of the source kept (header through the last good block)
    lost_bytes: int  # bytes of the source after the last good block
    lost_frames: int  # frames named by a damaged or truncated block record, if readable
    stop_reason: str  # why the scan stopped ("end of file" when nothing was lost)
    first_ns: int
    last_ns: int

    @classmethod
    def from_scan(cls, scan: BlockScan, source: Path, output: Path, size: int) -> RecoveryReport:
        """The report of recovering ``scan`` of a ``size``-byte ``source`` into ``output``."""
        ts = scan.entries["timestamp_ns"]
        return cls(
            source=source,
            output=output,
            windows=len(scan.windows),
            frames=len(scan.entries),
            good_bytes=scan.end,
            lost_bytes=0 if scan.stop_reason == END_OF_FILE else size - scan.end,
            lost_frames=scan.lost_frames,
            stop_reason=scan.stop_reason,
            first_ns=int(ts.min()) if len(ts) else 0,
            last_ns=int(ts.max()) if len(ts) else 0,
        )

    def summary(self) -> str:
        """One human line, used by the CLI."""
        lost = (
            f"lost {self.lost_bytes} bytes after offset {self.good_bytes}"
            + (f" ({self.lost_frames} frames)" if self.lost_frames else "")
            + f": {self.stop_reason}"
            if self.lost_bytes
            else "nothing lost"
        )
        return (
            f"recovered {self.windows} windows, {self.frames} frames "
            f"({format_utc(self.first_ns)} .. {format_utc(self.last_ns)}, "
            f"{(self.last_ns - self.first_ns) / 1e9:.1f} s) into {self.output}; {lost}"
        )


def default_output(source: Path) -> Path:
    """``x.hf.tmp`` -> ``x.hf``; anything else -> ``NAME.recovered``."""
    if source.name.endswith(TMP_SUFFIX):
        return source.with_name(source.name[: -len(TMP_SUFFIX)])
    return source.with_name(source.name + ".recovered")


def recover(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    overwrite: bool = False,
) -> RecoveryReport:
    """Rebuild a finalized file from the intact windows of ``source``.

    Writes ``output`` (default: ``source`` without ``.tmp``) through its own
    ``.tmp`` and an atomic rename; the source is left untouched. Raises
    :class:`RecoveryError` if not a single window could be recovered.
    """
    src = Path(source)
    out = Path(output) if output is not None else default_output(src)
    if out.resolve() == src.resolve():
        raise RecoveryError(src, "output would overwrite the source; pass another output path")
    if out.exists() and not overwrite:
        raise RecoveryError(src, f"output {out} already exists")
    fd = os.open(src, os.O_RDONLY)
    try:
        scan = scan_recoverable(fd, src)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    # not NAME.tmp: for the default output that is the source itself
    tmp = out.with_name(out.name + ".recovering" + TMP_SUFFIX)
    try:
        tmp.unlink(missing_ok=True)  # ours from an interrupted run, or a planted link
        with open(src, "rb") as fin, os.fdopen(create_new(tmp), "wb") as fout:
            _copy_prefix(fin, fout, scan.end)
            fout.flush()
            write_trailer(
                fout.fileno(),
                scan.end,
                scan.data_offset,
                scan.entries,
                scan.aux,
                scan.windows,
                scan.meta,
            )
        result = verify_file(tmp)  # the scan proved every block; this proves the whole
        if not result.ok:
            raise RecoveryError(src, "the recovered file does not verify: " + result.problems[0])
        if overwrite:
            os.replace(tmp, out)
        else:
            rename_noreplace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(out.parent)
    return RecoveryReport.from_scan(scan, src, out, size)


def scan_recoverable(fd: int, source: Path) -> BlockScan:
    """:func:`scan_blocks` of an open ``source``, with at least one intact window.

    Raises :class:`RecoveryError` when the header or stream table is unreadable
    or not one window is intact.
    """
    try:
        scan = scan_blocks(fd, os.fspath(source))
    except CorruptFileError as exc:
        raise RecoveryError(source, f"header or stream table unreadable: {exc.what}") from exc
    if not len(scan.windows):
        raise RecoveryError(source, f"no complete window found ({scan.stop_reason})")
    return scan


def _copy_prefix(src: BinaryIO, dst: BinaryIO, length: int) -> None:
    remaining = length
    while remaining:
        chunk = src.read(min(remaining, 8 << 20))
        if not chunk:
            raise RecoveryError(Path(src.name), "file shrank while recovering")
        dst.write(chunk)
        remaining -= len(chunk)
