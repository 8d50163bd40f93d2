"""Time synchronisation across streams: pure numpy maths, plus a report of a file.

The three methods of the design, each with an explicit tolerance and a mask
(``is_pad``) of the queries that found nothing:

==========================  =======================================  ==========================
method                      accuracy                                 for
==========================  =======================================  ==========================
:func:`nearest`             half the frame interval                  cameras, lidar
:func:`intersect`           the exposure / scan interval             frames with a duration
:func:`interpolate_linear`  best; needs a motion model (linear)      IMU rates, accelerations
:func:`slerp`               constant angular velocity between        orientation quaternions
==========================  =======================================  ==========================

Hardware-stamped and host-stamped streams are never matched silently
(:func:`check_clocks`). :func:`sync_report` summarises a file against one
reference stream; ``hyperframes sync-report FILE --ref STREAM`` prints it.
"""

from hyperframes.sync.clocks import Clock, ClockCheck, check_clocks, clock_of
from hyperframes.sync.errors import ClockMismatchError, NoMatchError, SyncError
from hyperframes.sync.interp import Interpolated, interpolate_linear, slerp
from hyperframes.sync.match import (
    Anchor,
    IntervalMatch,
    Match,
    frame_intervals,
    intersect,
    nearest,
)
from hyperframes.sync.report import PairReport, StreamReport, SyncReport, sync_report
from hyperframes.sync.stats import (
    DEFAULT_EDGES_NS,
    CounterGaps,
    ErrorStats,
    Gap,
    counter_gaps,
    error_stats,
    missing_windows,
)

__all__ = [
    "Match",
    "IntervalMatch",
    "Anchor",
    "nearest",
    "frame_intervals",
    "intersect",
    "Interpolated",
    "interpolate_linear",
    "slerp",
    "Clock",
    "ClockCheck",
    "clock_of",
    "check_clocks",
    "ErrorStats",
    "error_stats",
    "DEFAULT_EDGES_NS",
    "Gap",
    "CounterGaps",
    "counter_gaps",
    "missing_windows",
    "StreamReport",
    "PairReport",
    "SyncReport",
    "sync_report",
    "SyncError",
    "ClockMismatchError",
    "NoMatchError",
]
