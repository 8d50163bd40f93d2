"""Which windows a dataset serves: files found from paths or globs, checked once, as plain data.

Building a :class:`Catalog` opens every file once in the calling process to
read its window table and stream table and closes it again; the catalog then
holds only paths and numpy arrays, so datasets pickle cheaply into spawned
DataLoader workers, which open their own readers.
"""

from __future__ import annotations

import glob
import logging
import os
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from hyperframes.drive import Drive
from hyperframes.format.streams import StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.storage.objects import is_url, list_urls
from hyperframes.sync import ClockCheck, check_clocks
from hyperframes.torch.errors import StreamSelectionError

if TYPE_CHECKING:
    from hyperframes.catalog.manifest import ManifestEntry

__all__ = [
    "PathsLike",
    "Align",
    "FileWindows",
    "Catalog",
    "expand_paths",
    "build_catalog",
    "manifest_catalog",
    "open_pinned",
]

log = logging.getLogger(__name__)

PathsLike = str | os.PathLike[str] | Drive | Sequence[str | os.PathLike[str] | Drive]
_OPEN_THREADS = 8  # manifest_catalog: files opened at once
_OPEN_THREADS_REMOTE = 16  # objects (I/O bound): as many as the S3 client keeps connections


@dataclass(frozen=True, slots=True)
class Align:
    """Align every stream to the frames of a reference stream (timestamp queries).

    Each frame of ``ref`` in a window becomes one row; every other stream
    contributes its frame matched to that row's time (``mode``: nearest, or the
    last at/before, or the first at/after), searched in the whole file, or a
    pad (``is_pad``) when none lies within ``tolerance_ns``. ``strict=True``
    raises :class:`~hyperframes.sync.NoMatchError` instead of padding.
    Streams stamped by another clock than ``ref`` are refused unless
    ``allow_mixed_clocks`` (then listed in ``dataset.clock_checks`` and logged).
    """

    ref: str
    tolerance_ns: int
    mode: Literal["nearest", "before", "after"] = "nearest"
    allow_mixed_clocks: bool = False
    strict: bool = False

    def __post_init__(self) -> None:
        if self.tolerance_ns < 0:
            raise ValueError(f"tolerance_ns must be >= 0, got {self.tolerance_ns}")
        if self.mode not in ("nearest", "before", "after"):
            raise ValueError(f"mode must be 'nearest', 'before' or 'after', got {self.mode!r}")


@dataclass(frozen=True, slots=True)
class FileWindows:
    """One file of a catalog: its path, window ids, and the selected streams' ids in it.

    ``span`` (a manifest's clip, ``[start_ns, end_ns]``) keeps only the frames
    stamped in it, also in the windows at its edges; None: whole windows.
    """

    path: str
    window_ids: np.ndarray  # int64, ascending
    stream_ids: dict[str, int]  # selected stream name -> stream id in this file
    span: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Catalog:
    """The files and windows of a dataset, in file order then window order."""

    files: tuple[FileWindows, ...]
    streams: tuple[StreamInfo, ...]  # the selected streams, as the first file describes them
    window_ns: int
    offsets: np.ndarray  # int64, len(files) + 1: global position of each file's first window
    clock_checks: tuple[ClockCheck, ...] = ()
    # per file: -1 for a file given alone; else the same number for consecutive segments of
    # one drive with no gap between them (clips may run from one into the next)
    groups: np.ndarray | None = None
    # uri -> the manifest entries that pin its bytes: checked whenever a process opens it
    pins: Mapping[str, tuple[ManifestEntry, ...]] | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def locate(self, i: int) -> tuple[int, int]:
        """Global window ``i`` as (file number, window position in that file)."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"window {i} out of range (dataset has {n})")
        i %= n
        f = int(np.searchsorted(self.offsets, i, "right")) - 1
        return f, i - int(self.offsets[f])


def expand_paths(paths: PathsLike) -> list[str]:
    """Files from a path, a directory (its ``*.hf``), a glob, a drive, an ``s3://`` URL or a
    glob of them, or a list of those.

    Sorted per item; a :class:`~hyperframes.drive.Drive` gives its readable
    segments in drive order. Raises FileNotFoundError naming a pattern or
    path that matches nothing.
    """
    return [p for p, _ in _expand(paths)]


def _expand(paths: PathsLike) -> list[tuple[str, int]]:
    """Files and their group (see :attr:`Catalog.groups`)."""
    items = [paths] if isinstance(paths, str | os.PathLike | Drive) else list(paths)
    out: list[tuple[str, int]] = []
    group = 0
    for item in items:
        if isinstance(item, Drive):
            gaps_after = {g.after for g in item.gaps}
            bad = {d.path for d in item.damaged}
            for i, seg in enumerate(item.segments):
                if seg.path not in bad:
                    out.append((os.fspath(seg.path), group))
                if i in gaps_after or seg.path in bad:
                    group += 1
            group += 1
            continue
        name = os.fspath(item)
        if is_url(name):  # s3://bucket/key.hf, or a glob of keys under one prefix
            found = list_urls(name)
            if not found:
                raise FileNotFoundError(f"no object matches {name!r}")
            out += [(f, -1) for f in found]
        elif any(c in name for c in "*?["):
            found = sorted(glob.glob(name, recursive=True))  # noqa: PTH207 - absolute patterns
            if not found:
                raise FileNotFoundError(f"no file matches {name!r}")
            out += [(f, -1) for f in found]
        elif Path(name).is_dir():
            found = sorted(str(p) for p in Path(name).glob("*.hf"))
            if not found:
                raise FileNotFoundError(f"no *.hf file in directory {name!r}")
            out += [(f, -1) for f in found]
        elif Path(name).is_file():
            out.append((name, -1))
        else:
            raise FileNotFoundError(f"no such file: {name!r}")
    if not out:
        raise FileNotFoundError("no files given")
    return out


def _same_stream(a: StreamInfo, b: StreamInfo) -> str | None:
    for attr in ("kind", "encoding", "dtype", "shape"):
        if getattr(a, attr) != getattr(b, attr):
            return f"{attr} is {getattr(b, attr)!r} here but {getattr(a, attr)!r} in the first file"
    return None


def build_catalog(
    paths: PathsLike, streams: Sequence[str] | None = None, align: Align | None = None
) -> Catalog:
    """Open each file once, check the selected streams, and list its windows.

    ``streams=None`` selects every stream of the first file. Every file must
    hold every selected stream with the same kind, encoding, dtype and shape;
    all files must share one window length. With ``align`` the clocks of every
    stream are checked against the reference in every file.
    """
    found = _expand(paths)
    b = _Builder(streams, align)
    for path, _ in found:
        with HyperframeReader(path, verify=False) as r:
            b.add(r, path)
    return b.finish(b.files, np.array([g for _, g in found], np.int64))


class _Builder:
    """The checks of :func:`build_catalog`, one opened file at a time."""

    def __init__(self, streams: Sequence[str] | None, align: Align | None) -> None:
        self.streams, self.align = streams, align
        self.files: list[FileWindows] = []
        self.selected: list[StreamInfo] = []
        self.checks: list[ClockCheck] = []
        self.window_ns = 0

    def add(self, r: HyperframeReader, path: str) -> FileWindows:
        by_name = {s.name: s for s in r.streams.values()}
        if not self.files:
            streams = self.streams
            names = list(streams) if streams is not None else [s.name for s in by_name.values()]
            if not names:
                raise ValueError("select at least one stream")
            if len(set(names)) != len(names):
                raise ValueError(f"streams listed twice in {names}")
            for name in names:
                if name not in by_name:
                    raise StreamSelectionError(
                        path, name, f"not in this file; streams: {sorted(by_name)}"
                    )
            self.selected = [by_name[n] for n in names]
            self.window_ns = r.window_ns
        elif r.window_ns != self.window_ns:
            raise ValueError(
                f"{path}: window length {r.window_ns} ns differs from {self.window_ns} ns "
                "of the first file"
            )
        ids: dict[str, int] = {}
        for want in self.selected:
            got = by_name.get(want.name)
            if got is None:
                raise StreamSelectionError(
                    path, want.name, f"not in this file; streams: {sorted(by_name)}"
                )
            problem = _same_stream(want, got)
            if problem:
                raise StreamSelectionError(path, want.name, problem)
            ids[want.name] = got.id
        if self.align is not None:
            self.checks += _clock_checks(r, path, self.align, ids)
        fw = FileWindows(path, np.asarray(r.window_ids, np.int64).copy(), ids)
        self.files.append(fw)
        return fw

    def finish(
        self,
        files: Sequence[FileWindows],
        groups: np.ndarray,
        pins: Mapping[str, tuple[ManifestEntry, ...]] | None = None,
    ) -> Catalog:
        counts = [len(f.window_ids) for f in files]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        mixed = [c for c in self.checks if c.mixed]
        for c in mixed[:5]:
            log.warning("%s", c.describe())
        return Catalog(tuple(files), tuple(self.selected), self.window_ns, offsets,
                       tuple(mixed), groups, pins)  # fmt: skip


def open_pinned(pins: Sequence[ManifestEntry], **reader_kwargs: Any) -> HyperframeReader:
    """Open the uri of ``pins`` (manifest entries of one file) and check it against each.

    Raises :class:`~hyperframes.catalog.errors.ManifestError` naming the uri
    when the file or object is gone, or its bytes changed since the snapshot
    (ETag of an object, header fingerprint of a file).
    """
    from hyperframes.catalog.manifest import check_entry, open_entry  # noqa: PLC0415

    r = open_entry(pins[0], **reader_kwargs)
    try:
        for entry in pins[1:]:
            check_entry(entry, r)
    except BaseException:
        r.close()
        raise
    return r


def manifest_catalog(
    entries: Sequence[ManifestEntry],
    streams: Sequence[str] | None = None,
    align: Align | None = None,
) -> Catalog:
    """The windows of each manifest entry's ``[start_ns, end_ns]`` in its uri, entry by entry.

    Each file or object is opened once and checked against the manifest
    (:func:`open_pinned`). ``streams=None`` selects the streams every entry
    lists (entries with an empty list take any); given, each entry that
    lists streams must list them. Entries of one event (one ``event_id``)
    that follow each other form a group: a clip may run from one segment
    into the next (see :attr:`Catalog.groups`).
    """
    if not entries:
        raise ValueError("the manifest has no entries")
    listed = [e for e in entries if e.streams]
    if streams is None and listed:
        common = set.intersection(*(set(e.streams) for e in listed))
        streams = [n for n in listed[0].streams if n in common]
        if not streams:
            raise ValueError("the manifest's entries share no stream; pass streams=")
    for e in listed:
        lacking = [n for n in streams or () if n not in e.streams]
        if lacking:
            raise StreamSelectionError(e.uri, lacking[0], "not among the manifest entry's streams")
    pins: dict[str, tuple[ManifestEntry, ...]] = {}
    for e in entries:  # one check per distinct pin of a uri (many clips share a segment)
        had = pins.get(e.uri, ())
        if all((e.fingerprint, e.etag, e.sha256, e.bytes_stored)
               != (p.fingerprint, p.etag, p.sha256, p.bytes_stored) for p in had):  # fmt: skip
            pins[e.uri] = (*had, e)
    b = _Builder(streams, align)
    opened: dict[str, FileWindows] = {}
    uris = list(pins)

    def load(uri: str) -> HyperframeReader:
        r = open_pinned(pins[uri], verify=False)
        try:
            r.window_ids  # noqa: B018 - the window table, read on this thread
        except BaseException:
            r.close()
            raise
        return r

    # opened on threads (one request or two each; objects are I/O bound: more at once),
    # a sliding window of them in flight, checked and added in order
    threads = _OPEN_THREADS_REMOTE if any(is_url(u) for u in uris) else _OPEN_THREADS
    threads = max(1, min(threads, len(uris)))
    with ThreadPoolExecutor(threads) as pool:
        ahead: deque[tuple[str, Future[HyperframeReader]]] = deque()
        todo = iter(uris)
        try:
            while True:
                while len(ahead) < 2 * threads:
                    uri = next(todo, None)
                    if uri is None:
                        break
                    ahead.append((uri, pool.submit(load, uri)))
                if not ahead:
                    break
                uri, fut = ahead.popleft()
                with fut.result() as r:
                    opened[uri] = b.add(r, uri)
        finally:
            for _, fut in ahead:
                if not fut.cancel() and fut.exception() is None:
                    fut.result().close()  # closing twice is harmless
    files = []
    for e in entries:
        fw = opened[e.uri]
        keep = _meets(fw.window_ids, b.window_ns, e.start_ns, e.end_ns)
        files.append(replace(fw, window_ids=fw.window_ids[keep], span=(e.start_ns, e.end_ns)))
    groups, last = np.full(len(entries), -1, np.int64), None
    for i, e in enumerate(entries):
        if e.event_id is not None:
            groups[i] = groups[i - 1] if e.event_id == last else i
        last = e.event_id
    return b.finish(files, groups, pins)


def _meets(window_ids: np.ndarray, window_ns: int, start_ns: int, end_ns: int) -> np.ndarray:
    """Which windows ``(k * L, (k + 1) * L]`` hold a time of ``[start_ns, end_ns]``."""
    start = window_ids * window_ns
    return np.asarray((start < end_ns) & (start + window_ns >= start_ns))


def _clock_checks(
    r: HyperframeReader, path: str, align: Align, ids: dict[str, int]
) -> list[ClockCheck]:
    if align.ref not in ids:
        raise StreamSelectionError(path, align.ref, "the alignment reference is not selected")
    flags_of = r.index["flags"]

    def stream_flags(sid: int) -> np.ndarray:
        lo, hi = r.stream_slice(sid)
        return flags_of[lo:hi]

    ref_flags = stream_flags(ids[align.ref])
    out = []
    for name, sid in ids.items():
        if name != align.ref:
            flags = stream_flags(sid)
            out.append(
                check_clocks(
                    align.ref,
                    ref_flags,
                    name,
                    flags,
                    path=path,
                    allow_mixed_clocks=align.allow_mixed_clocks,
                )
            )
    return out


def select_spans(catalog: Catalog, spans: Sequence[tuple[int, int]]) -> Catalog:
    """The windows of ``catalog`` that share some time with a ``[start_ns, end_ns]`` of ``spans``.

    Window ``k`` covers ``(k * L, (k + 1) * L]``; one that only touches a span
    at its edge is not selected. Files left without a window
    stay in the catalog with none (so file numbers do not move).
    """
    ordered = sorted(spans)
    lo = np.array([a for a, _ in ordered], np.int64)
    hi = np.array([b for _, b in ordered], np.int64)
    files = []
    for f in catalog.files:
        start = f.window_ids * catalog.window_ns
        end = start + catalog.window_ns
        # the last span starting before the window's end: does any up to it reach past its start?
        i = np.searchsorted(lo, end, "left") - 1
        reach = np.maximum.accumulate(hi) if len(hi) else hi
        keep = (i >= 0) & (reach[np.clip(i, 0, None)] > start) if len(hi) else np.zeros(
            len(start), bool)  # fmt: skip
        files.append(replace(f, window_ids=f.window_ids[keep]))
    offsets = np.concatenate([[0], np.cumsum([len(f.window_ids) for f in files])]).astype(np.int64)
    return replace(catalog, files=tuple(files), offsets=offsets)
