"""Salvage an unfinalized ``.tmp`` file (power cut, kill -9) into a valid file.

Recovery hops from window block to window block using the checksummed block
records (docs/FORMAT.md, "Crash recovery"), checks every payload's CRC32C,
and stops at the first block that is missing, truncated or damaged: all
windows before it are kept, byte for byte, and a fresh index, tables and
finalized header are appended. Payload bytes are never scanned blindly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from hyperframes._crc import crc32c
from hyperframes._io import fsync_dir, pread_exact
from hyperframes._meta import Meta
from hyperframes._structure import read_header, read_meta
from hyperframes.errors import CorruptFileError, RecoveryError
from hyperframes.layout import (
    AUX_DTYPE,
    BLOCK_RECORD_SIZE,
    INDEX_DTYPE,
    WINDOW_DTYPE,
    BlockRecord,
    FrameFlags,
)
from hyperframes.writer import TMP_SUFFIX, write_trailer

__all__ = ["RecoveryReport", "scan_blocks", "recover"]


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
            f"({self.first_ns} .. {self.last_ns} ns) into {self.output}; {lost}"
        )


@dataclass(frozen=True, slots=True)
class _Scan:
    meta: Meta
    data_offset: int
    end: int
    entries: np.ndarray
    aux: np.ndarray
    windows: np.ndarray
    lost_frames: int
    stop_reason: str


def scan_blocks(fd: int, path: str, check_payloads: bool = True) -> _Scan:
    """Walk the window blocks of a (possibly truncated) file; pure reading.

    With ``check_payloads`` every payload's CRC32C is checked as well as the
    block records and their entry tables.
    """
    size = os.fstat(fd).st_size
    h = read_header(fd, path, size)
    # MetaCrc is written with the first header, so an unfinished file's stream table is
    # proven too; then it must agree with the header it was written with
    meta = read_meta(fd, path, h.meta_offset, h.meta_size, size, h.meta_crc)
    if meta.window_ns != h.window_ns:
        raise CorruptFileError(path, "header and metadata disagree on window length", 52)
    if len(meta.streams) != h.stream_count:
        raise CorruptFileError(
            path, f"header says {h.stream_count} streams, table has {len(meta.streams)}", 32
        )
    pos = h.data_offset
    entries: list[np.ndarray] = []
    auxes: list[np.ndarray] = []
    windows: list[tuple[int, int, int, int, int]] = []
    lost_frames = 0
    reason = "end of file"
    stream_ids = np.array(sorted(s.id for s in meta.streams), dtype=np.uint16)
    last_window: int | None = None
    while pos < size:
        rec = BlockRecord.decode(pread_exact(fd, BLOCK_RECORD_SIZE, pos))
        if rec is None:
            reason = f"no intact window record at offset {pos}"
            if h.finalized and pos == h.index_offset:
                reason = "end of file"  # the finalized trailer follows the last block
            break
        table_size = rec.frame_count * (INDEX_DTYPE.itemsize + AUX_DTYPE.itemsize)
        if (
            pos + rec.block_size > size
            or rec.payload_offset < pos + BLOCK_RECORD_SIZE + table_size
            or rec.payload_offset > pos + rec.block_size
        ):
            lost_frames = rec.frame_count
            reason = f"window {rec.window_id} at offset {pos} is truncated"
            break
        if last_window is not None and rec.window_id <= last_window:
            reason = f"window {rec.window_id} at offset {pos} repeats or goes back in time"
            break
        table = pread_exact(fd, table_size, pos + BLOCK_RECORD_SIZE)
        if crc32c(table) != rec.entries_crc:
            lost_frames = rec.frame_count
            reason = f"window {rec.window_id} at offset {pos}: entry table checksum mismatch"
            break
        n = rec.frame_count
        ent = np.frombuffer(table, INDEX_DTYPE, count=n)
        aux = np.frombuffer(table, AUX_DTYPE, count=n, offset=n * INDEX_DTYPE.itemsize)
        bad = _bad_frame(fd, ent, rec, pos, stream_ids, check_payloads) or _off_window(
            ent, rec.window_id, meta.window_ns
        )
        if bad is not None:
            lost_frames = n
            reason = f"window {rec.window_id} at offset {pos}: {bad}"
            break
        entries.append(ent)
        auxes.append(aux)
        windows.append(
            (
                rec.window_id,
                rec.payload_offset,
                pos + rec.block_size - rec.payload_offset,
                n,
                rec.flags,
            )
        )
        last_window = rec.window_id
        pos += rec.block_size
    return _Scan(
        meta=meta,
        data_offset=h.data_offset,
        end=pos,
        entries=np.concatenate(entries) if entries else np.empty(0, INDEX_DTYPE),
        aux=np.concatenate(auxes) if auxes else np.empty(0, AUX_DTYPE),
        windows=np.array(windows, dtype=WINDOW_DTYPE),
        lost_frames=lost_frames,
        stop_reason=reason,
    )


def _bad_frame(
    fd: int,
    ent: np.ndarray,
    rec: BlockRecord,
    pos: int,
    stream_ids: np.ndarray,
    check_payloads: bool,
) -> str | None:
    block_end = pos + rec.block_size
    for e in ent:
        off, size = int(e["offset"]), int(e["size"])
        if off < rec.payload_offset or off + size > block_end:
            return f"frame at {off} lies outside its block"
        if int(e["stream_id"]) not in stream_ids:
            return f"frame at {off} names unknown stream {int(e['stream_id'])}"
        if check_payloads and crc32c(pread_exact(fd, size, off)) != int(e["crc32c"]):
            return f"frame at {off} fails its checksum (not durable before the cut)"
    return None


def _off_window(ent: np.ndarray, window_id: int, window_ns: int) -> str | None:
    """A frame of a block must be of the block's window, LATE (earlier) or QUARANTINED."""
    flags = ent["flags"].astype(np.int64)
    own = (ent["timestamp_ns"].astype(object) - 1) // window_ns  # exact for any u64
    for i in range(len(ent)):
        f = int(flags[i])
        if f & FrameFlags.QUARANTINED:
            continue
        w = int(own[i])
        if (w >= window_id) if f & FrameFlags.LATE else (w != window_id):
            return (
                f"frame at t={int(ent['timestamp_ns'][i])} ns (stream {int(ent['stream_id'][i])}) "
                f"does not belong to window {window_id} of {window_ns} ns"
            )
    return None


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
    name = os.fspath(src)
    fd = os.open(name, os.O_RDONLY)
    try:
        try:
            scan = scan_blocks(fd, name)
        except CorruptFileError as exc:
            raise RecoveryError(src, f"header or stream table unreadable: {exc.what}") from exc
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if not len(scan.windows):
        raise RecoveryError(src, f"no complete window found ({scan.stop_reason})")
    # not NAME.tmp: for the default output that is the source itself
    tmp = out.with_name(out.name + ".recovering" + TMP_SUFFIX)
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
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
    os.replace(tmp, out)
    fsync_dir(out.parent)
    ts = scan.entries["timestamp_ns"]
    lost = 0 if scan.stop_reason == "end of file" else size - scan.end
    return RecoveryReport(
        source=src,
        output=out,
        windows=len(scan.windows),
        frames=len(scan.entries),
        good_bytes=scan.end,
        lost_bytes=lost,
        lost_frames=scan.lost_frames,
        stop_reason=scan.stop_reason,
        first_ns=int(ts.min()) if len(ts) else 0,
        last_ns=int(ts.max()) if len(ts) else 0,
    )


def _copy_prefix(src: BinaryIO, dst: BinaryIO, length: int) -> None:
    remaining = length
    while remaining:
        chunk = src.read(min(remaining, 8 << 20))
        if not chunk:
            raise RecoveryError(Path(src.name), "file shrank while recovering")
        dst.write(chunk)
        remaining -= len(chunk)
