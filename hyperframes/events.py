"""Events: a named moment (a button, a message, a rule, a person) and what to keep around it.

An :class:`Event` has a time (sensor or host clock, like a frame), a name,
optional string tags, a JSON payload, and how much to keep around it
(``pre_s`` before, ``post_s`` after). They are stored in two places
(docs/FORMAT.md, "Events"):

- in the segment that holds their time, as frames of the stream
  :data:`EVENT_STREAM_NAME` (kind ``event``, encoding ``json``, id
  :data:`EVENT_STREAM_ID`), one UTF-8 JSON object per frame
  (:meth:`Event.to_json`), so every reader, ``info``, ``plot``, the MCAP
  export and the datasets can see them;
- in the output directory's event log :data:`EVENT_LOG_NAME`, JSON Lines
  appended with fsync by the recorder: ``{"type": "event", ...}`` for each
  event and ``{"type": "segment", "name", "start_ns", "end_ns"}`` for each
  finalized segment. It survives the deletion of segments, and the segments
  an event protects are a pure function of the two
  (:func:`protected_segments`).

Everything here is pure apart from :func:`read_event_log` and
:func:`read_file_events`; the recorder's writing side is
:mod:`hyperframes.recorder.events.log`.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframes.errors import HyperframesError
from hyperframes.format.jsontext import brief, check_json_value, parse_json
from hyperframes.format.streams import SensorKind, StreamInfo, TimestampSource

__all__ = [
    "EVENT_STREAM_ID",
    "EVENT_STREAM_NAME",
    "EVENT_LOG_NAME",
    "MAX_EVENT_BYTES",
    "MAX_LOG_LINE",
    "EventError",
    "Event",
    "RawJson",
    "SegmentSpan",
    "EventLog",
    "event_stream_info",
    "check_event_name",
    "parse_event_body",
    "protected_segments",
    "protection",
    "parse_log_line",
    "log_line",
    "read_event_log",
    "read_file_events",
    "event_windows",
    "EventRow",
    "list_events",
    "events_of_files",
]

EVENT_STREAM_ID: Final = 0xFFFF
"""The stream id of the event stream in a recorder's segments (the highest u16)."""
EVENT_STREAM_NAME: Final = "events"
EVENT_LOG_NAME: Final = "events.jsonl"
"""The event log in a recorder's output directory."""
MAX_EVENT_BYTES: Final = 64 * 1024
"""Largest accepted event: the message body as received, and the event as stored (JSON)."""
MAX_LOG_LINE: Final = MAX_EVENT_BYTES + 1024
"""Longest event-log line: a stored event plus its log fields (longer lines are unreadable)."""
MAX_TAGS: Final = 32
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_TAG_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_U64: Final = 1 << 64
_MAX_WINDOW_S: Final = 86_400.0
_KEYS = frozenset({"name", "tags", "payload", "pre_s", "post_s", "note"})


class RawJson(bytes):
    """A JSON value kept as its compact UTF-8 text, not as Python objects.

    What the recorder holds an event's ``payload`` as (``parse_event_body(...,
    raw_payload=True)``): a byte per byte of JSON, where parsed objects take up
    to 24 (``[{}, {}, ...]``: a dict each), so the event log's byte bound is a
    bound on memory too. :meth:`Event.to_json` and :func:`log_line` write it
    as it is; :meth:`Event.to_dict` parses it back.
    """

    __slots__ = ()


class EventError(HyperframesError, ValueError):
    """An event that cannot be accepted: ``problem`` says what is wrong with it."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Event:
    """One event. ``source`` says where it came from (``zmq``, ``mqtt``, ``mark``, ``rule``)."""

    t_ns: int
    name: str
    pre_s: float = 0.0
    post_s: float = 0.0
    tags: Mapping[str, str] = field(default_factory=dict)
    payload: Any = None
    source: str = ""
    clock: str = TimestampSource.HOST.value
    quarantined: bool = False

    @property
    def start_ns(self) -> int:
        """Start of the window this event keeps: ``t - pre_s``."""
        return self.t_ns - round(self.pre_s * 1e9)

    @property
    def end_ns(self) -> int:
        """End of the window this event keeps: ``t + post_s``."""
        return self.t_ns + round(self.post_s * 1e9)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this event (as stored in files and in the event log)."""
        d = self._fields()
        if self.payload is not None:
            d["payload"] = (parse_json(self.payload, "payload") if isinstance(self.payload, RawJson)
                            else self.payload)  # fmt: skip
        if self.quarantined:
            d["quarantined"] = True
        return d

    def _fields(self) -> dict[str, Any]:
        return {
            "t_ns": self.t_ns,
            "name": self.name,
            "pre_s": self.pre_s,
            "post_s": self.post_s,
            "tags": dict(self.tags),
            "source": self.source,
            "clock": self.clock,
        }

    def to_json(self, head: Mapping[str, Any] | None = None) -> bytes:
        """UTF-8 JSON, compact, keys in a fixed order (``head``'s keys first: the log's type).

        A :class:`RawJson` payload is written as it is, never parsed.
        """
        d = {**(head or {}), **self._fields()}
        if isinstance(self.payload, RawJson):
            tail = b',"payload":' + self.payload + (b',"quarantined":true}' if self.quarantined
                                                     else b"}")  # fmt: skip
            return _dumps(d)[:-1] + tail
        if self.payload is not None:
            d["payload"] = self.payload
        if self.quarantined:
            d["quarantined"] = True
        return _dumps(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Event:
        """Rebuild an event from :meth:`to_dict` output; raises :class:`EventError`."""
        try:
            t_ns = d["t_ns"]
            if type(t_ns) is not int or not 0 <= t_ns < _U64:
                raise EventError(f"t_ns must be an integer 0..2^64-1, got {brief(t_ns)}")
            body = _check_fields(d, allow={"t_ns", "source", "clock", "quarantined"})
            source, clock = d.get("source", ""), d.get("clock", TimestampSource.HOST.value)
            if type(source) is not str or type(clock) is not str or len(source + clock) > 64:
                raise EventError(f"source and clock must be short strings, got {brief(source)}, "
                                 f"{brief(clock)}")  # fmt: skip
            return cls(
                t_ns=t_ns,
                name=body["name"],
                pre_s=body.get("pre_s", 0.0),
                post_s=body.get("post_s", 0.0),
                tags=body.get("tags", {}),
                payload=body.get("payload"),
                source=source,
                clock=clock,
                quarantined=d.get("quarantined", False) is True,
            )
        except KeyError as exc:
            raise EventError(f"missing key {exc.args[0]!r}") from None

    @classmethod
    def from_json(cls, data: bytes | str) -> Event:
        """Parse :meth:`to_json` output; raises :class:`EventError`."""
        return cls.from_dict(_load_object(data))


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    """A segment file's name and the sensor time it covers, ``[start_ns, end_ns]``."""

    name: str
    start_ns: int
    end_ns: int

    def overlaps(self, start_ns: int, end_ns: int) -> bool:
        """Whether ``[start_ns, end_ns]`` and this span share any instant."""
        return self.start_ns <= end_ns and start_ns <= self.end_ns


@dataclass(frozen=True, slots=True)
class EventLog:
    """What an event log holds: events in log order, segment spans by name, bad lines."""

    events: tuple[Event, ...] = ()
    segments: Mapping[str, SegmentSpan] = field(default_factory=dict)
    bad_lines: int = 0


def event_stream_info() -> StreamInfo:
    """The stream table entry of the event stream in a recorder segment."""
    return StreamInfo(
        EVENT_STREAM_ID,
        EVENT_STREAM_NAME,
        SensorKind.EVENT,
        "json",
        timestamp_source=TimestampSource.HOST,
        extra={"schema": "hyperframes.event/1"},
    )


def check_event_name(name: object, what: str = "name") -> str:
    """``name`` if it is a valid event name (1-64 of letters, digits, ``_ . : -``)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise EventError(
            f"{what} {brief(name, 80)} must be 1-64 letters, digits, '_', '.', ':' or '-' "
            "(starting with a letter or digit)"
        )
    return name


def _check_seconds(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EventError(f"{key} must be a number of seconds, got {brief(value)}")
    # compared before any conversion: float() of a 400-digit integer raises OverflowError
    if not (0 <= value <= _MAX_WINDOW_S) or not math.isfinite(value):
        raise EventError(f"{key} must be between 0 and {_MAX_WINDOW_S:g} s, got {brief(value)}")
    return float(value)


def _check_tags(tags: object) -> dict[str, str]:
    if not isinstance(tags, Mapping):
        raise EventError(f"tags must be an object of strings, got {brief(tags)}")
    if len(tags) > MAX_TAGS:
        raise EventError(f"at most {MAX_TAGS} tags, got {len(tags)}")
    out: dict[str, str] = {}
    for k, val in tags.items():
        if not isinstance(k, str) or not _TAG_RE.fullmatch(k):
            raise EventError(
                f"tag key {brief(k, 80)} must be 1-64 letters, digits, '_', '.', ':' or '-'"
            )
        if not isinstance(val, str) or len(val) > 1024:
            raise EventError(f"tag {k!r} must be a string of at most 1024 characters")
        out[k] = val
    return out


def _check_fields(d: Mapping[str, Any], allow: Iterable[str] = ()) -> dict[str, Any]:
    """Validate the user-given fields of an event object; returns them normalised."""
    unknown = sorted(set(d) - _KEYS - set(allow))
    if unknown:
        raise EventError(
            f"unknown key {brief(unknown[0], 80)} (allowed: {', '.join(sorted(_KEYS))})"
        )
    if "name" not in d:
        raise EventError("missing key 'name'")
    out: dict[str, Any] = {"name": check_event_name(d["name"])}
    for key in ("pre_s", "post_s"):
        if key in d and d[key] is not None:
            out[key] = _check_seconds(d[key], key)
    tags = _check_tags(d.get("tags", {}) or {})
    if "note" in d:
        if not isinstance(d["note"], str) or len(d["note"]) > 1024:
            raise EventError("note must be a string of at most 1024 characters")
        tags["note"] = d["note"]
    out["tags"] = tags
    if "payload" in d:
        try:
            check_json_value([d["payload"]], "payload")
        except ValueError as exc:
            raise EventError(str(exc)) from None
        out["payload"] = d["payload"]
    return out


def _load_object(
    data: bytes | str | memoryview, max_bytes: int = MAX_EVENT_BYTES
) -> dict[str, Any]:
    """The JSON object of an event (:func:`~hyperframes.format.jsontext.parse_json`'s limits)."""
    try:
        obj = parse_json(data, "event", max_bytes)
    except ValueError as exc:
        raise EventError(str(exc)) from None
    if type(obj) is not dict:
        raise EventError(f"an event is a JSON object, got {type(obj).__name__}")
    return obj


def _dumps(d: Mapping[str, Any]) -> bytes:
    # ensure_ascii off: a stored event takes the bytes it arrived in, not up to 6 per character
    return json.dumps(d, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def parse_event_body(
    body: bytes | str | memoryview,
    t_ns: int,
    *,
    clock: str,
    source: str,
    defaults: Mapping[str, tuple[float, float]] | None = None,
    default: tuple[float, float] = (0.0, 0.0),
    raw_payload: bool = False,
) -> Event:
    """An event from a wire message's JSON body stamped ``t_ns`` (docs/INGEST.md, "Events").

    ``pre_s``/``post_s`` missing from the body come from ``defaults[name]``,
    else ``default``. ``raw_payload``: the payload is kept as :class:`RawJson`
    (the recorder: memory a byte per byte). Raises :class:`EventError` naming
    what is wrong.
    """
    d = _check_fields(_load_object(body))
    pre, post = (defaults or {}).get(d["name"], default)
    payload = d.get("payload")
    if raw_payload and payload is not None:
        payload = RawJson(_dumps(payload))
    event = Event(
        t_ns=t_ns,
        name=d["name"],
        pre_s=float(d.get("pre_s", pre)),
        post_s=float(d.get("post_s", post)),
        tags=d["tags"],
        payload=payload,
        source=source,
        clock=clock,
    )
    size = len(event.to_json())
    if size > MAX_EVENT_BYTES:  # numbers can grow when written back (1e9 -> 1000000000.0)
        raise EventError(f"event of {size} bytes as stored is over {MAX_EVENT_BYTES}")
    return event


def protected_segments(event: Event, spans: Iterable[SegmentSpan]) -> list[str]:
    """Names of the segments overlapping ``[t - pre_s, t + post_s]`` (none when quarantined)."""
    if event.quarantined:
        return []
    lo, hi = event.start_ns, event.end_ns
    return [s.name for s in spans if s.overlaps(lo, hi)]


def protection(events: Iterable[Event], spans: Iterable[SegmentSpan]) -> dict[str, list[Event]]:
    """Segment name -> the events that protect it (only protected segments are keys)."""
    span_list = sorted(spans, key=lambda s: s.start_ns)
    starts = [s.start_ns for s in span_list]
    reach = list(itertools.accumulate((s.end_ns for s in span_list), max))  # non-decreasing
    out: dict[str, list[Event]] = {}
    for ev in events:
        if ev.quarantined:
            continue
        lo, hi = ev.start_ns, ev.end_ns
        first = bisect.bisect_left(reach, lo)  # spans before it all end before lo
        stop = bisect.bisect_right(starts, hi)
        for s in span_list[first:stop]:
            if s.end_ns >= lo:
                out.setdefault(s.name, []).append(ev)
    return out


def parse_log_line(line: bytes | str) -> Event | SegmentSpan | None:
    """One event-log line as an :class:`Event` or a :class:`SegmentSpan`; None if unreadable.

    Total: whatever the bytes (a line cut by a crash, or written by someone
    else), the answer is a checked item or None, never an exception.
    """
    try:
        obj = _load_object(line, MAX_LOG_LINE)
        kind = obj.get("type")
        if kind == "event":
            return Event.from_dict({k: v for k, v in obj.items() if k != "type"})
        if kind == "segment":
            name, start, end = obj.get("name"), obj.get("start_ns"), obj.get("end_ns")
            if (type(name) is str and len(name) <= 255 and type(start) is int
                    and type(end) is int and 0 <= start <= end < _U64):  # fmt: skip
                return SegmentSpan(name, start, end)
    except EventError:
        pass
    return None


def log_line(item: Event | SegmentSpan) -> bytes:
    """The event-log line (JSON, newline-terminated) of an event or a segment span."""
    if isinstance(item, Event):
        return item.to_json({"type": "event"}) + b"\n"
    d = {"type": "segment", "name": item.name, "start_ns": item.start_ns, "end_ns": item.end_ns}
    return _dumps(d) + b"\n"


def read_event_log(directory: str | os.PathLike[str]) -> EventLog:
    """Read ``DIR/events.jsonl`` (a missing log is empty; unreadable lines are counted, skipped).

    A line cut short by a crash (the last one) is one bad line; every
    complete line before it counts.
    """
    path = Path(directory) / EVENT_LOG_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return EventLog()
    events: list[Event] = []
    segments: dict[str, SegmentSpan] = {}
    bad = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        item = parse_log_line(line)
        if item is None:
            bad += 1
        elif isinstance(item, Event):
            events.append(item)
        else:
            segments[item.name] = item
    return EventLog(tuple(events), segments, bad)


def read_file_events(path: str | os.PathLike[str]) -> list[Event]:
    """The events stored in one hyperframe file (every stream of kind ``event``), by time."""
    from hyperframes.reader import HyperframeReader  # noqa: PLC0415 - avoid an import cycle

    out: list[Event] = []
    with HyperframeReader(path, verify=False) as r:
        for sid, info in r.streams.items():
            if info.kind != SensorKind.EVENT or info.encoding != "json":
                continue
            for frame in r.frames(sid):
                try:
                    out.append(Event.from_json(frame.tobytes()))
                except EventError:
                    continue  # a foreign event stream with another schema
    out.sort(key=lambda e: e.t_ns)
    return out


def event_windows(
    events: Sequence[Event], name: str, pre_s: float | None = None, post_s: float | None = None
) -> list[tuple[int, int]]:
    """``(start_ns, end_ns)`` around every event named ``name``, merged where they overlap.

    ``pre_s``/``post_s`` override each event's own.
    """
    spans = sorted(
        (
            e.t_ns - round((e.pre_s if pre_s is None else pre_s) * 1e9),
            e.t_ns + round((e.post_s if post_s is None else post_s) * 1e9),
        )
        for e in events
        if e.name == name
    )
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event as ``hyperframes events`` lists it: the segments it protects, which remain."""

    event: Event
    segments: tuple[str, ...]
    existing: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the event's fields plus ``segments`` and ``existing``."""
        return {**self.event.to_dict(), "segments": list(self.segments),
                "existing": list(self.existing)}  # fmt: skip


def list_events(path: str | os.PathLike[str], name: str | None = None) -> list[EventRow]:
    """The events of a recorder's output directory (its event log) or of one file, by time.

    A directory without an event log lists the events stored in its ``*.hf``
    files. ``name`` keeps only events of that name. Raises
    ``FileNotFoundError`` for a path that does not exist.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    rows: list[EventRow] = []
    if p.is_dir() and (p / EVENT_LOG_NAME).exists():
        log = read_event_log(p)
        on_disk = {f.name for f in p.iterdir()}
        spans = sorted(log.segments.values(), key=lambda s: s.start_ns)
        for ev in log.events:
            segs = tuple(protected_segments(ev, spans))
            rows.append(EventRow(ev, segs, tuple(n for n in segs if n in on_disk)))
    else:
        files = sorted(p.glob("*.hf")) if p.is_dir() else [p]
        for f in files:
            rows += [EventRow(ev, (f.name,), (f.name,)) for ev in read_file_events(f)]
    rows = [r for r in rows if name is None or r.event.name == name]
    rows.sort(key=lambda r: r.event.t_ns)
    return rows


def events_of_files(paths: Iterable[str | os.PathLike[str]]) -> list[Event]:
    """Every event of these files' event streams and of their directories' event logs, by time.

    An event found in both (or in several files) counts once; the log also
    knows events whose own segment was deleted.
    """
    seen: dict[tuple[int, str], Event] = {}
    dirs: set[Path] = set()
    for path in paths:
        p = Path(path)
        dirs.add(p.parent)
        for ev in read_file_events(p):
            seen.setdefault((ev.t_ns, ev.name), ev)
    for d in sorted(dirs):
        for ev in read_event_log(d).events:
            seen.setdefault((ev.t_ns, ev.name), ev)
    return sorted(seen.values(), key=lambda e: e.t_ns)
