"""Window assignment for imported frames: sans-IO, the recorder's end-inclusive rule.

Frames come in the order of some arrival clock (an MCAP file's log time) but
are placed by their capture time, which may lag it. A window ``k`` (frames
stamped in ``(k*L, (k+1)*L]``, :func:`hyperframes.format.windows.window_of`) stays
open until the arrival clock passes its end by ``max_delay_ns``; a frame of
a window already closed goes into the next window written, flagged LATE,
exactly as the recorder treats a late frame. A QUARANTINED frame (its stamp
judged implausible) goes into the window of its arrival.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from hyperframes.format.layout import FrameFlags
from hyperframes.format.windows import window_end, window_of

__all__ = ["PendingFrame", "ReadyWindow", "WindowAssembler"]


@dataclass(frozen=True, slots=True)
class PendingFrame:
    """A frame waiting for its window to close."""

    stream_id: int
    timestamp_ns: int
    payload: bytes | memoryview
    flags: int = 0
    stream_index: int | None = None
    receive_ns: int = 0
    duration_ns: int = 0


@dataclass(frozen=True, slots=True)
class ReadyWindow:
    """A closed window: its frames (late ones of earlier windows flagged LATE) and the
    streams without an on-time frame."""

    window_id: int
    frames: tuple[PendingFrame, ...]
    missing: tuple[int, ...]


@dataclass(slots=True)
class WindowAssembler:
    """Groups frames into windows; see the module docstring.

    ``add`` and ``finish`` return the windows that closed, in increasing id
    order, ready for :meth:`HyperframeWriter.write_window`. Windows without
    any frame are never produced.
    """

    window_ns: int
    stream_ids: Iterable[int]
    max_delay_ns: int = 0
    late_frames: int = 0
    _open: dict[int, list[PendingFrame]] = field(default_factory=dict)
    _late: list[PendingFrame] = field(default_factory=list)
    _closed_upto: int | None = None
    _streams: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.window_ns <= 0:
            raise ValueError(f"window length must be > 0 ns, got {self.window_ns}")
        if self.max_delay_ns < 0:
            raise ValueError(f"max_delay_ns must be >= 0, got {self.max_delay_ns}")
        self._streams = tuple(sorted(set(self.stream_ids)))

    def add(self, frame: PendingFrame, now_ns: int) -> list[ReadyWindow]:
        """Add a frame that arrived at ``now_ns``; returns the windows that closed.

        Windows whose end plus the delay lies before ``now_ns`` close first, so
        a frame of such a window is late.
        """
        ready = self._close(
            lambda wid: window_end(wid, self.window_ns) + self.max_delay_ns < now_ns
        )
        if frame.flags & FrameFlags.QUARANTINED:  # its stamp is implausible: placed on arrival
            w = window_of(now_ns, self.window_ns)
            if self._closed_upto is not None and w <= self._closed_upto:
                self._late.append(frame)  # into the next window written, not LATE
            else:
                self._open.setdefault(w, []).append(frame)
            return ready
        w = window_of(frame.timestamp_ns, self.window_ns)
        if self._closed_upto is not None and w <= self._closed_upto:
            self._late.append(replace(frame, flags=frame.flags | FrameFlags.LATE))
            self.late_frames += 1
        else:
            self._open.setdefault(w, []).append(frame)
        return ready

    def finish(self) -> list[ReadyWindow]:
        """Close every open window (the end of the input)."""
        ready = self._close(lambda _wid: True)
        if self._late and self._closed_upto is not None:  # late frames after the last window
            ready.append(self._emit(self._closed_upto + 1, []))
        return ready

    def _close(self, closable: Callable[[int], bool]) -> list[ReadyWindow]:
        ready = []
        while self._open:
            wid = min(self._open)
            if not closable(wid):
                break
            ready.append(self._emit(wid, self._open.pop(wid)))
        return ready

    def _emit(self, wid: int, frames: list[PendingFrame]) -> ReadyWindow:
        present = {f.stream_id for f in frames}
        late, self._late = self._late, []
        self._closed_upto = wid
        return ReadyWindow(
            wid,
            tuple(sorted(frames, key=lambda f: (f.timestamp_ns, f.stream_id)) + late),
            tuple(s for s in self._streams if s not in present),
        )
