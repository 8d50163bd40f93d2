"""Requests from the depot: read them, cut the range, upload it verified, answer.

The depot writes ``URL/VEHICLE/ID.json`` (``hyperframes request``, formats in
:mod:`~hyperframes.recorder.upload.request_doc`); the vehicle's upload service reads the
requests under ``upload.requests: URL`` (``s3://B/requests`` on the same store as
``upload.dest``, or a directory), answers each once and writes ``URL/VEHICLE/ID.result.json``.
A request with a result is done.

API for the upload service (one call per poll; everything else is internal)::

    settings = RequestSettings.from_upload(up)          # None: upload.requests not set
    results = answer_once(cfg, settings, dest, pace=svc._pace, pace_in=svc._pace_in)
    # -> the result documents written in this call ([] when nothing was waiting)
    when = next_poll(time.monotonic(), failures, rng, interval_s=..., retry_max_s=...)

:func:`answer_once` lists the requests (module
:mod:`~hyperframes.recorder.upload.request_store`; an :class:`UploadError` of the link or
the store ends the call: count it as a failed poll for
:func:`~hyperframes.recorder.upload.request_doc.next_poll`; ``Stopping`` from ``pace``
passes through), answers malformed ones ``refused`` and old ones ``expired``, and for the
others, highest priority first: plans the range (module
:mod:`~hyperframes.recorder.upload.request_stage`, in ``OUTPUT_DIR/.requests/ID/``), then
one file at a time (so a large range never sits on the disk twice) cuts it (a slice per
segment, or the whole segment hard-linked with ``whole``), uploads it with ``dest.upload``
(a :class:`~hyperframes.recorder.upload.dest.Job` as ``UploadService.upload_one`` builds
it) to ``PREFIX/ID_SEGMENT`` under the request's ``dest`` (the file name carries the id,
so a multipart state the destination keeps in the service's ``.uploading/`` never meets
the segment's own), marks it in ``OUTPUT_DIR/.requests/ID/.uploaded/`` (never sent twice)
and deletes it; then writes the result (:func:`finish`) and removes the staging
folder. A request whose range is still being recorded waits. One request's failure (a file
the store refuses, a disk full while cutting) is logged and it is tried again at the next
poll; it never ends the service.

Crash safety: every step is idempotent. A kill while cutting leaves a ``.tmp`` that the
next stage redoes (finished files are reused, per the state file ``state.json``); a kill
after an upload finds its mark (or the object, adopted by the destination); a kill after
the result finds the result and only removes the staging folder.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.segments import list_segments
from hyperframes.recorder.upload.dest import PROOFS, Destination, Job
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.request_doc import (
    DEFAULT_MAX_RANGE_S,
    MAX_REQUEST_BYTES,
    Refusal,
    Request,
    Span,
    order_requests,
    refusal_doc,
    result_doc,
    validate,
)
from hyperframes.recorder.upload.request_stage import (
    REQUESTS_DIR,
    Staged,
    cut_file,
    destination_root,
    keys,
    segment_spans,
    stage,
    sweep,
)
from hyperframes.recorder.upload.request_store import RequestStore
from hyperframes.recorder.upload.sums import file_sums

__all__ = ["RequestSettings", "finish", "answer_once", "streams_known"]

_OPEN: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_log = logging.getLogger("hyperframes.recorder.upload.requests")


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """Where the requests are and how they are bounded."""

    url: str
    """``s3://BUCKET/PREFIX`` or a directory: requests are under ``URL/VEHICLE/``."""
    max_range_s: float = DEFAULT_MAX_RANGE_S
    """A longer range is refused."""
    part_bytes: int = 16 << 20
    """Multipart part size for the file sums (the destination's own wins when it has one)."""
    seam_ns: int = 1_000_000_000
    """Time between two segments up to this is no gap."""

    @classmethod
    def from_upload(cls, up: Any) -> RequestSettings | None:
        """From an ``UploadConfig`` (``up.requests``, ``up.requests_max_range_s`` when it has
        them); ``None`` when requests are off."""
        url = getattr(up, "requests", None)
        if not url:
            return None
        max_range = getattr(up, "requests_max_range_s", None) or DEFAULT_MAX_RANGE_S
        return cls(str(url), float(max_range), int(getattr(up, "part_bytes", 16 << 20)))


def _ready(request: Request, spans: Sequence[Span], recording: bool, now: dt.datetime) -> bool:
    """Whether the range can be answered now: it has passed, and it is not still being
    recorded (an unfinished segment exists and the range ends after the last finalized)."""
    now_ns = int(now.timestamp() * 1e9)
    if request.end_ns > now_ns:
        return False
    newest = max((s.end_ns for s in spans if s.on_disk), default=None)
    return not (recording and (newest is None or request.end_ns > newest))


def finish(
    store: RequestStore,
    staged: Staged,
    delivered: Mapping[str, Mapping[str, Any]],
    now: dt.datetime,
    root: str,
) -> dict[str, Any]:
    """Write the result (unless one is there) and remove the staging folder; the result.

    ``delivered``: the mark of each file of :attr:`Staged.files`, by file name, as the
    destination returned it (ValueError when one is missing: upload them all first).
    """
    by_name = {f.name: f for f in staged.files}
    out, missing = [], list(staged.missing)
    for path, key in keys(staged, root):
        f = by_name[path.name]
        mark = delivered.get(f.name)
        if mark is None:
            raise ValueError(f"{f.name} of request {staged.request.id} was not uploaded")
        out.append(
            {
                "key": key,
                "url": mark.get("url"),
                "bytes": mark.get("size"),
                "sha256": mark.get("sha256"),
                "verified": mark.get("verified"),
                "start_ns": f.start_ns,
                "end_ns": f.end_ns,
                "source": f.source,
            }
        )
    missing.sort(key=lambda g: g.start_ns)
    doc = result_doc(staged.request, out, missing, now)
    r = staged.request
    if not store.write_result(r.vehicle, r.id, doc):
        doc = store.result(r.vehicle, r.id) or doc
    shutil.rmtree(staged.directory, ignore_errors=True)
    return doc


def _upload(
    dest: Destination,
    path: Path,
    key: str,
    part_bytes: int,
    pace: Callable[[int], None],
    pace_in: Callable[[int], None] | None,
) -> dict[str, Any]:
    """Upload one staged file as ``UploadService.upload_one`` does; its mark."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        raise UploadError("unreadable", f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UploadError("unreadable", f"{path}: not a regular file")
        try:
            sums = file_sums(fd, part_bytes)
        except OSError as exc:
            raise UploadError("unreadable", f"{path}: {exc.strerror or exc}") from None
        doc = dest.upload(Job(path, fd, sums, key, pace, pace_in))
    finally:
        os.close(fd)
    if doc.get("verified") not in PROOFS:
        raise UploadError("unverifiable", f"{doc.get('url')}: no proof of {path.name}")
    return doc


def _no_pace(_n: int) -> None:
    return None


def streams_known(cfg: VehicleConfig) -> set[str]:
    """The stream names a request may ask for: the configured streams and ``events``."""
    from hyperframes.events import EVENT_STREAM_NAME  # noqa: PLC0415

    return {s.info.name for s in cfg.streams} | {EVENT_STREAM_NAME}


def answer_once(
    cfg: VehicleConfig,
    settings: RequestSettings,
    dest: Destination,
    *,
    store: RequestStore | None = None,
    now: Callable[[], dt.datetime] | None = None,
    pace: Callable[[int], None] = _no_pace,
    pace_in: Callable[[int], None] | None = None,
    on_uploaded: Callable[[str, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Answer every request of this vehicle that can be answered now; the results written.

    ``dest``: the upload service's destination (requests may only point inside it);
    ``store``: default a :class:`RequestStore` of ``settings.url`` using ``dest``'s boto3
    client when it has one; ``now``: the wall clock (UTC); ``pace``/``pace_in``: as a
    :class:`Job`'s; ``on_uploaded(key, mark)``: called after each file is uploaded and marked.
    Raises :class:`UploadError` for a failure of the link or the store (the poll failed).
    """
    clock = now or (lambda: dt.datetime.now(dt.UTC))
    if store is None:
        store = RequestStore(
            settings.url,
            client=getattr(dest, "client", None) if settings.url.startswith("s3://") else None,
        )
    root = destination_root(dest)
    part_bytes = int(getattr(dest, "part_size", settings.part_bytes))
    listed = store.list(cfg.vehicle_id)
    sweep(cfg, {x.id for x in listed if not x.answered})
    known = streams_known(cfg)
    results: list[dict[str, Any]] = []
    todo: list[Request] = []
    for item in listed:
        if item.answered:
            continue
        t = clock()
        if item.size > MAX_REQUEST_BYTES:
            got: Request | Refusal = Refusal(
                item.id,
                "refused",
                f"the request of {item.size} bytes is over the limit of {MAX_REQUEST_BYTES}",
            )
        else:
            raw = store.read(cfg.vehicle_id, item.id)
            if raw is None:
                continue  # deleted since the listing
            got = validate(
                raw,
                known,
                t,
                id=item.id,
                vehicle=cfg.vehicle_id,
                max_range_s=settings.max_range_s,
                dest_root=root,
            )
        if isinstance(got, Refusal):
            doc = refusal_doc(got, cfg.vehicle_id, t)
            if store.write_result(cfg.vehicle_id, item.id, doc):
                _log.warning("request %s %s: %s", item.id, got.status, got.reason)
                results.append(doc)
            shutil.rmtree(Path(cfg.output_dir) / REQUESTS_DIR / item.id, ignore_errors=True)
        else:
            todo.append(got)
    for request in order_requests(todo):
        try:
            answered = _answer(
                cfg,
                settings,
                dest,
                store,
                request,
                root,
                part_bytes,
                clock,
                pace,
                pace_in,
                on_uploaded,
            )
        except UploadError as exc:
            if not exc.per_segment:
                raise
            _log.warning(
                "request %s: upload failed (%s), tried again at the next poll: %s",
                request.id,
                exc.reason,
                exc,
            )
            continue
        except OSError as exc:
            _log.error(
                "request %s: cannot stage it (%s); tried again at the next poll",
                request.id,
                exc.strerror or exc,
            )
            continue
        if answered is not None:
            results.append(answered)
    return results


def _answer(
    cfg: VehicleConfig,
    settings: RequestSettings,
    dest: Destination,
    store: RequestStore,
    request: Request,
    root: str,
    part_bytes: int,
    clock: Callable[[], dt.datetime],
    pace: Callable[[int], None],
    pace_in: Callable[[int], None] | None,
    on_uploaded: Callable[[str, dict[str, Any]], None] | None,
) -> dict[str, Any] | None:
    """Stage, upload, finish one request; ``None`` when its range is still being recorded."""
    directory = Path(cfg.output_dir) / REQUESTS_DIR / request.id
    if not directory.is_dir():
        spans, _ = segment_spans(cfg)
        recording = bool(list_segments(cfg.output_dir, cfg.vehicle_id, unfinished=True))
        if not _ready(request, spans, recording, clock()):
            return None
    staged = stage(request, cfg, seam_ns=settings.seam_ns, cut=False)
    marks = MarkStore(staged.directory)
    where = {path.name: key for path, key in keys(staged, root)}
    delivered: dict[str, dict[str, Any]] = {}
    for f in list(staged.files):  # one file on the disk at a time: cut, upload, mark, drop
        key = where[f.name]
        mark = marks.uploaded(f.name)
        if mark is None:
            if not cut_file(staged, f, cfg):
                continue
            mark = _upload(dest, f.path, key, part_bytes, pace, pace_in)
            marks.mark_uploaded(f.name, mark)
            _log.info(
                "request %s: uploaded %s to %s (%s)",
                request.id,
                f.name,
                mark.get("url"),
                mark.get("verified"),
            )
            if on_uploaded is not None:
                on_uploaded(key, mark)
        delivered[f.name] = mark
        f.path.unlink(missing_ok=True)
    doc = finish(store, staged, delivered, clock(), root)
    _log.info(
        "request %s answered: %s, %d file(s), %d missing part(s)",
        request.id,
        doc.get("status"),
        len(doc.get("delivered", [])),
        len(doc.get("missing", [])),
    )
    return doc
