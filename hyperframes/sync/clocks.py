"""The hardware/host clock guard: streams of different clocks are never matched silently.

Each index entry says which clock stamped its frame (FrameFlags.HW_TIMESTAMP:
sensor hardware capture time, else host time). Hardware capture times of
PTP/PPS-disciplined sensors share one clock; host times share another, offset
from it by driver and queue latency (tens of ms) that drifts. Matching across
the two without a clock model gives errors that no tolerance reveals, so it
needs an explicit ``allow_mixed_clocks=True``, and the resulting
:class:`ClockCheck` says so wherever matches are reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from hyperframes.format.layout import FrameFlags
from hyperframes.sync.errors import ClockMismatchError

__all__ = ["Clock", "ClockCheck", "clock_of", "check_clocks"]

Clock = Literal["hardware", "host", "mixed", "none"]
_HW = int(FrameFlags.HW_TIMESTAMP)


def clock_of(flags: np.ndarray) -> Clock:
    """The clock of a stream from its frames' index flags.

    ``"hardware"`` or ``"host"`` when every frame agrees, ``"mixed"`` when
    both occur (a sensor that lost its time sync), ``"none"`` without frames.
    """
    f = np.asarray(flags)
    if f.size == 0:
        return "none"
    hw = (f.astype(np.int64) & _HW) != 0
    if hw.all():
        return "hardware"
    if not hw.any():
        return "host"
    return "mixed"


@dataclass(frozen=True, slots=True)
class ClockCheck:
    """The clocks of a reference stream and a matched stream, and whether that was allowed."""

    ref: str
    ref_clock: Clock
    other: str
    other_clock: Clock
    allowed: bool  # True when mixed clocks were allowed explicitly

    @property
    def mixed(self) -> bool:
        """True when the two streams are not on one clock (or one of them mixes clocks)."""
        known = {self.ref_clock, self.other_clock} - {"none"}
        return len(known) > 1 or "mixed" in known

    def describe(self) -> str:
        """One line for reports and logs."""
        if not self.mixed:
            return f"{self.ref} and {self.other}: both {self.ref_clock} clock"
        verdict = "matched on explicit opt-in" if self.allowed else "not matched"
        return (
            f"{self.ref} ({self.ref_clock} clock) vs {self.other} ({self.other_clock} clock): "
            f"MIXED CLOCKS, {verdict}; errors include the unknown offset between the clocks"
        )


def check_clocks(
    ref: str,
    ref_flags: np.ndarray,
    other: str,
    other_flags: np.ndarray,
    *,
    allow_mixed_clocks: bool,
    path: str = "",
) -> ClockCheck:
    """Check that ``other`` may be matched against ``ref``; raises when clocks differ.

    Raises :class:`~hyperframes.sync.errors.ClockMismatchError` naming the
    file and both streams when their clocks differ and ``allow_mixed_clocks``
    is False; otherwise returns the :class:`ClockCheck` to report.
    """
    check = ClockCheck(ref, clock_of(ref_flags), other, clock_of(other_flags), allow_mixed_clocks)
    if check.mixed and not allow_mixed_clocks:
        raise ClockMismatchError(path, ref, check.ref_clock, other, check.other_clock)
    return check
