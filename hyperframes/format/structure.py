"""The rules of a finalized file's index: stream order, payload ranges, time order, aliasing.

Pure: the index (and the header that bounds its payload region) as read,
checked here without I/O; :mod:`hyperframes._structure` reads them through
storage and asks. The fast proofs (:func:`index_sound`: ~15 whole-array
operations) come first; when one might fail, the full checks
(:func:`check_index`, :func:`check_aliasing`) find and name the entry.
Every problem is a :class:`~hyperframes.errors.CorruptFileError` naming the
file and the byte offset.
"""

from __future__ import annotations

import numpy as np

from hyperframes.errors import CorruptFileError
from hyperframes.format.checks import overlap, range_problem
from hyperframes.format.layout import ALIGN, Header
from hyperframes.format.meta import Meta, stream_ids

__all__ = [
    "stream_slices",
    "stream_order",
    "index_sound",
    "entries_sound",
    "check_entries",
    "check_index",
    "check_aliasing",
]


def stream_slices(index: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]]:
    """Rows ``[lo, hi)`` of each stream id in an index sorted by stream (``lo == hi``: none)."""
    return _slices(index["stream_id"], ids)


def _slices(sid: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]]:
    keys = np.array(ids, dtype=np.uint16)
    lo = np.searchsorted(sid, keys, "left").tolist()
    hi = np.searchsorted(sid, keys, "right").tolist()
    return dict(zip(ids, zip(lo, hi, strict=True), strict=True))


def index_sound(
    index: np.ndarray, h: Header, ids: list[int], allow_overlap: bool
) -> dict[int, tuple[int, int]] | None:
    """The stream slices when every check of :func:`check_index` (and, unless
    ``allow_overlap``, :func:`check_aliasing`) passes, proven with few whole-array
    operations (~15 instead of ~40: at a few thousand entries each costs ~1 us);
    None when any might fail (the full checks then decide and name the problem).
    """
    slices = stream_order(index, ids)
    if slices is None or not entries_sound(index, h, allow_overlap):
        return None
    return slices


def stream_order(index: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]] | None:
    """The stream slices when the stream column is sorted and names only streams of
    ``ids`` (a sorted column whose slices cover every row); None when it might not."""
    n = len(index)
    if n < 2:
        return None
    sid = np.ascontiguousarray(index["stream_id"])  # one copy serves the next uses
    if (sid[1:] < sid[:-1]).any():
        return None
    slices = _slices(sid, ids)
    if sum(b - a for a, b in slices.values()) != n:
        return None
    return slices


def entries_sound(index: np.ndarray, h: Header, allow_overlap: bool) -> bool:
    """True when, in an index whose stream column is sorted, every payload lies aligned
    inside the payload region, each stream's timestamps are in order and (unless
    ``allow_overlap``) no payload overlaps another; False when one might not.

    One OR over the offsets proves the alignment, the lowest offset and the
    highest end the range; a time step backwards is allowed only where the
    stream changes; sorted offsets against sorted ends, the overlap test
    (:func:`_no_overlap`).
    """
    if len(index) < 2:
        return False
    words = index.view("<u8").reshape(-1, 4)
    off = words[:, 2]
    if int(np.bitwise_or.reduce(off)) & (ALIGN - 1):
        return False
    if int(off.min()) < h.data_offset or int(off.max()) > h.index_offset:
        return False
    if int((off + index["size"]).max()) > h.index_offset:  # no wrap: offsets <= index_offset
        return False
    ts = words[:, 1]
    back = np.flatnonzero(ts[1:] < ts[:-1]).tolist()
    if back:
        sid = index["stream_id"]
        if any(sid[k] == sid[k + 1] for k in back):
            return False
    return allow_overlap or _no_overlap(index)


def _no_overlap(index: np.ndarray) -> bool:
    """True when no payload is empty and none overlaps another (two timsorts: the offsets
    are a few sorted runs); False when one might."""
    size = index["size"]
    if not size.all():
        return False
    off = index.view("<u8").reshape(-1, 4)[:, 2]
    starts = np.sort(off, kind="stable")
    ends = np.sort(off + size, kind="stable")
    return not bool((ends[:-1] > starts[1:]).any())


def check_entries(path: str, index: np.ndarray, h: Header, meta: Meta) -> None:
    """What ``load_structure(defer_entries=True)`` left: every entry's payload range,
    alignment and time order, and no overlapping payloads (aliasing). The fast
    proof, else the full checks that name the entry."""
    if not entries_sound(index, h, allow_overlap=False):
        check_index(path, index, h, meta)
        check_aliasing(path, index, h)


def check_aliasing(path: str, entries: np.ndarray, h: Header, what: str = "index entries") -> None:
    """Refuse two entries whose payload bytes overlap: one small payload named many times
    would make every read of it cost again (and decode again), far beyond the file's size."""
    pair = overlap(entries["offset"], entries["size"])
    if pair is not None:
        a, b = pair
        raise CorruptFileError(
            path,
            f"{what} {a} and {b} name overlapping payload bytes "
            f"(at {int(entries['offset'][a])} and {int(entries['offset'][b])})",
            h.index_offset,
        )


def check_index(path: str, index: np.ndarray, h: Header, meta: Meta) -> None:
    """Vectorised checks of every entry (no per-entry Python loop).

    Works on a plain ``(n, 4)`` uint64 view of the 32-byte entries: contiguous
    words are several times faster to scan than structured-array fields.
    """
    if not len(index):
        return
    words = index.view("<u8").reshape(-1, 4)
    bad = range_problem(words[:, 2], words[:, 3] & 0xFFFFFFFF, h.data_offset, h.index_offset)
    if bad is not None:
        i = bad
        raise CorruptFileError(
            path,
            f"index entry {i} points at offset {int(words[i, 2])} "
            f"(+{int(words[i, 3] & 0xFFFFFFFF)} bytes), "
            f"outside the payload region [{h.data_offset}, {h.index_offset}) or unaligned",
            h.index_offset + 32 * i,
        )
    sid = (words[:, 0] & 0xFFFF).astype(np.uint16)
    known = np.zeros(1 << 16, dtype=bool)
    known[stream_ids(meta.streams)] = True
    unknown = ~known[sid]
    if unknown.any():
        i = int(np.argmax(unknown))
        raise CorruptFileError(
            path, f"index entry {i} names unknown stream {int(sid[i])}", h.index_offset + 32 * i
        )
    ts = words[:, 1]
    same = sid[1:] == sid[:-1]
    unsorted = sid[1:] < sid[:-1]
    unsorted |= same & (ts[1:] < ts[:-1])
    if unsorted.any():
        i = int(np.argmax(unsorted)) + 1
        raise CorruptFileError(
            path,
            f"index is not sorted by (stream, timestamp) at entry {i}",
            h.index_offset + 32 * i,
        )
