"""What one process (a DataLoader worker, or the main process) opens for a dataset.

Created lazily on first use and re-created when the process id changes (a
forked worker never uses its parent's readers, decoders or threads); never
pickled: datasets drop it in ``__getstate__``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from torch.utils.data import get_worker_info

from hyperframes.format.layout import FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.torch.cache import FrameCache
from hyperframes.torch.catalog import open_pinned

__all__ = ["WorkerState"]

_KEYFRAME = int(FrameFlags.KEYFRAME)


class WorkerState:
    """Readers (LRU, at most ``max_open_files``), the frame cache, video streams, a thread pool."""

    def __init__(
        self,
        *,
        max_open_files: int,
        cache_mb: float,
        verify: bool,
        pins: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        self.pid = os.getpid()
        self.pins = pins  # path -> manifest entries: checked each time the file is opened
        self.max_open_files = max(1, max_open_files)
        self.verify = verify
        self.cache = FrameCache(cache_mb) if cache_mb > 0 else None
        self._readers: OrderedDict[str, HyperframeReader] = OrderedDict()
        self._bases: dict[tuple[str, int], tuple[int, np.ndarray]] = {}
        self._keyframes: dict[tuple[str, int], np.ndarray] = {}
        self.videos: dict[tuple[str, int], Any] = {}  # VideoStream per (path, stream id)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._lock = threading.RLock()  # decode threads open readers and fill tables

    def reader(self, path: str) -> HyperframeReader:
        """The open reader of ``path`` (opened on first use; the least recently used is closed)."""
        with self._lock:
            return self._reader(path)

    def _reader(self, path: str) -> HyperframeReader:
        r = self._readers.get(path)
        if r is not None:
            self._readers.move_to_end(path)
            return r
        while len(self._readers) >= self.max_open_files:
            old, old_reader = self._readers.popitem(last=False)
            for key in [k for k in self.videos if k[0] == old]:
                self.videos.pop(key).close()
            old_reader.close()
        # in a DataLoader worker, the workers already use the cores: one frame, one thread
        threads = 1 if get_worker_info() is not None else None
        pinned = self.pins.get(path) if self.pins else None
        if pinned:
            r = open_pinned(pinned, verify=self.verify, threads=threads)
        else:
            r = HyperframeReader(path, verify=self.verify, threads=threads)
        self._readers[path] = r
        return r

    def stream(self, path: str, sid: int) -> tuple[int, np.ndarray]:
        """(index position of the stream's first frame, its sorted timestamps)."""
        key = (path, sid)
        got = self._bases.get(key)
        if got is None:
            with self._lock:
                r = self._reader(path)
                got = (r.stream_slice(sid)[0], r.timestamps(sid))
                self._bases[key] = got
        return got

    def keyframes(self, path: str, sid: int) -> np.ndarray:
        """Stream-relative positions of the frames flagged KEYFRAME."""
        key = (path, sid)
        kf = self._keyframes.get(key)
        if kf is None:
            base, ts = self.stream(path, sid)
            flags = self.reader(path).index["flags"][base : base + len(ts)].astype(np.int64)
            kf = np.flatnonzero(flags & _KEYFRAME)
            self._keyframes[key] = kf
        return kf

    def pool(self, size: int) -> ThreadPoolExecutor:
        """A thread pool of ``size`` threads for this process (re-created when the size grows)."""
        if self._pool is None or self._pool_size < size:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = ThreadPoolExecutor(size, thread_name_prefix="hf-decode")
            self._pool_size = size
        return self._pool

    def close(self) -> None:
        """Close readers and decoders, stop the threads."""
        for v in self.videos.values():
            v.close()
        self.videos.clear()
        for r in self._readers.values():
            r.close()
        self._readers.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
