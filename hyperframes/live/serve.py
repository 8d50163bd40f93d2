"""``hyperframes serve``: play recorded hyperframe files to Foxglove, with playback control.

:class:`Player` plays the files of a drive (a file, a drive directory, a glob, or
an ``s3://`` prefix or glob) to a :class:`~hyperframes.live.server.LiveServer`
advertising the drive's time range: Foxglove's play, pause, seek and speed
controls drive a paced loop on a thread.

Opening is lazy: the first file (by name) is opened (its tables read) for the
stream table, every other file's time span comes from its 512-byte header alone
(one read each, :data:`_HEAD_THREADS` at once; a ranged GET from a bucket). A
file's tables are read when playback reaches it; at most :data:`_OPEN` files are
kept open (the least recently used is closed). The stream table is the first
file's: a stream another file describes differently is left out of that file
(logged), a stream only later files have is not served.

The loop reads one chunk of drive time at a time from the current position (one
coalesced read per stream and chunk), and sends each frame when the wall clock
reaches its capture time scaled by the speed. After a seek each stream starts
with the state at that instant: a video stream (H.264/H.265/AV1) from its newest
keyframe at or before the time (so the picture decodes at once), any other stream
(images, point clouds, IMU, events) from its newest frame at or before it; those
are looked up in the file holding the time and up to :data:`_LOOKBACK` - 1 files
before it of the same drive (no hole over :data:`_DRIVE_GAP_NS` between them), and
sent at once with their own (earlier) timestamps. Stretches without frames
(between segments) are skipped.

The recorder's event stream (:data:`~hyperframes.events.EVENT_STREAM_ID`) is a
stream like the others: its frames go out on ``/events`` as the stored JSON, the
channel and encoding of the recorder's live view. Quarantined frames (the files'
quarantine tables: malformed timestamps) are not played; each file that has
some logs how many were left out, once, at start.
"""

from __future__ import annotations

import bisect
import glob
import heapq
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from foxglove.websocket import (
    PlaybackCommand,
    PlaybackControlRequest,
    PlaybackState,
    PlaybackStatus,
)

from hyperframes._structure import read_head
from hyperframes.errors import HyperframesError, NotFinalizedError
from hyperframes.format import search
from hyperframes.format.layout import FrameFlags, Header
from hyperframes.format.streams import StreamInfo
from hyperframes.live.server import LiveServer
from hyperframes.mcap.schemas import Codec, channel_for
from hyperframes.reader import HyperframeReader
from hyperframes.storage.objects import is_url, list_urls

__all__ = ["resolve_sources", "Player", "serve"]

log = logging.getLogger(__name__)
_CHUNK_NS = 250_000_000  # drive time read at once
_GAP_NS = 1_000_000_000  # a jump over more than this re-anchors the clock (no waiting)
_OPEN = 4  # files kept open (tables read), least recently used closed first
_LOOKBACK = 4  # files searched for a stream's frame (keyframe) before a seek time
_DRIVE_GAP_NS = 10_000_000_000  # a hole between files longer than this: another drive
_HEAD_THREADS = 8  # headers read at once when opening


def resolve_sources(path: str | os.PathLike[str]) -> list[str]:
    """The segment files ``path`` names: a ``.hf`` file, a directory (its ``*.hf``), a glob,
    an ``s3://bucket/prefix/`` (its ``*.hf``) or an ``s3://`` glob. Sorted by name."""
    text = os.fspath(path)
    if is_url(text):
        last = text.rpartition("/")[2]
        if text.endswith("/") or (not any(c in last for c in "*?[") and not last.endswith(".hf")):
            text = text.rstrip("/") + "/*.hf"
        urls = list_urls(text)
        if not urls:
            raise FileNotFoundError(f"{path}: no segment files (*.hf)")
        return urls
    p = Path(text)
    if p.is_dir():
        files = sorted(str(f) for f in p.glob("*.hf"))
    elif any(c in text for c in "*?["):
        files = sorted(glob.glob(text))  # noqa: PTH207
    else:
        files = [text] if p.exists() else []
    if not files:
        raise FileNotFoundError(f"{path}: no segment files (*.hf)")
    return files


def _finalized_head(path: str) -> Header:
    """``path``'s header alone (:func:`~hyperframes._structure.read_head`), which must be
    a finalized file's."""
    h = read_head(path)
    if not h.finalized:
        raise NotFinalizedError(path)
    return h


def _stream_table(reader: HyperframeReader, names: Sequence[str] | None) -> list[StreamInfo]:
    """``reader``'s streams, or those named (``ValueError`` for an unknown name)."""
    table = {s.name: s for s in reader.streams.values()}
    if names is None:
        return list(table.values())
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"no stream {', '.join(map(repr, unknown))}; streams: {', '.join(table)}")
    return [table[n] for n in names]


def _same(a: StreamInfo, b: StreamInfo) -> bool:
    return (a.kind, a.encoding, a.dtype, a.shape) == (b.kind, b.encoding, b.dtype, b.shape)


@dataclass(slots=True)
class _Source:
    """An open file: its reader and the served streams it has."""

    reader: HyperframeReader
    ids: dict[int, int]  # served stream id -> id in this file
    keyframes: dict[int, np.ndarray] = field(default_factory=dict)  # sid -> keyframe times

    def times(self, sid: int, keyframes: bool) -> np.ndarray:
        """The capture times of served stream ``sid`` here (of its keyframes only)."""
        r, fid = self.reader, self.ids[sid]
        if not keyframes:
            return r.timestamps(fid)
        kf = self.keyframes.get(sid)
        if kf is None:
            lo, hi = r.stream_slice(fid)
            rows = r.index[lo:hi]
            key = (rows["flags"] & int(FrameFlags.KEYFRAME)) != 0
            kf = self.keyframes[sid] = np.ascontiguousarray(rows["timestamp_ns"][key])
        return kf


@dataclass(frozen=True, slots=True)
class _Segment:
    """One file and its span (from its header)."""

    path: str
    start_ns: int
    end_ns: int


class Player:
    """Plays the files of one drive to a :class:`LiveServer` (see the module docstring).

    ``streams`` selects streams by name; ``speed`` is the initial speed;
    ``autoplay`` starts playing at once (else paused at the start, as Foxglove expects).
    """

    def __init__(
        self,
        files: Sequence[str | os.PathLike[str]],
        *,
        streams: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 8765,
        speed: float = 1.0,
        autoplay: bool = False,
        chunk_ns: int = _CHUNK_NS,
    ) -> None:
        if not files:
            raise ValueError("no input files")
        paths = [os.fspath(p) for p in files]
        first = HyperframeReader(paths[0])
        self._lock = threading.Lock()  # the open files
        self._open_files: OrderedDict[int, _Source] = OrderedDict()
        self._failed: dict[int, Exception] = {}  # files that did not open
        try:
            self.streams: list[StreamInfo] = _stream_table(first, streams)
            with ThreadPoolExecutor(min(_HEAD_THREADS, len(paths))) as pool:
                heads = [first.header, *pool.map(_finalized_head, paths[1:])]
        except BaseException:
            first.close()
            raise
        for p, h in zip(paths, heads, strict=True):
            if h.quarantine_count:
                log.info("%s: %d quarantined frame(s) left out (not played)", p, h.quarantine_count)
        order = sorted(range(len(paths)), key=lambda i: heads[i].start_ns)
        self.segments = [_Segment(paths[i], heads[i].start_ns, heads[i].end_ns) for i in order]
        """The files in time order (their spans from their headers)."""
        self._starts = [s.start_ns for s in self.segments]
        self._open_files[order.index(0)] = _Source(first, self._ids(first))
        self._video = {s.id for s in self.streams if channel_for(s).codec is Codec.VIDEO}
        self.start_ns = self.segments[0].start_ns
        self.end_ns = max(s.end_ns for s in self.segments)
        self.chunk_ns = chunk_ns
        self._cond = threading.Condition()
        self._gen = 0  # bumped by every control change: the loop drops what it was doing
        self._playing = autoplay
        self._speed = speed
        self._position = self.start_ns  # next drive time to play
        self._seek_to: int | None = self.start_ns  # first chunk: the seek rules apply
        self._closed = False
        self.sent = 0
        self.server = LiveServer(
            self.streams,
            host=host,
            port=port,
            playback_range=(self.start_ns, self.end_ns),
            listener=self,
        )
        self._thread = threading.Thread(target=self._run, name="hyperframes-serve", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self.server.port

    # --- control ---------------------------------------------------------------------

    def _state(self, request_id: str | None = None, did_seek: bool = False) -> PlaybackState:
        if self._playing:
            status = PlaybackStatus.Playing
        elif self._position > self.end_ns:
            status = PlaybackStatus.Ended
        else:
            status = PlaybackStatus.Paused
        t = min(max(self._position, self.start_ns), self.end_ns)
        return PlaybackState(status, t, self._speed, did_seek, request_id)

    def on_playback_control_request(self, request: PlaybackControlRequest) -> PlaybackState | None:
        """Play, pause, seek and speed from a client (called by the server)."""
        with self._cond:
            if request.playback_speed > 0:
                self._speed = float(request.playback_speed)
            did_seek = request.seek_time is not None
            if request.seek_time is not None:
                self.seek(int(request.seek_time), _locked=True)
            play = request.playback_command == PlaybackCommand.Play
            if play and self._position > self.end_ns:  # play after the end: from the start
                self.seek(self.start_ns, _locked=True)
            self._playing = play
            self._gen += 1
            self._cond.notify_all()
            return self._state(request.request_id, did_seek)

    def play(self, speed: float | None = None) -> None:
        """Play (at ``speed``)."""
        with self._cond:
            self._playing = True
            if speed is not None:
                self._speed = speed
            self._gen += 1
            self._cond.notify_all()

    def pause(self) -> None:
        """Pause."""
        with self._cond:
            self._playing = False
            self._gen += 1
            self._cond.notify_all()

    def seek(self, t_ns: int, *, _locked: bool = False) -> None:
        """Continue from drive time ``t_ns`` (each stream from its state there: see the
        module docstring)."""
        if not _locked:
            with self._cond:
                self.seek(t_ns, _locked=True)
                return
        t = min(max(t_ns, self.start_ns), self.end_ns)
        self._position = t
        self._seek_to = t
        self._gen += 1
        self._cond.notify_all()

    # --- files -------------------------------------------------------------------------

    def _ids(self, reader: HyperframeReader) -> dict[int, int]:
        """Served stream id -> id in ``reader``'s file, for the served streams it has alike."""
        mine = {s.name: s for s in reader.streams.values()}
        ids: dict[int, int] = {}
        for s in self.streams:
            t = mine.get(s.name)
            if t is not None and not _same(s, t):
                log.warning("%s: stream %r differs from the first file's: left out", reader.name,
                            s.name)  # fmt: skip
            elif t is not None:
                ids[s.id] = t.id
        return ids

    def reader(self, i: int) -> HyperframeReader:
        """The reader of segment ``i`` (in time order), opened if it is not (it may be
        closed again once :data:`_OPEN` others were used since); raises what its opening
        raised for a file that does not open."""
        src = self._open(i)
        if src is None:
            raise self._failed[i]
        return src.reader

    def _open(self, i: int) -> _Source | None:
        """Segment ``i``, opened (its tables read) if it is not; the least recently used
        beyond :data:`_OPEN` is closed. None for a file that does not open (damaged since
        its header was read, gone): logged once, then left out."""
        with self._lock:
            src = self._open_files.get(i)
            if src is not None:
                self._open_files.move_to_end(i)
                return src
            if i in self._failed:
                return None
            path = self.segments[i].path
            try:
                reader = HyperframeReader(path)
            except (HyperframesError, OSError) as exc:
                self._failed[i] = exc
                log.error("%s: left out, it does not open: %s", path, exc)
                return None
            src = self._open_files[i] = _Source(reader, self._ids(reader))
            while len(self._open_files) > _OPEN:
                self._open_files.popitem(last=False)[1].reader.close()
            return src

    def _lookback(self, t: int) -> Iterator[int]:
        """The segments that may hold a frame at or before ``t``, newest first: up to
        :data:`_LOOKBACK`, none past a hole of :data:`_DRIVE_GAP_NS` (another drive)."""
        edge = t
        for n, i in enumerate(reversed(range(bisect.bisect_right(self._starts, t)))):
            seg = self.segments[i]
            if n == _LOOKBACK or seg.end_ns + _DRIVE_GAP_NS < edge:
                return
            edge = min(edge, seg.start_ns)
            yield i

    # --- reading -----------------------------------------------------------------------

    def _before(self, sid: int, t: int) -> int | None:
        """The time of ``sid``'s newest frame at or before ``t`` (a keyframe for video)."""
        best: int | None = None
        for i in self._lookback(t):
            if best is not None and self.segments[i].end_ns <= best:
                continue  # nothing newer there
            src = self._open(i)
            if src is None or sid not in src.ids:
                continue
            ts = src.times(sid, keyframes=sid in self._video)
            k = search.find(ts, t, "before")
            if k is not None and (best is None or int(ts[k]) > best):
                best = int(ts[k])
        return best

    def _next_after(self, t: int) -> int | None:
        """The time of the first frame at or after ``t`` of any served stream."""
        best: int | None = None
        for i, seg in enumerate(self.segments):
            if best is not None and seg.start_ns > best:
                break
            if seg.end_ns < t:
                continue
            src = self._open(i)
            if src is None:
                continue
            for sid in src.ids:
                ts = src.times(sid, keyframes=False)
                k = search.find(ts, t, "after")
                if k is not None and (best is None or int(ts[k]) < best):
                    best = int(ts[k])
        return best

    def _read(self, lo: int, hi: int, seek: int | None) -> list[tuple[int, int, memoryview]]:
        """``(t, stream id, payload)`` of the frames in ``[lo, hi]`` in time order; after a
        seek to ``seek`` (= ``lo``), each stream from its frame before (:meth:`_before`)."""
        per: list[list[tuple[int, int, memoryview]]] = []
        for sid in (s.id for s in self.streams):
            a = lo
            if seek is not None:
                before = self._before(sid, seek)
                a = before if before is not None else lo
            rows: list[tuple[int, int, memoryview]] = []
            for i, seg in enumerate(self.segments):
                if seg.start_ns > hi:
                    break
                if seg.end_ns < a:
                    continue
                src = self._open(i)
                if src is None or sid not in src.ids:
                    continue
                frames = src.reader.read_range(src.ids[sid], a, hi)
                rows += [(f.timestamp_ns, sid, f.data.data) for f in frames]
            rows.sort(key=lambda x: x[0])
            per.append(rows)
        return list(heapq.merge(*per, key=lambda x: x[0]))

    # --- the paced loop ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:
            log.exception("playback failed")

    def _loop(self) -> None:
        anchor: tuple[float, int] | None = None  # (wall clock, drive time) when in step
        while True:
            with self._cond:
                while not self._closed and not self._playing:
                    anchor = None
                    self._cond.wait()
                if self._closed:
                    return
                gen, speed, lo, seek = self._gen, self._speed, self._position, self._seek_to
                self._seek_to = None
            if lo > self.end_ns:
                self._ended()
                anchor = None
                continue
            hi = min(lo + self.chunk_ns - 1, self.end_ns)
            frames = self._read(lo, hi, seek)
            if not frames:
                nxt = self._next_after(hi + 1)
                with self._cond:
                    if gen == self._gen:
                        self._position = nxt if nxt is not None else self.end_ns + 1
                if nxt is None or nxt - lo > _GAP_NS:
                    anchor = None
                continue
            if anchor is None:
                anchor = (time.monotonic(), max(lo, frames[0][0]) if seek is None else lo)
            interrupted = False
            for t, sid, payload in frames:
                due = anchor[0] + max(t - anchor[1], 0) / 1e9 / speed
                with self._cond:
                    while not self._closed and gen == self._gen:
                        wait = due - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    if self._closed or gen != self._gen:
                        interrupted = True
                        break
                    self._position = max(self._position, t + 1)
                self.server.publish(sid, t, payload)
                self.sent += 1
            if interrupted:  # paused, sought or a new speed: in step again from the position
                anchor = None
                continue
            self.server.broadcast_time(hi)
            with self._cond:
                if gen == self._gen:
                    self._position = hi + 1
                else:
                    anchor = None

    def _ended(self) -> None:
        with self._cond:
            self._playing = False
            self._position = self.end_ns + 1
            state = self._state()
        self.server.broadcast_playback_state(state)

    def close(self) -> None:
        """Stop playing, the server and the readers."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self.server.close()
        with self._lock:
            for src in self._open_files.values():
                src.reader.close()
            self._open_files.clear()

    def __enter__(self) -> Player:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    path: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    streams: Sequence[str] | None = None,
    speed: float = 1.0,
) -> Player:
    """Start serving the drive at ``path`` (see :func:`resolve_sources`); returns the player
    (call :meth:`Player.close` to stop)."""
    return Player(resolve_sources(path), streams=streams, host=host, port=port, speed=speed)
