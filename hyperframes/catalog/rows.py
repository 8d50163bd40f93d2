"""A segment's catalog rows, from what opening it told. Pure: no I/O.

:class:`SegmentFacts` holds what a segment's open gives (header, metadata,
stream table, index, window table, missing windows, events) plus what its
store says (size, ETag, modification time); :func:`segment_rows` turns it into
rows of ``segments``, ``streams`` and ``events``, each with its partition;
:func:`problem_row` describes one that could not be read. :func:`tables`
batches rows into one Arrow table per (table, vehicle, date).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
import pyarrow as pa

from hyperframes.catalog.schema import (
    SCHEMAS,
    UNKNOWN_VEHICLE,
    date_of,
    event_id,
    fingerprint,
    partition_dir,
)
from hyperframes.events import Event, RawJson
from hyperframes.format.codecs import CODEC_NAMES
from hyperframes.format.jsontext import parse_json
from hyperframes.format.layout import CODEC_MASK, CODEC_SHIFT, WINDOW_FLAG_HAS_LATE, Header
from hyperframes.format.naming import parse_segment_name
from hyperframes.format.streams import PRECOMPRESSED_ENCODINGS, FileMetadata, StreamInfo

__all__ = [
    "SegmentFacts",
    "Row",
    "vehicle_of",
    "segment_rows",
    "problem_row",
    "problem_partition",
    "tables",
    "one_line",
]

_PROBLEM_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    """What one segment's open told, and what its store says about it."""

    uri: str
    """The segment's key in the catalog: ``s3://B/K`` or an absolute path."""
    header: Header
    metadata: FileMetadata
    streams: Sequence[StreamInfo]
    index: np.ndarray
    """The index (INDEX_DTYPE): flags and payload sizes of every frame."""
    windows: np.ndarray
    """The window table (WINDOW_DTYPE)."""
    missing: Mapping[int, Sequence[int]]
    """Window id -> stream ids that delivered nothing there."""
    events: Sequence[Event]
    size: int
    etag: str | None = None
    modified_ns: int | None = None
    sha256: str | None = None

    @property
    def name(self) -> str:
        """The file name (the last part of the path or key)."""
        return self.uri.rstrip("/").rpartition("/")[2]


class Row(NamedTuple):
    """One row and where it goes: its table and partition."""

    table: str
    vehicle: str
    date: str
    row: dict[str, Any]


def _partition_ok(vehicle: str) -> bool:
    try:
        partition_dir("segments", vehicle, "1970-01-01")
    except ValueError:
        return False
    return True


def vehicle_of(name: str, metadata: FileMetadata | None = None) -> str:
    """The ``vehicle`` partition of a segment: from its file name
    (``{vehicle}_{stamp}Z_{seq}.hf``), else its metadata's vehicle id, else
    :data:`UNKNOWN_VEHICLE`."""
    parsed = parse_segment_name(name)
    if parsed is not None and _partition_ok(parsed.vehicle):
        return parsed.vehicle
    vid = metadata.vehicle_id if metadata is not None else ""
    if vid and vid != "unknown" and _partition_ok(vid):
        return vid
    return UNKNOWN_VEHICLE


def one_line(exc: BaseException) -> str:
    """An error as one short line (its first line, at most 300 characters)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= _PROBLEM_CHARS else text[: _PROBLEM_CHARS - 3] + "..."


def _conversion(extra: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Whether the converter wrote the file (its ``conversion`` record), and from what."""
    record = extra.get("conversion")
    if not isinstance(record, dict):
        return False, None
    src = record.get("source")
    if isinstance(src, dict):
        name = src.get("uri") or src.get("name")
        return True, name if isinstance(name, str) else None
    return True, src if isinstance(src, str) else None


def _int(value: object) -> int:
    return value if type(value) is int else 0


def _codec(info: StreamInfo, flags: np.ndarray) -> str:
    """The stored codec of a stream's payloads: the codec ids in its frames' flags (the
    truth; several joined by ``+``), else the stream table's; a precompressed encoding
    stored as it is names itself (``h265``)."""
    ids = np.unique((flags & CODEC_MASK) >> CODEC_SHIFT).tolist() if len(flags) else []
    names = [CODEC_NAMES.get(c, f"codec-{c}") for c in ids] if ids else [info.codec or "none"]
    if names == ["none"] and info.encoding in PRECOMPRESSED_ENCODINGS:
        return info.encoding
    return "+".join(names)


def _payload_text(payload: Any) -> str | None:
    if payload is None:
        return None
    if isinstance(payload, RawJson):
        return bytes(payload).decode("utf-8")
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def _note(payload: Any, tags: Mapping[str, str]) -> str | None:
    """The event's note: its payload's ``note`` (a string), else its ``note`` tag
    (``hyperframes mark --note`` writes the tag)."""
    if isinstance(payload, RawJson):
        try:
            payload = parse_json(payload, "event payload")
        except ValueError:
            payload = None
    note = payload.get("note") if isinstance(payload, dict) else None
    return note if isinstance(note, str) else tags.get("note")


def segment_rows(facts: SegmentFacts, cataloged_ns: int) -> list[Row]:
    """The rows of one readable segment: one of ``segments``, one of ``streams`` per
    stream, one of ``events`` per event; each with its partition (``vehicle`` from
    :func:`vehicle_of`, ``date`` of the segment's start, an event's of its time)."""
    h, meta, index = facts.header, facts.metadata, facts.index
    vehicle = vehicle_of(facts.name, meta)
    date = date_of(h.start_ns)
    converted, converted_from = _conversion(meta.extra)
    late = int(np.count_nonzero(facts.windows["flags"] & WINDOW_FLAG_HAS_LATE))
    seg = {
        "uri": facts.uri,
        "name": facts.name,
        "seq": meta.segment_seq,
        "start_ns": h.start_ns,
        "end_ns": h.end_ns,
        "window_ns": h.window_ns,
        "windows": h.window_count,
        "frames": h.frame_count,
        "streams": len(facts.streams),
        "bytes_stored": facts.size,
        "bytes_payload": int(index["size"].sum(dtype=np.uint64)) if len(index) else 0,
        "fingerprint": fingerprint(facts.size, h.index_crc, h.meta_crc),
        "etag": facts.etag,
        "sha256": facts.sha256,
        "format_version": h.version,
        "recorder_version": meta.recorder_version,
        "converted": converted,
        "converted_from": converted_from,
        "dropped": _int(meta.extra.get("dropped")),
        "late": late,
        "quarantined": h.quarantine_count,
        "events": len(facts.events),
        "modified_ns": facts.modified_ns,
        "cataloged_ns": cataloged_ns,
    }
    out = [Row("segments", vehicle, date, seg)]
    sids = index["stream_id"]
    missing: dict[int, int] = defaultdict(int)
    for ids in facts.missing.values():
        for sid in ids:
            missing[int(sid)] += 1
    for info in sorted(facts.streams, key=lambda s: s.id):
        mine = index[sids == info.id]
        ts = mine["timestamp_ns"]
        out.append(Row("streams", vehicle, date, {
            "uri": facts.uri,
            "stream_id": info.id,
            "name": info.name,
            "kind": str(info.kind),
            "encoding": info.encoding,
            "codec": _codec(info, mine["flags"]),
            "rate_hz": info.rate_hz,
            "frames": len(mine),
            "first_ns": int(ts.min()) if len(ts) else None,
            "last_ns": int(ts.max()) if len(ts) else None,
            "missing_windows": missing.get(info.id, 0),
            "cataloged_ns": cataloged_ns,
        }))  # fmt: skip
    for ev in facts.events:
        out.append(Row("events", vehicle, date_of(ev.t_ns), {
            "event_id": event_id(vehicle, ev.t_ns, ev.name),
            "t_ns": ev.t_ns,
            "name": ev.name,
            "pre_s": ev.pre_s,
            "post_s": ev.post_s,
            "start_ns": ev.start_ns,
            "end_ns": ev.end_ns,
            "source": ev.source,
            "clock": ev.clock,
            "tags": sorted(dict(ev.tags).items()),
            "note": _note(ev.payload, ev.tags),
            "payload": _payload_text(ev.payload),
            "uri": facts.uri,
            "cataloged_ns": cataloged_ns,
        }))  # fmt: skip
    return out


def problem_partition(name: str, modified_ns: int | None) -> tuple[str, str]:
    """(vehicle, date) of a segment that could not be read: from its file name, else
    :data:`UNKNOWN_VEHICLE` and the date of its modification time."""
    parsed = parse_segment_name(name)
    if parsed is not None and _partition_ok(parsed.vehicle):
        return parsed.vehicle, parsed.start.strftime("%Y-%m-%d")
    return UNKNOWN_VEHICLE, date_of(modified_ns or 0)


def problem_row(
    uri: str,
    exc: BaseException,
    *,
    size: int | None,
    etag: str | None,
    modified_ns: int | None,
    cataloged_ns: int,
) -> Row:
    """The ``problems`` row of a segment that could not be read: the error's class name
    and one line saying what is wrong."""
    name = uri.rstrip("/").rpartition("/")[2]
    vehicle, date = problem_partition(name, modified_ns)
    return Row("problems", vehicle, date, {
        "uri": uri,
        "name": name,
        "bytes_stored": size,
        "etag": etag,
        "modified_ns": modified_ns,
        "error": type(exc).__name__,
        "problem": one_line(exc),
        "cataloged_ns": cataloged_ns,
    })  # fmt: skip


def tables(rows: Iterable[Row]) -> dict[tuple[str, str, str], pa.Table]:
    """Rows batched into one Arrow table per (table, vehicle, date), in the table's schema."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r.table, r.vehicle, r.date)].append(r.row)
    return {
        key: pa.Table.from_pylist(batch, schema=SCHEMAS[key[0]])
        for key, batch in sorted(groups.items())
    }
