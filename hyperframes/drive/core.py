"""Drives: one vehicle's consecutive segments read as one recording.

A vehicle run is many segment files (a new one every ``segment_seconds`` and
after every restart); late frames of a segment's last windows sit in the next
one and spans overlap (docs/FORMAT.md). :func:`open_drive` returns a
read-only :class:`Drive` with the reader's API over the whole run: ``read``,
``read_range``, ``get_window`` (late frames merged from wherever they were
written), the stream table and what changed in it, and the *gaps* (time no
segment covers) apart from the windows a stream missed.

Opening is lazy. It lists the files, takes vehicle and sequence number from
the names (:mod:`hyperframes.format.naming`) and reads each segment's 512-byte
header (its span, window length, frame and quarantine counts): one ``pread``
per segment, no index. A segment's metadata, window table and index are read
the first time a query needs that segment; at most ``max_open`` segments are
held open at once (least recently used closed first).

A segment that cannot be read (bad header, checksum, not finalized) is named
in :attr:`Drive.damaged` with what is wrong and skipped; ``.tmp`` files (a
recording cut short, or still being written) are listed in
:attr:`Drive.unfinished` and never read.

Where a drive comes from (a directory, a glob, a list of paths) is decided in
:func:`discover` only.
"""

from __future__ import annotations

import bisect
import glob
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import numpy as np

from hyperframes._structure import _table, read_head, read_meta
from hyperframes.drive.plan import Gap, SpanIndex, StreamChange, find_gaps, stream_changes
from hyperframes.errors import DriveError, FrameNotFoundError, HyperframesError
from hyperframes.format.layout import WINDOW_DTYPE, WINDOW_FLAG_HAS_LATE, Header, HeaderFlags
from hyperframes.format.meta import Meta
from hyperframes.format.naming import SegmentName, parse_segment_name
from hyperframes.format.streams import StreamInfo
from hyperframes.format.windows import window_end, window_start
from hyperframes.reader import Frame, Hyperframe, HyperframeReader, Mode

DAMAGED_DIR = "damaged"  # where the recorder moves what it could not recover
_TMP = ".tmp"
Sources = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
_FAR = 1 << 70  # further than any two timestamps


@dataclass(frozen=True, slots=True)
class Damaged:
    """A segment of the drive that could not be read, and why."""

    path: Path
    what: str


@dataclass(frozen=True, slots=True)
class DriveFrame:
    """Where a drive query found its frame: segment position and index position."""

    segment: int
    position: int
    timestamp_ns: int


@dataclass(frozen=True, slots=True)
class Listing:
    """What :func:`discover` found: finished segments, ``.tmp`` files, ``damaged/`` contents."""

    segments: list[tuple[Path, int]]  # path, size in bytes
    unfinished: list[Path]
    damaged_dir: list[Path]


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def discover(source: Sources) -> Listing:
    """The files a drive source names: a directory, a glob, or a list of paths.

    A directory gives its ``*.hf`` files (``*.hf.tmp`` as unfinished, and the
    files of its ``damaged/`` folder); a glob the files it matches; a list
    the files given. Raises ``FileNotFoundError`` for a path that does not
    exist and :class:`DriveError` when nothing is found.
    """
    segments: list[tuple[Path, int]] = []
    unfinished: list[Path] = []
    damaged: list[Path] = []
    if isinstance(source, str | os.PathLike):
        text = os.fspath(source)
        if Path(text).is_dir():
            with os.scandir(text) as it:
                for e in sorted(it, key=lambda e: e.name):
                    if not e.is_file():
                        continue
                    if e.name.endswith(".hf"):
                        segments.append((Path(e.path), e.stat().st_size))
                    elif e.name.endswith(".hf" + _TMP):
                        unfinished.append(Path(e.path))
            dd = Path(text, DAMAGED_DIR)
            if dd.is_dir():
                damaged = sorted(dd.iterdir())
            if not segments and not unfinished:
                raise DriveError(text, "no segment files (*.hf) in this directory")
            return Listing(segments, unfinished, damaged)
        if _is_glob(text):
            paths: list[str | os.PathLike[str]] = [*sorted(glob.glob(text))]  # noqa: PTH207
            if not paths:
                raise DriveError(text, "the pattern matches no file")
        else:
            paths = [text]
    else:
        paths = list(source)
        if not paths:
            raise DriveError("<drive>", "no segment files given")
    for p in paths:
        path = Path(p)
        size = path.stat().st_size  # FileNotFoundError names the path
        if path.is_dir():
            raise DriveError(path, "is a directory; pass the directory alone, not in a list")
        if path.name.endswith(_TMP):
            unfinished.append(path)
        else:
            segments.append((path, size))
    return Listing(segments, unfinished, damaged)


class Segment:
    """One segment file of a drive: its header at once, the rest on first use."""

    def __init__(self, path: Path, size: int, name: SegmentName | None, header: Header) -> None:
        self.path = path
        self.size = size
        self.name = name
        self.header = header
        self._meta: Meta | None = None
        self._windows: np.ndarray | None = None

    @classmethod
    def open(cls, path: Path, size: int) -> Segment:
        """Read and check the header; raises a :class:`HyperframesError` on damage."""
        h = read_head(os.fspath(path), size)
        if not h.flags & HeaderFlags.FINALIZED:
            raise DriveError(
                path, "not finalized (a .hf name but no index); run hyperframes recover"
            )
        return cls(path, size, parse_segment_name(path.name), h)

    @property
    def start_ns(self) -> int:
        """Start of the segment's span (late frames included)."""
        return self.header.start_ns

    @property
    def end_ns(self) -> int:
        """End of the segment's span."""
        return self.header.end_ns

    @property
    def seq(self) -> int | None:
        """Sequence number from the file name (or the metadata when the name is not ours)."""
        if self.name is not None:
            return self.name.seq
        return self.meta().file.segment_seq

    @property
    def vehicle(self) -> str:
        """Vehicle id from the file name (or the metadata when the name is not ours)."""
        if self.name is not None:
            return self.name.vehicle
        return self.meta().file.vehicle_id

    def _read(self, what: str) -> Meta | np.ndarray:
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            h, name = self.header, os.fspath(self.path)
            if what == "meta":
                return read_meta(fd, name, h.meta_offset, h.meta_size, self.size, h.meta_crc)
            return _table(
                fd, name, "window table", h.windows_offset, h.windows_size, h.windows_crc,
                WINDOW_DTYPE, h.window_count, h.data_offset, self.size,
            )  # fmt: skip
        finally:
            os.close(fd)

    def meta(self) -> Meta:
        """Stream table, file metadata and missing windows (one read, cached)."""
        if self._meta is None:
            m = self._read("meta")
            assert isinstance(m, Meta)
            self._meta = m
        return self._meta

    def window_table(self) -> np.ndarray:
        """The window table (one read, checked against its CRC, cached)."""
        if self._windows is None:
            w = self._read("windows")
            assert isinstance(w, np.ndarray)
            self._windows = w
        return self._windows

    def late_windows(self) -> int:
        """Windows whose block holds late frames."""
        return int(np.count_nonzero(self.window_table()["flags"] & WINDOW_FLAG_HAS_LATE))

    def __repr__(self) -> str:
        return f"Segment({os.fspath(self.path)!r})"


class Drive:
    """One vehicle's segments as one read-only recording; see :func:`open_drive`.

    Mirrors :class:`~hyperframes.reader.HyperframeReader`: :meth:`read`,
    :meth:`find`, :meth:`read_range`, :meth:`timestamps`, :meth:`get_window`
    (window ``i`` of the whole drive), iteration over windows, ``streams``.
    Frames carry the path of the segment they came from. Safe to share
    between threads; not picklable (open one per process).
    """

    def __init__(
        self,
        segments: Sequence[Segment],
        *,
        source: str = "<drive>",
        damaged: Sequence[Damaged] = (),
        unfinished: Sequence[Path] = (),
        damaged_dir: Sequence[Path] = (),
        verify: bool = True,
        max_open: int = 32,
        threads: int | None = None,
        min_gap_ns: int = 1_000_000_000,
    ) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be >= 1, got {max_open}")
        self.source = source
        self.segments: list[Segment] = list(segments)
        self.damaged: list[Damaged] = list(damaged)
        self.unfinished: list[Path] = list(unfinished)
        self.damaged_dir: list[Path] = list(damaged_dir)
        self.verify = verify
        self.max_open = max_open
        self.threads = threads
        self.min_gap_ns = min_gap_ns
        lengths = sorted({s.header.window_ns for s in self.segments})
        if len(lengths) > 1:
            first = next(s for s in self.segments if s.header.window_ns != lengths[0])
            raise DriveError(
                source,
                f"window lengths differ ({', '.join(f'{n / 1e6:g} ms' for n in lengths)}; "
                f"{first.path.name} has {first.header.window_ns / 1e6:g} ms); "
                "open the parts with one window length as separate drives",
            )
        self.window_ns = lengths[0] if lengths else 0
        self._spans = SpanIndex([(s.start_ns, s.end_ns) for s in self.segments])
        self._bad: set[int] = set()
        self._readers: OrderedDict[int, HyperframeReader] = OrderedDict()
        self._lock = threading.Lock()
        self._window_ids: np.ndarray | None = None
        self._streams: dict[int, StreamInfo] | None = None
        self._by_name: dict[str, int] = {}

    # --- facts from the headers ----------------------------------------

    @property
    def vehicle(self) -> str:
        """The vehicle id ('' for a drive without segments)."""
        return self.segments[0].vehicle if self.segments else ""

    @property
    def start_ns(self) -> int:
        """Start of the earliest segment span."""
        return min((s.start_ns for s in self.segments), default=0)

    @property
    def end_ns(self) -> int:
        """End of the latest segment span."""
        return max((s.end_ns for s in self.segments), default=0)

    @property
    def frame_count(self) -> int:
        """Frames in every readable segment's index."""
        return sum(s.header.frame_count for s in self.segments)

    @property
    def size(self) -> int:
        """Bytes of every readable segment."""
        return sum(s.size for s in self.segments)

    @property
    def quarantined_count(self) -> int:
        """Quarantined frames of every readable segment."""
        return sum(s.header.quarantine_count for s in self.segments)

    @property
    def gaps(self) -> list[Gap]:
        """Time no segment covers for longer than ``min_gap_ns`` (default 1 s), in order.

        The recorder was not running (a restart, an outage) or a segment is
        gone (:attr:`Gap.missing_segments`). Shorter holes between segments are
        windows nobody delivered a frame to; :attr:`missing` lists the windows
        a stream missed.
        """
        spans = [(s.start_ns, s.end_ns) for s in self.segments]
        return find_gaps(spans, self._seqs(), self.min_gap_ns)

    def _seqs(self) -> list[int | None]:
        return [s.name.seq if s.name is not None else None for s in self.segments]

    # --- stream tables (one metadata read per segment, on first use) ---

    @property
    def streams(self) -> dict[int, StreamInfo]:
        """Every stream of the drive by id (a stream's latest definition)."""
        if self._streams is None:
            streams: dict[int, StreamInfo] = {}
            for i in range(len(self.segments)):
                meta = self._meta(i)
                if meta is not None:
                    streams.update({s.id: s for s in meta.streams})
            self._by_name = {s.name: sid for sid, s in streams.items()}
            self._streams = streams
        return self._streams

    def stream(self, stream: int | str) -> StreamInfo:
        """A stream by id or name."""
        return self.streams[self._stream_id(stream)]

    def changes(self) -> list[StreamChange]:
        """What changed in the stream table from segment to segment (added, removed, changed)."""
        tables = []
        for i in range(len(self.segments)):
            meta = self._meta(i)
            tables.append([s.to_dict() for s in meta.streams] if meta is not None else [])
        return stream_changes(tables)

    @property
    def missing(self) -> dict[int, tuple[int, ...]]:
        """Window id -> stream ids that delivered nothing there (incomplete windows only)."""
        out: dict[int, set[int]] = {}
        for i in range(len(self.segments)):
            meta = self._meta(i)
            if meta is not None:
                for wid, ids in meta.missing.items():
                    out.setdefault(wid, set()).update(ids)
        return {wid: tuple(sorted(ids)) for wid, ids in sorted(out.items())}

    # --- lookups ---------------------------------------------------------

    def find(
        self,
        stream: int | str,
        timestamp_ns: int,
        mode: Mode = "nearest",
        tolerance_ns: int | None = None,
    ) -> DriveFrame:
        """Segment and index position of the frame matching a query; see :meth:`read`."""
        pos, i, t = self._locate(stream, timestamp_ns, mode, tolerance_ns)
        return DriveFrame(pos, i, t)

    def read(
        self,
        stream: int | str,
        timestamp_ns: int,
        mode: Mode = "nearest",
        tolerance_ns: int | None = None,
    ) -> Frame:
        """The frame of ``stream`` nearest to / at or before / at or after ``timestamp_ns``.

        Searches every segment whose span can hold a closer frame (late
        frames in the next segment included). Raises
        :class:`FrameNotFoundError` as the reader does.
        """
        sp, t = self._spans, timestamp_ns
        k = bisect.bisect_right(sp.starts, t) - 1
        if k >= 0 and sp.ends[k] >= t:  # fast path: the segment holding t, when it is enough
            r = self.reader(sp.order[k])
            if r is not None:
                try:
                    f = r.read(stream, t, mode)
                except (KeyError, FrameNotFoundError):
                    f = None
                if f is not None and self._settled(k, t, mode, abs(f.timestamp_ns - t)):
                    if tolerance_ns is not None and abs(f.timestamp_ns - t) > tolerance_ns:
                        raise FrameNotFoundError(
                            self.source, f.stream.id, t, f"no frame within {tolerance_ns} ns",
                            f.timestamp_ns,
                        )  # fmt: skip
                    return f
        pos, i, _ = self._search(stream, t, mode, tolerance_ns)
        r = self.reader(pos)
        if r is None:  # cannot happen for a segment just read, unless it was damaged since
            raise DriveError(self.segments[pos].path, "segment became unreadable")
        return r.frame_at(i)

    def _settled(self, k: int, t: int, mode: Mode, d: int) -> bool:
        """Whether no span but the ``k``-th (by start) can hold a frame closer than ``d``."""
        sp = self._spans
        left = t - sp.maxend[k - 1] if k > 0 else _FAR
        right = sp.starts[k + 1] - t if k + 1 < len(sp.starts) else _FAR
        if mode == "before":
            right = _FAR
        elif mode == "after" and k > 0 and sp.maxend[k - 1] < t:
            left = _FAR
        return d < left and d <= right

    def _locate(
        self, stream: int | str, t: int, mode: Mode, tolerance_ns: int | None
    ) -> tuple[int, int, int]:
        """(segment, index position, timestamp) of the match; the common case in one segment.

        Fast path: the segment whose span holds ``t`` answers, and no other
        span lies closer to ``t`` than that answer (the usual case away from
        a boundary). Otherwise every candidate of :meth:`SpanIndex.candidates`.
        """
        sp = self._spans
        k = bisect.bisect_right(sp.starts, t) - 1
        if k >= 0 and sp.ends[k] >= t and tolerance_ns is None:
            pos = sp.order[k]
            r = self.reader(pos)
            if r is not None:
                try:
                    i = r.find(stream, t, mode)
                except (KeyError, FrameNotFoundError):
                    i = -1
                if i >= 0:
                    found = int(r.index[i]["timestamp_ns"])
                    if self._settled(k, t, mode, abs(found - t)):
                        return pos, i, found
        return self._search(stream, t, mode, tolerance_ns)

    def _search(
        self, stream: int | str, timestamp_ns: int, mode: Mode, tolerance_ns: int | None
    ) -> tuple[int, int, int]:
        best: tuple[int, int, int] | None = None
        best_d = -1
        for pos, own, frontier in self._spans.candidates(timestamp_ns, mode):
            if best is not None and frontier > best_d:
                break
            if best is not None and own > best_d:
                continue
            r = self.reader(pos)
            if r is None:
                continue
            try:
                i = r.find(stream, timestamp_ns, mode)
            except (KeyError, FrameNotFoundError):
                continue
            t = int(r.index[i]["timestamp_ns"])
            d = abs(t - timestamp_ns)
            if best is None or d < best_d or (d == best_d and t < best[2]):
                best, best_d = (pos, i, t), d
        sid = self._stream_id(stream)
        if best is None:
            raise FrameNotFoundError(self.source, sid, timestamp_ns, f"no frame {mode} the query")
        if tolerance_ns is not None and best_d > tolerance_ns:
            raise FrameNotFoundError(
                self.source, sid, timestamp_ns, f"no frame within {tolerance_ns} ns", best[2]
            )
        return best

    def read_range(self, stream: int | str, start_ns: int, end_ns: int) -> list[Frame]:
        """Frames of ``stream`` with ``start_ns <= timestamp <= end_ns``, from every segment."""
        self._stream_id(stream)
        out: list[Frame] = []
        for pos in self._spans.overlapping(start_ns, end_ns):
            r = self.reader(pos)
            if r is None:
                continue
            try:
                out.extend(r.read_range(stream, start_ns, end_ns))
            except KeyError:
                continue
        out.sort(key=lambda f: (f.timestamp_ns, f.stream_index))
        return out

    def timestamps(self, stream: int | str) -> np.ndarray:
        """Sorted timestamps of one stream over the whole drive (reads every index)."""
        self._stream_id(stream)
        parts = []
        for pos in range(len(self.segments)):
            r = self.reader(pos)
            if r is None:
                continue
            try:
                parts.append(r.timestamps(stream))
            except KeyError:
                continue
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.uint64)

    # --- windows ---------------------------------------------------------

    @property
    def window_ids(self) -> np.ndarray:
        """Every window id of the drive in order (one window-table read per segment)."""
        if self._window_ids is None:
            parts = []
            for i, s in enumerate(self.segments):
                if i in self._bad:
                    continue
                try:
                    parts.append(s.window_table()["window_id"])
                except HyperframesError as exc:
                    self._mark_bad(i, exc)
            ids = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
            self._window_ids = ids
        return self._window_ids

    def window_count(self) -> int:
        """Windows of the whole drive."""
        return len(self.window_ids)

    def __len__(self) -> int:
        return self.window_count()

    def get_window(self, i: int) -> Hyperframe:
        """Window ``i`` (0-based over the drive) with every frame stamped in it, late ones
        from the next segment included."""
        ids = self.window_ids
        if not -len(ids) <= i < len(ids):
            raise IndexError(f"window {i} out of range (drive has {len(ids)})")
        return self.window(int(ids[i]))

    def window(self, window_id: int) -> Hyperframe:
        """The window with id ``window_id`` (frames stamped in ``(k*L, (k+1)*L]``)."""
        lo, hi = window_start(window_id, self.window_ns), window_end(window_id, self.window_ns)
        frames: dict[int, list[Frame]] = {}
        missing: set[int] = set()
        merged = False
        for pos in self._spans.overlapping(lo + 1, hi):
            r = self.reader(pos)
            if r is None:
                continue
            got = r.read_positions(r.window_positions(window_id))
            merged = merged or (bool(got) and bool(frames))
            for f in got:
                frames.setdefault(f.stream.id, []).append(f)
            missing.update(r.missing.get(window_id, ()))
        if merged:
            for fs in frames.values():
                fs.sort(key=lambda f: (f.timestamp_ns, f.stream_index))
        names = {s.name: sid for sid, s in self.streams.items()}
        return Hyperframe(window_id, lo, hi, frames, tuple(sorted(missing)), names=names)

    def windows(self) -> Iterator[Hyperframe]:
        """Every window of the drive in order."""
        for wid in self.window_ids:
            yield self.window(int(wid))

    def __iter__(self) -> Iterator[Hyperframe]:
        return self.windows()

    # --- segments ----------------------------------------------------------

    def reader(self, i: int) -> HyperframeReader | None:
        """The open reader of segment ``i`` (opened on first use), or None if it is damaged."""
        with self._lock:
            r = self._readers.get(i)
            if r is not None:
                self._readers.move_to_end(i)
                return r
            if i in self._bad:
                return None
        try:
            r = HyperframeReader(self.segments[i].path, verify=self.verify, threads=self.threads)
        except HyperframesError as exc:
            self._mark_bad(i, exc)
            return None
        try:
            r.index  # noqa: B018 - every entry checked now (a reader leaves that to its 2nd read),
            # so a damaged index marks the segment damaged here, not a later read's error
        except HyperframesError as exc:
            r.close()
            self._mark_bad(i, exc)
            return None
        with self._lock:
            self._readers[i] = r
            while len(self._readers) > self.max_open:
                _, old = self._readers.popitem(last=False)
                old.close()
        return r

    def _meta(self, i: int) -> Meta | None:
        if i in self._bad:
            return None
        try:
            return self.segments[i].meta()
        except HyperframesError as exc:
            self._mark_bad(i, exc)
            return None

    def _mark_bad(self, i: int, exc: Exception) -> None:
        with self._lock:
            if i not in self._bad:
                self._bad.add(i)
                self.damaged.append(Damaged(self.segments[i].path, _what(exc)))

    def _stream_id(self, stream: int | str) -> int:
        streams = self.streams
        if isinstance(stream, str):
            sid = self._by_name.get(stream)
            if sid is None:
                raise KeyError(
                    f"{self.source}: no stream named {stream!r}; streams: {sorted(self._by_name)}"
                )
            return sid
        if stream not in streams:
            raise KeyError(f"{self.source}: no stream with id {stream}; ids: {sorted(streams)}")
        return stream

    # --- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close every open segment."""
        with self._lock:
            while self._readers:
                _, r = self._readers.popitem()
                r.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("Drive holds open files and cannot be pickled; open one per process")

    def __repr__(self) -> str:
        return (
            f"Drive({self.vehicle!r}, {len(self.segments)} segments, "
            f"{(self.end_ns - self.start_ns) / 1e9:.1f} s)"
        )


def _what(exc: Exception) -> str:
    """An error's message without the path in front (the path is named beside it)."""
    text = str(exc)
    path = getattr(exc, "path", None) or getattr(exc, "source", None)
    if path and text.startswith(f"{path}: "):
        return text[len(path) + 2 :]
    return text


def _source_name(source: Sources) -> str:
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    return f"{len(source)} files"


def _open_segments(listing: Listing) -> tuple[list[Segment], list[Damaged]]:
    segments, damaged = [], []
    for path, size in listing.segments:
        try:
            segments.append(Segment.open(path, size))
        except (HyperframesError, OSError) as exc:
            damaged.append(Damaged(path, _what(exc)))
    return segments, damaged


def _vehicle_of(segment: Segment, damaged: list[Damaged]) -> str | None:
    try:
        return segment.vehicle
    except HyperframesError as exc:
        damaged.append(Damaged(segment.path, _what(exc)))
        return None


def _order(segments: Iterable[Segment]) -> list[Segment]:
    """Drive order: by sequence number when every name has one, else by span."""
    segs = list(segments)
    if all(s.name is not None for s in segs):
        return sorted(segs, key=lambda s: (s.name.seq if s.name else 0, s.path.name))
    return sorted(segs, key=lambda s: (s.start_ns, s.end_ns, s.path.name))


def find_drives(source: Sources, **options: object) -> list[Drive]:
    """Every drive in ``source`` (see :func:`discover`), one per vehicle, by vehicle id.

    ``options`` go to :class:`Drive` (``verify``, ``max_open``, ``threads``).
    Damaged segments and ``.tmp`` files go to the drive of the vehicle their
    name names (to the first drive when the name is not a segment name).
    """
    listing = discover(source)
    segments, damaged = _open_segments(listing)
    by_vehicle: dict[str, list[Segment]] = {}
    for s in segments:
        v = _vehicle_of(s, damaged)
        if v is not None:
            by_vehicle.setdefault(v, []).append(s)

    def vehicle_of_path(p: Path) -> str | None:
        n = parse_segment_name(p.name)
        return n.vehicle if n is not None else None

    for p in [*listing.unfinished, *(d.path for d in damaged)]:
        v = vehicle_of_path(p)
        if v is not None:
            by_vehicle.setdefault(v, [])
    name = _source_name(source)
    drives = []
    vehicles = sorted(by_vehicle) or [""]
    for v in vehicles:
        own = by_vehicle.get(v, [])

        def mine(p: Path, v: str = v) -> bool:
            pv = vehicle_of_path(p)
            return pv == v or (pv is None and v == vehicles[0])

        drives.append(
            Drive(
                _order(own),
                source=f"{name} ({v})" if len(vehicles) > 1 else name,
                damaged=[d for d in damaged if mine(d.path)],
                unfinished=[p for p in listing.unfinished if mine(p)],
                damaged_dir=listing.damaged_dir if v == vehicles[0] else (),
                **options,  # type: ignore[arg-type]
            )
        )
    return drives


def open_drive(
    source: Sources,
    *,
    vehicle: str | None = None,
    verify: bool = True,
    max_open: int = 32,
    threads: int | None = None,
    min_gap_ns: int = 1_000_000_000,
) -> Drive:
    """Open one vehicle's segments as a :class:`Drive`.

    ``source`` is a directory (its ``*.hf`` files), a glob (``"run/car-7_*.hf"``)
    or a list of paths. When it holds segments of several vehicles, pass
    ``vehicle``; they are never mixed. ``verify`` checks every payload's
    CRC32C on reading, ``max_open`` bounds the segments held open, ``threads``
    goes to each :class:`~hyperframes.reader.HyperframeReader`; time between
    segments longer than ``min_gap_ns`` is a gap (:attr:`Drive.gaps`).

    Raises :class:`DriveError` when no readable segment is found or the
    vehicles are ambiguous.
    """
    drives = find_drives(
        source, verify=verify, max_open=max_open, threads=threads, min_gap_ns=min_gap_ns
    )
    name = _source_name(source)
    if vehicle is not None:
        mine = [d for d in drives if d.vehicle == vehicle and d.segments]
        if not mine:
            found = sorted(d.vehicle for d in drives if d.segments)
            raise DriveError(name, f"no segments of vehicle {vehicle!r}; found {found}")
        drive = mine[0]
    else:
        real = [d for d in drives if d.segments]
        if len(real) > 1:
            listed = ", ".join(f"{d.vehicle} ({len(d.segments)} segments)" for d in real)
            raise DriveError(
                name, f"segments of {len(real)} vehicles: {listed}; pass vehicle= (--vehicle)"
            )
        if not real:
            bad = drives[0].damaged if drives else []
            why = f"; damaged: {bad[0].path.name}: {bad[0].what}" if bad else ""
            raise DriveError(name, f"no readable segment{why}")
        drive = real[0]
    return drive
