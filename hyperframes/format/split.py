"""Splitting the work on one large frame across threads (blocks of a payload, its CRC).

One process-wide pool of helper threads, created on first use and never
reused across ``fork`` (a forked child, such as a DataLoader worker, gets a
fresh one). The calling thread always works too, taking the same tasks as
the helpers from a shared counter, so a busy or slow pool delays a split but
never stalls it. The tasks themselves must release the GIL (LZ4 through
ctypes, ZSTD and numpy copies do) for the split to pay; fastcrc's CRC32C
holds it, so a frame's checksum is ``first``, run on the calling thread
while the helpers start.

A split only pays when another core is idle: on a box whose run queue is
full (load average at or above its CPUs, checked at most twice a second) a
helper that claims a task may not run for milliseconds while the caller
waits for it (measured here at load 11 on 2 cores: a 1.9 MB lidar read took
4.9 ms on two threads, 1.3 ms on one), so then everything runs on the
calling thread.

Nor does it pay when the work is short next to the time a sleeping helper
takes to start: 50-800 us (typically 60-120) on the 2-vCPU VM this was
measured on (an idle vCPU is woken through the host), a few us on bare
metal. So the calling thread runs the first task itself, timed, and hands
the rest to helpers only when the rest would take more than 4 of those
start times; the start time is learned from the splits made (a running
average that also fades when no split measures it). On that VM a 1.9 MB
blosc2 lidar sweep (~220 us of decoding) read 12-32% slower on two threads
than on one in most runs before this rule. Even a split that starts at
once gains less there than the thread count says: two threads decoding
LZ4 side by side each ran at ~55-75% of the speed of one alone (1.33x
together; the decode of a page-cache-cold sweep is bound by memory).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import queue
import threading
import time
from collections.abc import Callable

__all__ = ["default_threads", "run_split", "box_is_busy"]

_MAX_DEFAULT = 4
_LOAD_EVERY = 0.5  # seconds between load-average reads
_PAYS = 4  # helpers are woken when the rest of the work takes this many helper start times
_LEARN = 0.25  # weight of the newest start time in the average
_FORGET_NS = 2_000_000_000  # the average halves every 2 s without a split to measure


def box_is_busy(load: float, cpus: int) -> bool:
    """Whether a load average of ``load`` leaves no CPU of ``cpus`` idle for a helper."""
    return load >= cpus


class _Load:
    """Whether this box is busy now (the load average, read at most every ``_LOAD_EVERY`` s)."""

    def __init__(self) -> None:
        self.at = -_LOAD_EVERY
        self.busy = False

    def check(self) -> bool:
        now = time.monotonic()
        if now - self.at >= _LOAD_EVERY:
            self.at = now
            try:
                self.busy = box_is_busy(os.getloadavg()[0], _cpus())
            except OSError:  # pragma: no cover - no load average here
                self.busy = False
        return self.busy


_load = _Load()


class _Wake:
    """How long a helper takes to start on a split's tasks, averaged over the last splits.

    Starts at 0 (the first split is always made: it measures); a split whose
    helpers never started before the work was done counts the whole wait.
    Only splits measure, so the average also halves every 2 s without one: a
    slow phase (a burst of load) stops splits for a while, not for good.
    Updates race harmlessly (floats, last writer wins).
    """

    def __init__(self) -> None:
        self.ns = 0.0
        self.at = 0  # time.monotonic_ns() of the last measure

    def now_ns(self) -> float:
        """The average as of now (halved for every 2 s since the last measure)."""
        halvings: float = (time.monotonic_ns() - self.at) / _FORGET_NS
        return self.ns * math.pow(0.5, halvings)

    def pays(self, rest_ns: float) -> bool:
        """Whether work that takes ``rest_ns`` on one thread is worth waking helpers for."""
        return rest_ns > _PAYS * self.now_ns()

    def observe(self, ns: float) -> None:
        """One split's helper start time."""
        current = self.now_ns()
        self.ns = current + (ns - current) * _LEARN
        self.at = time.monotonic_ns()


_wake = _Wake()


@functools.cache
def default_threads() -> int:
    """Threads one frame's decode may use by default: the CPUs this process may run on, <= 4
    (asked once per process: every reader's open needs it)."""
    return max(1, min(_MAX_DEFAULT, _cpus()))


os.register_at_fork(after_in_child=default_threads.cache_clear)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Pool:
    """The helper threads of this process and the queue they take jobs from.

    Plain daemon threads blocked on a ``SimpleQueue`` (a C queue): handing a
    job over is one ``put``, ~1 us, where ``ThreadPoolExecutor.submit`` (a
    future, a work item, a lock and a semaphore) took 20-30 us on a lidar
    read's cold caches. The helpers only ever run while a split's caller
    waits for them, so at exit they are idle in ``get``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.size = 0

    def get(self, helpers: int) -> queue.SimpleQueue[Callable[[], None]]:
        """The job queue, with at least ``helpers`` threads serving it."""
        if self.size < helpers:
            with self.lock:
                while self.size < helpers:
                    threading.Thread(
                        target=_serve, args=(self.jobs,), name=f"hf-split_{self.size}", daemon=True
                    ).start()
                    self.size += 1
        return self.jobs

    def forget(self) -> None:
        """In a forked child: the parent's threads do not exist here, and its lock may be held."""
        self.lock = threading.Lock()
        self.jobs = queue.SimpleQueue()
        self.size = 0


def _serve(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        jobs.get()()  # a job never raises: run_split's jobs hand their errors to the caller


_pool = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.forget)


def run_split(
    count: int,
    task: Callable[[int], None],
    threads: int,
    first: Callable[[], None] | None = None,
) -> None:
    """Run ``task(0) .. task(count - 1)`` on the calling thread and up to ``threads - 1`` helpers.

    The calling thread runs ``task(0)`` itself and times it; helpers are
    woken for the rest only when it would take several helper start times
    (see the module's notes). ``first`` then runs on the calling thread (the
    helpers start on the tasks meanwhile), or before the remaining tasks when
    there are no helpers. Returns when every task has run. Errors: an
    exception from ``first`` wins over one from a task (``first`` runs even
    when ``task(0)`` failed); after any error no further task is started, and
    the first one is raised once the running tasks have finished. With
    ``threads <= 1``, or on a busy box (:func:`box_is_busy`), everything runs
    in order on the calling thread, and a failing ``first`` skips the tasks.
    """
    helpers = min(threads - 1, count - 1)
    if helpers > 0 and _load.check():
        helpers = 0
    if helpers <= 0:
        if first is not None:
            first()
        for i in range(count):
            task(i)
        return
    clock = time.perf_counter_ns
    t0 = clock()
    try:
        task(0)
    except BaseException:
        if first is not None:
            first()  # its exception wins
        raise
    if not _wake.pays((clock() - t0) * (count - 1)):
        if first is not None:
            first()
        for i in range(1, count):
            task(i)
        return
    claims = itertools.count(1)  # next() on it is atomic: each index is taken once
    errors: list[BaseException] = []
    started: list[int] = []
    gate = threading.Lock()  # a helper starts only while the split is open
    joined = False  # set (under the gate) once the caller stops waiting for newcomers
    finished: queue.SimpleQueue[None] = queue.SimpleQueue()

    def work() -> None:
        for i in claims:
            if i >= count or errors:
                return
            try:
                task(i)
            except BaseException as exc:  # handed to the caller below
                errors.append(exc)
                return

    def job() -> None:
        with gate:
            if joined:  # the caller finished everything: nothing left, and it is not waiting
                return
            started.append(clock())
        try:
            work()
        finally:
            finished.put(None)

    jobs = _pool.get(threads - 1)
    woken = clock()
    for _ in range(helpers):
        jobs.put(job)
    first_error: BaseException | None = None
    if first is not None:
        try:
            first()
        except BaseException as exc:  # raised below, after the helpers stop
            first_error = exc
            errors.append(exc)
    work()
    done = clock()
    with gate:
        joined = True
        running = len(started)
    for _ in range(running):  # a helper that started may still be in a task
        finished.get()
    _wake.observe((min(started) if started else done) - woken)
    if first_error is not None:
        raise first_error
    if errors:
        raise errors[0]
