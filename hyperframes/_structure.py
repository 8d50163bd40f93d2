"""Load and validate the structure of a file: header, index, tables, metadata.

Reads through storage (:mod:`hyperframes.storage.source`) and checks with the
format's rules (the index's: :mod:`hyperframes.format.structure`). Every offset
and size is checked against the file length before anything is allocated or
read, so a hostile file yields a typed error, never a huge allocation, a hang
or a crash. Unknown flag bits and reserved bytes are ignored (forward
compatibility); only what cannot be read is rejected.
"""

from __future__ import annotations

import os
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
from hyperframes.format.structure import (
    check_aliasing,
    check_entries,
    check_index,
    index_sound,
    stream_order,
    stream_slices,
)
from hyperframes.storage.objects import client_for, fail, is_url, split_s3_url
from hyperframes.storage.source import Fd, HeldBytes, pread_exact
from hyperframes.storage.source import file_size as _file_size

_LITTLE_ENDIAN: Final = int(HeaderFlags.LITTLE_ENDIAN)  # plain int: IntFlag ops cost ~1 us

__all__ = [
    "Structure",
    "read_header",
    "read_head",
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


def read_head(path: str, file_size: int | None = None) -> Header:
    """The checked header of ``path`` (a file, or an ``s3://`` object) read alone: one
    512-byte ``pread``, or one ranged GET (its ``Content-Range`` tells the size). Finalized
    or not: the caller decides. ``file_size``: a local file's size when already known."""
    if not is_url(path):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            return read_header(fd, path, os.fstat(fd).st_size if file_size is None else file_size)
        finally:
            os.close(fd)
    bucket, key = split_s3_url(path)
    try:
        got = client_for().get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{HEADER_SIZE - 1}")
        data: bytes = got["Body"].read()
    except Exception as exc:  # botocore raises many kinds; all become RemoteError
        raise fail(path, exc) from None
    total = str(got.get("ContentRange", "")).rpartition("/")[2]
    size = int(total) if total.isdigit() else len(data)
    return read_header(HeldBytes(data, size), path, size)


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
        slices = stream_order(index, ids)
    else:
        slices = index_sound(index, h, ids, allow_overlap)
    if slices is None:  # something failed the fast proof: the full checks name it
        check_index(path, index, h, meta)
        if not (allow_overlap or defer_entries):
            check_aliasing(path, index, h)
        slices = stream_slices(index, ids)
    table = load_windows(fd, path, h, file_size) if windows else np.zeros(0, WINDOW_DTYPE)
    return Structure(h, meta, index, table, file_size, slices)


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
