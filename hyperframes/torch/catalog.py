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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from hyperframes.drive import Drive
from hyperframes.format.streams import StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.storage.objects import is_url, list_urls
from hyperframes.sync import ClockCheck, check_clocks
from hyperframes.torch.errors import StreamSelectionError

__all__ = ["PathsLike", "Align", "FileWindows", "Catalog", "expand_paths", "build_catalog"]

log = logging.getLogger(__name__)

PathsLike = str | os.PathLike[str] | Drive | Sequence[str | os.PathLike[str] | Drive]


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
    """One file of a catalog: its path, window ids, and the selected streams' ids in it."""

    path: str
    window_ids: np.ndarray  # int64, ascending
    stream_ids: dict[str, int]  # selected stream name -> stream id in this file


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
    files: list[FileWindows] = []
    selected: list[StreamInfo] = []
    checks: list[ClockCheck] = []
    window_ns = 0
    found = _expand(paths)
    for path, _ in found:
        with HyperframeReader(path, verify=False) as r:
            by_name = {s.name: s for s in r.streams.values()}
            if not files:
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
                selected = [by_name[n] for n in names]
                window_ns = r.window_ns
            elif r.window_ns != window_ns:
                raise ValueError(
                    f"{path}: window length {r.window_ns} ns differs from {window_ns} ns "
                    "of the first file"
                )
            ids: dict[str, int] = {}
            for want in selected:
                got = by_name.get(want.name)
                if got is None:
                    raise StreamSelectionError(
                        path, want.name, f"not in this file; streams: {sorted(by_name)}"
                    )
                problem = _same_stream(want, got)
                if problem:
                    raise StreamSelectionError(path, want.name, problem)
                ids[want.name] = got.id
            if align is not None:
                checks += _clock_checks(r, path, align, ids)
            files.append(FileWindows(path, np.asarray(r.window_ids, np.int64).copy(), ids))
    offsets = np.concatenate([[0], np.cumsum([len(f.window_ids) for f in files])]).astype(np.int64)
    mixed = [c for c in checks if c.mixed]
    for c in mixed[:5]:
        log.warning("%s", c.describe())
    groups = np.array([g for _, g in found], np.int64)
    return Catalog(tuple(files), tuple(selected), window_ns, offsets, tuple(mixed), groups)


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
