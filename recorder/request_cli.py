"""``hyperframes request``: ask a vehicle for a time range, and see what was asked and got.

.. code-block:: sh

    hyperframes request veh-0042 --start 2026-12-03T12:00:00Z --end 2026-12-03T12:01:00Z \\
        --streams cam_front,imu --dest s3://fleet/requested        # -> s3://fleet/requests/veh-0042/ID.json
    hyperframes request --status veh-0042 --requests s3://fleet/requests

Registered by :func:`hyperframes.recorder.cli.register`. Formats: module
:mod:`hyperframes.recorder.upload.request_doc`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from typing import Any

from hyperframes.cli.common import EXIT_FAILED, CommandError
from hyperframes.format.times import format_utc, parse_duration, parse_time
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.request_doc import (
    DEFAULT_EXPIRES_S,
    new_request_id,
    request_doc,
)
from hyperframes.storage.objects import split_s3_url

__all__ = ["register", "default_requests_url"]


def default_requests_url(dest: str) -> str | None:
    """``s3://BUCKET/requests`` for a destination in ``BUCKET``; ``None`` for a directory."""
    if not dest.startswith("s3://"):
        return None
    bucket, _ = split_s3_url(dest)
    return f"s3://{bucket}/requests"


def _time(flag: str, text: str) -> int:
    try:
        t = parse_time(text, 0)
        relative = t != parse_time(text, 1)  # seconds from a start: there is no start here
    except ValueError as exc:
        raise CommandError(f"{flag}: {exc}") from None
    if relative:
        raise CommandError(f"{flag} {text}: give an absolute time (ISO 8601, Unix seconds or ns)")
    return t


def _store(url: str) -> Any:
    from hyperframes.recorder.upload.request_store import RequestStore  # noqa: PLC0415 - boto3 lazily

    try:
        return RequestStore(url)
    except ValueError as exc:
        raise CommandError(f"--requests: {exc}") from None


def _write(args: argparse.Namespace) -> int:
    if args.start is None or args.end is None or args.dest is None:
        raise CommandError("a request needs --start, --end and --dest (or --status to list)")
    url = args.requests or default_requests_url(args.dest)
    if url is None:
        raise CommandError("--requests: give the requests folder for a directory --dest")
    try:
        expires_s = parse_duration(args.expires) if args.expires else DEFAULT_EXPIRES_S
        if args.dest.startswith("s3://"):
            split_s3_url(args.dest)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    streams = [s.strip() for s in args.streams.split(",") if s.strip()] if args.streams else None
    now = dt.datetime.now(dt.UTC)
    rid = new_request_id(now, random.SystemRandom())
    try:
        doc = request_doc(
            id=rid,
            vehicle=args.vehicle,
            start_ns=_time("--start", args.start),
            end_ns=_time("--end", args.end),
            dest=args.dest,
            created_at=now,
            expires_s=expires_s,
            streams=streams,
            whole=args.whole,
            priority=args.priority,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    try:
        where = _store(url).write_request(doc)
    except UploadError as exc:
        raise CommandError(str(exc), EXIT_FAILED) from None
    print(f"{rid}\t{where}")
    return 0


def _summary(req: dict[str, Any] | None, res: dict[str, Any] | None, rid: str) -> dict[str, Any]:
    row: dict[str, Any] = {"id": rid, "status": "waiting"}
    src = req if isinstance(req, dict) else res or {}
    for k in ("vehicle", "start_ns", "end_ns", "streams", "whole", "priority", "dest"):
        if k in src:
            row[k] = src[k]
    if res is not None:
        row["status"] = res.get("status")
        listed = res.get("delivered")
        delivered: list[Any] = listed if isinstance(listed, list) else []
        row["delivered_files"] = len(delivered)
        row["delivered_bytes"] = sum(
            int(d.get("bytes") or 0) for d in delivered if isinstance(d, dict)
        )
        row["missing"] = res.get("missing") if isinstance(res.get("missing"), list) else []
        row["reason"] = res.get("reason")
        row["answered_at"] = res.get("answered_at")
    return row


def _missing_text(row: dict[str, Any]) -> str:
    parts = []
    for m in row.get("missing") or []:
        try:
            parts.append(f"{m['why']} {(int(m['end_ns']) - int(m['start_ns'])) / 1e9:.1f}s")
        except (KeyError, TypeError, ValueError):
            continue
    return ", ".join(parts) or "-"


def _status(args: argparse.Namespace) -> int:
    from hyperframes.format.jsontext import parse_json  # noqa: PLC0415

    if args.requests is None:
        raise CommandError("--status needs --requests URL (s3://BUCKET/requests or a folder)")
    store = _store(args.requests)
    rows = []
    try:
        vehicles = [args.vehicle] if args.vehicle else store.vehicles()
        for v in vehicles:
            for item in store.list(v):
                raw = store.read(v, item.id)
                req = None
                if raw is not None:
                    try:
                        req = parse_json(raw, "the request", 1 << 16)
                    except ValueError:
                        req = None
                res = store.result(v, item.id) if item.answered else None
                rows.append({"vehicle": v, **_summary(req, res, item.id)})
    except UploadError as exc:
        raise CommandError(str(exc), EXIT_FAILED) from None
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("VEHICLE\tID\tSTART\tSECONDS\tSTATUS\tFILES\tBYTES\tMISSING")
    for r in rows:
        start, end = r.get("start_ns"), r.get("end_ns")
        ok = isinstance(start, int) and isinstance(end, int)
        span = f"{(end - start) / 1e9:.1f}" if ok else "-"  # type: ignore[operator]
        when = format_utc(start) if isinstance(start, int) and start >= 0 else "-"
        status = r["status"] + (f" ({r['reason']})" if r.get("reason") else "")
        print(
            f"{r['vehicle']}\t{r['id']}\t{when}\t{span}\t{status}\t"
            f"{r.get('delivered_files', '-')}\t{r.get('delivered_bytes', '-')}\t"
            f"{_missing_text(r)}"
        )
    return 0


def _request(args: argparse.Namespace) -> int:
    if args.status:
        return _status(args)
    if not args.vehicle:
        raise CommandError("name the VEHICLE to ask (or --status to list requests)")
    return _write(args)


def register(subparsers: Any) -> None:
    """Add ``request`` to ``hyperframes``."""
    p = subparsers.add_parser(
        "request", help="ask a vehicle to upload a time range; --status lists requests and results"
    )
    p.add_argument("vehicle", nargs="?", metavar="VEHICLE", help="the vehicle id")
    p.add_argument("--start", metavar="T", help="ISO 8601, Unix seconds or ns since the epoch")
    p.add_argument("--end", metavar="T", help="end of the range (same forms)")
    p.add_argument("--streams", metavar="A,B", help="only these streams (default: all)")
    p.add_argument("--whole", action="store_true", help="whole segments instead of slices")
    p.add_argument("--priority", type=int, default=10, metavar="N", help="0..100, higher first")
    p.add_argument("--expires", metavar="DUR", help="e.g. 7d (default), 12h, 30m")
    p.add_argument("--dest", metavar="URL", help="where the data goes: s3://BUCKET/PREFIX")
    p.add_argument(
        "--requests",
        metavar="URL",
        help="the requests folder (default: s3://BUCKET/requests of --dest)",
    )
    p.add_argument("--status", action="store_true", help="list requests and their results")
    p.add_argument("--json", action="store_true", help="--status as JSON")
    p.set_defaults(handler=_request)
