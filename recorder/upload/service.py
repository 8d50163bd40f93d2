"""The upload loop: list, order, check ``when``, upload, verify, mark, maybe delete.

Runs in the foreground (``hyperframes upload``, the ``hyperframes-upload``
unit) or once (``--once``). Nothing is lost on any failure: a segment stays
where it is, unmarked, until its upload has been verified; the next attempt
resumes or starts over. Consecutive failures back off exponentially with
full jitter up to ``retry_max_s``; failures that retrying soon cannot fix
(wrong credentials, a missing bucket) wait the longest at once, so a
misconfigured box does not hammer its depot.

An entry that cannot be opened or read (a link planted under a segment's
name, a file this uid may not read, one that shrank) is no reason to stop:
it is skipped, counted (``unreadable``), logged once per wait, and waits on
its own backoff (:class:`~hyperframes.recorder.upload.plan.EntryBackoff`, from
``scan_interval_s`` doubling to ``retry_max_s``) while the others go.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hyperframes.cli.common import TransferMeter, progress, progress_done
from hyperframes.errors import HyperframesError
from hyperframes.events import read_event_log
from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.events.retention import protected_names
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recorder.upload.config import UploadConfig
from hyperframes.recorder.upload.dest import Destination, Job
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.plan import (
    Candidate,
    EntryBackoff,
    TokenBucket,
    backoff_s,
    object_key,
    order,
)
from hyperframes.recorder.upload.stats import UploadStats
from hyperframes.recorder.upload.sums import file_sums
from hyperframes.storage.local import fsync_dir

__all__ = ["UploadService", "make_destination", "protected_segments"]

_log = logging.getLogger("hyperframes.recorder.upload")
_WHEN_TIMEOUT_S = 30.0
# no link followed; O_NONBLOCK: a FIFO put under a segment's name cannot hang the open
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class _Stopping(Exception):
    """The service was asked to stop in the middle of an upload."""


def make_destination(up: UploadConfig, marks: MarkStore) -> tuple[Destination, str]:
    """The destination for ``up.dest`` and the key prefix inside it."""
    if up.is_s3:
        from hyperframes.recorder.upload.s3 import S3Dest  # noqa: PLC0415 - boto3 only for s3://

        dest = S3Dest(up.dest, up.s3, marks, up.part_bytes)
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
    """Uploads the finalized segments of one vehicle's output directory."""

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
        self._unreadable = EntryBackoff(upload.scan_interval_s, upload.retry_max_s)
        self.beat = time.monotonic()
        """Last sign of progress (for the watchdog thread)."""
        self._meter: TransferMeter | None = None

    # --- control -------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to stop (after the current chunk; the upload resumes next time)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def _pace(self, n: int) -> None:
        if self._stop.is_set():
            raise _Stopping()
        delay = self._bucket.delay(n, time.monotonic())
        if delay > 0 and self._stop.wait(delay):
            raise _Stopping()
        self.stats.sent_bytes += n
        self.beat = now = time.monotonic()
        meter = self._meter
        if meter is not None:
            line = meter.update(meter.done + n, now)
            if line is not None and meter.tty:
                progress(line)
            elif line is not None:
                _log.info("%s", line)

    # --- one pass ------------------------------------------------------------

    def pending(self) -> list[Candidate]:
        """Finalized segments not yet marked uploaded, in upload order."""
        done = self.marks.uploaded_names()
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
        ordered = order(found, protected_segments(self.cfg.output_dir), self.up.priority_glob)
        self.stats.backlog_segments = len(ordered)
        self.stats.backlog_bytes = sum(c.size for c in ordered)
        self.stats.oldest_pending_start = (
            min(c.start for c in ordered).timestamp() if ordered else None
        )
        return ordered

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
        """Upload, verify and mark one segment; ``False`` when it vanished first."""
        path = Path(self.cfg.output_dir) / c.name
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
            key = object_key(self.prefix, c.vehicle, c.start, c.name)
            # a line redrawn on a terminal; in a log (the unit), one every 30 s
            self._meter = TransferMeter(f"uploading {c.name}", c.size, tty=sys.stderr.isatty(),
                                        log_every_s=self.progress_log_s)  # fmt: skip
            doc = self.dest.upload(Job(path, fd, sums, key, self._pace))
        finally:
            os.close(fd)
            if self._meter is not None and self._meter.tty and self._meter.done:
                progress_done()
            self._meter = None
        self.marks.mark_uploaded(c.name, doc)
        took = max(time.monotonic() - t0, 1e-6)
        self.stats.uploaded_segments += 1
        self.stats.uploaded_bytes += c.size
        self.stats.last_rate_bytes_s = c.size / took
        _log.info(
            "uploaded %s (%.1f MB in %.1f s) to %s, verified (%s)",
            c.name,
            c.size / 1e6,
            took,
            doc["url"],
            doc.get("verified") or doc.get("found") or "sha256",
        )
        if self.up.delete_after_upload:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                fsync_dir(path.parent)
                self.stats.deleted_after_upload += 1
        return True

    def _skip_unreadable(self, c: Candidate, exc: UploadError) -> None:
        """Count an entry that cannot be read and start (or lengthen) its own backoff."""
        delay = self._unreadable.failed(c.name, time.monotonic(), self._rng)
        self.stats.failed(exc.reason, str(exc))
        self.stats.unreadable_segments = len(self._unreadable)
        _log.warning(
            "cannot read %s, skipped (the others go on; next try in %.0f s): %s",
            c.name,
            delay,
            exc,
        )

    def run_once(self) -> int:
        """One pass over what is there; the number of segments that failed (0: all done).

        A segment that cannot be read is skipped on its own backoff (module
        docstring); any other failure ends the pass (the link or the store is
        the likely cause, and the next segment would fail the same way); the
        loop backs off.
        """
        pending = self.pending()
        self._unreadable.keep([c.name for c in pending])
        self.stats.unreadable_segments = len(self._unreadable)
        if pending and not self.allowed():
            return 0
        skipped = 0
        for c in pending:
            if self._stop.is_set():
                break
            if self._unreadable.waiting(c.name, time.monotonic()):
                continue
            try:
                self.upload_one(c)
            except _Stopping:
                _log.info("stopping in the middle of %s; it resumes at the next start", c.name)
                break
            except UploadError as exc:
                if exc.reason == "unreadable":
                    self._skip_unreadable(c, exc)
                    skipped += 1
                    continue
                self.stats.failed(exc.reason, str(exc))
                log = _log.error if exc.persistent else _log.warning
                log("upload of %s failed (%s): %s", c.name, exc.reason, exc)
                self._failures += 1
                self._last_persistent = exc.persistent
                self.pending()
                return skipped + 1
            self._unreadable.ok(c.name)
            self._failures = 0
            self.pending()
        self.stats.unreadable_segments = len(self._unreadable)
        return skipped

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
