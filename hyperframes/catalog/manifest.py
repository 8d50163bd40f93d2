"""Snapshots: from a question to the exact bytes a training set uses (``catalog snapshot``).

:func:`snapshot` runs a question (SQL, or an :class:`~hyperframes.catalog.query.EventsQuery`)
against a catalog and writes a manifest: a Parquet file of the
:data:`~hyperframes.catalog.schema.MANIFEST` schema with one row per (event,
segment): the clip ``[t - pre, t + post]`` clipped to the segment, the
segment's identity (header fingerprint, ETag, sha256, size) and the streams
to read. Its key-value metadata records the layout version, the catalog root,
the question and when it was asked.

:func:`read_manifest` reads one back (refusing a newer version);
:func:`check_entry` compares an opened segment with the entry that pinned it
(an object's ETag, known from the open, no extra request; a file's
fingerprint, read from its header) and :func:`open_entry` opens and checks;
both raise :class:`~hyperframes.catalog.errors.ManifestError` naming the uri.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from hyperframes import __version__
from hyperframes.catalog.errors import ManifestError
from hyperframes.catalog.query import EventsQuery, catalog_root, events_query_sql, run_sql
from hyperframes.catalog.schema import MANIFEST, PARQUET_VERSION_KEY, VERSION, fingerprint
from hyperframes.catalog.views import open_catalog
from hyperframes.storage.local import atomic_output

if TYPE_CHECKING:
    from hyperframes.reader import HyperframeReader

__all__ = [
    "ManifestEntry",
    "Copies",
    "snapshot",
    "clips_sql",
    "read_manifest",
    "manifest_metadata",
    "check_entry",
    "open_entry",
    "KEY_ROOT",
    "KEY_QUERY",
    "KEY_CREATED",
]

KEY_ROOT: Final = b"hyperframes.catalog.root"
KEY_QUERY: Final = b"hyperframes.catalog.query"
KEY_CREATED: Final = b"hyperframes.catalog.created"
_KEY_MADE_BY: Final = b"hyperframes.catalog.created_by"

Copies = Literal["converted", "raw", "all"]
"""Which copy of a segment a clip uses when the catalog holds a raw one and its converted
copies (same vehicle, sequence number and start): ``converted`` (the default, else raw),
``raw`` (else converted), ``all`` (a row for each)."""

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One row of a manifest: the clip ``[start_ns, end_ns]`` of the segment at ``uri``,
    pinned by its ``fingerprint`` (size and header CRCs), ``etag`` (objects), ``sha256`` and
    size; ``streams``: the streams to read (empty: every stream)."""

    uri: str
    fingerprint: str | None
    etag: str | None
    sha256: str | None
    bytes_stored: int | None
    vehicle: str | None
    start_ns: int
    end_ns: int
    streams: tuple[str, ...]
    event_id: str | None
    event_name: str | None


def _order(copies: Copies) -> str:
    if copies == "converted":
        return "s.converted DESC NULLS LAST, s.uri"
    if copies == "raw":
        return "s.converted ASC NULLS FIRST, s.uri"
    raise ValueError(f"copies must be 'converted', 'raw' or 'all', not {copies!r}")


def clips_sql(
    mode: Literal["events", "segments"],
    *,
    pre_s: float | None,
    post_s: float | None,
    copies: Copies,
    vehicles: Sequence[str] | None,
    dates: tuple[dt.date, dt.date] | None,
) -> str:
    """SQL of the manifest rows over ``_asked`` (the question's rows, numbered ``_i``) and
    ``segments``. Pure. ``vehicles`` and ``dates`` bound the segments read (pruning)."""
    where = ["true"]
    if vehicles is not None:
        where.append(
            "vehicle IN (" + ", ".join("'" + v.replace("'", "''") + "'" for v in vehicles) + ")"
        )
    if dates is not None:
        where.append(f"date BETWEEN DATE '{dates[0]:%Y-%m-%d}' AND DATE '{dates[1]:%Y-%m-%d}'")
    segs = f"SELECT * FROM segments WHERE {' AND '.join(where)}"
    if mode == "events":
        pre = f"{float(pre_s)!r}" if pre_s is not None else "coalesce(a.pre_s, 0.0)"
        post = f"{float(post_s)!r}" if post_s is not None else "coalesce(a.post_s, 0.0)"
        asked = f"""SELECT a._i, a.vehicle, a.event_id, a.event_name,
  a.t_ns - CAST(round({pre} * {_NS}) AS BIGINT) AS lo,
  a.t_ns + CAST(round({post} * {_NS}) AS BIGINT) AS hi FROM _asked a"""
        on = "s.vehicle = a.vehicle AND s.start_ns <= a.hi AND s.end_ns > a.lo"
    else:
        asked = "SELECT _i, uri, vehicle, event_id, event_name, lo, hi FROM _asked"
        on = (
            "s.uri = a.uri AND (a.vehicle IS NULL OR s.vehicle = a.vehicle) "
            "AND s.start_ns <= coalesce(a.hi, s.end_ns) "
            "AND s.end_ns > coalesce(a.lo, s.start_ns)"
        )
    pick = (
        ""
        if copies == "all"
        else (
            f"QUALIFY row_number() OVER (PARTITION BY a._i, s.vehicle, s.seq, s.start_ns "
            f"ORDER BY {_order(copies)}) = 1"
        )
    )
    return f"""WITH a AS ({asked}), s AS ({segs})
SELECT s.uri, s.fingerprint, s.etag, s.sha256, s.bytes_stored, s.vehicle,
       greatest(coalesce(a.lo, s.start_ns), s.start_ns) AS start_ns,
       least(coalesce(a.hi, s.end_ns), s.end_ns) AS end_ns,
       a.event_id, a.event_name, a._i, s.start_ns AS segment_start_ns
FROM a JOIN s ON {on}
{pick}
ORDER BY a._i, s.start_ns, s.uri"""


def _asked(table: pa.Table) -> tuple[Literal["events", "segments"], pa.Table]:
    """The question's rows as ``_asked``: events (``vehicle``, ``t_ns``) or segments (``uri``)."""
    names = set(table.column_names)
    n = table.num_rows

    def col(name: str, typ: pa.DataType, *alts: str) -> pa.Array:
        for c in (name, *alts):
            if c in names:
                return table.column(c).cast(typ)
        return pa.nulls(n, typ)

    base = {
        "_i": pa.array(range(n), pa.int64()),
        "vehicle": col("vehicle", pa.string()),
        "event_id": col("event_id", pa.string()),
        "event_name": col("event_name", pa.string(), "name"),
    }
    if {"vehicle", "t_ns"} <= names:
        extra = {
            "t_ns": col("t_ns", pa.int64()),
            "pre_s": col("pre_s", pa.float64()),
            "post_s": col("post_s", pa.float64()),
        }
        return "events", pa.table({**base, **extra})
    if "uri" in names:
        if "event_name" not in names:  # a segment's name is no event's
            base["event_name"] = pa.nulls(n, pa.string())
        extra = {
            "uri": col("uri", pa.string()),
            "lo": col("start_ns", pa.int64()),
            "hi": col("end_ns", pa.int64()),
        }
        return "segments", pa.table({**base, **extra})
    raise ValueError(
        "the question must return events (columns vehicle and t_ns; pre_s, post_s, event_id, "
        f"name optional) or segments (a uri column); it returned {', '.join(table.column_names)}"
    )


def _date(t_ns: int) -> dt.date:
    return dt.datetime.fromtimestamp(max(0, t_ns) // _NS, dt.UTC).date()


def snapshot(
    con_or_root: duckdb.DuckDBPyConnection | str | os.PathLike[str],
    sql_or_events_query: str | EventsQuery,
    path: str | os.PathLike[str],
    *,
    pre_s: float | None = None,
    post_s: float | None = None,
    streams: Sequence[str] | None = None,
    copies: Copies = "converted",
    overwrite: bool = False,
    now_ns: int | None = None,
) -> int:
    """Write the manifest of a question to ``path``; returns its rows (clips x segments).

    The question (SQL over the catalog's views, or an :class:`EventsQuery`) returns
    events (``vehicle``, ``t_ns``; ``pre_s``, ``post_s``, ``event_id``, ``name``
    optional) or segments (``uri``; ``start_ns``, ``end_ns`` optional). An event's
    clip is ``[t - pre, t + post]`` (``pre_s``/``post_s`` given here replace each
    event's own), one row per segment it overlaps, clipped to the segment, in the
    question's order. ``streams``: the streams a reader should read (default: all).

    Raises :class:`QueryError` for SQL DuckDB refuses, ``ValueError`` for a question
    of neither shape, ``FileExistsError`` when ``path`` exists and not ``overwrite``.
    """
    if (pre_s is not None and pre_s < 0) or (post_s is not None and post_s < 0):
        raise ValueError("pre and post must be >= 0 seconds")
    own = not isinstance(con_or_root, duckdb.DuckDBPyConnection)
    con = (
        con_or_root
        if isinstance(con_or_root, duckdb.DuckDBPyConnection)
        else (open_catalog(con_or_root))
    )
    try:
        if isinstance(sql_or_events_query, EventsQuery):
            with events_query_sql(con, sql_or_events_query.resolve(now_ns)) as (sql, params):
                answer = run_sql(con, sql, params)
            described = sql_or_events_query.describe()
        else:
            answer, described = run_sql(con, sql_or_events_query), sql_or_events_query
        mode, asked = _asked(answer)
        vehicles, dates = None, None
        if mode == "events" and asked.num_rows and asked.column("vehicle").null_count == 0:
            vehicles = sorted(set(asked.column("vehicle").to_pylist()))
            lo = [
                t - round((pre_s if pre_s is not None else (p or 0.0)) * _NS)
                for t, p in zip(
                    asked.column("t_ns").to_pylist(), asked.column("pre_s").to_pylist(), strict=True
                )
            ]
            hi = [
                t + round((post_s if post_s is not None else (p or 0.0)) * _NS)
                for t, p in zip(
                    asked.column("t_ns").to_pylist(),
                    asked.column("post_s").to_pylist(),
                    strict=True,
                )
            ]
            dates = (_date(min(lo)) - dt.timedelta(days=1), _date(max(hi)))
        con.register("_asked", asked)
        try:
            text = clips_sql(
                mode, pre_s=pre_s, post_s=post_s, copies=copies, vehicles=vehicles, dates=dates
            )
            rows = run_sql(con, text)
        finally:
            con.unregister("_asked")
        root = catalog_root(con)
    finally:
        if own:
            con.close()
    wanted = [str(s) for s in streams or ()]
    n = rows.num_rows
    table = pa.table(
        {
            "uri": rows.column("uri"),
            "fingerprint": rows.column("fingerprint"),
            "etag": rows.column("etag"),
            "sha256": rows.column("sha256"),
            "bytes_stored": rows.column("bytes_stored"),
            "vehicle": rows.column("vehicle"),
            "start_ns": rows.column("start_ns"),
            "end_ns": rows.column("end_ns"),
            "streams": pa.array([wanted] * n, pa.list_(pa.string())),
            "event_id": rows.column("event_id"),
            "event_name": rows.column("event_name"),
        },
        schema=MANIFEST,
    )
    created = dt.datetime.fromtimestamp(time.time(), dt.UTC).isoformat(timespec="seconds")
    table = table.replace_schema_metadata(
        {
            PARQUET_VERSION_KEY: str(VERSION).encode(),
            KEY_ROOT: root.encode(),
            KEY_QUERY: described.encode(),
            KEY_CREATED: created.encode(),
            _KEY_MADE_BY: f"hyperframes {__version__}".encode(),
            b"hyperframes.catalog.clip": json.dumps(
                {"pre_s": pre_s, "post_s": post_s, "copies": copies}
            ).encode(),
        }
    )
    with atomic_output(path, overwrite) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return int(n)


def manifest_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """A manifest's key-value metadata (version, root, query, created, ...) as text."""
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in meta.items()}


def read_manifest(path: str | os.PathLike[str]) -> list[ManifestEntry]:
    """The entries of a manifest, in order.

    Raises :class:`ManifestError` for a file that is no manifest or one written by a
    newer layout version; ``FileNotFoundError`` for a missing file.
    """
    name = os.fspath(path)
    try:
        table = pq.read_table(path)
    except pa.ArrowInvalid as exc:
        raise ManifestError(name, f"not a manifest (not Parquet: {exc})") from None
    meta = table.schema.metadata or {}
    raw = meta.get(PARQUET_VERSION_KEY)
    try:
        version = int(raw) if raw is not None else None
    except ValueError:
        version = None
    if version is None:
        raise ManifestError(name, f"not a manifest (no {PARQUET_VERSION_KEY.decode()} metadata)")
    if version > VERSION:
        raise ManifestError(
            name,
            f"the manifest is of version {version}, newer than this hyperframes reads "
            f"({VERSION}): upgrade hyperframes-sensors",
        )
    missing = [f.name for f in MANIFEST if f.name not in table.column_names]
    if missing:
        raise ManifestError(name, f"not a manifest: no column {', '.join(missing)}")
    out = []
    for row in table.select(MANIFEST.names).to_pylist():
        if row["uri"] is None or row["start_ns"] is None or row["end_ns"] is None:
            raise ManifestError(name, "an entry has no uri or time range")
        row["streams"] = tuple(row["streams"] or ())
        out.append(ManifestEntry(**row))
    return out


def _etag(text: str) -> str:
    t = text.strip()
    return t[2:].strip('"') if t.startswith("W/") else t.strip('"')


def check_entry(entry: ManifestEntry, opened: HyperframeReader) -> None:
    """Check that ``opened`` (a reader of ``entry.uri``) holds the bytes ``entry`` pinned.

    An object: its ETag (known from the open, no extra request) against the entry's;
    a file, or an entry without ETag: the fingerprint of its header and size.
    Raises :class:`ManifestError` naming the uri and what changed.
    """
    remote = opened.remote
    if remote is not None and entry.etag and remote.etag:
        if _etag(entry.etag) != _etag(remote.etag):
            raise ManifestError(
                entry.uri,
                f"the object changed since the snapshot: ETag {entry.etag} then, {remote.etag} now",
            )
        return
    if not entry.fingerprint:
        raise ManifestError(entry.uri, "the manifest entry pins no bytes (no fingerprint or ETag)")
    h = opened.header
    now = fingerprint(opened.file_size, h.index_crc, h.meta_crc)
    if now != entry.fingerprint:
        what = "object" if remote is not None else "file"
        size = ""
        if entry.bytes_stored is not None and entry.bytes_stored != opened.file_size:
            size = f"; {entry.bytes_stored} bytes then, {opened.file_size} now"
        raise ManifestError(
            entry.uri,
            f"the {what} changed since the snapshot: fingerprint (size-index CRC-metadata CRC) "
            f"{entry.fingerprint} then, {now} now{size}",
        )


def open_entry(entry: ManifestEntry, **reader_kwargs: Any) -> HyperframeReader:
    """Open ``entry.uri`` and :func:`check_entry` it; a file or object that is gone raises
    :class:`ManifestError` naming it (the reader is yours to close)."""
    from hyperframes.reader import HyperframeReader  # noqa: PLC0415
    from hyperframes.storage.objects import RemoteError  # noqa: PLC0415

    try:
        r = HyperframeReader(entry.uri, **reader_kwargs)
    except FileNotFoundError:
        raise ManifestError(entry.uri, "no such file: it is gone since the snapshot") from None
    except RemoteError as exc:
        if "no such object" not in str(exc) and "no such bucket" not in str(exc):
            raise
        raise ManifestError(entry.uri, "no such object: it is gone since the snapshot") from None
    try:
        check_entry(entry, r)
    except BaseException:
        r.close()
        raise
    return r
