"""Per-stream sequence numbers: gaps, late arrivals, duplicates, restarts. Pure, no I/O.

A driver numbers each stream's frames ``seq = 0, 1, 2, ...``. The recorder
uses the numbers for two things only: to count frames lost before they
reached it (a number that never arrives) and to drop exact re-sends. The
rules (docs/INGEST.md, "Sequence numbers"):

- **Higher than any seen**: new. Numbers skipped on the way become *missing*.
- **A missing number arrives**: a late delivery; it fills its gap.
- **A missing number is lost** once the stream is ``horizon_seqs`` numbers
  past it or ``horizon_ns`` of receive time has passed since it went missing
  (and at shutdown). Only then is it counted as a ``sequence-gap`` drop, so a
  frame delivered half a second late is never counted as lost.
- **A number already seen, with the same timestamp**: an exact duplicate (an
  MQTT QoS 1 redelivery, a driver retry); dropped and counted as
  ``duplicate``.
- **A number already seen (or too old to tell) with a newer timestamp than the
  newest frame**: the driver restarted its counter. The gaps still open are
  lost; numbering starts again from this frame.
- **Otherwise** (a lower number with an older timestamp): an old frame
  re-sent or delivered very late; kept, and the tracking is left alone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["SeqVerdict", "SeqResult", "SeqTracker"]


class SeqVerdict(enum.Enum):
    """What a frame's sequence number says about it."""

    NEW = "new"
    FILLED = "filled"  # a missing number arrived late
    DUPLICATE = "duplicate"
    RESTART = "restart"
    OLD = "old"


@dataclass(frozen=True, slots=True)
class SeqResult:
    """The verdict on one frame and the numbers that became definitely lost now."""

    verdict: SeqVerdict
    lost: int = 0


@dataclass(slots=True)
class _Gap:
    lo: int  # first missing number
    hi: int  # last missing number
    since_ns: int  # receive time when the gap opened


class SeqTracker:
    """Sequence tracking of one stream; see the module docstring for the rules."""

    def __init__(self, horizon_seqs: int = 1024, horizon_ns: int = 5_000_000_000) -> None:
        if horizon_seqs < 1 or horizon_ns < 0:
            raise ValueError(f"need horizon_seqs >= 1 and horizon_ns >= 0, got "
                             f"{horizon_seqs}, {horizon_ns}")  # fmt: skip
        self._horizon_seqs = horizon_seqs
        self._horizon_ns = horizon_ns
        self._high: int | None = None
        self._high_ts = 0  # newest timestamp seen since the last (re)start
        self._recent: dict[int, int] = {}  # seq -> timestamp, the last horizon_seqs numbers
        self._gaps: list[_Gap] = []  # open gaps, by number

    @property
    def pending(self) -> int:
        """Missing numbers not yet judged lost."""
        return sum(g.hi - g.lo + 1 for g in self._gaps)

    def observe(self, seq: int, timestamp_ns: int, now_ns: int) -> SeqResult:
        """Judge one frame received at ``now_ns`` (any clock that only moves forward)."""
        if self._high is None:
            self._start(seq, timestamp_ns)
            return SeqResult(SeqVerdict.NEW, self._expire(now_ns))
        if seq > self._high:
            if seq > self._high + 1:
                self._gaps.append(_Gap(self._high + 1, seq - 1, now_ns))
            self._high = seq
            self._note(seq, timestamp_ns)
            return SeqResult(SeqVerdict.NEW, self._expire(now_ns))
        if self._fill(seq):
            self._note(seq, timestamp_ns)
            return SeqResult(SeqVerdict.FILLED, self._expire(now_ns))
        if self._recent.get(seq) == timestamp_ns:
            return SeqResult(SeqVerdict.DUPLICATE, self._expire(now_ns))
        if timestamp_ns > self._high_ts:
            lost = self.flush()
            self._start(seq, timestamp_ns)
            return SeqResult(SeqVerdict.RESTART, lost)
        return SeqResult(SeqVerdict.OLD, self._expire(now_ns))

    def expire(self, now_ns: int) -> int:
        """Numbers judged lost because time passed (call it now and then); returns the count."""
        return self._expire(now_ns)

    def flush(self) -> int:
        """Judge every open gap lost (shutdown); returns the count."""
        lost = self.pending
        self._gaps.clear()
        return lost

    # --- internals ------------------------------------------------------------

    def _start(self, seq: int, timestamp_ns: int) -> None:
        self._high = seq
        self._high_ts = timestamp_ns
        self._recent = {seq: timestamp_ns}

    def _note(self, seq: int, timestamp_ns: int) -> None:
        self._recent[seq] = timestamp_ns
        self._high_ts = max(self._high_ts, timestamp_ns)
        if len(self._recent) > 2 * self._horizon_seqs:  # amortised pruning
            floor = (self._high or 0) - self._horizon_seqs
            self._recent = {s: t for s, t in self._recent.items() if s > floor}

    def _fill(self, seq: int) -> bool:
        for i, g in enumerate(self._gaps):
            if g.lo <= seq <= g.hi:
                parts = [_Gap(g.lo, seq - 1, g.since_ns), _Gap(seq + 1, g.hi, g.since_ns)]
                self._gaps[i : i + 1] = [p for p in parts if p.lo <= p.hi]
                return True
        return False

    def _expire(self, now_ns: int) -> int:
        if not self._gaps:
            return 0
        floor = (self._high or 0) - self._horizon_seqs  # numbers at or below it are lost
        lost = 0
        keep: list[_Gap] = []
        for g in self._gaps:
            if now_ns - g.since_ns >= self._horizon_ns or g.hi <= floor:
                lost += g.hi - g.lo + 1
            elif g.lo <= floor:
                lost += floor - g.lo + 1
                keep.append(_Gap(floor + 1, g.hi, g.since_ns))
            else:
                keep.append(g)
        self._gaps = keep
        return lost
