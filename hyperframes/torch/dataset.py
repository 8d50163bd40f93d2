"""PyTorch datasets over hyperframe files: one window per sample, or clips of windows.

Both hold only plain data (paths, window tables, options): readers, decoders,
caches and threads are created lazily in each process that loads samples, so
DataLoader workers work under fork and spawn alike.

A window sample is a nested dict::

    {"file": str, "window": int, "window_id": int, "start_ns": int, "end_ns": int,
     "camera": {"cam_front": {"data": [Tensor (H, W, 3) uint8, ...],   # one per frame
                              "timestamp_ns": Tensor (n,) int64,
                              "is_pad": Tensor (n,) bool,
                              "missing": bool}, ...},
     "lidar": {...}, "imu": {...}}                 # grouped by sensor kind, then stream name

``missing`` is True when the stream has no frame in the window (then
``n == 0``, unless aligned); ``is_pad`` marks aligned rows that matched
nothing (see :class:`~hyperframes.torch.catalog.Align`). With
``decode="gpu"`` H.265 streams carry ``encoded`` spans instead of ``data``.
:func:`~hyperframes.torch.collate.collate` batches samples.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np
from torch.utils.data import Dataset

from hyperframes.format.streams import StreamInfo
from hyperframes.sync import ClockCheck
from hyperframes.torch._load import DecodeMode, load_steps, plan_step
from hyperframes.torch._state import WorkerState
from hyperframes.torch.cache import CacheStats
from hyperframes.torch.catalog import (
    Align,
    Catalog,
    PathsLike,
    build_catalog,
    manifest_catalog,
    select_spans,
)

__all__ = ["Sample", "HyperframeDataset", "SequenceDataset"]

Sample = dict[str, Any]
_MODES = ("cpu", "gpu", "raw")


class _Base(Dataset[Sample]):
    """Options and per-process state shared by both datasets."""

    def __init__(
        self,
        paths: PathsLike | Catalog,
        *,
        streams: Sequence[str] | None,
        decode: DecodeMode,
        align: Align | None,
        cache_mb: float,
        decode_threads: int | None,
        max_open_files: int,
        verify: bool,
        transform: Callable[[Sample], Sample] | None,
    ) -> None:
        if decode not in _MODES:
            raise ValueError(f"decode must be one of {', '.join(_MODES)}, got {decode!r}")
        if cache_mb < 0:
            raise ValueError(f"cache_mb must be >= 0, got {cache_mb}")
        if isinstance(paths, Catalog):  # built already (from_manifest)
            self.catalog: Catalog = paths
        else:
            self.catalog = build_catalog(paths, streams, align)
        self.decode: DecodeMode = decode
        self.align = align
        self.cache_mb = cache_mb
        self.verify = verify
        self.max_open_files = max_open_files
        self.transform = transform
        n_video = sum(s.encoding == "h265" for s in self.catalog.streams)
        if decode_threads is None:
            decode_threads = n_video if decode == "cpu" else 1
        self.decode_threads = max(1, decode_threads)
        self._state: WorkerState | None = None

    # --- facts ---------------------------------------------------------------------

    @property
    def streams(self) -> tuple[StreamInfo, ...]:
        """The selected streams (as the first file describes them)."""
        return self.catalog.streams

    @property
    def paths(self) -> list[str]:
        """The files, in dataset order."""
        return [f.path for f in self.catalog.files]

    @property
    def clock_checks(self) -> tuple[ClockCheck, ...]:
        """Stream pairs matched across clocks on explicit opt-in (``Align.allow_mixed_clocks``)."""
        return self.catalog.clock_checks

    def cache_stats(self) -> CacheStats | None:
        """This process's frame cache counters (None without a cache or before loading)."""
        st = self._state
        return st.cache.stats if st is not None and st.cache is not None else None

    # --- per-process state ---------------------------------------------------------

    def _local(self) -> WorkerState:
        st = self._state
        if st is None or st.pid != os.getpid():  # first use, or inherited through fork
            st = WorkerState(
                max_open_files=self.max_open_files,
                cache_mb=self.cache_mb,
                verify=self.verify,
                pins=self.catalog.pins,
            )
            self._state = st
        return st

    @classmethod
    def from_manifest(cls, manifest: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Self:
        """The dataset of exactly the clips a manifest (``hyperframes catalog snapshot``) pins.

        Serves the windows of each entry's ``[start_ns, end_ns]`` in its uri (a
        path or an ``s3://`` object, read with range reads), entry by entry in
        manifest order, and of those windows only the frames stamped in the
        range. ``streams`` defaults to the streams every entry lists. Every
        file is checked against the manifest when it is opened, here and again
        in each DataLoader worker:
        :class:`~hyperframes.catalog.errors.ManifestError` names a uri that is
        gone or whose bytes changed since the snapshot (ETag of an object,
        header fingerprint of a file). The other arguments are the class's own.
        Needs the ``catalog`` extra.
        """
        from hyperframes.catalog.manifest import read_manifest  # noqa: PLC0415

        entries = read_manifest(manifest)
        catalog = manifest_catalog(entries, kwargs.get("streams"), kwargs.get("align"))
        return cls(catalog, *args, **kwargs)

    def close(self) -> None:
        """Close this process's readers and decoders (they reopen on the next sample)."""
        if self._state is not None and self._state.pid == os.getpid():
            self._state.close()
        self._state = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_state"] = None  # readers and decoders never travel to another process
        return state

    def _load(self, file: int, windows: Sequence[int]) -> list[Sample]:
        st = self._local()
        plans = [plan_step(st, self.catalog, file, w, self.align) for w in windows]
        return load_steps(st, self.catalog, file, plans, self.decode, self.decode_threads)


class HyperframeDataset(_Base):
    """One sample per window across many files (a path, a directory, a glob or a list).

    ``streams`` selects streams by name (default: all of the first file);
    ``decode``: ``"cpu"`` (JPEG/PNG and H.265 decoded in the worker),
    ``"gpu"`` (H.265 left as encoded spans for
    :class:`~hyperframes.torch.video.GpuVideoDecoder`; JPEG still in the
    worker) or ``"raw"`` (every payload as uint8 bytes). ``align`` turns each
    reference frame into one row across streams (timestamp queries with a
    tolerance and ``is_pad`` masks). ``cache_mb`` sizes the per-worker LRU of
    decoded images (0: none). ``decode_threads`` defaults to one per H.265
    camera (cpu mode). ``transform`` runs on each sample in the worker.
    ``around`` keeps only the windows around events of that name (from the
    files' event streams and their directories' event logs), ``pre_s``
    before and ``post_s`` after each (default: the event's own).
    :meth:`from_manifest` serves exactly the clips of a catalog snapshot;
    ``paths`` may also be a :class:`~hyperframes.torch.catalog.Catalog` built
    already (then ``streams`` and ``align`` are the ones it was built with).
    """

    def __init__(
        self,
        paths: PathsLike | Catalog,
        *,
        streams: Sequence[str] | None = None,
        decode: DecodeMode = "cpu",
        align: Align | None = None,
        cache_mb: float = 0.0,
        decode_threads: int | None = None,
        max_open_files: int = 64,
        verify: bool = True,
        transform: Callable[[Sample], Sample] | None = None,
        around: str | None = None,
        pre_s: float | None = None,
        post_s: float | None = None,
    ) -> None:
        super().__init__(
            paths,
            streams=streams,
            decode=decode,
            align=align,
            cache_mb=cache_mb,
            decode_threads=decode_threads,
            max_open_files=max_open_files,
            verify=verify,
            transform=transform,
        )

        if around is not None:
            self._select_around(around, pre_s, post_s)
        elif pre_s is not None or post_s is not None:
            raise ValueError("pre_s and post_s go with around= (an event name)")

    def _select_around(self, name: str, pre_s: float | None, post_s: float | None) -> None:
        from hyperframes.events import event_windows, events_of_files  # noqa: PLC0415

        for key, val in (("pre_s", pre_s), ("post_s", post_s)):
            if val is not None and not val >= 0:
                raise ValueError(f"{key} must be >= 0 seconds, got {val}")
        events = events_of_files(self.paths)
        spans = event_windows(events, name, pre_s, post_s)
        if not spans:
            names = sorted({e.name for e in events})
            raise ValueError(
                f"no event named {name!r} in these files"
                + (f" (events: {', '.join(names)})" if names else " (they hold no events)")
            )
        self.catalog = select_spans(self.catalog, spans)
        self.event_spans = spans
        """The ``(start_ns, end_ns)`` spans selected around the events."""

    def __len__(self) -> int:
        return len(self.catalog)

    def locate(self, index: int) -> tuple[str, int]:
        """Sample ``index`` as (file path, window id)."""
        f, w = self.catalog.locate(index)
        fw = self.catalog.files[f]
        return fw.path, int(fw.window_ids[w])

    def __getitem__(self, index: int) -> Sample:
        f, w = self.catalog.locate(int(index))
        sample = self._load(f, [w])[0]
        sample["index"] = int(index) % len(self)
        return self.transform(sample) if self.transform is not None else sample


class SequenceDataset(_Base):
    """Clips of ``length`` consecutive windows, one every ``stride`` windows.

    A clip never spans a gap (a window id missing from the recording) unless
    ``allow_gaps``, nor two files unless ``cross_files`` (and then only files
    whose windows continue without a gap, unless ``allow_gaps``). Given a
    :class:`~hyperframes.drive.Drive` (``cross_files=None``, the default),
    clips run on from one segment into the next, but never across a gap of
    the drive (:attr:`Drive.gaps`), whatever ``allow_gaps`` says. A clip
    sample is ``{"index": i, "window_id": [ids], "steps": [window samples]}``;
    :func:`~hyperframes.torch.collate.collate` makes ``(B, T, F, ...)``.
    H.265 cameras decode forward through the clip with one decoder (cpu), or
    come as one span per step that :class:`GpuVideoDecoder` decodes forward.
    """

    def __init__(
        self,
        paths: PathsLike | Catalog,
        length: int,
        *,
        stride: int = 1,
        allow_gaps: bool = False,
        cross_files: bool | None = None,
        streams: Sequence[str] | None = None,
        decode: DecodeMode = "cpu",
        align: Align | None = None,
        cache_mb: float = 0.0,
        decode_threads: int | None = None,
        max_open_files: int = 64,
        verify: bool = True,
        transform: Callable[[Sample], Sample] | None = None,
    ) -> None:
        if length < 1 or stride < 1:
            raise ValueError(f"length and stride must be >= 1, got {length} and {stride}")
        super().__init__(
            paths,
            streams=streams,
            decode=decode,
            align=align,
            cache_mb=cache_mb,
            decode_threads=decode_threads,
            max_open_files=max_open_files,
            verify=verify,
            transform=transform,
        )
        self.length = length
        self.stride = stride
        self.allow_gaps = allow_gaps
        self.cross_files = cross_files
        self.clips: np.ndarray = clip_starts(self.catalog, length, stride, allow_gaps, cross_files)

    def __len__(self) -> int:
        return len(self.clips)

    def windows_of(self, index: int) -> list[tuple[str, int]]:
        """The (file path, window id) of each step of clip ``index``."""
        start = int(self.clips[index])
        out = []
        for g in range(start, start + self.length):
            f, w = self.catalog.locate(g)
            fw = self.catalog.files[f]
            out.append((fw.path, int(fw.window_ids[w])))
        return out

    def __getitem__(self, index: int) -> Sample:
        start = int(self.clips[int(index)])
        steps: list[Sample] = []
        by_file: dict[int, list[int]] = {}
        for g in range(start, start + self.length):
            f, w = self.catalog.locate(g)
            by_file.setdefault(f, []).append(w)
        for f, windows in by_file.items():  # files in order: a clip crosses them forward
            steps += self._load(f, windows)
        sample: Sample = {
            "index": int(index) % len(self),
            "window_id": [s["window_id"] for s in steps],
            "steps": steps,
        }
        return self.transform(sample) if self.transform is not None else sample


def clip_starts(
    catalog: Catalog, length: int, stride: int, allow_gaps: bool, cross_files: bool | None
) -> np.ndarray:
    """Global window positions where clips start (see :class:`SequenceDataset`).

    ``cross_files``: True crosses any two files, False none, None only
    consecutive segments of one drive with no gap between them.
    """
    ids = np.concatenate([f.window_ids for f in catalog.files]) if catalog.files else np.empty(0)
    counts = [len(f.window_ids) for f in catalog.files]
    file_of = np.repeat(np.arange(len(catalog.files)), counts)
    groups = catalog.groups if catalog.groups is not None else np.full(len(catalog.files), -1)
    group_of = np.repeat(groups, counts)
    breaks = np.zeros(len(ids), bool)  # True where a run of continuous windows starts
    if len(ids):
        breaks[0] = True
        if not allow_gaps:
            breaks[1:] |= ids[1:] != ids[:-1] + 1
        new_file = file_of[1:] != file_of[:-1]
        a, b = group_of[:-1], group_of[1:]
        same_drive = (a == b) & (a >= 0)
        if cross_files is False:
            breaks[1:] |= new_file
        elif cross_files is None:
            breaks[1:] |= new_file & ~same_drive
        else:
            breaks[1:] |= new_file & ((a >= 0) | (b >= 0)) & ~same_drive  # a drive's gap
        breaks[1:] |= ids[1:] <= ids[:-1]  # overlapping files: never run backwards
    run_starts = np.flatnonzero(breaks)
    run_ends = np.append(run_starts[1:], len(ids))
    starts = [
        np.arange(a, b - length + 1, stride, dtype=np.int64)
        for a, b in zip(run_starts, run_ends, strict=True)
        if b - a >= length
    ]
    return np.concatenate(starts) if starts else np.empty(0, np.int64)
