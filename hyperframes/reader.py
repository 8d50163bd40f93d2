"""HyperframeReader: random and window access to a finalized file with ``pread``.

The reader holds one file descriptor and never moves a file position, so one
reader may serve several threads. It cannot be pickled: open one per process
(a PyTorch DataLoader worker opens its own, see :mod:`hyperframes.torch`).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

import numpy as np

from hyperframes._structure import (
    Structure,
    check_entries,
    load_aux,
    load_quarantine,
    load_structure,
    load_windows,
)
from hyperframes.errors import ChecksumError, CorruptFileError, FrameNotFoundError
from hyperframes.format import search
from hyperframes.format.buffers import aligned_empty, scratch
from hyperframes.format.checks import span_problem
from hyperframes.format.codecs import CodecError, decode_aligned
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import CODEC_MASK, FrameFlags, Header
from hyperframes.format.meta import StreamTable, stream_ids
from hyperframes.format.split import default_threads
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.format.windows import window_end, window_start
from hyperframes.storage.objects import RemoteFile, is_url
from hyperframes.storage.source import Fd, pread_into

__all__ = ["HyperframeReader", "Frame", "Hyperframe", "Mode"]

Mode = Literal["nearest", "before", "after"]
_COALESCE_GAP = 64 << 10  # read across holes up to this size rather than issue another pread
_DECODE_MASK = CODEC_MASK | int(FrameFlags.SHUFFLED)  # plain ints: enum ops cost ~1 us each
_WINDOW_OF_ZERO = (1 << 64) - 1  # window -1 (a frame stamped 0) in the uint64 window keys
# an index row as a tuple: stream_id, flags, stream_index, timestamp_ns, offset, size, crc32c
_Row = tuple[int, int, int, int, int, int, int]


def pread_into_aligned(fd: Fd, size: int, offset: int) -> np.ndarray:
    """``size`` bytes at ``offset`` in a fresh 64-byte-aligned array (shorter at end of file)."""
    return pread_into(fd, aligned_empty(size), offset)


def pread_scratch(fd: Fd, size: int, offset: int) -> np.ndarray:
    """Like :func:`pread_into_aligned`, into this thread's scratch buffer.

    For bytes that are only decoded from: the next call in the same thread
    overwrites them (:func:`hyperframes.format.buffers.scratch`).
    """
    return pread_into(fd, scratch(size), offset)


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. ``data`` starts on a 64-byte boundary in memory."""

    stream: StreamInfo
    timestamp_ns: int
    stream_index: int
    flags: int
    data: np.ndarray  # uint8, 64-byte aligned
    path: str = ""  # the file it was read from (for error messages)

    @property
    def stream_id(self) -> int:
        """The frame's stream id."""
        return self.stream.id

    @property
    def keyframe(self) -> bool:
        """True for codec keyframes (H.265 IDR access units...)."""
        return bool(self.flags & FrameFlags.KEYFRAME)

    @property
    def hardware_timestamp(self) -> bool:
        """True when ``timestamp_ns`` is a sensor capture time, False for host time."""
        return bool(self.flags & FrameFlags.HW_TIMESTAMP)

    @property
    def late(self) -> bool:
        """True when the recorder received this frame after its window had closed."""
        return bool(self.flags & FrameFlags.LATE)

    @property
    def quarantined(self) -> bool:
        """True when the recorder judged the timestamp implausible (clock jump)."""
        return bool(self.flags & FrameFlags.QUARANTINED)

    def tobytes(self) -> bytes:
        """The payload as bytes (a copy)."""
        return self.data.tobytes()

    def array(self) -> np.ndarray:
        """The payload as an array of the stream's dtype and shape (a view, no copy).

        Raises :class:`CorruptFileError` when the payload's size does not fit
        the dtype and shape, ``TypeError`` for a stream that is not an array.
        """
        s = self.stream
        try:
            return s.as_array(self.data)
        except ValueError as exc:
            raise CorruptFileError(
                self.path or "<frame>",
                f"frame of stream {s.id} ({s.name}) at t={self.timestamp_ns} ns: {exc}",
            ) from None

    def image(self) -> np.ndarray:
        """A camera frame as pixels: ``jpeg``/``png`` decoded and ``raw-rgb``/``raw-bgr``
        as ``(H, W, 3)`` uint8 R, G, B (``raw-bgr`` swapped, never left in B, G, R order);
        ``raw-gray8``/``raw-gray16``/``raw-f32`` as ``(H, W)`` uint8/uint16/float32.

        Raw sizes come from the stream's ``extra["width"]``/``["height"]`` (or its
        shape). JPEG uses :func:`hyperframes.images.decode_image` (simplejpeg when
        installed, else Pillow). Raises :class:`CorruptFileError` when the payload
        does not decode or is not the stream's size,
        :class:`hyperframes.images.ImageLayoutError` for a raw stream without a
        size, ValueError for a stream of another encoding.
        """
        from hyperframes.images import (  # noqa: PLC0415 - PIL
            IMAGE_ENCODINGS,
            RAW_IMAGE_ENCODINGS,
            decode_image,
            raw_image,
            raw_size,
        )

        s = self.stream
        if s.encoding not in IMAGE_ENCODINGS and s.encoding not in RAW_IMAGE_ENCODINGS:
            known = ", ".join(sorted(IMAGE_ENCODINGS | RAW_IMAGE_ENCODINGS.keys()))
            raise ValueError(
                f"stream {s.name!r} holds {s.encoding!r}, not an image ({known}); "
                "array streams: Frame.array(); H.265: hyperframes.video"
            )
        size = raw_size(s.encoding, s.extra, s.shape) if s.encoding in RAW_IMAGE_ENCODINGS else None
        try:
            if size is None:
                return decode_image(self.data, s.encoding)
            return raw_image(self.data, s.encoding, *size)
        except ValueError as exc:
            raise CorruptFileError(
                self.path or "<frame>",
                f"frame of stream {s.id} ({s.name}) at t={self.timestamp_ns} ns: {exc}",
            ) from None

    def __repr__(self) -> str:
        return (
            f"Frame({self.stream.name!r}, t={self.timestamp_ns}, #{self.stream_index}, "
            f"{self.data.nbytes} bytes{', keyframe' if self.keyframe else ''})"
        )


_new = object.__new__
_SET_STREAM, _SET_TS, _SET_INDEX, _SET_FLAGS, _SET_DATA, _SET_PATH = (
    Frame.__dict__[name].__set__
    for name in ("stream", "timestamp_ns", "stream_index", "flags", "data", "path")
)


def _frame(
    stream: StreamInfo, ts: int, stream_index: int, flags: int, data: np.ndarray, path: str
) -> Frame:
    """``Frame(...)`` at half the cost: the slot setters directly, without the frozen
    dataclass's ``object.__setattr__`` per field (~0.8 of a small read's ~5 us)."""
    f: Frame = _new(Frame)
    _SET_STREAM(f, stream)
    _SET_TS(f, ts)
    _SET_INDEX(f, stream_index)
    _SET_FLAGS(f, flags)
    _SET_DATA(f, data)
    _SET_PATH(f, path)
    return f


@dataclass(frozen=True, slots=True)
class Hyperframe:
    """All frames of one window, per stream in timestamp order.

    ``hf[stream]`` takes a stream id or name and gives that stream's frames
    in this window (``[]`` when it has none here); a name or id the file
    does not have raises KeyError listing the streams. ``frames`` maps
    stream ids to frames; ``missing`` lists the ids the recorder expected
    but did not get for this window.
    """

    window_id: int
    start_ns: int  # exclusive
    end_ns: int  # inclusive
    frames: dict[int, list[Frame]]
    missing: tuple[int, ...] = field(default=())
    #: the file's streams by name (for ``hf["cam_front"]``); empty: only ids are checked
    names: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, stream: int | str) -> list[Frame]:
        if isinstance(stream, str):
            if stream not in self.names:
                raise KeyError(
                    f"window {self.window_id}: no stream named {stream!r}; "
                    f"streams: {sorted(self.names)}"
                )
            return self.frames.get(self.names[stream], [])
        if self.names and stream not in self.names.values() and stream not in self.frames:
            ids = {i: n for n, i in self.names.items()}
            raise KeyError(
                f"window {self.window_id}: no stream id {stream}; streams: "
                + ", ".join(f"{i} ({ids[i]})" for i in sorted(ids))
            )
        return self.frames.get(stream, [])

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{fs[0].stream.name}: {len(fs)}" for _, fs in sorted(self.frames.items()) if fs
        )
        return (
            f"Hyperframe(window {self.window_id}, ({self.start_ns}, {self.end_ns}] ns, "
            f"{{{counts}}}" + (f", missing {list(self.missing)}" if self.missing else "") + ")"
        )


class _Streams(Mapping[int, StreamInfo]):
    """A reader's streams by id, each stream table entry validated on its first use.

    An entry that fails its checks is a :class:`CorruptFileError` naming the
    file, raised where that stream is first used (opening checked its id and
    name). ``cache`` holds the entries validated so far.
    """

    __slots__ = ("_offset", "_path", "_pos", "_table", "cache")

    def __init__(self, table: Sequence[StreamInfo], path: str, offset: int) -> None:
        self._table = table
        self._pos = {sid: k for k, sid in enumerate(stream_ids(table))}
        self._path = path
        self._offset = offset
        self.cache: dict[int, StreamInfo] = {}

    def __getitem__(self, sid: int) -> StreamInfo:
        info = self.cache.get(sid)
        if info is None:
            k = self._pos[sid]  # KeyError for an unknown id
            try:
                info = self._table[k]
            except ValueError as exc:
                raise CorruptFileError(self._path, f"metadata: {exc}", self._offset) from None
            self.cache[sid] = info
        return info

    def __iter__(self) -> Iterator[int]:
        return iter(self._pos)

    def __len__(self) -> int:
        return len(self._pos)

    def __contains__(self, sid: object) -> bool:
        return sid in self._pos

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{sid}: {self[sid]!r}' for sid in self._pos)}}}"


class HyperframeReader:
    """Reads a finalized hyperframe file.

    Opening reads the header, index and metadata once (a few ms for a
    million frames) and checks what every lookup relies on: the checksums,
    the stream ids and names, the index sorted by stream. The rest is checked
    where it is first needed: each stream's entry of the stream table on the
    first use of that stream, a stream's time order when its timestamps are
    first used, every index entry (payload range, time order, no aliasing)
    before a second frame is read, a batch or the whole index (the one frame
    read before checks its own entry), the window table on first use (time
    lookups never need it). Payloads are read on demand with ``pread``. With
    ``verify=True`` (the default) every payload read is checked against its
    CRC32C.

    ``threads`` bounds the threads that decode one large frame read alone
    (:meth:`read`, :meth:`frame_at`): its blocks, and its CRC check
    alongside. Default: up to 4 of the CPUs this process may use; 1 decodes
    on the calling thread only (say, in each of many DataLoader workers).
    Batch reads (windows, ranges) decode each frame on the calling thread.

    ``len(reader)`` is the number of windows and ``for hf in reader`` yields
    each window as a :class:`Hyperframe` (one read each, in time order);
    streams are named by id or name everywhere. Use it as a context manager
    (or call :meth:`close`); it is not picklable: open one per process.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        verify: bool = True,
        max_frame_bytes: int = 1 << 30,
        threads: int | None = None,
    ) -> None:
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        self._name = os.fspath(path)
        self._path: Path | None = None
        self.verify = verify
        self.max_frame_bytes = max_frame_bytes
        self.threads = default_threads() if threads is None else threads
        self.remote: RemoteFile | None = None
        """For an ``s3://`` URL: the object, with its request counts (``remote.stats``)."""
        if is_url(self._name):
            self.remote = RemoteFile(self._name)
            self._fd: Fd = self.remote  # storage.source reads it like a descriptor
        else:
            self._fd = os.open(self._name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = None
            if isinstance(self._fd, int):
                st = os.fstat(self._fd)
                if stat.S_ISDIR(st.st_mode):  # else a nameless EISDIR on read
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self._name)
                size = st.st_size
            self._s: Structure = load_structure(
                self._fd,
                self._name,
                windows=False,
                lazy_streams=True,
                defer_entries=True,
                file_size=size,
            )
        except BaseException:
            self.close()
            raise
        table = self._s.meta.streams
        self.streams: Mapping[int, StreamInfo] = _Streams(
            table, self._name, self.header.meta_offset
        )
        """The file's streams by id (each validated the first time it is used)."""
        self._infos = self.streams.cache  # the validated ones: the read paths look here first
        self._by_name = (
            dict(zip(table.names, table.ids, strict=True))
            if isinstance(table, StreamTable)
            else {s.name: s.id for s in table}
        )
        self._slices = self._s.slices
        self._ts: dict[int, np.ndarray] = {}
        self._ts_lists: dict[int, list[int]] = {}  # the same as Python ints, for lookups
        self._searched: set[int] = set()  # streams looked up once (the list is made on the 2nd)
        self._by_window: tuple[np.ndarray, np.ndarray] | None = None
        self._aux: np.ndarray | None = None
        self._quarantine: np.ndarray | None = None
        self._window_table: np.ndarray | None = None  # loaded on first use
        self._lock = threading.Lock()
        # Open proved the stream order (the slices); each entry's payload range, time order
        # and overlap (aliasing: one payload named many times could make reading a file
        # cost far more than its size) wait for the second read or a batch: the first
        # read checks its own entry, and a stream's timestamps are checked when first used.
        self._proven = False
        self._free_read = True

    # --- file-level facts ------------------------------------------------

    @property
    def path(self) -> Path:
        """The file's path (for a URL, a ``Path`` of it: use :attr:`name`)."""
        p = self._path
        if p is None:
            p = self._path = Path(self._name)
        return p

    @property
    def metadata(self) -> FileMetadata:
        """Vehicle id, recorder version, segment number, creation time."""
        return self._s.meta.file

    @property
    def window_ns(self) -> int:
        """Window length in ns."""
        return self._s.header.window_ns

    @property
    def index(self) -> np.ndarray:
        """The whole index (read-only structured array, INDEX_DTYPE), every entry checked."""
        if not self._proven:
            self._prove()
        return self._s.index

    @property
    def frame_count(self) -> int:
        """Frames in the file."""
        return len(self._s.index)

    @property
    def start_ns(self) -> int:
        """Start of the first window."""
        return self._s.header.start_ns

    @property
    def end_ns(self) -> int:
        """End of the last window."""
        return self._s.header.end_ns

    @property
    def header(self) -> Header:
        """The decoded header (for tools such as ``hyperframes info``)."""
        return self._s.header

    def stream(self, stream: int | str) -> StreamInfo:
        """A stream by id or name."""
        sid = self._stream_id(stream)
        return self.streams[sid]

    def stream_slice(self, stream: int | str) -> tuple[int, int]:
        """Index positions ``[lo, hi)`` of one stream's frames (by id or name).

        The index is sorted by stream, so a stream's frames are the contiguous
        rows ``index[lo:hi]`` in timestamp order; ``lo == hi`` for a stream
        without frames. Raises ``KeyError`` for an unknown stream.
        """
        return self._slices[self._stream_id(stream)]

    def timestamps(self, stream: int | str) -> np.ndarray:
        """Sorted capture timestamps of one stream (uint64, contiguous, cached)."""
        sid = self._stream_id(stream)
        ts = self._ts.get(sid)
        if ts is None:
            lo, hi = self._slices[sid]
            ts = np.ascontiguousarray(self._s.index["timestamp_ns"][lo:hi])
            if not self._proven and (ts[1:] < ts[:-1]).any():
                self._prove()  # out of time order: the full checks name the entry
            self._ts[sid] = ts
        return ts

    @property
    def missing(self) -> dict[int, tuple[int, ...]]:
        """Window id -> stream ids that delivered nothing there (incomplete windows only)."""
        return self._s.meta.missing

    def aux(self) -> np.ndarray:
        """Per-entry host receive time and exposure/scan duration, aligned with :attr:`index`."""
        with self._lock:
            if self._aux is None:
                self._aux = load_aux(self._fd, self._name, self._s.header, self.frame_count)
            return self._aux

    def quarantine(self) -> np.ndarray:
        """Frames the recorder quarantined (implausible timestamps), in write order.

        A QUARANTINE_DTYPE array (index entry + aux row per frame). These
        frames are not in :attr:`index`: time lookups, windows and the header
        span never see them. Read one with :meth:`quarantined_frame`.
        """
        with self._lock:
            if self._quarantine is None:
                self._quarantine = load_quarantine(
                    self._fd, self._name, self._s.header, self._s.index
                )
            return self._quarantine

    def _windows(self) -> np.ndarray:
        """The window table, read and checked on first use (time lookups never need it);
        whatever uses it works on the whole file, so the index's aliasing is checked too."""
        table = self._window_table
        if table is None:
            if not self._proven:
                self._prove()
            with self._lock:
                if self._window_table is None:
                    s = self._s
                    self._window_table = load_windows(self._fd, self._name, s.header, s.file_size)
                table = self._window_table
        return table

    def quarantined_frame(self, i: int) -> Frame:
        """Quarantined frame ``i`` (a position in :meth:`quarantine`), decoded."""
        table = self.quarantine()
        e = table[i]
        row: _Row = (
            int(e["stream_id"]), int(e["flags"]), int(e["stream_index"]),
            int(e["timestamp_ns"]), int(e["offset"]), int(e["size"]), int(e["crc32c"]),
        )  # fmt: skip
        if row[0] not in self.streams:
            raise CorruptFileError(
                self._name, f"quarantined frame {i} names unknown stream {row[0]}", row[4]
            )
        return self._decode(i, row, self._pread(row))

    # --- lookups ----------------------------------------------------------

    def find(
        self,
        stream: int | str,
        timestamp_ns: int,
        mode: Mode = "nearest",
        tolerance_ns: int | None = None,
    ) -> int:
        """Index position of the frame matching a query; see :meth:`read`."""
        sid = self._by_name.get(stream, -1) if isinstance(stream, str) else stream
        lst = self._ts_lists.get(sid)
        if lst is None:  # first lookups in this stream (or an unknown one: KeyError)
            sid = self._stream_id(stream)
            if sid not in self._searched:  # the first: a search of the array is cheaper
                self._searched.add(sid)
                ts = self.timestamps(sid)
                j = search.find(ts, timestamp_ns, mode)
                return self._found(sid, timestamp_ns, mode, tolerance_ns, j, ts)
            lst = self._ts_lists[sid] = self.timestamps(sid).tolist()  # pays from the second
        i = search.find_in_list(lst, timestamp_ns, mode)
        if i is not None and (tolerance_ns is None or abs(lst[i] - timestamp_ns) <= tolerance_ns):
            return self._slices[sid][0] + i
        return self._found(sid, timestamp_ns, mode, tolerance_ns, i, self.timestamps(sid))

    def _found(
        self,
        sid: int,
        timestamp_ns: int,
        mode: Mode,
        tolerance_ns: int | None,
        i: int | None,
        ts: np.ndarray,
    ) -> int:
        """The index position of match ``i`` in ``ts``, or the error that it is none."""
        if i is None:
            near = search.find(ts, timestamp_ns, "nearest")
            raise FrameNotFoundError(
                self._name,
                sid,
                timestamp_ns,
                f"no frame {mode} the query",
                int(ts[near]) if near is not None else None,
            )
        if tolerance_ns is not None and abs(int(ts[i]) - timestamp_ns) > tolerance_ns:
            raise FrameNotFoundError(
                self._name, sid, timestamp_ns, f"no frame within {tolerance_ns} ns", int(ts[i])
            )
        return self._slices[sid][0] + i

    def read(
        self,
        stream: int | str,
        timestamp_ns: int,
        mode: Mode = "nearest",
        tolerance_ns: int | None = None,
    ) -> Frame:
        """The frame of ``stream`` nearest to / at or before / at or after ``timestamp_ns``.

        Raises :class:`FrameNotFoundError` when the stream has no such frame
        or the match is further than ``tolerance_ns`` away.
        """
        return self.frame_at(self.find(stream, timestamp_ns, mode, tolerance_ns))

    def read_range(self, stream: int | str, start_ns: int, end_ns: int) -> list[Frame]:
        """Frames of ``stream`` with ``start_ns <= timestamp <= end_ns``, coalesced reads."""
        sid = self._stream_id(stream)
        a, b = search.range_between(self.timestamps(sid), start_ns, end_ns)
        base = self._slices[sid][0]
        return self._read_entries(np.arange(base + a, base + b))

    def read_positions(self, positions: Sequence[int] | np.ndarray) -> list[Frame]:
        """The frames of the index entries at ``positions``, in the order given.

        Payloads that lie close together in the file (any streams, any order
        of ``positions``) are read with one ``pread``, as :meth:`read_range`
        and :meth:`get_window` do. A position may repeat. Raises
        ``IndexError`` for a position outside ``[0, frame_count)`` and
        ``TypeError`` for positions that are not integers.
        """
        idx = np.asarray(positions)
        if idx.size == 0:
            return []
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise TypeError(
                f"positions must be a 1-D sequence of integers, got {idx.dtype} {idx.shape}"
            )
        n = self.frame_count
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise IndexError(
                f"{self._name}: index position {int(idx[np.argmax(bad)])} out of range "
                f"(file has {n} frames)"
            )
        return self._read_entries(idx.astype(np.intp, copy=False))

    def frames(self, stream: int | str) -> Iterator[Frame]:
        """Every frame of one stream in timestamp order."""
        lo, hi = self._slices[self._stream_id(stream)]
        for i in range(lo, hi):
            yield self.frame_at(i)

    def frame_at(self, i: int) -> Frame:
        """The frame of index entry ``i``."""
        row: _Row = self._s.index.item(i)  # ~3x faster than index[i].item()
        if not self._proven:
            self._before_reading(row)
        fd = self._fd
        if row[1] & _DECODE_MASK or type(fd) is not int:
            return self._decode(i, row, self._pread(row))
        # stored raw, local file: the read buffer is the frame (one preadv, no helper calls)
        sid, flags, stream_index, ts, offset, size, crc = row
        buf = aligned_empty(size)
        if os.preadv(fd, [buf], offset) != size:  # type: ignore[list-item]  # arrays are buffers
            return self._decode(i, row, pread_into_aligned(fd, size, offset))  # short: retry
        if self.verify and crc32c(buf) != crc:
            self._checksum_error(i, row, buf)
        info = self._infos.get(sid) or self.streams[sid]
        return _frame(info, ts, stream_index, flags, buf, self._name)

    # --- windows ----------------------------------------------------------

    def window_count(self) -> int:
        """Number of windows (hyperframes) in the file."""
        return len(self._windows())

    @property
    def window_ids(self) -> np.ndarray:
        """Window ids (multiples of the window length since the epoch) in order."""
        return self._windows()["window_id"]

    @property
    def window_table(self) -> np.ndarray:
        """The window table: one row per window block, sorted by window id (read-only).

        A structured WINDOW_DTYPE array (:mod:`hyperframes.format.layout`) with the
        fields ``window_id`` (``k``: the window covers ``(k*L, (k+1)*L]``),
        ``payload_offset`` and ``payload_size`` (the byte range of the block's
        payloads), ``frame_count`` (frames stored in the block, quarantined
        ones included) and ``flags`` (bit 0: some stream delivered nothing;
        bit 1: the block holds late frames); see docs/FORMAT.md, "Window
        table". Checked against its CRC32C and the file's layout on open.
        """
        return self._windows()

    def window_entries(self, i: int) -> np.ndarray:
        """Index positions of the frames of window ``i`` (by timestamp), per stream in order."""
        return self.window_positions(int(self._windows()["window_id"][i]))

    def window_positions(self, window_id: int) -> np.ndarray:
        """Index positions of the frames stamped in window ``window_id``, per stream in order.

        By timestamp, whether or not the window is in this file's window
        table: a segment's late frames of the previous segment's last window
        are found here too (:mod:`hyperframes.drive` merges them).
        """
        keys, order = self._window_order()
        wid = window_id
        if not -1 <= wid < _WINDOW_OF_ZERO:
            return np.empty(0, np.intp)
        key = np.uint64(_WINDOW_OF_ZERO if wid == -1 else wid)
        a, b = np.searchsorted(keys, key, "left"), np.searchsorted(keys, key, "right")
        return order[a:b]

    def _window_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Every entry's window (sorted) and the entry positions in that order, built once.

        Window ``(t - 1) // L`` of every timestamp ``t`` (``t = 0`` is window -1,
        kept as 2**64-1, which no other timestamp reaches); a stable sort keeps
        each window's entries per stream in timestamp order. O(n log n) once,
        then O(log n) per window, whatever the number of streams.
        """
        if not self._proven:
            self._prove()
        with self._lock:
            if self._by_window is None:
                ts = self._s.index["timestamp_ns"]
                key = (ts - np.uint64(1)) // np.uint64(self.window_ns)
                key[ts == 0] = _WINDOW_OF_ZERO
                order = np.argsort(key, kind="stable")
                self._by_window = (key[order], order)
            return self._by_window

    def get_window(self, i: int) -> Hyperframe:
        """Window ``i`` (0-based) as a :class:`Hyperframe`; one coalesced read for its block."""
        if not -len(self._windows()) <= i < len(self._windows()):
            raise IndexError(f"window {i} out of range (file has {len(self._windows())})")
        wid = int(self._windows()["window_id"][i])
        frames: dict[int, list[Frame]] = {}
        for f in self._read_entries(self.window_entries(i)):
            frames.setdefault(f.stream.id, []).append(f)
        return Hyperframe(
            window_id=wid,
            start_ns=window_start(wid, self.window_ns),
            end_ns=window_end(wid, self.window_ns),
            frames=frames,
            missing=self._s.meta.missing.get(wid, ()),
            names=self._by_name,
        )

    def __iter__(self) -> Iterator[Hyperframe]:
        """Every window in time order, as :meth:`get_window` gives them (one read each)."""
        for i in range(self.window_count()):
            yield self.get_window(i)

    def __len__(self) -> int:
        """The number of windows (what ``for hf in reader`` yields), not frames."""
        return self.window_count()

    # --- lifecycle --------------------------------------------------------

    @property
    def name(self) -> str:
        """The path or URL this reader was opened with."""
        return self._name

    @property
    def file_size(self) -> int:
        """The file's (or object's) size in bytes."""
        return self._s.file_size

    def close(self) -> None:
        """Close the file descriptor (or drop a remote object's cached spans)."""
        if self.remote is not None:
            self.remote.close()
            self._fd = -1
        elif isinstance(self._fd, int) and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if type(fd) is int and fd >= 0:
            os.close(fd)

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError(
            "HyperframeReader holds a file descriptor and cannot be pickled; "
            "open one reader per process (e.g. lazily in each DataLoader worker)"
        )

    # --- internals --------------------------------------------------------

    def _stream_id(self, stream: int | str) -> int:
        if isinstance(stream, str):
            sid = self._by_name.get(stream)
            if sid is None:
                raise KeyError(
                    f"{self._name}: no stream named {stream!r}; streams: {sorted(self._by_name)}"
                )
            return sid
        if stream not in self.streams:
            raise KeyError(f"{self._name}: no stream with id {stream}; ids: {sorted(self.streams)}")
        return stream

    def _before_reading(self, row: _Row) -> None:
        """Let the first single read through with its own entry (``row``) checked; prove
        every entry before a second."""
        with self._lock:
            if self._free_read:
                self._free_read = False
                h = self._s.header
                if not span_problem(row[4], row[5], h.data_offset, h.index_offset):
                    return
        self._prove()

    def _prove(self) -> None:
        """Check what open left of every entry (range, time order, overlap), once per reader."""
        with self._lock:
            if not self._proven:
                s = self._s
                check_entries(self._name, s.index, s.header, s.meta)
                self._proven = True

    def _read_entries(self, positions: np.ndarray) -> list[Frame]:
        """Decode the frames at index ``positions``, reading neighbouring payloads at once."""
        if not len(positions):
            return []
        if not self._proven:
            self._prove()  # a batch: every entry checked first
        order = np.argsort(self._s.index["offset"][positions], kind="stable")
        rows: list[_Row] = self._s.index[positions[order]].tolist()
        out: list[Frame | None] = [None] * len(rows)
        run_start = 0
        run_end = rows[0][4] + rows[0][5]
        for k in range(1, len(rows) + 1):
            if k < len(rows) and rows[k][4] - run_end <= _COALESCE_GAP:
                run_end = max(run_end, rows[k][4] + rows[k][5])
                continue
            base = rows[run_start][4]
            buf = pread_into_aligned(self._fd, run_end - base, base)
            for j in range(run_start, k):
                row = rows[j]
                rel = row[4] - base
                stored = buf[rel : rel + row[5]]
                out[order[j]] = self._decode(int(positions[order[j]]), row, stored, threads=1)
            if k < len(rows):
                run_start, run_end = k, rows[k][4] + rows[k][5]
        return [f for f in out if f is not None]

    def _pread(self, row: _Row) -> np.ndarray:
        """The stored bytes of one entry: a fresh aligned array when they are the frame
        itself, a reused per-thread buffer when they are only decoded from."""
        if row[1] & _DECODE_MASK:
            return pread_scratch(self._fd, row[5], row[4])
        return pread_into_aligned(self._fd, row[5], row[4])

    def _decode(self, i: int, row: _Row, stored: np.ndarray, threads: int | None = None) -> Frame:
        """The frame of index row ``row`` from its stored bytes.

        ``threads`` (default: the reader's) may split its decode. Batch reads
        pass 1: splitting one frame inside a batch cost ~15% on the 2-core
        box, cache lines bouncing between the cores for the frames after it.
        """
        sid, flags, stream_index, ts, offset, size, crc = row
        if len(stored) != size:
            raise CorruptFileError(
                self._name, f"frame {i} truncated ({len(stored)}/{size} bytes)", offset
            )
        stream = self._infos.get(sid) or self.streams[sid]
        if not flags & _DECODE_MASK:  # stored raw: the stored bytes are the frame
            if self.verify and crc32c(stored) != crc:
                self._checksum_error(i, row, stored)
            return _frame(stream, ts, stream_index, flags, stored, self._name)

        def check() -> None:
            if crc32c(stored) != crc:
                self._checksum_error(i, row, stored)

        try:
            data = decode_aligned(
                stored.data,
                flags,
                stream.itemsize,
                self.max_frame_bytes,
                threads=self.threads if threads is None else threads,
                first=check if self.verify else None,
            )
        except CodecError as exc:
            raise CorruptFileError(self._name, f"frame {i}: {exc}", offset) from None
        return _frame(stream, ts, stream_index, flags, data, self._name)

    def _checksum_error(self, i: int, row: _Row, stored: np.ndarray) -> None:
        sid, _, _, ts, offset, _, crc = row
        raise ChecksumError(
            self._name, f"frame {i} (stream {sid}, t={ts})", offset, crc, crc32c(stored)
        )
