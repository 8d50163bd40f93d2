"""Load and validate the structure of a file: header, index, tables, metadata.

Every offset and size is checked against the file length before anything is
allocated or read, so a hostile file yields a typed error, never a huge
allocation, a hang or a crash. Unknown flag bits and reserved bytes are
ignored (forward compatibility); only what cannot be read is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from hyperframes.errors import (
    ChecksumError,
    CorruptFileError,
    NotFinalizedError,
    UnsupportedVersionError,
)
from hyperframes.format.checks import overlap, range_problem, span_problem
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import (
    ALIGN,
    AUX_DTYPE,
    HEADER_SIZE,
    INDEX_DTYPE,
    MAGIC,
    QUARANTINE_DTYPE,
    VERSION,
    WINDOW_DTYPE,
    Header,
    HeaderFlags,
)
from hyperframes.format.meta import MAX_META_SIZE, Meta, decode_meta, stream_ids
from hyperframes.storage.source import Fd, pread_exact
from hyperframes.storage.source import file_size as _file_size

_LITTLE_ENDIAN: Final = int(HeaderFlags.LITTLE_ENDIAN)  # plain int: IntFlag ops cost ~1 us

__all__ = [
    "Structure",
    "read_header",
    "read_meta",
    "load_structure",
    "check_entries",
    "load_aux",
    "load_quarantine",
    "stream_slices",
]


@dataclass(frozen=True, slots=True)
class Structure:
    """Everything a reader keeps in memory about a finalized file."""

    header: Header
    meta: Meta
    index: np.ndarray  # INDEX_DTYPE, sorted by (stream_id, timestamp_ns)
    windows: np.ndarray  # WINDOW_DTYPE, sorted by window_id
    file_size: int
    slices: dict[int, tuple[int, int]]  # stream id -> its index rows [lo, hi)


def read_header(fd: Fd, path: str, file_size: int) -> Header:
    """Read and check the 512-byte header (finalized or not)."""
    if file_size < HEADER_SIZE:
        raise CorruptFileError(path, f"file is {file_size} bytes, shorter than the header", 0)
    header, magic, stored, computed = Header.decode(pread_exact(fd, HEADER_SIZE, 0))
    if magic != MAGIC:
        raise CorruptFileError(path, f"bad magic {magic!r}, expected {MAGIC!r}", 0)
    if header.version < 1:  # no format version 0 ever existed: damage, not a newer writer
        raise CorruptFileError(
            path, f"header field Version is {header.version}, versions start at 1", 4
        )
    if header.version != VERSION:
        raise UnsupportedVersionError(path, header.version, VERSION)
    if stored != computed:
        raise ChecksumError(path, "header", 0, stored, computed)
    if header.header_size != HEADER_SIZE:
        raise CorruptFileError(path, f"header size {header.header_size}, expected 512", 6)
    if not header.flags & _LITTLE_ENDIAN:
        raise CorruptFileError(path, "header flags lack the little-endian bit", 8)
    if header.window_ns <= 0:
        raise CorruptFileError(path, "window length is 0", 52)
    return header


def _region(path: str, what: str, offset: int, size: int, lo: int, hi: int) -> None:
    if span_problem(offset, size, lo, hi):
        raise CorruptFileError(
            path,
            f"{what} [{offset}, {offset + size}) lies outside [{lo}, {hi}) or is unaligned",
            offset,
        )


def read_meta(
    fd: Fd,
    path: str,
    offset: int,
    size: int,
    file_size: int,
    crc: int | None,
    *,
    lazy: bool = False,
) -> Meta:
    """Read, check and decode the JSON metadata block (``lazy``: see :func:`decode_meta`)."""
    _region(path, "metadata", offset, size, HEADER_SIZE, file_size)
    if size > MAX_META_SIZE:
        raise CorruptFileError(path, f"metadata block of {size} bytes exceeds the limit", offset)
    data = pread_exact(fd, size, offset)
    if crc is not None and crc32c(data) != crc:
        raise ChecksumError(path, "metadata", offset, crc, crc32c(data))
    try:
        return decode_meta(data, lazy=lazy)
    except ValueError as exc:  # UnicodeDecodeError and json's errors are ValueErrors too
        raise CorruptFileError(path, f"metadata: {exc}", offset) from None
    except (KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        # decode_meta validates every field it uses; this is a safety net only
        raise CorruptFileError(
            path, f"metadata does not decode: {type(exc).__name__}: {exc}", offset
        ) from None


def _table(
    fd: Fd,
    path: str,
    what: str,
    offset: int,
    size: int,
    crc: int,
    dtype: np.dtype,
    count: int,
    lo: int,
    hi: int,
) -> np.ndarray:
    _region(path, what, offset, size, lo, hi)
    if size != count * dtype.itemsize:
        raise CorruptFileError(
            path, f"{what} is {size} bytes, expected {count} x {dtype.itemsize}", offset
        )
    data = pread_exact(fd, size, offset)
    actual = crc32c(data)
    if actual != crc:
        raise ChecksumError(path, what, offset, crc, actual)
    return np.frombuffer(data, dtype=dtype)


def load_structure(
    fd: Fd,
    path: str,
    *,
    allow_overlap: bool = False,
    windows: bool = True,
    lazy_streams: bool = False,
    defer_entries: bool = False,
    file_size: int | None = None,
) -> Structure:
    """Validate a finalized file and load its index, window table and metadata.

    Index entries whose payloads overlap (aliasing) are refused unless
    ``allow_overlap`` (``verify`` reports them itself and goes on checking).
    With ``windows=False`` the window table is left for :func:`load_windows`
    (a reader that only looks frames up by time never needs it); the
    structure then holds an empty one. With ``lazy_streams`` each stream
    table entry is validated on its first use (:class:`~hyperframes.format.meta.StreamTable`).
    With ``defer_entries`` open proves only what the stream slices rely on
    (the stream column sorted, every entry naming a known stream); the rest
    of each entry (payload range and alignment, time order, no overlap) is
    the caller's: :func:`check_entries` before a second frame, and
    :func:`~hyperframes.format.checks.span_problem` of its entry / a stream's own
    time order for the one read before it. ``file_size``: the caller's
    ``fstat`` of ``fd``, when it has one.
    """
    if file_size is None:
        file_size = _file_size(fd)
    h = read_header(fd, path, file_size)
    if not h.finalized:
        raise NotFinalizedError(path)
    if not HEADER_SIZE <= h.data_offset <= h.index_offset:
        raise CorruptFileError(path, f"data offset {h.data_offset} outside the file", 60)
    if not isinstance(fd, int) and h.index_offset < file_size:
        fd.prefetch(h.index_offset, file_size - h.index_offset)  # every table: one request
    index = _table(
        fd,
        path,
        "index",
        h.index_offset,
        h.index_size,
        h.index_crc,
        INDEX_DTYPE,
        h.frame_count,
        h.data_offset,
        file_size,
    )
    meta = read_meta(fd, path, h.meta_offset, h.meta_size, file_size, h.meta_crc, lazy=lazy_streams)
    if len(meta.streams) != h.stream_count:
        raise CorruptFileError(
            path, f"header says {h.stream_count} streams, table has {len(meta.streams)}", 32
        )
    if meta.window_ns != h.window_ns:
        raise CorruptFileError(path, "header and metadata disagree on window length", 52)
    ids = sorted(stream_ids(meta.streams))
    if defer_entries:  # only what the slices rely on: stream order, known streams
        slices = _stream_order(index, ids)
    else:
        slices = _index_sound(index, h, ids, allow_overlap)
    if slices is None:  # something failed the fast proof: the full checks name it
        _check_index(path, index, h, meta)
        if not (allow_overlap or defer_entries):
            _check_aliasing(path, index, h)
        slices = stream_slices(index, ids)
    table = load_windows(fd, path, h, file_size) if windows else np.zeros(0, WINDOW_DTYPE)
    return Structure(h, meta, index, table, file_size, slices)


def stream_slices(index: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]]:
    """Rows ``[lo, hi)`` of each stream id in an index sorted by stream (``lo == hi``: none)."""
    return _slices(index["stream_id"], ids)


def _slices(sid: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]]:
    keys = np.array(ids, dtype=np.uint16)
    lo = np.searchsorted(sid, keys, "left").tolist()
    hi = np.searchsorted(sid, keys, "right").tolist()
    return dict(zip(ids, zip(lo, hi, strict=True), strict=True))


def _index_sound(
    index: np.ndarray, h: Header, ids: list[int], allow_overlap: bool
) -> dict[int, tuple[int, int]] | None:
    """The stream slices when every check of :func:`_check_index` (and, unless
    ``allow_overlap``, :func:`_check_aliasing`) passes, proven with few whole-array
    operations (~15 instead of ~40: at a few thousand entries each costs ~1 us);
    None when any might fail (the full checks then decide and name the problem).
    """
    slices = _stream_order(index, ids)
    if slices is None or not _entries_sound(index, h, allow_overlap):
        return None
    return slices


def _stream_order(index: np.ndarray, ids: list[int]) -> dict[int, tuple[int, int]] | None:
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


def _entries_sound(index: np.ndarray, h: Header, allow_overlap: bool) -> bool:
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
    if not _entries_sound(index, h, allow_overlap=False):
        _check_index(path, index, h, meta)
        _check_aliasing(path, index, h)


def load_windows(fd: Fd, path: str, h: Header, file_size: int) -> np.ndarray:
    """The window table of a finalized file, checked (CRC, order, payload ranges)."""
    windows = _table(
        fd,
        path,
        "window table",
        h.windows_offset,
        h.windows_size,
        h.windows_crc,
        WINDOW_DTYPE,
        h.window_count,
        h.data_offset,
        file_size,
    )
    if len(windows) > 1 and np.any(np.diff(windows["window_id"]) <= 0):
        raise CorruptFileError(path, "window table is not sorted by window id", h.windows_offset)
    bad = range_problem(
        windows["payload_offset"], windows["payload_size"], h.data_offset, h.index_offset
    )
    if bad is not None:
        raise CorruptFileError(
            path,
            f"window table row {bad} points outside the payload region "
            f"[{h.data_offset}, {h.index_offset}) or is unaligned",
            h.windows_offset + WINDOW_DTYPE.itemsize * bad,
        )
    return windows


def _check_aliasing(path: str, entries: np.ndarray, h: Header, what: str = "index entries") -> None:
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


def _check_index(path: str, index: np.ndarray, h: Header, meta: Meta) -> None:
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


def load_aux(fd: Fd, path: str, h: Header, count: int) -> np.ndarray:
    """The per-entry receive time / duration table (empty if the file has none)."""
    if h.aux_size == 0:
        return np.zeros(count, AUX_DTYPE)
    return _table(
        fd,
        path,
        "aux table",
        h.aux_offset,
        h.aux_size,
        h.aux_crc,
        AUX_DTYPE,
        count,
        h.data_offset,
        _file_size(fd),
    )


def load_quarantine(fd: Fd, path: str, h: Header, index: np.ndarray | None = None) -> np.ndarray:
    """The quarantine table (QUARANTINE_DTYPE, write order; empty if the file has none).

    With ``index`` given, a quarantined payload that overlaps another one (or
    an indexed one) is refused as aliasing.
    """
    if h.quarantine_count == 0 and h.quarantine_size == 0:
        return np.zeros(0, QUARANTINE_DTYPE)
    table = _table(
        fd,
        path,
        "quarantine table",
        h.quarantine_offset,
        h.quarantine_size,
        h.quarantine_crc,
        QUARANTINE_DTYPE,
        h.quarantine_count,
        h.data_offset,
        _file_size(fd),
    )
    bad = range_problem(table["offset"], table["size"], h.data_offset, h.index_offset)
    if bad is not None:
        raise CorruptFileError(
            path,
            f"quarantine entry {bad} points outside the payload region or is unaligned",
            h.quarantine_offset + QUARANTINE_DTYPE.itemsize * bad,
        )
    if index is not None:
        offsets = np.concatenate([index["offset"], table["offset"]])
        pair = overlap(offsets, np.concatenate([index["size"], table["size"]]))
        if pair is not None:
            raise CorruptFileError(
                path,
                "a quarantined frame's payload overlaps another payload "
                f"(at {int(offsets[pair[0]])} and {int(offsets[pair[1]])})",
                h.quarantine_offset,
            )
    return table
