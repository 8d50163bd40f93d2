"""Recovery on start: finish the segments a crash left as ``.tmp`` before recording on.

After a power cut or a ``kill -9`` the segment being written stays behind as
``NAME.hf.tmp``. On start the recorder finishes each ``.tmp`` of its vehicle
in its output directory with :func:`hyperframes.salvage.finish_in_place`
(the scan and trailer of ``hyperframes recover``, written into the ``.tmp``
itself, verified, then renamed to ``NAME.hf``), so an upload job only ever
sees finalized segments. A ``.tmp`` with nothing recoverable, or whose result
does not verify, moves to ``damaged/`` beside a ``.reason.txt`` that says why;
bytes after the last intact window go to ``damaged/NAME.hf.tmp.tail``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hyperframes.errors import HyperframesError
from hyperframes.recorder.metrics import RecorderStats
from hyperframes.salvage import finish_in_place
from hyperframes.storage.local import (
    UnsafePathError,
    fsync_dir,
    rename_noreplace,
    safe_dir,
    write_new,
)

__all__ = ["DAMAGED_DIR", "Outcome", "recover_leftovers"]

_log = logging.getLogger(__name__)

DAMAGED_DIR = "damaged"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one leftover ``.tmp``."""

    source: Path
    result: str  # "recovered" | "damaged" | "kept" (an I/O error: retried at the next start)
    detail: str
    output: Path | None = None


def recover_leftovers(
    tmps: Iterable[Path], stats: RecorderStats, stop: threading.Event | None = None
) -> list[Outcome]:
    """Finish every ``.tmp`` in ``tmps`` (see the module doc); stops between files on ``stop``."""
    out = []
    for tmp in tmps:
        if stop is not None and stop.is_set():
            break
        outcome = _one(tmp)
        if outcome.result == "recovered":
            stats.segments_recovered += 1
        elif outcome.result == "damaged":
            stats.segments_damaged += 1
        out.append(outcome)
    return out


def _one(tmp: Path) -> Outcome:
    damaged = tmp.parent / DAMAGED_DIR
    final = tmp.with_name(tmp.name.removesuffix(".tmp"))
    if final.exists():  # finished before (by hand?) and the .tmp kept: never overwrite
        reason = f"{final.name} exists already; this .tmp was not used"
        _log.warning("recovery on start: %s: %s, moved to %s/", tmp.name, reason, DAMAGED_DIR)
        try:
            _move_aside(tmp, damaged, reason)
        except OSError as exc:
            return Outcome(tmp, "kept", f"{reason}; cannot move it aside: {exc}")
        return Outcome(tmp, "damaged", reason)
    try:
        if damaged.exists() or damaged.is_symlink():  # made 0770 by an older version: tighten it
            safe_dir(damaged, private=True)
        report = finish_in_place(tmp, tail_to=damaged / (tmp.name + ".tail"), owned=True)
    except (HyperframesError, UnsafePathError) as exc:
        _log.error("recovery on start: %s", exc)
        with contextlib.suppress(OSError):
            _move_aside(tmp, damaged, str(exc))
            return Outcome(tmp, "damaged", str(exc))
        return Outcome(tmp, "kept", str(exc))
    except OSError as exc:
        _log.error("recovery on start: %s: %s; left in place, retried at the next start", tmp,
                   exc)  # fmt: skip
        return Outcome(tmp, "kept", str(exc))
    _log.warning("recovery on start: %s", report.summary())
    return Outcome(tmp, "recovered", report.summary(), report.output)


def _move_aside(tmp: Path, damaged: Path, reason: str) -> None:
    """Move ``tmp`` into ``damaged/`` beside a reason file; never over or through anything there."""
    safe_dir(damaged, private=True)
    target, n = damaged / tmp.name, 0
    while os.path.lexists(target) or os.path.lexists(_note(target)):
        n += 1
        target = damaged / f"{tmp.name}.{n}"
    write_new(_note(target), (reason + "\n").encode(), 0o640)
    rename_noreplace(tmp, target)
    fsync_dir(damaged)
    fsync_dir(tmp.parent)


def _note(target: Path) -> Path:
    return target.with_name(target.name + ".reason.txt")
