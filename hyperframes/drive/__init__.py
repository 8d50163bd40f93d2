"""Drives: many segments of one vehicle read as one recording (docs/DRIVES.md).

- :mod:`~hyperframes.drive.core`: :func:`open_drive`, :class:`Drive` (the reader's
  API over every segment), :func:`find_drives`;
- :mod:`~hyperframes.drive.plan`: the pure rules (which segment holds a time,
  gaps, stream changes);
- :mod:`~hyperframes.drive.splice`: ``slice`` and ``cat``, stored payloads copied;
- :mod:`~hyperframes.drive.usage`: ``du``, bytes per stream;
- :mod:`~hyperframes.drive.blockmap`: which frames each window block holds, for
  whoever copies blocks (splice, the converter).
"""

from hyperframes.drive.core import (
    DAMAGED_DIR,
    Damaged,
    Drive,
    DriveFrame,
    Segment,
    Sources,
    discover,
    find_drives,
    open_drive,
)
from hyperframes.drive.plan import Gap, StreamChange

__all__ = [
    "Drive",
    "DriveFrame",
    "Damaged",
    "Gap",
    "Segment",
    "StreamChange",
    "Sources",
    "discover",
    "find_drives",
    "open_drive",
    "DAMAGED_DIR",
]
