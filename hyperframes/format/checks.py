"""Pure validation of index entries, payload ranges, window ids, window blocks, payloads.

Shared by the reader (refuse on open), ``verify`` (report every problem) and
recovery (keep only what it can prove), so the three agree on what a valid
file is. Each check returns a description of the first problem, or None.
"""

from __future__ import annotations

import numpy as np

from hyperframes.format.codecs import CodecError, decode_aligned
from hyperframes.format.layout import (
    ALIGN,
    AUX_DTYPE,
    BLOCK_RECORD_SIZE,
    CODEC_MASK,
    INDEX_DTYPE,
    BlockRecord,
    FrameFlags,
)
from hyperframes.format.streams import StreamInfo
from hyperframes.format.windows import window_of

__all__ = [
    "span_problem",
    "range_problem",
    "overlap",
    "window_id_problem",
    "off_window",
    "payload_problem",
    "fits_block",
    "block_problem",
    "block_entries_problem",
    "BLOCK_TABLE_ROW",
]

_U64_MAX = (1 << 64) - 1


def span_problem(offset: int, size: int, lo: int, hi: int) -> bool:
    """Whether the one payload ``[offset, offset + size)`` is not inside ``[lo, hi)`` or not
    64-byte aligned (:func:`range_problem` for a single span of Python ints)."""
    return bool(offset % ALIGN) or offset < lo or size < 0 or offset + size > hi


def range_problem(offsets: np.ndarray, sizes: np.ndarray, lo: int, hi: int) -> int | None:
    """Position of the first payload not inside ``[lo, hi)`` or not 64-byte aligned.

    ``offsets`` and ``sizes`` are unsigned arrays; the checks cannot wrap around
    (an offset beyond ``hi`` is refused before ``offset + size`` is looked at).
    """
    if not len(offsets):
        return None
    off = offsets.astype(np.uint64, copy=False)
    size = sizes.astype(np.uint64, copy=False)
    if (
        int(off.min()) >= lo
        and int(off.max()) <= hi
        and not (off & np.uint64(ALIGN - 1)).any()
        and int((off + size).max()) <= hi  # no wrap: every offset is at most hi < 2**63
    ):
        return None
    hi64 = np.uint64(hi)
    bad = off < np.uint64(lo)
    bad |= off > hi64
    bad |= (off & np.uint64(ALIGN - 1)) != 0
    bad |= size > hi64 - np.minimum(off, hi64)
    return int(np.argmax(bad))


def overlap(offsets: np.ndarray, sizes: np.ndarray) -> tuple[int, int] | None:
    """Positions of two payloads whose byte ranges overlap (aliasing), or None.

    Call after :func:`range_problem` (ranges must not wrap). Empty payloads
    occupy no bytes and never overlap. Non-empty ranges are disjoint exactly
    when, with starts and ends sorted independently, every end is at most the
    next start; two plain sorts are cheaper than an argsort and its gathers,
    which only a file that fails needs (to name the two entries).
    """
    if len(offsets) < 2:
        return None
    off = offsets.astype(np.uint64, copy=False)
    size = sizes.astype(np.uint64, copy=False)
    if not size.all():
        keep = np.flatnonzero(size)
        pair = overlap(off[keep], size[keep])
        return None if pair is None else (int(keep[pair[0]]), int(keep[pair[1]]))
    ends = np.sort(off + size, kind="stable")  # timsort: a few sorted runs (one per stream)
    if not (ends[:-1] > np.sort(off, kind="stable")[1:]).any():
        return None
    order = np.argsort(off, kind="stable")
    start = off[order]
    bad = start[1:] < (start + size[order])[:-1]
    k = int(np.argmax(bad))
    a, b = int(order[k]), int(order[k + 1])
    return (a, b) if a < b else (b, a)


def window_id_problem(window_id: int, window_ns: int) -> str | None:
    """Why ``window_id`` cannot be a window of a file (its span leaves 0..2**64-1), or None."""
    if window_id < 0 or (window_id + 1) * window_ns > _U64_MAX:
        return f"window id {window_id} x {window_ns} ns lies outside 0..2**64-1 ns"
    return None


def fits_block(timestamp_ns: int, flags: int, window_id: int, window_ns: int) -> bool:
    """The block rule: a frame of block ``window_id`` is of that window, LATE or QUARANTINED.

    A LATE frame belongs to an earlier window; a QUARANTINED one may carry any stamp.
    """
    if flags & _QUARANTINED:
        return True
    own = window_of(timestamp_ns, window_ns)
    return own < window_id if flags & _LATE else own == window_id


def off_window(ent: np.ndarray, window_id: int, window_ns: int) -> str | None:
    """The first frame of a block's entries that breaks :func:`fits_block`, described."""
    for e in ent:
        ts = int(e["timestamp_ns"])
        if not fits_block(ts, int(e["flags"]), window_id, window_ns):
            return (
                f"frame at t={ts} ns (stream {int(e['stream_id'])}) "
                f"does not belong to window {window_id} of {window_ns} ns"
            )
    return None


def payload_problem(
    stream: StreamInfo, flags: int, stored: memoryview | bytes | np.ndarray, max_size: int
) -> str | None:
    """Why a stored payload cannot be read as a frame of ``stream``, or None.

    Decodes it (bounded by ``max_size`` and the codec ratio limit) and checks
    the decoded size against the stream's dtype and shape.
    """
    data = stored.data if isinstance(stored, np.ndarray) else stored
    size = len(data)
    if flags & _DECODE_BITS:
        try:
            size = decode_aligned(data, flags, stream.itemsize, max_size).size
        except CodecError as exc:
            return str(exc)
    return stream.size_problem(size)


_DECODE_BITS = CODEC_MASK | int(FrameFlags.SHUFFLED)
_QUARANTINED = int(FrameFlags.QUARANTINED)  # plain ints: enum ops cost ~1 us per frame
_LATE = int(FrameFlags.LATE)


#: One row of a window block's entry table: its index entry, then its aux row.
BLOCK_TABLE_ROW = INDEX_DTYPE.itemsize + AUX_DTYPE.itemsize


def block_problem(
    rec: BlockRecord, pos: int, limit: int, window_ns: int, last_window: int | None
) -> str | None:
    """What is wrong with a block record at ``pos`` (before reading its entries), or None."""
    table_end = pos + BLOCK_RECORD_SIZE + rec.frame_count * BLOCK_TABLE_ROW
    if rec.block_size > limit - pos:
        return "is truncated"
    if rec.block_size % ALIGN or rec.payload_offset % ALIGN:
        return f"block size {rec.block_size} or payload offset {rec.payload_offset} unaligned"
    if not table_end <= rec.payload_offset <= pos + rec.block_size:
        return f"payload offset {rec.payload_offset} outside its block"
    problem = window_id_problem(rec.window_id, window_ns)
    if problem is not None:
        return problem
    if last_window is not None and rec.window_id <= last_window:
        return "repeats or goes back in time"
    return None


def block_entries_problem(
    ent: np.ndarray, rec: BlockRecord, pos: int, known: np.ndarray, window_ns: int
) -> str | None:
    """What is wrong with a block's entries (ranges, streams, windows), or None; no I/O."""
    bad = range_problem(ent["offset"], ent["size"], rec.payload_offset, pos + rec.block_size)
    if bad is not None:
        return f"frame at {int(ent['offset'][bad])} lies outside its block or is unaligned"
    unknown = ~known[ent["stream_id"]]
    if unknown.any():
        return f"a frame names unknown stream {int(ent['stream_id'][np.argmax(unknown)])}"
    pair = overlap(ent["offset"], ent["size"])
    if pair is not None:
        return f"frames at {int(ent['offset'][pair[0]])} and {int(ent['offset'][pair[1]])} overlap"
    return off_window(ent, rec.window_id, window_ns)
