"""One input in a directory, converted by one worker: markers, adoption, conversion.

:func:`run_directory_task` is what :func:`hyperframes.converter.task.run_task`
runs for a request made by :func:`make_request` (the input and ``OUT`` on a
disk this worker sees). It decides, by content, whether the input was
already converted (a *marker* ``OUT/.markers/<input sha256>.<config
key>.json``), converts it otherwise
(:func:`hyperframes.converter.convert.convert_archive`: published only once
verified), writes the marker once the output is published, and turns every
application error into a ``failed`` outcome (statuses and faults:
:mod:`hyperframes.converter.task`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any, Final

from hyperframes.converter import __version__
from hyperframes.converter.cataloging import catalog_output
from hyperframes.converter.config import ConvertConfig, parse_config
from hyperframes.converter.convert import (
    PhaseProgress,
    Progress,
    convert_archive,
    file_sha256,
    is_conversion_of,
)
from hyperframes.converter.errors import ConverterError, OutputExistsError
from hyperframes.converter.outcome import error_of, fault_of
from hyperframes.converter.plan import config_key, marker_name
from hyperframes.storage.local import safe_dir, write_atomic

__all__ = [
    "MARKERS_DIR",
    "make_request",
    "run_directory_task",
    "process_input",
    "read_marker",
    "write_json_atomic",
]

log = logging.getLogger(__name__)

MARKERS_DIR: Final = ".markers"


def make_request(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    config: ConvertConfig,
    *,
    encoder: str | None = None,
) -> str:
    """The JSON request for :func:`run_directory_task` (by way of ``run_task``)."""
    return json.dumps(
        {
            "input": os.fspath(source),
            "out": os.fspath(out_dir),
            "config": config.to_dict(),
            "encoder": encoder,
        }
    )


def write_json_atomic(
    path: Path, doc: dict[str, Any], *, replace: bool = True, dir_fd: int | None = None
) -> None:
    """Write ``doc`` to ``path`` as JSON, atomically, following no link.

    (:func:`hyperframes.storage.local.write_atomic`)
    """
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    write_atomic(path, data, replace=replace, dir_fd=dir_fd)


def read_marker(out_dir: Path, sha256: str, key: str) -> dict[str, Any] | None:
    """The marker of an input already converted under ``key``, or None."""
    path = out_dir / MARKERS_DIR / marker_name(sha256, key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # a damaged marker: convert again
        log.warning("%s: unreadable marker (%s); converting again", path, exc)
        return None
    return doc if isinstance(doc, dict) else None


def _write_marker(out_dir: Path, sha256: str, key: str, doc: dict[str, Any]) -> Path:
    markers = out_dir / MARKERS_DIR
    safe_dir(markers, 0o777)
    path = markers / marker_name(sha256, key)
    write_json_atomic(path, doc)
    return path


def process_input(
    source: Path,
    out_dir: Path,
    config: ConvertConfig,
    *,
    encoder: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Skip, adopt or convert one input; returns the outcome (never raises for its errors)."""
    t0 = time.monotonic()
    key = config_key(config)
    outcome: dict[str, Any] = {
        "input": os.fspath(source),
        "config_key": key,
        "converter_version": __version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    try:
        sha = file_sha256(source)
        outcome["sha256"] = sha
        final = out_dir / source.name
        outcome["output"] = os.fspath(final)
        marker = read_marker(out_dir, sha, key)
        if marker is not None:
            outcome.update(
                status="skipped",
                reason="already converted (marker)",
                output=marker.get("output", os.fspath(final)),
            )
        elif final.exists() and is_conversion_of(final, sha, key):
            _write_marker(
                out_dir,
                sha,
                key,
                {
                    "input": source.name,
                    "sha256": sha,
                    "config_key": key,
                    "output": os.fspath(final),
                    "adopted": True,
                },
            )
            outcome.update(
                status="skipped",
                reason="output existed with this input's conversion record; marker written",
            )
        elif final.exists():
            raise OutputExistsError(
                final,
                "it is not a conversion of this input under this "
                "config; remove it or choose another --out",
            )
        else:
            result = convert_archive(
                source, out_dir, config, sha256=sha, progress=progress, encoder=encoder
            )
            doc = {
                "input": source.name,
                "sha256": sha,
                "config_key": key,
                "converter_version": __version__,
                "output": result.output,
                "converted_ns": time.time_ns(),
                "result": result.to_dict(),
            }
            _write_marker(out_dir, sha, key, doc)
            outcome.update(status="converted", result=result.to_dict())
            catalog_output(config.catalog, result.output, outcome)
    except Exception as exc:  # every application error becomes an outcome, never a retry
        outcome.update(status="failed", fault=fault_of(exc), error=error_of(exc), reason=str(exc))
    outcome["seconds"] = round(time.monotonic() - t0, 3)
    return outcome


def run_directory_task(request: str, progress: PhaseProgress | None = None) -> str:
    """Run one request (see :func:`make_request`); returns the outcome as JSON text."""
    req = json.loads(request)
    try:
        config = parse_config(req["config"])
    except ConverterError as exc:
        return json.dumps(
            {
                "input": req["input"],
                "status": "failed",
                "fault": "converter",
                "error": exc.details(),
                "reason": str(exc),
            }
        )
    outcome = process_input(
        Path(req["input"]), Path(req["out"]), config, encoder=req.get("encoder"), progress=progress
    )
    return json.dumps(outcome)
