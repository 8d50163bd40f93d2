"""Timestamp plausibility: which clock do the sensors agree on? Pure, no I/O, no clock read.

Every frame gives one sample of the *offset* between the sensors' data clock
and the host's monotonic clock: ``offset = timestamp_ns - host_ns``. Frames
delivered on time agree on that offset up to their delivery latency. A frame
whose offset is far from the agreed one carries an implausible stamp: a
sensor clock reset to 1970, a stamp hours in the future, or a backlog that a
broker or a PUSH socket held while the recorder was down.

:class:`ClockAnchor` keeps the agreed offset (the *anchor*) and judges frames
against it. It never trusts a single frame:

1. **Settling.** Until it has an anchor, it holds every frame for
   ``settle_ns`` of host time (the engine uses its grace period), then picks
   the anchor from all of them with :func:`pick_anchor`: the freshest cluster
   of offsets that two streams agree on (a backlog is old, fresh frames are
   fresh), failing that the freshest cluster of two frames, failing that the
   freshest frame. Then it judges the held frames in arrival order.
2. **Judging.** A frame is plausible when its offset lies within
   ``max_jump_ns`` of the anchor. A plausible frame moves the anchor forward
   when it is fresher (latency only ever makes frames look older).
3. **Doubt and re-anchoring.** An implausible frame is held, not condemned.
   The next plausible frame (any stream) condemns every held frame: the other
   sensors still agree on the anchor, so the held ones are quarantined. If
   instead ``reanchor_ns`` passes with no plausible frame at all, every clock
   moved (a PTP grandmaster change, a GNSS time step): the anchor is picked
   again from the held frames as in 1., and they are judged against it.

Results come back as ``(item, plausible)`` pairs, in arrival order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ClockAnchor", "pick_anchor", "Judged"]

T = TypeVar("T")
Judged = tuple[T, bool]


def pick_anchor(samples: Sequence[tuple[int, int]], tolerance_ns: int) -> int:
    """The anchor offset for ``(stream_id, offset_ns)`` samples (at least one).

    Offsets are grouped into clusters whose neighbours lie within
    ``tolerance_ns`` of each other. The chosen cluster is the freshest (highest
    offset) one that two streams agree on; failing that, the freshest one with
    two frames; failing that, the freshest frame. The anchor is the highest
    offset in that cluster.
    """
    if not samples:
        raise ValueError("pick_anchor needs at least one sample")
    ordered = sorted(samples, key=lambda s: s[1])
    clusters: list[list[tuple[int, int]]] = [[ordered[0]]]
    for s in ordered[1:]:
        if s[1] - clusters[-1][-1][1] > tolerance_ns:
            clusters.append([s])
        else:
            clusters[-1].append(s)
    by_streams = [c for c in clusters if len({sid for sid, _ in c}) >= 2]
    by_frames = [c for c in clusters if len(c) >= 2]
    chosen = (by_streams or by_frames or clusters)[-1]
    return chosen[-1][1]


@dataclass(slots=True)
class _Held(Generic[T]):
    item: T
    stream_id: int
    offset: int


class ClockAnchor(Generic[T]):
    """Judges frame timestamps against the clock the sensors agree on; see the module doc.

    ``max_jump_ns`` is how far (either way) a frame's offset may stray from
    the anchor; ``settle_ns`` how long frames are held before the first anchor
    is picked; ``reanchor_ns`` how long no frame at all may agree with the
    anchor before it is picked again (every clock moved).
    """

    def __init__(self, max_jump_ns: int, settle_ns: int, reanchor_ns: int) -> None:
        if max_jump_ns <= 0:
            raise ValueError(f"max_jump_ns must be > 0, got {max_jump_ns}")
        if settle_ns < 0 or reanchor_ns < 0:
            raise ValueError(
                f"settle_ns and reanchor_ns must be >= 0, got {settle_ns}, {reanchor_ns}"
            )
        self._max_jump = max_jump_ns
        self._settle = settle_ns
        self._reanchor = reanchor_ns
        self._anchor: int | None = None
        self._held: list[_Held[T]] = []
        self._held_since = 0
        self.reanchors = 0  # times every clock moved and the anchor was picked again

    @property
    def anchor_ns(self) -> int | None:
        """The agreed offset ``timestamp - host time`` (``None`` while settling)."""
        return self._anchor

    def provisional_ns(self) -> int | None:
        """The anchor, or while settling the one the held frames would give now (``None``
        before any frame): what an event is judged against before the first verdict."""
        if self._anchor is not None or not self._held:
            return self._anchor
        return pick_anchor([(h.stream_id, h.offset) for h in self._held], self._max_jump)

    @property
    def held(self) -> int:
        """Frames waiting for a verdict."""
        return len(self._held)

    def offer(self, item: T, stream_id: int, timestamp_ns: int, host_ns: int) -> list[Judged[T]]:
        """Take one frame received at host time ``host_ns``; return every verdict reached."""
        offset = timestamp_ns - host_ns
        if self._anchor is not None and abs(offset - self._anchor) <= self._max_jump:
            self._anchor = max(self._anchor, offset)
            out: list[Judged[T]] = [(h.item, False) for h in self._held]
            self._held.clear()
            out.append((item, True))
            return out
        if not self._held:
            self._held_since = host_ns
        self._held.append(_Held(item, stream_id, offset))
        return self.poll(host_ns)

    def poll(self, host_ns: int) -> list[Judged[T]]:
        """Let host time pass: (re-)anchor once the held frames have waited long enough."""
        wait = self._settle if self._anchor is None else self._reanchor
        if not self._held or host_ns - self._held_since < wait:
            return []
        return self.drain()

    def drain(self) -> list[Judged[T]]:
        """Settle now on whatever is held (shutdown); return the verdicts."""
        if not self._held:
            return []
        if self._anchor is not None:
            self.reanchors += 1
        held, self._held = self._held, []
        self._anchor = pick_anchor([(h.stream_id, h.offset) for h in held], self._max_jump)
        return [(h.item, abs(h.offset - self._anchor) <= self._max_jump) for h in held]
