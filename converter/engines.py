"""Where conversions run: a local pool of fresh spawn processes, or Ray tasks on a cluster.

Both engines run :func:`hyperframes.converter.task.run_task` on a JSON request and hand
back its JSON outcome; the batch treats them alike (``submit``, ``poll``,
``cancel_all``).

- :class:`LocalEngine`: one fresh ``spawn`` process per archive (no state
  leaks from one archive to the next; a crash takes one archive with it), at
  most ``workers`` at once. Results and progress come back as JSON bytes over
  a pipe. Each child asks Linux to kill it when the batch process dies
  (``PR_SET_PDEATHSIG``), so a ``kill -9`` of the batch leaves no orphan
  still writing. A child that dies without an outcome is retried once, then
  reported as a ``system`` failure.
- :class:`RayEngine`: the same function as a Ray task, one per archive.
  GPU tasks (encoder ``nvenc``, or ``auto`` while the cluster advertises the
  custom resource ``nvenc``) ask for one GPU and one ``nvenc``, so they land
  on hosts whose GPUs have NVENC (A100/H100/H200 have none: do not give their
  nodes that resource); other tasks ask for CPUs and run x265. Lost workers
  and nodes are retried (``max_retries``), application errors are not
  (``retry_exceptions=False``, and ``run_task`` returns them as outcomes).
  Input and output paths must be visible on every node (shared storage).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final, Protocol

from hyperframes.converter.config import BatchConfig
from hyperframes.converter.errors import ConfigError, MissingExtraError
from hyperframes.converter.outcome import Outcome
from hyperframes.converter.task import run_task

__all__ = [
    "Outcome",
    "Engine",
    "LocalEngine",
    "RayEngine",
    "default_workers",
    "make_engine",
]

log = logging.getLogger(__name__)

#: ``on_progress(key, done, total, bytes_done, phase)``: frames of a conversion (phase
#: ``convert``), or bytes of a bucket task's ``download``, ``upload`` or ``re-read``
ProgressSink = Callable[[str, int, int, int, str], None]

_PR_SET_PDEATHSIG: Final = 1
_CORES_PER_ARCHIVE: Final = 4  # x265 (wavefront threads) + the camera threads of one archive
_BYTES_PER_ARCHIVE: Final = 2 << 30  # measured peak RSS of a 60 s vehicle archive, rounded up


def default_workers() -> int:
    """Archives converted at once by default: one per 4 cores and per 2 GiB of memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    by_cpu = max(1, (cores or 1) // _CORES_PER_ARCHIVE)
    avail = _available_memory()
    return by_cpu if avail is None else max(1, min(by_cpu, avail // _BYTES_PER_ARCHIVE))


def _available_memory() -> int | None:
    """MemAvailable (free plus reclaimable page cache) in bytes, where Linux says it."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _system_failure(source: str, what: str) -> Outcome:
    return {
        "input": source,
        "status": "failed",
        "fault": "system",
        "reason": what,
        "error": {"error": "WorkerLost", "message": what},
    }


class Engine(Protocol):
    """What the batch needs from an engine."""

    name: str
    slots: int  # tasks it runs at once

    def submit(self, key: str, request: str) -> None:
        """Start one task; ``key`` identifies it in :meth:`poll` (the input path)."""
        ...

    def poll(self, timeout: float) -> list[tuple[str, Outcome]]:
        """Wait up to ``timeout`` seconds; returns the tasks finished since the last call."""
        ...

    def active(self) -> int:
        """Tasks submitted and not yet returned by :meth:`poll`."""
        ...

    def cancel_all(self) -> list[str]:
        """Stop every running task; returns their keys."""
        ...

    def close(self) -> None:
        """Release the engine."""
        ...


# --- local spawn pool --------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request above
        os._exit(1)


def _child_main(request: str, conn: Connection, parent: int) -> None:
    """Entry point of a spawned worker: run the task, stream progress, send the outcome."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the batch decides when to stop a worker
    last = 0.0

    def progress(frames: int, total: int, nbytes: int, phase: str = "convert") -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 0.25 or frames == total:
            last = now
            conn.send_bytes(json.dumps({"progress": [frames, total, nbytes, phase]}).encode())

    outcome = run_task(request, progress)
    conn.send_bytes(json.dumps({"outcome": json.loads(outcome)}).encode())
    conn.close()


@dataclass(slots=True)
class _Running:
    process: BaseProcess
    conn: Connection
    request: str
    attempt: int
    outcome: Outcome | None = None


@dataclass(slots=True)
class LocalEngine:
    """Fresh spawn processes, at most ``slots`` at once (see the module docstring)."""

    slots: int
    on_progress: ProgressSink | None = None
    max_retries: int = 1
    name: str = "local"
    _running: dict[str, _Running] = field(default_factory=dict)
    _ctx: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def submit(self, key: str, request: str, attempt: int = 1) -> None:
        """Start a fresh process for one task."""
        parent_end, child_end = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_child_main,
            args=(request, child_end, os.getpid()),
            name=f"hf-convert-{Path(key).name}",
            daemon=False,
        )
        proc.start()
        child_end.close()
        self._running[key] = _Running(proc, parent_end, request, attempt)

    def poll(self, timeout: float) -> list[tuple[str, Outcome]]:
        """Collect progress and outcomes; reap finished workers."""
        if not self._running:
            time.sleep(timeout)
            return []
        by_handle: dict[Any, str] = {}
        for key, run in self._running.items():
            by_handle[run.conn] = key
            by_handle[run.process.sentinel] = key
        ready = wait(list(by_handle), timeout)
        done: list[tuple[str, Outcome]] = []
        for key in dict.fromkeys(by_handle[h] for h in ready):
            run = self._running[key]
            self._drain(key, run)
            if run.process.is_alive() and run.outcome is None:
                continue
            run.process.join(timeout=5)
            self._drain(key, run)
            del self._running[key]
            run.conn.close()
            if run.outcome is not None:
                done.append((key, run.outcome))
                continue
            code = run.process.exitcode
            what = f"worker process died (exit code {code}) on attempt {run.attempt}"
            if run.attempt <= self.max_retries:
                log.warning("%s: %s; retrying", key, what)
                self.submit(key, run.request, run.attempt + 1)
            else:
                done.append((key, _system_failure(key, what)))
        return done

    def _drain(self, key: str, run: _Running) -> None:
        with contextlib.suppress(EOFError, OSError):
            while run.conn.poll():
                msg = json.loads(run.conn.recv_bytes())
                if "outcome" in msg:
                    run.outcome = msg["outcome"]
                elif "progress" in msg and self.on_progress is not None:
                    self.on_progress(key, *msg["progress"])

    def active(self) -> int:
        """Workers running."""
        return len(self._running)

    def cancel_all(self) -> list[str]:
        """SIGTERM, then SIGKILL, every worker; their staging directories are swept later."""
        keys = list(self._running)
        for run in self._running.values():
            run.process.terminate()
        for run in self._running.values():
            run.process.join(timeout=5)
            if run.process.is_alive():
                run.process.kill()
                run.process.join()
            run.conn.close()
        self._running.clear()
        return keys

    def close(self) -> None:
        """Stop whatever still runs."""
        self.cancel_all()


# --- Ray ---------------------------------------------------------------------------


def _import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - an optional extra
    except ImportError:
        raise MissingExtraError("ray", "cluster", "--ray (converting on a Ray cluster)") from None
    return ray


def _ray_task(request: str) -> str:
    """The Ray task: :func:`run_task` without progress."""
    logging.basicConfig(level=logging.INFO)
    return run_task(request)


class RayEngine:
    """Ray tasks, one per archive (see the module docstring)."""

    name = "ray"

    def __init__(self, address: str, batch: BatchConfig, encoder: str) -> None:
        self._ray = ray = _import_ray()
        if not ray.is_initialized():
            if address == "auto":
                try:
                    ray.init(address="auto", log_to_driver=False)
                except ConnectionError:  # no cluster on this machine: start a local instance
                    ray.init(log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        resources = ray.cluster_resources()
        self._nvenc = int(resources.get("nvenc", 0))
        self._encoder = encoder
        if encoder == "nvenc" and self._nvenc == 0:
            raise ConfigError(
                "video.encoder",
                "'nvenc' on Ray needs nodes that advertise the custom resource 'nvenc' "
                "(ray start --resources='{\"nvenc\": 1}' on hosts whose GPUs have NVENC); "
                "none does; use auto or x265",
            )
        largest = max(
            (n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")), default=1.0
        )
        self._num_cpus = min(batch.ray_num_cpus, largest)  # a task no node can hold never runs
        if self._num_cpus < batch.ray_num_cpus:
            log.info(
                "batch.ray_num_cpus %g: the largest node has %g CPUs; asking for %g",
                batch.ray_num_cpus,
                largest,
                self._num_cpus,
            )
        self._batch = batch
        self._remote = ray.remote(_ray_task)
        self._refs: dict[Any, tuple[str, bool]] = {}  # ref -> (key, on a GPU)
        cpus = float(resources.get("CPU", 1.0))
        self.slots = max(1, int(cpus // max(self._num_cpus, 1e-3)) + self._nvenc)

    def _gpu_busy(self) -> int:
        return sum(1 for _, gpu in self._refs.values() if gpu)

    def submit(self, key: str, request: str) -> None:
        """Start one Ray task: on an NVENC GPU where the config allows and one is free."""
        gpu = self._encoder in ("auto", "nvenc") and self._gpu_busy() < self._nvenc
        options: dict[str, Any] = {
            "num_cpus": self._num_cpus,
            "max_retries": self._batch.ray_max_retries,
            "retry_exceptions": False,
        }
        if gpu:
            options.update(num_gpus=1, resources={"nvenc": 1})
        elif self._encoder == "auto":
            req = json.loads(request)
            req["encoder"] = "x265"  # no NVENC reserved for this task: do not try it
            request = json.dumps(req)
        ref = self._remote.options(**options).remote(request)
        self._refs[ref] = (key, gpu)

    def poll(self, timeout: float) -> list[tuple[str, Outcome]]:
        """Outcomes of the tasks finished; a task lost after its retries is a system failure."""
        if not self._refs:
            time.sleep(timeout)
            return []
        ray = self._ray
        ready, _ = ray.wait(list(self._refs), num_returns=len(self._refs), timeout=timeout)
        done = []
        for ref in ready:
            key, _gpu = self._refs.pop(ref)
            try:
                done.append((key, json.loads(ray.get(ref))))
            except ray.exceptions.RayError as exc:
                what = f"Ray task lost after {self._batch.ray_max_retries} retries: {exc}"
                done.append((key, _system_failure(key, what.splitlines()[0])))
        return done

    def active(self) -> int:
        """Tasks submitted and not collected."""
        return len(self._refs)

    def cancel_all(self) -> list[str]:
        """Cancel (force) every task still running."""
        keys = [key for key, _ in self._refs.values()]
        for ref in self._refs:
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
        self._refs.clear()
        return keys

    def close(self) -> None:
        """Cancel what still runs; the Ray connection stays for the process."""
        self.cancel_all()


def make_engine(
    ray_address: str | None,
    batch: BatchConfig,
    encoder: str,
    on_progress: ProgressSink | None = None,
) -> Engine:
    """``RayEngine`` for ``--ray ADDRESS|auto``, else a ``LocalEngine`` sized to the machine."""
    if ray_address:
        return RayEngine(ray_address, batch, encoder)
    return LocalEngine(batch.workers or default_workers(), on_progress)
