"""The engines' one entry point for one input: JSON text in, JSON text out.

:func:`run_task` is the same function for the local process pool and for Ray
tasks: its request and its outcome are JSON documents (no pickle on any
wire; Ray's own transport only carries the strings). The request's ``kind``
says where the input and the output are: a file and a directory
(:mod:`hyperframes.converter.directory.task`, the default) or objects in a
bucket (``"bucket"``: :mod:`hyperframes.converter.bucket.task`). Either way
the task decides, by content, whether the input was already converted (a
*marker* named by the input's SHA-256 and the config key), converts it
otherwise, writes the marker once the output is published, and turns every
application error into a ``failed`` outcome (so Ray never retries one; only
lost workers and nodes are retried).

Outcome statuses: ``converted``, ``skipped`` (a marker, or an existing output
whose conversion record names this input and config: it is adopted and the
marker written), ``failed`` with a ``fault``: ``input`` (the input cannot be
converted: not finalized, corrupt, undecodable frames), ``verify`` (the
output broke a rule: no output), ``converter`` (not the input's fault: an
encoder missing, the output name taken, the disk), ``system`` (the worker
died; set by the engines); for a bucket also ``deferred`` (its lease lost, or
the input changed or vanished: left for the next scan).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

from hyperframes.converter.convert import PhaseProgress
from hyperframes.converter.directory.task import run_directory_task

__all__ = ["FAULT_ENV", "run_task"]

#: Test-only fault injection: ``exit-once:NAME:DIR`` makes the worker converting
#: the input called NAME exit abruptly the first time (a lost worker), leaving
#: ``DIR/NAME.crashed`` behind; the engines must retry it.
FAULT_ENV: Final = "HYPERFRAMES_CONVERT_FAULT"


def _inject_fault(source: str) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    kind, _, rest = spec.partition(":")
    name, _, flag_dir = rest.partition(":")
    if kind != "exit-once" or Path(source).name != name:
        return
    try:
        fd = os.open(Path(flag_dir) / f"{name}.crashed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os._exit(70)  # a worker lost mid-task, as far as the engine can tell


def run_task(request: str, progress: PhaseProgress | None = None) -> str:
    """Run one request (``make_request`` of either kind); returns the outcome as JSON text."""
    req = json.loads(request)
    _inject_fault(req["input"])
    if req.get("kind") == "bucket":
        # imported for bucket requests only: a directory worker never loads the store's side
        from hyperframes.converter.bucket.task import run_bucket_task  # noqa: PLC0415

        return run_bucket_task(request, progress)
    return run_directory_task(request, progress)
