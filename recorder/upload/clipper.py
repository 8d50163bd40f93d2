"""Event clips cut on the vehicle by the upload service, at the start of each pass.

:func:`cut_due_clips` reads the recorder's event log and the finalized
segments of ``output_dir``, asks :func:`~hyperframes.recorder.events.clips.due_clips`
which clips are due, and cuts each with :func:`~hyperframes.drive.splice.slice_drive`
(stored payloads copied, nothing decoded, the output verified) into
``CLIPS_DIR/NAME.hf``: first as ``NAME.hf.tmp`` (slice's own atomic output,
verified), then, once the budget allows it
(:func:`~hyperframes.recorder.events.clips.plan_budget`), renamed into place
and the directory fsynced. A ``.tmp`` (or slice's hidden staging file) left
by a crash is removed at the next call, and the clip is cut again. The event
(its fields, tags and payload) and the clip's range are in the clip's
``FileMetadata.extra`` (``event`` and ``clip``).

Nothing here raises into the caller: a clip that cannot be written (disk full,
a directory it may not write) is counted in :attr:`ClipReport.failed` and
logged, and the pass goes on; the clip is tried again at the next call.
:func:`list_clips` gives the finished clips, oldest first, for the service to
upload before segments.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframes.drive import open_drive
from hyperframes.drive.splice import slice_drive
from hyperframes.errors import HyperframesError
from hyperframes.events import EVENT_STREAM_NAME, SegmentSpan, read_event_log
from hyperframes.format.jsontext import check_json_value
from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.events.clips import ClipPlan, due_clips, parse_clip_name, plan_budget
from hyperframes.recorder.events.retention import read_span
from hyperframes.recorder.segments import list_segments
from hyperframes.storage.local import fsync_dir, safe_dir

__all__ = ["ClipReport", "cut_due_clips", "list_clips", "clips_dir"]

_log = logging.getLogger("hyperframes.recorder.upload.clips")
_UNFINISHED: Final = (".tmp", ".cut")  # NAME.hf.tmp, slice's .NAME.hf.tmp.cut(.tmp)
_MAX_WARNED: Final = 10_000
_warned: set[str] = set()
"""Clips already warned about (over budget, failed): one line per clip and process."""


@dataclass(slots=True)
class ClipReport:
    """What one :func:`cut_due_clips` call did. Every count is of this call alone.

    - ``made``: clips cut, verified and renamed into place (``paths``, ``bytes``);
    - ``waiting``: events whose window is not yet wholly in finalized segments;
    - ``evicted``: events whose window no finalized segment on disk holds any more
      (counted at every call while the event is in the log);
    - ``skipped``: clips over ``clips.max_mb`` even after deleting every uploaded
      clip (tried again at the next call);
    - ``failed``: clips that could not be cut or written (``errors`` says why);
    - ``deleted``: uploaded clips deleted to make room;
    - ``leftovers``: unfinished files of an earlier call (a crash) removed;
    - ``done``: events whose clip exists or was uploaded;
    - ``quarantined``: events off the sensor clock (they keep nothing, get no clip).
    """

    made: int = 0
    bytes: int = 0
    waiting: int = 0
    evicted: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    leftovers: int = 0
    done: int = 0
    quarantined: int = 0
    paths: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def clips_dir(cfg: VehicleConfig) -> Path:
    """The clips directory: ``events.clips.dir`` under ``output_dir`` (absolute: as it is)."""
    return Path(cfg.output_dir) / cfg.events.clips.dir


def _finished(directory: Path) -> list[tuple[Path, int]]:
    """Finished clips (regular files with a clip name) and their sizes, oldest first."""
    found: list[tuple[str, str, Path, int]] = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                parts = parse_clip_name(e.name)
                if parts is None or not e.is_file(follow_symlinks=False):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    found.append((parts[1], e.name, Path(e.path), e.stat().st_size))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found.sort()
    return [(p, size) for _, _, p, size in found]


def list_clips(cfg: VehicleConfig) -> list[Path]:
    """The finished clips of ``cfg``, oldest event first (none when clips are off or absent)."""
    if not cfg.events.clips.enabled:
        return []
    try:
        return [p for p, _ in _finished(clips_dir(cfg))]
    except OSError as exc:
        _log.warning("cannot list the clips in %s: %s", clips_dir(cfg), exc)
        return []


def _remove_leftovers(directory: Path) -> int:
    """Remove what a crash left: ``NAME.hf.tmp`` and slice's staging files; how many."""
    gone = 0
    with os.scandir(directory) as it:
        names = [e.name for e in it if e.is_file(follow_symlinks=False)]
    for name in names:
        if name.endswith(_UNFINISHED):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
                gone += 1
    if gone:
        fsync_dir(directory)
        _log.info("clips: removed %d unfinished file(s) in %s; their clips are cut again",
                  gone, directory)  # fmt: skip
    return gone


def _spans(cfg: VehicleConfig, logged: dict[str, SegmentSpan]) -> list[tuple[Path, SegmentSpan]]:
    """The finalized segments on disk and their spans (the log's, else their index's)."""
    out = []
    for path in list_segments(cfg.output_dir, cfg.vehicle_id):
        span = logged.get(path.name) or read_span(path)
        if span is not None:
            out.append((path, SegmentSpan(path.name, span.start_ns, span.end_ns)))
    return out


def _extra(plan: ClipPlan, streams: list[str]) -> dict[str, Any]:
    """The clip's ``FileMetadata.extra``: the event, and the clip's range and sources."""
    ev = plan.event.to_dict()
    clip = {
        "name": plan.name,
        "start_ns": plan.start_ns,
        "end_ns": plan.end_ns,
        "window": [plan.event.start_ns, plan.event.end_ns],
        "segments": list(plan.segments),
        "streams": streams,
    }
    extra = {"event": ev, "clip": clip}
    try:
        check_json_value(extra, "clip metadata")
    except ValueError as exc:  # a payload nested as deep as an event may be: kept in the segment
        ev.pop("payload", None)
        ev["payload_omitted"] = str(exc)
    return extra


def _cut(plan: ClipPlan, paths: dict[str, Path], tmp: Path, vehicle: str) -> int:
    """Cut one clip into ``tmp`` (verified, atomic); its size in bytes."""
    drive = open_drive([paths[n] for n in plan.segments], vehicle=vehicle)
    try:
        have = {s.name for s in drive.streams.values()}
        if plan.streams is None:
            names = sorted(have)
        else:
            names = [s for s in plan.streams if s in have]
            if not names:
                raise HyperframesError(
                    f"none of the streams {', '.join(plan.streams)} is in its segments"
                )
            if EVENT_STREAM_NAME in have and EVENT_STREAM_NAME not in names:
                names.append(EVENT_STREAM_NAME)
        slice_drive(drive, plan.start_ns, plan.end_ns, tmp, streams=names, overwrite=True,
                    extra=_extra(plan, names))  # fmt: skip
    finally:
        drive.close()
    return tmp.stat().st_size


def _warn_once(key: str, msg: str, *args: object, level: int = logging.WARNING) -> None:
    """Log once per ``key`` and process (a clip retried every pass is not logged every pass)."""
    if key in _warned:
        _log.debug(msg, *args)
        return
    if len(_warned) >= _MAX_WARNED:
        _warned.clear()
    _warned.add(key)
    _log.log(level, msg, *args)


def cut_due_clips(
    cfg: VehicleConfig, uploaded: Collection[str], *, now_ns: int | None = None
) -> ClipReport:
    """Cut every clip that is due into ``clips_dir(cfg)``; never raises.

    ``uploaded``: names the upload service has marked uploaded (its
    :class:`~hyperframes.recorder.upload.marks.MarkStore`); a clip named there
    is never cut again, and only those clips are deleted to keep the
    directory under ``events.clips.max_mb``. ``now_ns``: the host clock
    (default: now). Does nothing when ``events.clips`` is off.
    """
    report = ClipReport()
    clips = cfg.events.clips
    if not clips.enabled:
        return report
    directory = clips_dir(cfg)
    if not Path(cfg.output_dir).is_dir():  # nothing recorded yet
        return report
    try:
        log = read_event_log(cfg.output_dir)
        segments = _spans(cfg, dict(log.segments))
        recording = bool(list_segments(cfg.output_dir, cfg.vehicle_id, unfinished=True))
        safe_dir(directory)
        report.leftovers = _remove_leftovers(directory)
        existing = _finished(directory)
    except (OSError, HyperframesError) as exc:
        report.failed += 1
        report.errors.append(f"{directory}: {exc}")
        _warn_once(f"prepare {directory}", "clips: cannot prepare %s: %s; no clip this pass "
                   "(recording and uploads go on)", directory, exc,
                   level=logging.ERROR)  # fmt: skip
        return report
    done = set(uploaded)
    plans = due_clips(
        log.events,
        [s for _, s in segments],
        {p.name for p, _ in existing} | done,
        vehicle=cfg.vehicle_id,
        clips=clips,
        now_ns=time.time_ns() if now_ns is None else now_ns,
        recording=recording,
    )
    report.waiting, report.evicted = plans.waiting, plans.evicted
    report.done, report.quarantined = plans.done, plans.quarantined
    paths = {s.name: p for p, s in segments}
    for plan in plans.due:
        _one(plan, paths, directory, existing, done, cfg, report)
    if report.made or report.failed or report.skipped:
        _log.info(
            "clips: %d made (%.1f MB), %d over budget, %d failed, %d waiting, %d evicted",
            report.made, report.bytes / 1e6, report.skipped, report.failed, report.waiting,
            report.evicted,
        )  # fmt: skip
    return report


def _one(
    plan: ClipPlan,
    paths: dict[str, Path],
    directory: Path,
    existing: list[tuple[Path, int]],
    uploaded: set[str],
    cfg: VehicleConfig,
    report: ClipReport,
) -> None:
    """Cut, budget and publish one clip; every outcome is counted in ``report``."""
    max_bytes = cfg.events.clips.max_bytes
    sizes = [(p.name, n) for p, n in existing]
    if not plan_budget(sizes, uploaded, 1, max_bytes).fits:  # no room even for one byte
        report.skipped += 1
        _warn_once(plan.name, "clips: %s skipped: the clips not yet uploaded fill "
                   "events.clips.max_mb (%g)", plan.name, cfg.events.clips.max_mb)  # fmt: skip
        return
    tmp = directory / f"{plan.name}.tmp"
    final = directory / plan.name
    try:
        size = _cut(plan, paths, tmp, cfg.vehicle_id)
        decision = plan_budget(sizes, uploaded, size, max_bytes)
        if not decision.fits:
            tmp.unlink()
            report.skipped += 1
            _warn_once(plan.name, "clips: %s (%.1f MB) skipped: over events.clips.max_mb (%g) "
                       "with every uploaded clip deleted", plan.name, size / 1e6,
                       cfg.events.clips.max_mb)  # fmt: skip
            return
        for name in decision.delete:
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
            report.deleted += 1
            existing[:] = [(p, n) for p, n in existing if p.name != name]
            _log.info("clips: deleted %s (uploaded) to make room for %s", name, plan.name)
        if os.path.lexists(final) and not stat.S_ISREG(os.lstat(final).st_mode):
            raise OSError(f"{final} exists and is not a regular file")
        os.replace(tmp, final)
        fsync_dir(directory)
    except Exception as exc:  # disk full, a damaged segment, anything: this clip alone fails
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        report.failed += 1
        report.errors.append(f"{plan.name}: {exc}")
        _warn_once(f"failed {plan.name}", "clips: cannot write %s: %s (recording and uploads "
                   "go on; tried again every pass)", plan.name, exc,
                   level=logging.ERROR)  # fmt: skip
        return
    existing.append((final, size))
    report.made += 1
    report.bytes += size
    report.paths.append(final)
    _log.info("clips: cut %s (%.1f MB, %.1f s, %s)", plan.name, size / 1e6,
              (plan.end_ns - plan.start_ns) / 1e9,
              ", ".join(plan.streams) if plan.streams else "every stream")  # fmt: skip
