"""The one batch loop: scan, settle, claim, run on an engine, record; for either inbox.

:func:`run_loop` drives an :class:`~hyperframes.converter.batch.inbox.Inbox` (a
directory or a bucket prefix) with the same guarantees for both:

- idempotent: a task skips an input whose marker names its SHA-256 under the
  same converter version and config, whatever its name;
- resumable: outputs are published only once verified, markers after that;
  at start the batch sweeps what conversions that died left behind;
- one bad input never stops the batch: it is reported, written to the
  ledger, and (inbox inputs only; a named input is never touched) set aside
  in ``INBOX/failed/`` with ``NAME.reason.json``;
- an entry not ready yet (``defer``) is reported once in a one-shot batch and
  looked at again on every scan in ``--watch``; an entry seen once unchanged
  is not reconsidered;
- two inputs that would publish the same output name are never in one batch;
- SIGINT/SIGTERM cancel the running tasks and drop their claims.

Every result is one ledger record: the outcome with the time and the engine.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Hashable
from types import FrameType
from typing import Any, Final

from hyperframes.converter.batch.inbox import Inbox, Item
from hyperframes.converter.batch.ledger import Ledger, now_iso
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.engines import Engine, make_engine
from hyperframes.converter.outcome import Outcome
from hyperframes.converter.progress import BatchDisplay, Tally

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_INTERRUPTED", "run_loop"]

log = logging.getLogger(__name__)

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_INTERRUPTED: Final = 130
_SET_ASIDE: Final = ("input", "verify")  # faults of the input itself: it leaves the inbox


class _Stop:
    """SIGINT/SIGTERM set a flag the batch loop checks (main thread only)."""

    def __init__(self) -> None:
        self.requested: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.requested = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def run_loop(
    inbox: Inbox,
    config: ConvertConfig,
    *,
    watch: bool,
    ray: str | None,
    display: BatchDisplay,
) -> int:
    """Run a batch over ``inbox`` (see the module docstring); returns the exit status.

    0: every input converted or skipped; 1: some input failed; 130: stopped
    by SIGINT/SIGTERM in one-shot mode (in ``--watch`` mode they are the way
    to stop, and the status is 0 or 1).
    """
    tally = Tally()
    with inbox.session() as ledger:
        engine = make_engine(ray, config.batch, config.video.encoder, display.progress)
        try:
            with display, _Stop() as stop:
                loop = _Loop(inbox, ledger, config, watch, ray or "local", display, tally)
                interrupted = loop.run(engine, stop)
        finally:
            engine.close()
    tally.notes.extend(inbox.notes())
    display.summary(tally)
    if interrupted and not watch:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK


class _Loop:
    """The loop's bookkeeping and its steps."""

    def __init__(
        self,
        inbox: Inbox,
        ledger: Ledger,
        config: ConvertConfig,
        watch: bool,
        engine_name: str,
        display: BatchDisplay,
        tally: Tally,
    ) -> None:
        self.inbox = inbox
        self.ledger = ledger
        self.poll_s = config.batch.poll_s
        self.watch = watch
        self.engine_name = engine_name
        self.display = display
        self.tally = tally
        self.queue: list[Item] = []
        self.running: dict[str, Item] = {}  # engine key -> item
        self.seen: set[Hashable | None] = set()
        self.deferred_reported: set[Hashable | None] = set()
        self.names: set[str] = set()  # output names queued or running

    # --- results -------------------------------------------------------------

    def done(self, outcome: Outcome) -> None:
        doc = {"time": now_iso(), "engine": self.engine_name, **outcome}
        self.ledger.write(doc)
        self.tally.add(outcome)
        self.display.finished(outcome)

    def deferred(self, item: Item, reason: str) -> None:
        """Not now: reported once outside ``--watch``; in ``--watch`` tried again later."""
        if item.identity is not None:
            if self.watch:  # looked at again on the next scan
                self.seen.discard(item.identity)
                return
            if item.identity in self.deferred_reported:
                return
            self.deferred_reported.add(item.identity)
        self.done({"input": item.key, "status": "deferred", "reason": reason})

    # --- inputs --------------------------------------------------------------

    def enqueue(self, items: list[Item]) -> None:
        if not items:
            return
        for item, settled in zip(items, self.inbox.settled(items), strict=True):
            self.display.queued()
            if settled is not None:
                self.done(settled)
            elif item.name in self.names:  # two inputs would publish the same output name
                self.done(
                    {
                        "input": item.key,
                        "status": "failed",
                        "fault": "converter",
                        "reason": f"another input named {item.name} is in this batch; its "
                        "output would take the same name (convert it in a separate batch)",
                    }
                )
            else:
                self.names.add(item.name)
                self.queue.append(item)

    def scan(self) -> None:
        fresh: list[Item] = []
        for entry in self.inbox.scan():
            item = entry.item
            if item.identity in self.seen:
                continue
            if entry.action == "defer":
                self.deferred(item, entry.reason)
                continue
            self.seen.add(item.identity)
            if entry.action == "ignore":
                self.done({"input": item.key, "status": "ignored", "reason": entry.reason})
            elif entry.action == "fail":
                self.display.queued()
                outcome: Outcome = {
                    "input": item.key,
                    "status": "failed",
                    "fault": "input",
                    "reason": entry.reason,
                    "error": {
                        "error": "NotFinalized",
                        "message": entry.reason,
                        "rule": "finalized",
                    },
                }
                self.inbox.set_aside(item, outcome)
                self.done(outcome)
            else:
                fresh.append(item)
        self.enqueue(fresh)

    # --- running -------------------------------------------------------------

    def submit(self, engine: Engine, item: Item) -> None:
        why = self.inbox.claim(item)
        if why is not None:
            self.names.discard(item.name)
            self.deferred(item, why)
            return
        request = self.inbox.request(item)
        self.running[item.key] = item
        self.display.started(item.key)
        engine.submit(item.key, request)

    def finished(self, key: str, outcome: Outcome) -> None:
        outcome.setdefault("input", key)
        item = self.running.pop(key, None)
        if item is None:
            self.done(outcome)
            return
        self.names.discard(item.name)
        if outcome.get("fault") == "system":  # the worker died (twice, or lost on Ray)
            self.inbox.release(item)
        if outcome.get("status") == "deferred":
            self.deferred(item, str(outcome.get("reason", "")))
            return
        if (
            item.inbox
            and not self.inbox.tasks_set_aside
            and outcome.get("status") == "failed"
            and outcome.get("fault") in _SET_ASIDE
        ):
            self.inbox.set_aside(item, outcome)
        self.done(outcome)

    def run(self, engine: Engine, stop: _Stop) -> bool:
        """Until done (one-shot) or stopped; True when stopped by a signal."""
        self.inbox.sweep()  # the first request: a wrong store or credentials end the batch here
        for got in self.inbox.named():
            if isinstance(got, Item):
                self.enqueue([got])
            else:
                self.done(got)
        next_scan = 0.0
        while True:
            if stop.requested is not None:
                for key in engine.cancel_all():
                    item = self.running.pop(key, None)
                    if item is not None:
                        self.inbox.release(item)
                    self.done(
                        {
                            "input": key,
                            "status": "interrupted",
                            "reason": f"stopped by signal {stop.requested}",
                        }
                    )
                return True
            now = time.monotonic()
            if now >= next_scan:
                try:
                    self.scan()
                except self.inbox.transient as exc:
                    if not self.watch:
                        raise
                    log.warning("scan failed, trying again in %g s: %s", self.poll_s, exc)
                next_scan = now + self.poll_s
            while self.queue and engine.active() < engine.slots:
                self.submit(engine, self.queue.pop(0))
            for key, outcome in engine.poll(0.2):
                self.finished(key, outcome)
            if not self.watch and not self.queue and engine.active() == 0:
                return False
