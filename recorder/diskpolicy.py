"""The free-space policy: a pure decision plus two thin I/O helpers.

``disk.min_free_mb`` is the floor. When free space falls below it:

- ``stop`` (default): the current segment is finalized and recording stops
  with a CRITICAL log line and ``hyperframes_recording 0``. The daemon keeps
  running and keeps draining its sockets (so drivers are not blocked), and
  counts every frame it cannot write as dropped (reason ``disk-full``). It
  resumes by itself, in a new segment, once free space is back above the floor
  plus a 10% margin (an operator freed space). Exiting instead would make
  systemd's ``Restart=on-failure`` loop on a full disk.
- ``delete-oldest``: finalized segments of this vehicle are deleted, oldest
  first, until the floor is met again; ``.tmp`` files, the segment being
  written and names matching ``disk.protected_glob`` are never deleted.
  Segments that an event protects (:mod:`hyperframes.recorder.events.retention`) go last: every
  unprotected segment is deleted first, oldest first, and a protected one only
  when that is not enough (the daemon logs each such deletion as an error and
  counts it). Among the unprotected (and among the protected), segments that
  ``hyperframes upload`` has marked uploaded and verified go first. If even
  that is not enough, recording stops as above.

Only segments are ever deleted here (the files :func:`~hyperframes.recorder.segments.list_segments`
names in ``output_dir`` itself). Event clips (``events.clips``) live in a directory of
their own and are bounded by ``events.clips.max_mb`` instead, where only uploaded clips
make room (:mod:`hyperframes.recorder.events.clips`): a clip is kept until it is uploaded.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DiskDecision", "decide", "free_bytes", "RESUME_MARGIN"]

RESUME_MARGIN = 1.1
"""Recording resumes above ``min_free * RESUME_MARGIN`` (no flapping at the edge)."""


@dataclass(frozen=True, slots=True)
class DiskDecision:
    """What to do: delete these files (oldest first), and whether recording may go on.

    ``protected`` lists the files of ``delete`` that an event protected.
    """

    delete: tuple[Path, ...] = ()
    record: bool = True
    protected: tuple[Path, ...] = ()


def decide(
    free: int,
    min_free: int,
    policy: str,
    segments: Sequence[tuple[Path, int]] = (),
    *,
    protected_glob: str | None = None,
    current: Path | None = None,
    stopped: bool = False,
    protected: Collection[Path] = (),
    uploaded: Collection[str] = (),
) -> DiskDecision:
    """Decide from ``free`` bytes against the ``min_free`` floor.

    ``segments`` are ``(path, size)`` of finalized segments, oldest first;
    ``stopped`` says recording is currently stopped (resuming needs the
    margin). ``policy`` is ``"stop"`` or ``"delete-oldest"``. Segments in
    ``protected`` are deleted only after every other candidate.
    Segments whose names are in ``uploaded`` (safe at the upload destination) go
    first within each group.
    """
    if policy not in ("stop", "delete-oldest"):
        raise ValueError(f"unknown disk policy {policy!r} (stop, delete-oldest)")
    floor = int(min_free * RESUME_MARGIN) if stopped else min_free
    if free >= floor:
        return DiskDecision()
    if policy == "stop":
        return DiskDecision(record=False)
    delete: list[Path] = []
    last_resort: list[Path] = []
    gained = free
    candidates = [
        (path, size)
        for path, size in segments
        if not path.name.endswith(".tmp")
        and (current is None or path != current)
        and not (protected_glob and fnmatch.fnmatch(path.name, protected_glob))
    ]
    if uploaded:
        candidates.sort(key=lambda ps: ps[0].name not in uploaded)  # stable: oldest first
    for spared in (False, True):
        for path, size in candidates:
            if gained >= floor:
                break
            if (path in protected) != spared:
                continue
            (last_resort if spared else delete).append(path)
            gained += size
    return DiskDecision(
        (*delete, *last_resort), record=gained >= floor, protected=tuple(last_resort)
    )


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes available to an unprivileged writer on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
