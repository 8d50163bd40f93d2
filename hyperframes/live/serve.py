"""``hyperframes serve``: play recorded hyperframe files to Foxglove, with playback control.

:class:`Player` opens the files of a drive (a file, a drive directory, a glob, or
an ``s3://`` prefix or glob), reading only their tables, and plays them to a
:class:`~hyperframes.live.server.LiveServer` advertising the drive's time range:
Foxglove's play, pause, seek and speed controls drive a paced loop on a thread.
The loop reads one chunk of drive time at a time from the current position (one
coalesced read per stream and chunk: ranged GETs from a bucket), and sends each
frame when the wall clock reaches its capture time scaled by the speed. A seek
starts at the first frame at or after the requested time; a video stream
(H.264/H.265/AV1) starts at its newest keyframe at or before it, so the picture
decodes at once. Stretches without frames (between segments) are skipped.
"""

from __future__ import annotations

import glob
import heapq
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from foxglove.websocket import (
    PlaybackCommand,
    PlaybackControlRequest,
    PlaybackState,
    PlaybackStatus,
)

from hyperframes.format import search
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import StreamInfo
from hyperframes.live.server import LiveServer
from hyperframes.mcap.schemas import Codec, channel_for
from hyperframes.reader import HyperframeReader
from hyperframes.storage.objects import is_url, list_urls

__all__ = ["resolve_sources", "Player", "serve"]

log = logging.getLogger(__name__)
_CHUNK_NS = 250_000_000  # drive time read at once
_GAP_NS = 1_000_000_000  # a jump over more than this re-anchors the clock (no waiting)


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


def _stream_table(
    readers: Sequence[HyperframeReader], names: Sequence[str] | None
) -> list[StreamInfo]:
    """The streams by name, the same in every file (``ValueError`` otherwise or for an
    unknown name): the first file's :class:`StreamInfo` of each."""
    table: dict[str, StreamInfo] = {}
    for r in readers:
        for s in r.streams.values():
            a = table.setdefault(s.name, s)
            if (a.kind, a.encoding, a.dtype, a.shape) != (s.kind, s.encoding, s.dtype, s.shape):
                raise ValueError(f"{r.name}: stream {s.name!r} differs from the other files")
    if names is None:
        return list(table.values())
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"no stream {', '.join(map(repr, unknown))}; streams: {', '.join(table)}")
    return [table[n] for n in names]


@dataclass(slots=True)
class _Source:
    reader: HyperframeReader
    ids: dict[int, int]  # served stream id -> id in this file
    keyframes: dict[int, np.ndarray] = field(default_factory=dict)  # sid -> keyframe times


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
        self.readers = [HyperframeReader(p) for p in files]
        self.readers.sort(key=lambda r: r.start_ns)
        self.streams: list[StreamInfo] = _stream_table(self.readers, streams)
        self._video = {s.id for s in self.streams if channel_for(s).codec is Codec.VIDEO}
        self._sources = [
            _Source(
                r,
                {s.id: t.id for s in self.streams for t in r.streams.values() if t.name == s.name},
            )
            for r in self.readers
        ]
        self.start_ns = min(r.start_ns for r in self.readers)
        self.end_ns = max(r.end_ns for r in self.readers)
        self.chunk_ns = chunk_ns
        self._cond = threading.Condition()
        self._gen = 0  # bumped by every control change: the loop drops what it was doing
        self._playing = autoplay
        self._speed = speed
        self._position = self.start_ns  # next drive time to play
        self._seek_to: int | None = self.start_ns  # first chunk: the keyframe rule applies
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
        """Continue from drive time ``t_ns`` (video from its newest keyframe at or before)."""
        if not _locked:
            with self._cond:
                self.seek(t_ns, _locked=True)
                return
        t = min(max(t_ns, self.start_ns), self.end_ns)
        self._position = t
        self._seek_to = t
        self._gen += 1
        self._cond.notify_all()

    # --- reading -----------------------------------------------------------------------

    def _keyframe_before(self, sid: int, t: int) -> int | None:
        """The time of ``sid``'s newest keyframe at or before ``t``, in any file."""
        best: int | None = None
        for src in self._sources:
            if sid not in src.ids or src.reader.start_ns > t:
                continue
            kf = src.keyframes.get(sid)
            if kf is None:
                r, fid = src.reader, src.ids[sid]
                lo, hi = r.stream_slice(fid)
                rows = r.index[lo:hi]
                kf = np.ascontiguousarray(
                    rows["timestamp_ns"][(rows["flags"] & int(FrameFlags.KEYFRAME)) != 0]
                )
                src.keyframes[sid] = kf
            i = search.find(kf, t, "before")
            if i is not None and (best is None or int(kf[i]) > best):
                best = int(kf[i])
        return best

    def _next_after(self, t: int) -> int | None:
        best: int | None = None
        for src in self._sources:
            if src.reader.end_ns < t:
                continue
            for fid in src.ids.values():
                ts = src.reader.timestamps(fid)
                i = search.find(ts, t, "after")
                if i is not None and (best is None or int(ts[i]) < best):
                    best = int(ts[i])
        return best

    def _read(self, lo: int, hi: int, seek: int | None) -> list[tuple[int, int, memoryview]]:
        """``(t, stream id, payload)`` of the frames in ``[lo, hi]`` in time order; after a
        seek to ``seek``, video streams from their newest keyframe at or before it."""
        per: list[list[tuple[int, int, memoryview]]] = []
        for sid in (s.id for s in self.streams):
            a = lo
            if seek is not None and sid in self._video:
                kf = self._keyframe_before(sid, seek)
                a = kf if kf is not None else lo
            rows: list[tuple[int, int, memoryview]] = []
            for src in self._sources:
                r = src.reader
                fid = src.ids.get(sid)
                if fid is None or r.end_ns < a or r.start_ns > hi:
                    continue
                rows += [(f.timestamp_ns, sid, f.data.data) for f in r.read_range(fid, a, hi)]
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
        for r in self.readers:
            r.close()

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
