"""The upload service's duty to the depot's requests (``upload.requests``): poll them on
their cadence, answer them (:func:`~hyperframes.recorder.upload.requests.answer_once`),
count what they cost and what waits. Held by
:class:`~hyperframes.recorder.upload.service.UploadService` as ``requests``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.upload.config import UploadConfig
from hyperframes.recorder.upload.dest import Destination
from hyperframes.recorder.upload.errors import Stopping, UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.request_doc import next_poll
from hyperframes.recorder.upload.request_stage import REQUESTS_DIR
from hyperframes.recorder.upload.requests import RequestSettings, answer_once
from hyperframes.recorder.upload.stats import UploadStats

__all__ = ["RequestDuty"]

_log = logging.getLogger("hyperframes.recorder.upload")


class RequestDuty:
    """Polls and answers the depot's requests for one service (off without
    ``upload.requests``).

    ``pace``/``pace_in``: the service's bandwidth cap (``Stopping`` when it is asked to
    stop); ``touch``: a sign of progress for the service's watchdog; ``clock``: monotonic
    seconds, as the service's.
    """

    def __init__(
        self,
        cfg: VehicleConfig,
        up: UploadConfig,
        dest: Destination,
        stats: UploadStats,
        *,
        rng: random.Random,
        clock: Callable[[], float],
        pace: Callable[[int], None],
        pace_in: Callable[[int], None],
        touch: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self.up = up
        self.dest = dest
        self.stats = stats
        self.settings = RequestSettings.from_upload(up)
        self._rng = rng
        self._clock = clock
        self._pace = pace
        self._pace_in = pace_in
        self._touch = touch
        self._next_poll = float("-inf")
        """When to poll the requests next (on ``clock``); at once at the first pass."""
        self._poll_failures = 0
        self._req_t0: float | None = None

    @property
    def enabled(self) -> bool:
        """Whether ``upload.requests`` is set."""
        return self.settings is not None

    def poll_now(self) -> None:
        """Make the next poll due at once (``upload.when`` has just turned to go)."""
        self._next_poll = float("-inf")

    def due(self) -> bool:
        """Whether the depot's requests should be polled now: on their jittered cadence
        (:func:`~hyperframes.recorder.upload.request_doc.next_poll`), and at once after
        :meth:`poll_now`."""
        return self.settings is not None and self._clock() >= self._next_poll

    def answer(self) -> None:
        """Poll the requests and answer those that can be answered now (cut, uploaded
        verified, result written: :func:`~hyperframes.recorder.upload.requests.answer_once`);
        a failure of the link or the store backs the next poll off, anything else is logged
        and counted, never raised into the loop (``Stopping`` passes through). The caller
        has asked ``upload.when``."""
        settings = self.settings
        if settings is None:
            return
        self._req_t0 = None
        try:
            results = answer_once(
                self.cfg,
                settings,
                self.dest,
                pace=self._pace_request,
                pace_in=self._pace_in,
                on_uploaded=self._uploaded,
            )
        except Stopping:
            raise
        except UploadError as exc:
            self._poll_failures += 1
            self.stats.request_failures += 1
            self.stats.failed(exc.reason, str(exc))
            _log.warning("polling the requests at %s failed (%s): %s", settings.url,
                         exc.reason, exc)  # fmt: skip
        except Exception as exc:  # never into the loop: logged, counted, polled again later
            self._poll_failures += 1
            self.stats.request_failures += 1
            _log.error("answering the requests at %s failed: %s", settings.url, exc)
        else:
            self._poll_failures = 0
            self.stats.requests_answered += len(results)
        self._next_poll = next_poll(self._clock(), self._poll_failures, self._rng,
                                    interval_s=self.up.requests_interval_s,
                                    retry_max_s=max(self.up.retry_max_s, 1.0))  # fmt: skip
        self._count_staged()
        self._touch()

    def answer_if_due(self) -> bool:
        """Answer the requests if they are due (after the clips, before anything else);
        ``False`` when the service was asked to stop in the middle."""
        if not self.due():
            return True
        try:
            self.answer()
        except Stopping:
            _log.info("stopping in the middle of a request; it resumes at the next start")
            return False
        return True

    def _pace_request(self, n: int) -> None:
        if self._req_t0 is None:
            self._req_t0 = time.monotonic()
        self._pace(n)

    def _uploaded(self, key: str, mark: dict[str, Any]) -> None:
        """One requested file uploaded and marked (by :func:`answer_once`)."""
        size = int(mark.get("size") or 0)
        took = None if self._req_t0 is None else time.monotonic() - self._req_t0
        self._req_t0 = None
        self.stats.uploaded_segments += 1
        self.stats.uploaded_bytes += size
        self.stats.classes["requested"].delivered(size, took)
        self._touch()

    def _count_staged(self) -> None:
        """The requested class's waiting files: staged in ``OUTPUT_DIR/.requests/ID/`` and
        not yet marked there (a request that failed halfway waits for the next poll)."""
        files = size = 0
        root = Path(self.cfg.output_dir) / REQUESTS_DIR
        with contextlib.suppress(OSError), os.scandir(root) as it:
            for req in it:
                if not req.is_dir(follow_symlinks=False):
                    continue
                done = MarkStore(req.path).uploaded_names()
                with contextlib.suppress(OSError), os.scandir(req.path) as files_in:
                    for f in files_in:
                        if (f.name.startswith(".") or f.name.endswith(".tmp")
                                or f.name.endswith(".json") or f.name in done
                                or not f.is_file(follow_symlinks=False)):  # fmt: skip
                            continue
                        files += 1
                        size += f.stat(follow_symlinks=False).st_size
        cs = self.stats.classes["requested"]
        cs.waiting_files, cs.waiting_bytes = files, size
