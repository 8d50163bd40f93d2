"""Staging a request's range in ``OUTPUT_DIR/.requests/ID/``: plan, cut, keys, sweep.

:func:`stage` plans the files of a request from the finalized segments still on disk (and
names what the vehicle does not have, from the event log), keeping the plan and the
finished files in ``state.json`` so that a crash redoes only the file being cut;
:func:`cut_file` cuts one file when it is needed (a slice per segment, or the whole segment
hard-linked with ``whole``), each named ``ID_SEGMENT``: the name carries the request's id,
so the multipart state a destination keeps by file name never meets the segment's own.
:func:`keys` says where each goes; :func:`sweep` removes the folders of requests no longer
waiting. Answering: :mod:`~hyperframes.recorder.upload.requests`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframes.drive.core import Segment
from hyperframes.drive.splice import slice_drive
from hyperframes.errors import HyperframesError
from hyperframes.events import read_event_log
from hyperframes.format.jsontext import parse_json
from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.segments import list_segments
from hyperframes.recorder.upload.dest import Destination
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.request_doc import (
    Gap,
    Request,
    Span,
    dest_key_prefix,
    missing_parts,
)
from hyperframes.storage.local import fsync_dir, safe_dir, write_atomic

__all__ = [
    "REQUESTS_DIR",
    "StagedFile",
    "Staged",
    "segment_spans",
    "stage",
    "cut_file",
    "destination_root",
    "keys",
    "sweep",
]

REQUESTS_DIR: Final = ".requests"
"""``OUTPUT_DIR/.requests/ID/``: a request's staged files, its state and its marks."""
STATE_NAME: Final = "state.json"
_log = logging.getLogger("hyperframes.recorder.upload.requests")


@dataclass(frozen=True, slots=True)
class StagedFile:
    """One file cut for a request: its name, the segment it came from and its range."""

    name: str
    source: str
    start_ns: int
    end_ns: int
    path: Path


@dataclass(slots=True)
class Staged:
    """A request's files ready in ``directory``, and what could not be cut."""

    request: Request
    directory: Path
    files: list[StagedFile] = field(default_factory=list)
    missing: list[Gap] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    """Names of the files cut completely (in ``state.json``)."""
    sources: dict[str, Path] = field(default_factory=dict)
    """The segments on disk when staged, by name."""


def segment_spans(cfg: VehicleConfig) -> tuple[list[Span], dict[str, Path]]:
    """Every segment known: those on disk (span from the header) and those the event log
    remembers; the paths of those on disk."""
    paths: dict[str, Path] = {}
    spans: list[Span] = []
    for path in list_segments(cfg.output_dir, cfg.vehicle_id):
        try:
            seg = Segment.open(path, path.lstat().st_size)
        except (OSError, HyperframesError) as exc:
            _log.warning("request: skipping segment %s: %s", path.name, exc)
            continue
        paths[path.name] = path
        spans.append(Span(path.name, seg.start_ns, seg.end_ns, True))
    try:
        log = read_event_log(cfg.output_dir)
    except (OSError, HyperframesError) as exc:
        _log.warning("request: event log unreadable (%s): evicted time shows as gaps", exc)
    else:
        spans += [
            Span(s.name, s.start_ns, s.end_ns, False)
            for s in log.segments.values()
            if s.name not in paths
        ]
    return spans, paths


def _state_doc(staged: Staged) -> dict[str, Any]:
    return {
        "request": dict(staged.request.doc),
        "files": [
            {
                "name": f.name,
                "source": f.source,
                "start_ns": f.start_ns,
                "end_ns": f.end_ns,
                "done": f.name in staged.done,
            }
            for f in staged.files
        ],
        "missing": [g.to_dict() for g in staged.missing],
    }


def _read_state(directory: Path, request: Request) -> dict[str, Any] | None:
    try:
        data = (directory / STATE_NAME).read_bytes()
        doc = parse_json(data, "the staging state", 16 << 20)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("request") != dict(request.doc):
        return None
    return doc


def _copy_whole(source: Path, out: Path) -> None:
    """A hard link to the segment, else a copy (``.tmp``, fsync, rename)."""
    out.unlink(missing_ok=True)
    try:
        os.link(source, out, follow_symlinks=False)
    except OSError:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.unlink(missing_ok=True)
        with source.open("rb") as src, tmp.open("xb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, out)
    fsync_dir(out.parent)


def _write_state(staged: Staged) -> None:
    write_atomic(staged.directory / STATE_NAME, json.dumps(_state_doc(staged)).encode(), 0o640)


def stage(
    request: Request, cfg: VehicleConfig, *, seam_ns: int = 1_000_000_000, cut: bool = True
) -> Staged:
    """Plan ``request``'s files in ``OUTPUT_DIR/.requests/ID/`` from the finalized segments
    still on disk, and cut them (unless ``cut`` is false: then :func:`cut_file` cuts each
    when it is needed, so that a large range never sits on the disk twice): one slice per
    segment (named ``ID_SEGMENT``), or the whole segments (hard-linked) with ``whole``;
    what the vehicle does not have is in :attr:`Staged.missing`.

    Idempotent: the plan and the finished files are kept in ``state.json``; called again
    after a crash it reuses them and redoes the file that was being cut. ``OSError`` of a
    full disk passes through, the state kept.
    """
    directory = safe_dir(safe_dir(Path(cfg.output_dir) / REQUESTS_DIR) / request.id)
    staged = Staged(request, directory)
    state = _read_state(directory, request)
    spans, staged.sources = segment_spans(cfg)
    if state is None:
        staged.missing = missing_parts(request.start_ns, request.end_ns, spans, seam_ns=seam_ns)
        for s in sorted((s for s in spans if s.on_disk), key=lambda s: (s.start_ns, s.name)):
            if s.start_ns <= request.end_ns and request.start_ns <= s.end_ns:
                name = f"{request.id}_{s.name}"
                lo, hi = max(s.start_ns, request.start_ns), min(s.end_ns, request.end_ns)
                staged.files.append(StagedFile(name, s.name, lo, hi, directory / name))
        _write_state(staged)
    else:
        staged.missing = [
            Gap(int(g["start_ns"]), int(g["end_ns"]), str(g["why"]))
            for g in state.get("missing", [])
        ]
        staged.files = [
            StagedFile(
                str(f["name"]),
                str(f["source"]),
                int(f["start_ns"]),
                int(f["end_ns"]),
                directory / str(f["name"]),
            )
            for f in state.get("files", [])
        ]
        staged.done = {str(f["name"]) for f in state.get("files", []) if f.get("done")}
    if cut:
        for f in list(staged.files):
            cut_file(staged, f, cfg)
    return staged


def cut_file(staged: Staged, f: StagedFile, cfg: VehicleConfig) -> bool:
    """Make sure ``f`` is cut (reused when finished before); ``False`` when it cannot be:
    its segment is gone (``evicted``) or unreadable (``damaged``), and it moves from
    :attr:`Staged.files` to :attr:`Staged.missing`. The state is saved either way."""
    if f.name in staged.done and f.path.is_file():
        return True
    staged.done.discard(f.name)
    why = _cut(staged.request, cfg, f, staged.sources.get(f.source))
    if why is None:
        staged.done.add(f.name)
    else:
        staged.files.remove(f)
        staged.missing.append(Gap(f.start_ns, f.end_ns, why))
        staged.missing.sort(key=lambda g: g.start_ns)
    _write_state(staged)
    return why is None


def _cut(request: Request, cfg: VehicleConfig, f: StagedFile, source: Path | None) -> str | None:
    """Write ``f`` from its segment; ``None`` when done, else why it is missing."""
    if source is None or not source.is_file():
        return "evicted"
    try:
        if request.whole:
            _copy_whole(source, f.path)
        else:
            slice_drive(
                [source],
                f.start_ns,
                f.end_ns,
                f.path,
                streams=request.streams,
                vehicle=cfg.vehicle_id,
                overwrite=True,
            )
    except FileNotFoundError:
        return "evicted"
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        _log.warning("request %s: cannot cut %s: %s", request.id, f.source, exc)
        return "damaged"
    except (HyperframesError, ValueError) as exc:
        _log.warning("request %s: cannot cut %s: %s", request.id, f.source, exc)
        return "damaged"
    return None


def destination_root(dest: Destination) -> str:
    """The key space of a destination: ``s3://BUCKET`` or its directory."""
    bucket = getattr(dest, "bucket", None)
    if bucket is not None:
        return f"s3://{bucket}"
    return str(getattr(dest, "root", ""))


def keys(staged: Staged, root: str) -> list[tuple[Path, str]]:
    """``(local path, object key)`` of each staged file: ``PREFIX/ID_SEGMENT`` under the
    request's ``dest`` inside the destination ``root`` (:func:`destination_root`)."""
    prefix = dest_key_prefix(staged.request.dest, root)
    if prefix is None:  # validate() refused it already; a state from another config
        raise UploadError("refused", f"{staged.request.dest} is not inside {root}")
    return [(f.path, "/".join(p for p in (prefix, f.name) if p)) for f in staged.files]


def sweep(cfg: VehicleConfig, waiting: set[str]) -> None:
    """Remove the staging folders of requests no longer waiting: answered (a kill after the
    result), or deleted by the depot before an answer."""
    root = Path(cfg.output_dir) / REQUESTS_DIR
    with contextlib.suppress(FileNotFoundError), os.scandir(root) as it:
        for e in it:
            if e.name not in waiting and e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path, ignore_errors=True)
