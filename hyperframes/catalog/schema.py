"""The catalog's tables: their columns, their partitions, the version. Pure, no I/O.

A catalog is a folder of Parquet files (a directory, or a prefix in a bucket)::

    ROOT/_catalog.json                       {"format": "hyperframes-catalog", "version": 1}
    ROOT/segments/vehicle=V/date=D/part-*.parquet
    ROOT/streams/vehicle=V/date=D/part-*.parquet
    ROOT/events/vehicle=V/date=D/part-*.parquet
    ROOT/problems/vehicle=V/date=D/part-*.parquet

``vehicle`` and ``date`` (UTC, ``YYYY-MM-DD`` of the segment's or event's
start) are hive partitions: they are in the path, not in the files, so an
engine that filters on them opens only the folders it needs. A part file is
written whole under a temporary name and renamed (a single PUT in a bucket),
so a reader sees it whole or not at all. Builders never rewrite a part: a
segment read again (changed, or by two builders at once) adds rows, and the
views (:mod:`hyperframes.catalog.views`) keep the newest row per key
(``uri`` for segments, streams and problems; ``event_id`` for events).

Times are integer nanoseconds since the Unix epoch (``*_ns``), as everywhere
in hyperframes; the views add ``TIMESTAMP`` columns for people.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Final

import pyarrow as pa

__all__ = [
    "FORMAT",
    "VERSION",
    "MARKER",
    "TABLES",
    "PARTITIONS",
    "UNKNOWN_VEHICLE",
    "SEGMENTS",
    "STREAMS",
    "EVENTS",
    "PROBLEMS",
    "MANIFEST",
    "SCHEMAS",
    "KEYS",
    "date_of",
    "partition_dir",
    "event_id",
    "fingerprint",
]

FORMAT: Final = "hyperframes-catalog"
VERSION: Final = 1
"""The catalog layout version: a reader refuses a catalog (or a part file) of a newer one."""
MARKER: Final = "_catalog.json"
"""The file at the root that says this folder is a catalog, and of which version."""
PARQUET_VERSION_KEY: Final = b"hyperframes.catalog.version"
"""Key of the Parquet key-value metadata every part file carries (the layout version)."""

TABLES: Final = ("segments", "streams", "events", "problems")
PARTITIONS: Final = ("vehicle", "date")
UNKNOWN_VEHICLE: Final = "_unknown"
"""The vehicle partition of a problem whose file name names no vehicle."""

SEGMENTS: Final = pa.schema(
    [
        ("uri", pa.string()),  # s3://B/K or an absolute local path: the key of a segment
        ("name", pa.string()),  # the file name
        ("seq", pa.int64()),  # segment_seq from the file's metadata (-1: unknown)
        ("start_ns", pa.int64()),  # first window's start (header)
        ("end_ns", pa.int64()),  # last window's end (header)
        ("window_ns", pa.int64()),
        ("windows", pa.int64()),
        ("frames", pa.int64()),
        ("streams", pa.int32()),
        ("bytes_stored", pa.int64()),  # object/file size
        ("bytes_payload", pa.int64()),  # sum of the stored payload sizes (index)
        ("fingerprint", pa.string()),  # size + the header's index and metadata CRCs (no reads)
        ("etag", pa.string()),  # the store's ETag (null for local files)
        ("sha256", pa.string()),  # when known without reading payloads (upload sums), else null
        ("format_version", pa.int32()),
        ("recorder_version", pa.string()),
        ("converted", pa.bool_()),  # written by the converter
        ("converted_from", pa.string()),  # the source it was converted from (name or uri)
        ("dropped", pa.int64()),  # frames the recorder counted as dropped (metadata), else 0
        ("late", pa.int64()),  # late windows
        ("quarantined", pa.int64()),  # quarantined frames
        ("events", pa.int32()),  # events stored in the segment
        ("modified_ns", pa.int64()),  # object LastModified / file mtime: upload time for objects
        ("cataloged_ns", pa.int64()),  # when this row was written
    ]
)

STREAMS: Final = pa.schema(
    [
        ("uri", pa.string()),
        ("stream_id", pa.int32()),
        ("name", pa.string()),
        ("kind", pa.string()),
        ("encoding", pa.string()),
        ("codec", pa.string()),  # the stored codec of its payloads: none/lz4/zstd/h265...
        ("rate_hz", pa.float64()),  # nominal rate (stream table), null if unknown
        ("frames", pa.int64()),
        ("first_ns", pa.int64()),  # null when the stream has no frame in this segment
        ("last_ns", pa.int64()),
        ("missing_windows", pa.int64()),
        ("cataloged_ns", pa.int64()),
    ]
)

EVENTS: Final = pa.schema(
    [
        ("event_id", pa.string()),  # event_id(vehicle, t_ns, name)
        ("t_ns", pa.int64()),
        ("name", pa.string()),
        ("pre_s", pa.float64()),
        ("post_s", pa.float64()),
        ("start_ns", pa.int64()),  # t - pre
        ("end_ns", pa.int64()),  # t + post
        ("source", pa.string()),  # mark, rule, zmq, mqtt, ...
        ("clock", pa.string()),
        ("tags", pa.map_(pa.string(), pa.string())),
        ("note", pa.string()),  # payload["note"] when it is a string, else null
        ("payload", pa.string()),  # the payload as JSON text (null: none)
        ("uri", pa.string()),  # the segment it was found in
        ("cataloged_ns", pa.int64()),
    ]
)

PROBLEMS: Final = pa.schema(
    [
        ("uri", pa.string()),
        ("name", pa.string()),
        ("bytes_stored", pa.int64()),
        ("etag", pa.string()),
        ("modified_ns", pa.int64()),
        ("error", pa.string()),  # the typed error's class name
        ("problem", pa.string()),  # one line: what is wrong
        ("cataloged_ns", pa.int64()),
    ]
)

MANIFEST: Final = pa.schema(
    [
        ("uri", pa.string()),
        ("fingerprint", pa.string()),
        ("etag", pa.string()),
        ("sha256", pa.string()),
        ("bytes_stored", pa.int64()),
        ("vehicle", pa.string()),
        ("start_ns", pa.int64()),  # the clip's range in this segment
        ("end_ns", pa.int64()),
        ("streams", pa.list_(pa.string())),  # empty: every stream
        ("event_id", pa.string()),  # null when the row is no event's
        ("event_name", pa.string()),
    ]
)
"""A snapshot (``hyperframes catalog snapshot``): exactly which bytes a training set uses."""

SCHEMAS: Final = {"segments": SEGMENTS, "streams": STREAMS, "events": EVENTS,
                  "problems": PROBLEMS}  # fmt: skip
KEYS: Final = {"segments": ("uri",), "streams": ("uri", "stream_id"), "events": ("event_id",),
               "problems": ("uri",)}  # fmt: skip
"""What identifies a row: the views keep the newest (``cataloged_ns``) row per key."""


def date_of(t_ns: int) -> str:
    """The ``date`` partition (UTC ``YYYY-MM-DD``) of a time in ns since the epoch."""
    return dt.datetime.fromtimestamp(max(0, t_ns) // 1_000_000_000, dt.UTC).strftime("%Y-%m-%d")


def partition_dir(table: str, vehicle: str, date: str) -> str:
    """``table/vehicle=V/date=D`` (relative to the root; ``/`` separated).

    Raises ``ValueError`` for an unknown table or a vehicle that cannot be a path part.
    """
    if table not in SCHEMAS:
        raise ValueError(f"unknown catalog table {table!r} (tables: {', '.join(TABLES)})")
    if not vehicle or "/" in vehicle or "\\" in vehicle or vehicle in (".", "..") or "=" in vehicle:
        raise ValueError(f"vehicle {vehicle!r} cannot name a catalog partition")
    return f"{table}/vehicle={vehicle}/date={date}"


def event_id(vehicle: str, t_ns: int, name: str) -> str:
    """A stable id for an event: the same event found in many segments is one row."""
    return hashlib.sha256(f"{vehicle}\0{t_ns}\0{name}".encode()).hexdigest()[:20]


def fingerprint(size: int, index_crc: int, meta_crc: int) -> str:
    """A segment's identity read from its header: size and the CRCs of its index and metadata.

    The index holds every payload's CRC32C, so a file whose bytes changed
    changes its fingerprint (with the odds of CRC32C), and reading it costs
    nothing beyond the header.
    """
    return f"{size}-{index_crc:08x}-{meta_crc:08x}"
