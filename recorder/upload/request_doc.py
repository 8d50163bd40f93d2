"""Requests from the depot, pure: the request and result documents, their checks, what is
missing from a range, and when to poll again. No I/O here (request_store.py, request_stage.py
and requests.py beside it do it).

A **request** (``s3://B/requests/VEHICLE/ID.json``, written by ``hyperframes request``)::

    {"format": "hyperframes.request/1", "id": "20261203T120000Z-ab12cd", "vehicle": "veh-0042",
     "start_ns": 1764763200000000000, "end_ns": 1764763260000000000,
     "streams": ["cam_front", "imu"],         # null: every stream
     "whole": false,                          # true: the whole segments, not slices
     "priority": 10,                          # higher first (0..100)
     "created_at": "2026-12-03T12:00:00Z", "expires_at": "2026-12-10T12:00:00Z",
     "dest": "s3://B/PREFIX"}

A **result** (``ID.result.json`` beside it; a request with a result is done)::

    {"format": "hyperframes.request-result/1", "id": ..., "vehicle": ...,
     "status": "delivered" | "partial" | "missing" | "expired" | "refused",
     "reason": "...",                         # refused / expired only
     "start_ns": ..., "end_ns": ...,          # the range asked for (when it could be read)
     "delivered": [{"key", "url", "bytes", "sha256", "start_ns", "end_ns", "source"}],
     "missing": [{"start_ns", "end_ns", "why"}],   # why: evicted | gap | before-recording
                                                   #      | after-recording | damaged
     "answered_at": "2026-12-03T12:03:10Z"}
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hyperframes.format.jsontext import parse_json
from hyperframes.storage.objects import split_s3_url

__all__ = [
    "REQUEST_FORMAT",
    "RESULT_FORMAT",
    "STATUSES",
    "MISSING_WHY",
    "MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RANGE_S",
    "DEFAULT_EXPIRES_S",
    "Request",
    "Refusal",
    "Span",
    "Gap",
    "new_request_id",
    "valid_id",
    "request_doc",
    "validate",
    "iso",
    "missing_parts",
    "result_doc",
    "refusal_doc",
    "status_of",
    "next_poll",
    "dest_key_prefix",
    "order_requests",
]

REQUEST_FORMAT: Final = "hyperframes.request/1"
RESULT_FORMAT: Final = "hyperframes.request-result/1"
STATUSES: Final = ("delivered", "partial", "missing", "expired", "refused")
MISSING_WHY: Final = ("evicted", "gap", "before-recording", "after-recording", "damaged")
MAX_REQUEST_BYTES: Final = 64 * 1024
"""A request object larger than this is refused unread."""
DEFAULT_MAX_RANGE_S: Final = 24 * 3600.0
DEFAULT_EXPIRES_S: Final = 7 * 24 * 3600.0
MAX_STREAMS: Final = 256
_ID_RE: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,99}")
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_VEHICLE_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_U63: Final = (1 << 63) - 1
_KEYS: Final = frozenset(
    {
        "format",
        "id",
        "vehicle",
        "start_ns",
        "end_ns",
        "streams",
        "whole",
        "priority",
        "created_at",
        "expires_at",
        "dest",
        "note",
    }
)


@dataclass(frozen=True, slots=True)
class Request:
    """A valid request: the range ``[start_ns, end_ns]`` of ``vehicle``, to ``dest``."""

    id: str
    vehicle: str
    start_ns: int
    end_ns: int
    streams: tuple[str, ...] | None
    whole: bool
    priority: int
    expires_at: dt.datetime
    dest: str
    doc: Mapping[str, Any]
    """The document as read (kept in the staging state)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request answered without data: ``status`` is ``refused`` or ``expired``."""

    id: str
    status: str
    reason: str
    start_ns: int | None = None
    end_ns: int | None = None


@dataclass(frozen=True, slots=True)
class Span:
    """A segment's sensor time ``[start_ns, end_ns]``; ``on_disk``: still on the vehicle."""

    name: str
    start_ns: int
    end_ns: int
    on_disk: bool


@dataclass(frozen=True, slots=True)
class Gap:
    """A part of a request's range the vehicle cannot deliver, and why (:data:`MISSING_WHY`)."""

    start_ns: int
    end_ns: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"start_ns": self.start_ns, "end_ns": self.end_ns, "why": self.why}


def iso(when: dt.datetime) -> str:
    """``2026-12-03T12:00:00Z`` (UTC, whole seconds)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def new_request_id(now: dt.datetime, rng: random.Random) -> str:
    """A time-sortable, unique id: ``20261203T120000Z-ab12cd`` (UTC, then 6 random chars)."""
    tail = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6))
    return f"{now.astimezone(dt.UTC):%Y%m%dT%H%M%S}Z-{tail}"


def valid_id(text: str) -> bool:
    """Whether ``text`` can be a request id (an object name part: no ``/``, no leading dot)."""
    return bool(_ID_RE.fullmatch(text)) and not text.endswith(".result")


def request_doc(
    *,
    id: str,
    vehicle: str,
    start_ns: int,
    end_ns: int,
    dest: str,
    created_at: dt.datetime,
    expires_s: float = DEFAULT_EXPIRES_S,
    streams: Sequence[str] | None = None,
    whole: bool = False,
    priority: int = 10,
) -> dict[str, Any]:
    """A request document (what ``hyperframes request`` writes); ValueError when it would be
    refused on its face (the vehicle still checks it against what it records)."""
    if not _VEHICLE_RE.fullmatch(vehicle):
        raise ValueError(f"vehicle {vehicle[:40]!r}: letters, digits, _ . - (at most 128)")
    doc = {
        "format": REQUEST_FORMAT,
        "id": id,
        "vehicle": vehicle,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "streams": list(streams) if streams else None,
        "whole": whole,
        "priority": priority,
        "created_at": iso(created_at),
        "expires_at": iso(created_at + dt.timedelta(seconds=expires_s)),
        "dest": dest,
    }
    got = validate(doc, None, created_at, id=id, vehicle=vehicle, max_range_s=None)
    if isinstance(got, Refusal):
        raise ValueError(got.reason)
    return doc


def _int_ns(doc: Mapping[str, Any], key: str) -> int | str:
    value = doc.get(key)
    if type(value) is not int or not 0 <= value <= _U63:
        return f"{key} must be an integer of ns since the epoch, got {str(value)[:40]!r}"
    return value


def validate(
    raw: bytes | Mapping[str, Any],
    streams_known: Collection[str] | None,
    now: dt.datetime,
    *,
    id: str,
    vehicle: str,
    max_range_s: float | None = DEFAULT_MAX_RANGE_S,
    dest_root: str | None = None,
) -> Request | Refusal:
    """The :class:`Request` in ``raw`` (bytes as read, or a parsed document), or why it is
    answered without data: a :class:`Refusal` ``refused`` (its reason) or ``expired``.

    ``streams_known``: the stream names this vehicle records (``None``: not checked);
    ``max_range_s``: the longest range (``None``: no bound); ``dest_root``: the vehicle's
    upload destination, which the request's ``dest`` must lie in (``None``: not checked).
    """

    def refuse(reason: str, lo: int | None = None, hi: int | None = None) -> Refusal:
        return Refusal(id, "refused", reason, lo, hi)

    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            doc = parse_json(raw, "the request", MAX_REQUEST_BYTES)
        except ValueError as exc:
            return refuse(str(exc)[:300])
    else:
        doc = raw
    if not isinstance(doc, Mapping):
        return refuse(f"the request is not a JSON object (a {type(doc).__name__})")
    if doc.get("format") != REQUEST_FORMAT:
        return refuse(f"format must be {REQUEST_FORMAT!r}, got {str(doc.get('format'))[:40]!r}")
    unknown = sorted(str(k)[:40] for k in doc if k not in _KEYS)
    if unknown:
        return refuse(f"unknown field(s): {', '.join(unknown[:5])}")
    if doc.get("id") != id:
        return refuse(f"id {str(doc.get('id'))[:40]!r} is not the object's name {id!r}")
    if doc.get("vehicle") != vehicle:
        return refuse(f"vehicle {str(doc.get('vehicle'))[:40]!r} is not this vehicle ({vehicle})")
    start, end = _int_ns(doc, "start_ns"), _int_ns(doc, "end_ns")
    if isinstance(start, str):
        return refuse(start)
    if isinstance(end, str):
        return refuse(end)
    if start >= end:
        return refuse(f"start_ns {start} is not before end_ns {end}", start, end)
    if max_range_s is not None and end - start > max_range_s * 1e9:
        return refuse(
            f"a range of {(end - start) / 3.6e12:.1f} h is over the limit of "
            f"{max_range_s / 3600:g} h; ask for several smaller ranges",
            start,
            end,
        )
    streams = doc.get("streams")
    names: tuple[str, ...] | None = None
    if streams is not None:
        if not isinstance(streams, list) or not streams or len(streams) > MAX_STREAMS:
            return refuse("streams must be null or a list of 1 to 256 names", start, end)
        if not all(isinstance(s, str) and _NAME_RE.fullmatch(s) for s in streams):
            return refuse("streams must be stream names (letters, digits, _ . : -)", start, end)
        names = tuple(dict.fromkeys(streams))
        if streams_known is not None:
            bad = [s for s in names if s not in streams_known]
            if bad:
                known = ", ".join(sorted(streams_known))
                return refuse(f"unknown stream(s) {', '.join(bad)}; streams: {known}", start, end)
    whole = doc.get("whole", False)
    if type(whole) is not bool:
        return refuse("whole must be true or false", start, end)
    priority = doc.get("priority", 10)
    if type(priority) is not int or not 0 <= priority <= 100:
        return refuse("priority must be an integer 0..100", start, end)
    expires = _parse_iso(doc.get("expires_at"))
    if expires is None:
        return refuse("expires_at must be an ISO 8601 time", start, end)
    dest = doc.get("dest")
    if not isinstance(dest, str) or not dest or len(dest) > 1024:
        return refuse("dest must be s3://BUCKET/PREFIX or a directory", start, end)
    if dest_root is not None and dest_key_prefix(dest, dest_root) is None:
        return refuse(f"dest {dest[:200]} is not inside this vehicle's destination", start, end)
    if expires < now:
        return Refusal(id, "expired", f"expired at {iso(expires)}", start, end)
    return Request(id, vehicle, start, end, names, whole, priority, expires, dest, dict(doc))


def _clean_parts(path: str) -> list[str] | None:
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") or "\\" in p or "\x00" in p for p in parts):
        return None
    return parts


def dest_key_prefix(dest: str, root: str) -> str | None:
    """The key prefix of ``dest`` inside the destination ``root`` (its key space: a bucket's
    keys for ``s3://``, the path under a directory), or ``None`` when ``dest`` is not in it.

    The vehicle writes only where its own upload destination is: a request cannot point
    it at another bucket or another directory.
    """
    if root.startswith("s3://"):
        if not dest.startswith("s3://"):
            return None
        try:
            bucket, key = split_s3_url(dest)
            root_bucket, _ = split_s3_url(root)
        except ValueError:
            return None
        parts = _clean_parts(key)
        return "/".join(parts) if bucket == root_bucket and parts is not None else None
    if dest.startswith("s3://"):
        return None
    dest = dest.removeprefix("file://")
    r, d = _clean_parts(root), _clean_parts(dest)
    if r is None or d is None or not dest.startswith("/") or d[: len(r)] != r:
        return None
    return "/".join(d[len(r) :])


def order_requests(requests: Iterable[Request]) -> list[Request]:
    """Answer order: highest priority first, then oldest (ids sort by time)."""
    return sorted(requests, key=lambda r: (-r.priority, r.id))


def missing_parts(
    start_ns: int, end_ns: int, spans: Sequence[Span], *, seam_ns: int = 1_000_000_000
) -> list[Gap]:
    """The parts of ``[start_ns, end_ns]`` no segment on disk covers, each with its reason.

    ``spans``: every segment known (on disk, and those the event log remembers that were
    deleted). Time between segments on disk up to ``seam_ns`` is a seam, not a gap. An
    uncovered part is ``evicted`` where a deleted segment covered it, ``before-recording``
    before the first segment known, ``after-recording`` after the last one, else ``gap``.
    """
    disk = sorted((s.start_ns, s.end_ns) for s in spans if s.on_disk)
    covered: list[list[int]] = []
    for a, b in disk:
        if covered and a <= covered[-1][1] + seam_ns:
            covered[-1][1] = max(covered[-1][1], b)
        else:
            covered.append([a, b])
    holes: list[tuple[int, int]] = []
    cur = start_ns
    for a, b in covered:
        if b < cur:
            continue
        if a > end_ns:
            break
        if a > cur:
            holes.append((cur, a - 1))
        cur = max(cur, b + 1)
    if cur <= end_ns:
        holes.append((cur, end_ns))
    gone = sorted((s.start_ns, s.end_ns) for s in spans if not s.on_disk)
    first = min((s.start_ns for s in spans), default=None)
    last = max((s.end_ns for s in spans), default=None)
    out: list[Gap] = []
    for lo, hi in holes:
        for a, b, why in _split(lo, hi, gone, first, last):
            if out and out[-1].why == why and out[-1].end_ns + 1 >= a:
                out[-1] = Gap(out[-1].start_ns, b, why)
            else:
                out.append(Gap(a, b, why))
    return out


def _split(
    lo: int, hi: int, gone: Sequence[tuple[int, int]], first: int | None, last: int | None
) -> list[tuple[int, int, str]]:
    """``[lo, hi]`` cut into evicted parts and the rest (before, after, or a gap)."""
    pieces: list[tuple[int, int, str]] = []
    cur = lo
    for a, b in gone:
        if b < cur or a > hi:
            continue
        if a > cur:
            pieces.extend(_plain(cur, a - 1, first, last))
        pieces.append((max(a, cur), min(b, hi), "evicted"))
        cur = min(b, hi) + 1
        if cur > hi:
            break
    if cur <= hi:
        pieces.extend(_plain(cur, hi, first, last))
    return pieces


def _plain(lo: int, hi: int, first: int | None, last: int | None) -> list[tuple[int, int, str]]:
    if first is None or last is None:
        return [(lo, hi, "before-recording")]
    out = []
    if lo < first:
        out.append((lo, min(hi, first - 1), "before-recording"))
        lo = first
    if hi > last:
        if lo <= last:
            out.append((lo, last, "gap"))
        out.append((max(lo, last + 1), hi, "after-recording"))
    elif lo <= hi:
        out.append((lo, hi, "gap"))
    return out


def status_of(delivered: Sequence[Any], missing: Sequence[Any]) -> str:
    """``delivered`` (all of it), ``partial`` (some) or ``missing`` (nothing)."""
    if not delivered:
        return "missing"
    return "partial" if missing else "delivered"


def result_doc(
    request: Request,
    delivered: Sequence[Mapping[str, Any]],
    missing: Sequence[Gap | Mapping[str, Any]],
    answered_at: dt.datetime,
) -> dict[str, Any]:
    """The result of a request answered with data (or with nothing: ``missing``)."""
    gaps = [m.to_dict() if isinstance(m, Gap) else dict(m) for m in missing]
    return {
        "format": RESULT_FORMAT,
        "id": request.id,
        "vehicle": request.vehicle,
        "status": status_of(delivered, gaps),
        "start_ns": request.start_ns,
        "end_ns": request.end_ns,
        "streams": list(request.streams) if request.streams else None,
        "whole": request.whole,
        "delivered": [dict(d) for d in delivered],
        "missing": gaps,
        "answered_at": iso(answered_at),
    }


def refusal_doc(refusal: Refusal, vehicle: str, answered_at: dt.datetime) -> dict[str, Any]:
    """The result of a request answered ``refused`` or ``expired``."""
    return {
        "format": RESULT_FORMAT,
        "id": refusal.id,
        "vehicle": vehicle,
        "status": refusal.status,
        "reason": refusal.reason,
        "start_ns": refusal.start_ns,
        "end_ns": refusal.end_ns,
        "delivered": [],
        "missing": [],
        "answered_at": iso(answered_at),
    }


def next_poll(
    now: float,
    failures: int,
    rng: random.Random,
    *,
    interval_s: float = 60.0,
    retry_max_s: float = 900.0,
) -> float:
    """When to list the requests again (same clock as ``now``, seconds).

    No failures: ``interval_s`` with +-20 % jitter (a fleet does not poll in lockstep).
    After ``failures`` consecutive failed polls: exponential backoff from ``interval_s``
    with full jitter, capped at ``retry_max_s`` (never sooner than 1 s). The service also
    polls at once when the link comes back (``upload.when`` turning to go).
    """
    if failures <= 0:
        return now + interval_s * rng.uniform(0.8, 1.2)
    ceiling = min(retry_max_s, interval_s * 2.0 ** min(failures, 30))
    return now + max(1.0, rng.uniform(0.0, ceiling))
