"""Walk the window blocks of a file (finalized or cut short) and keep what can be proven.

A block is kept only if its record and entry table are intact and everything
it says is consistent: the block is 64-byte aligned and lies inside the file,
its window id is on the u64 grid and later than the previous block's, every
entry names a known stream, lies inside the block, 64-byte aligned, without
overlapping another, and belongs to the block's window (or is LATE or
QUARANTINED); with ``check_payloads`` every payload also matches its CRC32C,
decodes, and fits its stream's dtype. The walk stops at the first block that
fails. Used by recovery (what it keeps is exactly what ``verify`` accepts)
and by ``verify`` (to compare the blocks with the index). The rules are the
format's (:func:`hyperframes.format.checks.block_problem` and
:func:`~hyperframes.format.checks.block_entries_problem`); this walk reads
through storage and asks them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hyperframes._structure import read_header, read_meta
from hyperframes.errors import CorruptFileError
from hyperframes.format.checks import (
    BLOCK_TABLE_ROW,
    block_entries_problem,
    block_problem,
    payload_problem,
)
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import (
    ALIGN,
    AUX_DTYPE,
    BLOCK_RECORD_SIZE,
    HEADER_SIZE,
    INDEX_DTYPE,
    WINDOW_DTYPE,
    BlockRecord,
)
from hyperframes.format.meta import Meta
from hyperframes.format.streams import StreamInfo
from hyperframes.storage.source import Fd, file_size, pread_exact

__all__ = ["BlockScan", "scan_blocks", "END_OF_FILE"]

END_OF_FILE = "end of file"


@dataclass(frozen=True, slots=True)
class BlockScan:
    """What :func:`scan_blocks` found: the intact blocks' entries, aux rows and windows."""

    meta: Meta
    data_offset: int
    end: int  # offset after the last intact block
    entries: np.ndarray  # INDEX_DTYPE, write order
    aux: np.ndarray  # AUX_DTYPE, same order
    windows: np.ndarray  # WINDOW_DTYPE, one row per intact block
    lost_frames: int  # frames named by the first block that failed, if readable
    stop_reason: str  # END_OF_FILE when every block was intact


def scan_blocks(
    fd: Fd, path: str, check_payloads: bool = True, max_frame_bytes: int = 1 << 30
) -> BlockScan:
    """Walk the window blocks of ``fd`` from DataOffset; pure reading.

    Raises :class:`CorruptFileError` when the header or the stream table is
    unreadable (nothing can be proven then).
    """
    size = file_size(fd)
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
    meta_end = HEADER_SIZE if h.finalized else h.meta_offset + h.meta_size
    if h.data_offset % ALIGN or not meta_end <= h.data_offset <= size:
        raise CorruptFileError(
            path, f"data offset {h.data_offset} is unaligned or overlaps the metadata", 60
        )
    limit = h.index_offset if h.finalized and h.data_offset <= h.index_offset <= size else size
    streams = {s.id: s for s in meta.streams}
    known = np.zeros(1 << 16, dtype=bool)
    known[list(streams)] = True
    pos = h.data_offset
    entries: list[np.ndarray] = []
    auxes: list[np.ndarray] = []
    windows: list[tuple[int, int, int, int, int]] = []
    lost_frames = 0
    reason = END_OF_FILE
    last_window: int | None = None
    while pos < limit:
        rec = BlockRecord.decode(pread_exact(fd, BLOCK_RECORD_SIZE, pos))
        if rec is None:
            reason = f"no intact window record at offset {pos}"
            break
        where = f"window {rec.window_id} at offset {pos}"
        problem = block_problem(rec, pos, limit, meta.window_ns, last_window)
        if problem is not None:
            lost_frames = rec.frame_count
            reason = f"{where}: {problem}"
            break
        n = rec.frame_count
        table = pread_exact(fd, n * BLOCK_TABLE_ROW, pos + BLOCK_RECORD_SIZE)
        if crc32c(table) != rec.entries_crc:
            lost_frames = n
            reason = f"{where}: entry table checksum mismatch"
            break
        ent = np.frombuffer(table, INDEX_DTYPE, count=n)
        aux = np.frombuffer(table, AUX_DTYPE, count=n, offset=n * INDEX_DTYPE.itemsize)
        problem = block_entries_problem(ent, rec, pos, known, meta.window_ns)
        if problem is None and check_payloads:
            problem = _payloads_problem(fd, ent, streams, max_frame_bytes)
        if problem is not None:
            lost_frames = n
            reason = f"{where}: {problem}"
            break
        entries.append(ent)
        auxes.append(aux)
        end = pos + rec.block_size
        windows.append((rec.window_id, rec.payload_offset, end - rec.payload_offset, n, rec.flags))
        last_window = rec.window_id
        pos = end
    return BlockScan(
        meta=meta,
        data_offset=h.data_offset,
        end=pos,
        entries=np.concatenate(entries) if entries else np.empty(0, INDEX_DTYPE),
        aux=np.concatenate(auxes) if auxes else np.empty(0, AUX_DTYPE),
        windows=np.array(windows, dtype=WINDOW_DTYPE),
        lost_frames=lost_frames,
        stop_reason=reason,
    )


def _payloads_problem(
    fd: Fd, ent: np.ndarray, streams: dict[int, StreamInfo], max_frame_bytes: int
) -> str | None:
    """Every payload of a block matches its CRC32C, decodes and fits its stream, or why not."""
    for e in ent.tolist():
        sid, flags, _, _, off, size, crc = e
        stored = pread_exact(fd, size, off)
        if len(stored) != size or crc32c(stored) != crc:
            return f"frame at {off} fails its checksum (not durable before the cut)"
        problem = payload_problem(streams[sid], flags, stored, max_frame_bytes)
        if problem is not None:
            return f"frame at {off}: {problem}"
    return None
