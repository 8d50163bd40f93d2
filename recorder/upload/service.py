"""The upload loop: list, order, check ``when``, upload, verify, mark, maybe delete.

Each pass first cuts the event clips that are due (``events.clips``,
:mod:`~hyperframes.recorder.upload.clipper`) and polls the depot's requests on
their cadence (``upload.requests``, :mod:`~hyperframes.recorder.upload.requests`),
then uploads, in this order (:func:`~hyperframes.recorder.upload.plan.order`):
clips, requested files, and, with ``upload.mode: all``, the finalized
segments. With ``upload.mode: events`` the segments stay on the vehicle and
only their catalog rows go up (``upload.catalog``), once per segment, under
the URL each segment *would* have in the destination: that object is not
there until the depot requests it. A request whose files are all up is
answered (its result object written).

Runs in the foreground (``hyperframes upload``, the ``hyperframes-upload``
unit) or once (``--once``). Nothing is lost on any failure: a segment stays
where it is, unmarked, until its upload has been proven (the mark names the
proof, one of :data:`~hyperframes.recorder.upload.dest.PROOFS`), and only a
marked segment is deleted (``delete_after_upload``); the next attempt resumes
or starts over.

One segment's failure never blocks the others: an entry that cannot be
opened or read (a link planted under a segment's name, a file this uid may
not read, one that shrank), a body the store refused or a proof disproved
(``checksum-mismatch``), another object under its key (``conflict``), one
nothing proves (``unverifiable``), another refusal of its requests
(``refused``): it is skipped, counted, logged once per wait, and waits on its
own backoff (:class:`~hyperframes.recorder.upload.plan.EntryBackoff`, from
``scan_interval_s`` doubling to ``retry_max_s``; a conflict at once the
longest) while the pass goes on. Only failures of the link or the store
(network, 5xx, credentials, a missing bucket; two refusals in a row) end the
pass: consecutive ones back off exponentially with full jitter up to
``retry_max_s``, and those that retrying soon cannot fix (credentials, a
missing bucket) wait the longest at once, so a misconfigured box does not
hammer its depot.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import random
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hyperframes.cli.common import TransferMeter, progress, progress_done
from hyperframes.errors import HyperframesError
from hyperframes.events import read_event_log
from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.events.clips import parse_clip_name
from hyperframes.recorder.events.retention import protected_names
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recorder.upload.catalog_rows import CatalogRows
from hyperframes.recorder.upload.clipper import cut_due_clips, list_clips
from hyperframes.recorder.upload.config import UploadConfig
from hyperframes.recorder.upload.dest import PROOFS, Destination, Job
from hyperframes.recorder.upload.errors import Stopping, UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.plan import (
    CLIPS_DIR,
    Candidate,
    EntryBackoff,
    TokenBucket,
    backoff_s,
    candidate_key,
    clip_key,
    order,
)
from hyperframes.recorder.upload.request_duty import RequestDuty
from hyperframes.recorder.upload.stats import UploadStats
from hyperframes.recorder.upload.sums import file_sums
from hyperframes.storage.local import fsync_dir

__all__ = ["UploadService", "make_destination", "protected_segments"]

_log = logging.getLogger("hyperframes.recorder.upload")
_WHEN_TIMEOUT_S = 30.0
# no link followed; O_NONBLOCK: a FIFO put under a segment's name cannot hang the open
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _clip_time(name: str, mtime: float) -> dt.datetime:
    """A clip's event time from its name (UTC), else its file time."""
    parts = parse_clip_name(name)
    if parts is not None:
        with contextlib.suppress(ValueError):
            return dt.datetime.strptime(parts[1], "%Y%m%dT%H%M%S.%f").replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(mtime, dt.UTC)


def make_destination(up: UploadConfig, marks: MarkStore) -> tuple[Destination, str]:
    """The destination for ``up.dest`` and the key prefix inside it."""
    if up.is_s3:
        from hyperframes.recorder.upload.s3 import S3Dest  # noqa: PLC0415 - boto3 only for s3://

        dest = S3Dest(up.dest, up.s3, marks, up.part_bytes, verify=up.verify)
        return dest, dest.prefix
    from hyperframes.recorder.upload.local import LocalDest  # noqa: PLC0415

    return LocalDest(up.dest), ""


def protected_segments(output_dir: Path) -> set[str]:
    """Segments that events protect, from the recorder's event log (none without one)."""
    try:
        log = read_event_log(output_dir)
    except (OSError, HyperframesError) as exc:
        _log.warning(
            "event log of %s unreadable (%s): upload order ignores events", output_dir, exc
        )
        return set()
    return protected_names(log.events, log.segments.values())


class UploadService:
    """Uploads the clips, requested files and finalized segments of one vehicle's output
    directory (module docstring).

    ``clock`` (monotonic seconds) times each segment's own backoff; tests play the loop on
    a fake one.
    """

    progress_log_s: float = 30.0
    """Off a terminal, a segment still uploading is logged this often."""

    def __init__(
        self,
        cfg: VehicleConfig,
        upload: UploadConfig,
        *,
        dest: Destination | None = None,
        stats: UploadStats | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.up = upload
        self.marks = MarkStore(cfg.output_dir)
        if dest is None:
            dest, self.prefix = make_destination(upload, self.marks)
        else:
            self.prefix = getattr(dest, "prefix", "")
        self.dest = dest
        self.stats = stats or UploadStats()
        self._stop = threading.Event()
        self._bucket = TokenBucket(upload.bandwidth_bytes_s, now=time.monotonic())
        self._rng = rng or random.Random()
        self._failures = 0
        self._last_persistent = False
        self._held = EntryBackoff(upload.scan_interval_s, upload.retry_max_s)
        """Segments that failed alone, each on its own backoff (on ``clock``)."""
        self._clock = clock
        self.beat = time.monotonic()
        """Last sign of progress (for the watchdog thread)."""
        self._meter: TransferMeter | None = None
        self.requests = RequestDuty(cfg, upload, dest, self.stats, rng=self._rng, clock=clock,
                                    pace=self._pace, pace_in=self._pace_in,
                                    touch=self._touch)  # fmt: skip
        """The depot's requests (``upload.requests``)."""
        self.catalog_rows = CatalogRows(cfg, upload, self.marks, dest, self.prefix, self.stats,
                                        rng=self._rng, clock=clock, stopping=self._stop.is_set,
                                        touch=self._touch)  # fmt: skip
        """The catalog rows (``upload.catalog``)."""

    # --- control -------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to stop (after the current chunk; the upload resumes next time)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def _touch(self) -> None:
        """A sign of progress (the requests and catalog rows call it too)."""
        self.beat = time.monotonic()

    def _take(self, n: int) -> float:
        """Wait for ``n`` bytes' worth of the bandwidth cap (``Stopping`` when asked to stop)."""
        if self._stop.is_set():
            raise Stopping()
        delay = self._bucket.delay(n, time.monotonic())
        if delay > 0 and self._stop.wait(delay):
            raise Stopping()
        self.beat = now = time.monotonic()
        return now

    def _pace_in(self, n: int) -> None:
        """Before reading ``n`` bytes back from the store: the same cap, counted apart."""
        self._take(n)
        self.stats.read_back_bytes += n

    def _pace(self, n: int) -> None:
        now = self._take(n)
        self.stats.sent_bytes += n
        meter = self._meter
        if meter is not None:
            line = meter.update(meter.done + n, now)
            if line is not None and meter.tty:
                progress(line)
            elif line is not None:
                _log.info("%s", line)

    # --- one pass ------------------------------------------------------------

    def pending(self) -> list[Candidate]:
        """Files not yet marked uploaded, in upload order: clips, requested files, then
        (``upload.mode: all``) the finalized segments."""
        done = self.marks.uploaded_paths()
        found = self._clip_candidates(done)  # requested files: self.requests sends them
        segments = self._segment_candidates(done)
        if self.up.mode == "all":
            found += segments
            protected = protected_segments(self.cfg.output_dir)
            self.stats.kept_segments = self.stats.kept_bytes = 0
        else:  # events: the segments stay on the vehicle until requested or evicted
            protected = set()
            self.stats.kept_segments = len(segments)
            self.stats.kept_bytes = sum(c.size for c in segments)
        ordered = order(found, protected, self.up.priority_glob)
        self.stats.backlog_segments = len(ordered)
        self.stats.backlog_bytes = sum(c.size for c in ordered)
        for kind in ("clip", "segment"):
            cs = self.stats.classes[kind]
            mine = [c for c in ordered if c.kind == kind]
            cs.waiting_files, cs.waiting_bytes = len(mine), sum(c.size for c in mine)
        segs = [c for c in ordered if c.kind == "segment"]
        self.stats.oldest_pending_start = min(c.start for c in segs).timestamp() if segs else None
        return ordered

    def _segment_candidates(self, done: set[str]) -> list[Candidate]:
        """Finalized segments not marked uploaded (a segment's mark is keyed by its name)."""
        found = []
        for path in list_segments(self.cfg.output_dir, self.cfg.vehicle_id):
            if path.name in done:
                continue
            name = parse_segment_name(path.name)
            if name is None:  # pragma: no cover - list_segments parsed it already
                continue
            try:
                size = path.lstat().st_size
            except FileNotFoundError:
                continue
            found.append(Candidate(path.name, name.vehicle, name.start, name.seq, size))
        return found

    def _clip_candidates(self, done: set[str]) -> list[Candidate]:
        """Finished clips not marked uploaded (marked as ``clips/NAME.hf``), oldest first."""
        if not self.cfg.events.clips.enabled:
            return []
        try:
            clips = list_clips(self.cfg)
        except OSError as exc:
            _log.warning("cannot list the clips: %s", exc)
            return []
        found = []
        for rank, path in enumerate(clips):
            rel = f"{CLIPS_DIR}/{path.name}"
            if rel in done:
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            found.append(
                Candidate(
                    rel,
                    self.cfg.vehicle_id,
                    _clip_time(path.name, st.st_mtime),
                    rank,
                    st.st_size,
                    kind="clip",
                    key=clip_key(self.prefix, self.cfg.vehicle_id, path.name),
                    source=str(path),
                )
            )
        return found

    def allowed(self) -> bool:
        """Whether ``upload.when`` allows uploading now (its command exits 0)."""
        if self.up.when is None:
            return True
        try:
            rc = subprocess.run(
                self.up.when,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=_WHEN_TIMEOUT_S,
                check=False,
            ).returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            _log.warning(
                "upload.when %s failed to run: %s; not uploading now", self.up.when[0], exc
            )
            rc = -1
        ok = rc == 0
        if ok != self.stats.allowed:
            _log.info("upload.when now says %s", "go" if ok else f"not now (exit {rc})")
            if ok:  # a new connection: poll the requests at once
                self.requests.poll_now()
        self.stats.allowed = ok
        return ok

    def _open(self, path: Path) -> int | None:
        """The segment open for reading, None when it is gone; an :class:`UploadError`
        (``unreadable``) when it cannot be opened or is not a regular file."""
        try:
            fd = os.open(path, _OPEN)
        except FileNotFoundError:
            return None
        except OSError as exc:
            why = "a symbolic link (not followed)" if exc.errno == errno.ELOOP else exc.strerror
            raise UploadError("unreadable", f"{path}: {why or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UploadError("unreadable", f"{path}: not a regular file")
        return fd

    def upload_one(self, c: Candidate) -> bool:
        """Upload, verify and mark one file (of any class); ``False`` when it vanished first."""
        path = Path(c.source) if c.source is not None else Path(self.cfg.output_dir) / c.name
        fd = self._open(path)
        if fd is None:
            self.stats.vanished += 1
            _log.warning("%s was deleted before its upload (disk policy?); skipped", c.name)
            return False
        t0 = time.monotonic()
        try:
            try:
                sums = file_sums(fd, self.up.part_bytes)
            except OSError as exc:
                raise UploadError("unreadable", f"{path}: {exc.strerror or exc}") from None
            key = candidate_key(self.prefix, c)
            # a line redrawn on a terminal; in a log (the unit), one every 30 s
            self._meter = TransferMeter(f"uploading {c.name}", c.size, tty=sys.stderr.isatty(),
                                        log_every_s=self.progress_log_s)  # fmt: skip
            doc = self.dest.upload(Job(path, fd, sums, key, self._pace, self._pace_in))
        finally:
            os.close(fd)
            if self._meter is not None and self._meter.tty and self._meter.done:
                progress_done()
            self._meter = None
        if doc.get("verified") not in PROOFS:  # every destination proves what it hands back
            raise UploadError("unverifiable", f"{doc.get('url')}: no proof of {c.name}")
        self.marks.mark_path(c.name, doc)
        if self.up.catalog is not None and c.kind == "segment":
            self.catalog_rows.add_uploaded(path, doc)
        took = max(time.monotonic() - t0, 1e-6)
        self.stats.uploaded_segments += 1
        self.stats.uploaded_bytes += c.size
        self.stats.last_rate_bytes_s = c.size / took
        self.stats.classes[c.kind].delivered(c.size, None if doc.get("found") else took)
        _log.info(
            "uploaded %s (%.1f MB in %.1f s) to %s, verified (%s)%s",
            c.name,
            c.size / 1e6,
            took,
            doc["url"],
            doc["verified"],
            f", {doc['found']}" if doc.get("found") else "",
        )
        if self.up.delete_after_upload and c.kind == "segment":
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                fsync_dir(path.parent)
                self.stats.deleted_after_upload += 1
        return True

    def _hold(self, c: Candidate, exc: UploadError) -> None:
        """Count a failure of this segment alone and start (or lengthen) its own backoff."""
        delay = self._held.failed(
            c.name, self._clock(), self._rng, reason=exc.reason, longest=exc.persistent
        )
        self.stats.failed(exc.reason, str(exc))
        self._held_stats()
        log = _log.error if exc.persistent else _log.warning
        what = "cannot read" if exc.reason == "unreadable" else f"upload failed ({exc.reason}):"
        log("%s %s, skipped (the others go on; next try in %.0f s): %s",
            what, c.name, delay, exc)  # fmt: skip

    def _held_stats(self) -> None:
        held = self._held.reasons()
        self.stats.held = held
        self.stats.unreadable_segments = held.get("unreadable", 0)

    def cut_clips(self) -> None:
        """Cut the clips that are due (``events.clips``); never raises into the loop."""
        if not self.cfg.events.clips.enabled:
            return
        prefix = f"{CLIPS_DIR}/"
        uploaded = {p[len(prefix) :] for p in self.marks.uploaded_paths() if p.startswith(prefix)}
        try:
            report = cut_due_clips(self.cfg, uploaded)
        except Exception as exc:  # the clipper never raises; if it did, uploads go on
            self.stats.clip_failures += 1
            _log.error("cutting the clips failed: %s; uploads go on", exc)
            return
        if report.failed:
            self.stats.clip_failures += 1
        self.beat = time.monotonic()

    def run_once(self) -> int:
        """One pass: cut due clips, poll requests, then upload what is there; the number of
        files that failed (0: all done).

        A file that fails alone waits on its own backoff and the pass goes on
        (module docstring); a failure of the link or the store ends the pass (the
        next file would fail the same way), and the loop backs off.
        """
        self.cut_clips()
        pending = self.pending()
        self._held.keep([c.name for c in pending])
        self._held_stats()
        rows = self.catalog_rows.waiting()
        # with requests, ``when`` is asked every pass: its turning to go polls them at once
        if (pending or rows or self.requests.enabled) and not self.allowed():
            return 0
        failed = refused = 0
        for c in pending:
            if self._stop.is_set():
                break
            if c.kind != "clip" and not self.requests.answer_if_due():
                break  # stopping in the middle of a request
            if self._held.waiting(c.name, self._clock()):
                continue
            try:
                self.upload_one(c)
            except Stopping:
                _log.info("stopping in the middle of %s; it resumes at the next start", c.name)
                break
            except UploadError as exc:
                failed += 1
                if exc.per_segment:
                    self._hold(c, exc)
                    refused = refused + 1 if exc.reason == "refused" else 0
                    if refused < 2:
                        continue
                    # two segments in a row refused: the store refuses the requests themselves
                    _log.warning("two segments in a row refused: ending this pass")
                    self._failures += 1
                    self._last_persistent = False
                else:
                    self.stats.failed(exc.reason, str(exc))
                    log = _log.error if exc.persistent else _log.warning
                    log("upload of %s failed (%s): %s", c.name, exc.reason, exc)
                    self._failures += 1
                    self._last_persistent = exc.persistent
                self.pending()
                return failed
            self._held.ok(c.name)
            self._failures = refused = 0
            self.pending()
        self._held_stats()
        if self._stop.is_set() or not self.requests.answer_if_due():
            return failed
        if rows:
            failed += self.catalog_rows.send(rows)
        return failed

    def next_delay(self) -> float:
        """How long to wait before the next pass."""
        if self._failures == 0:
            return self.up.scan_interval_s
        if getattr(self, "_last_persistent", False):
            return self.up.retry_max_s * self._rng.uniform(0.5, 1.0)
        return max(
            0.5, backoff_s(self._failures - 1, base_s=2.0, cap_s=self.up.retry_max_s, rng=self._rng)
        )

    def run(self, notify: Any = None) -> None:
        """Pass after pass until :meth:`stop`; ``notify``: an :mod:`~.sdnotify` Notifier."""
        first = True
        while not self._stop.is_set():
            self.run_once()
            self.beat = time.monotonic()
            if notify is not None:
                if first:
                    notify.ready(self.stats.status_line())
                    first = False
                notify.status(self.stats.status_line())
            delay = self.next_delay()
            if self._failures:
                _log.info("retrying in %.0f s", delay)
            self._stop.wait(delay)
