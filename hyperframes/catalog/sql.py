"""The SQL of the catalog's views and everyday questions, as text. Pure: no I/O.

:mod:`hyperframes.catalog.views` runs these against DuckDB; they are kept
apart so the SQL can be read, and tested, on its own.

The views keep the newest row (``cataloged_ns``) per key of
:data:`~hyperframes.catalog.schema.KEYS`, within its partition: a key's rows
share their ``vehicle`` and ``date`` (both follow from the key: the vehicle
from the segment's name, the date from its start or the event's time), and
deduplicating per partition lets DuckDB push filters on ``vehicle`` and
``date`` through the dedupe down to the files, so a query for one vehicle
and week opens only those folders.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from hyperframes.catalog.schema import KEYS, SCHEMAS

__all__ = [
    "HIVE_TYPES",
    "VIEWS",
    "duck_type",
    "quote",
    "ident",
    "empty_relation",
    "parquet_relation",
    "table_view",
    "spans_view",
    "coverage_view",
    "drives_view",
    "event_segments_view",
    "EventsFilter",
    "events_sql",
]

HIVE_TYPES: Final = "{'vehicle': 'VARCHAR', 'date': 'DATE'}"
VIEWS: Final = (
    "segments",
    "streams",
    "events",
    "problems",
    "coverage",
    "drives",
    "event_segments",
)
"""The views :func:`~hyperframes.catalog.views.open_catalog` makes (besides ``TABLE_all``)."""

# TIMESTAMP columns for people, per table: name -> the ns column it shows
_TIMES: Final = {
    "segments": (
        ("start_time", "start_ns"),
        ("end_time", "end_ns"),
        ("modified_time", "modified_ns"),
    ),
    "streams": (("first_time", "first_ns"), ("last_time", "last_ns")),
    "events": (("time", "t_ns"), ("start_time", "start_ns"), ("end_time", "end_ns")),
    "problems": (("modified_time", "modified_ns"),),
}


def duck_type(t: pa.DataType) -> str:
    """DuckDB's name for an Arrow type of the catalog's schemas."""
    if pa.types.is_map(t):
        return f"MAP({duck_type(t.key_type)}, {duck_type(t.item_type)})"
    if pa.types.is_list(t):
        return f"{duck_type(t.value_type)}[]"
    names = {
        pa.string(): "VARCHAR",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }
    if t not in names:
        raise ValueError(f"no DuckDB type for {t}")
    return names[t]


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def ts(ns_column: str) -> str:
    """A TIMESTAMP (UTC, microseconds) of an integer ns column."""
    return f"make_timestamp({ns_column} // 1000)"


def empty_relation(table: str) -> str:
    """A relation with ``table``'s columns and partitions and no row (no part written yet)."""
    cols = [f"CAST(NULL AS {duck_type(f.type)}) AS {ident(f.name)}" for f in SCHEMAS[table]]
    cols += ["CAST(NULL AS VARCHAR) AS vehicle", "CAST(NULL AS DATE) AS date"]
    return f"SELECT {', '.join(cols)} WHERE false"


def parquet_relation(table: str, files: str | list[str]) -> str:
    """``table``'s rows from Parquet files (a glob or a list) with the hive partitions."""
    src = quote(files) if isinstance(files, str) else "[" + ", ".join(map(quote, files)) + "]"
    cols = ", ".join(ident(f.name) for f in SCHEMAS[table])
    return (
        f"SELECT {cols}, vehicle, date FROM read_parquet({src}, hive_partitioning = true, "
        f"hive_types = {HIVE_TYPES})"
    )


def table_view(table: str, source: str) -> str:
    """The view of ``table``: the newest row per key (and partition), with TIMESTAMPs."""
    keys = ", ".join(ident(k) for k in KEYS[table])
    times = "".join(f", {ts(col)} AS {name}" for name, col in _TIMES[table])
    cols = ", ".join(ident(f.name) for f in SCHEMAS[table])
    return (
        f"SELECT {cols}, vehicle, date{times} FROM {source} "
        f"QUALIFY row_number() OVER (PARTITION BY vehicle, date, {keys} "
        f"ORDER BY cataloged_ns DESC NULLS LAST) = 1"
    )


def spans_view() -> str:
    """``segment_spans``: one row per recorded span (a raw segment and its converted copies,
    same vehicle, sequence number and start, are one: the raw one's row when there is one)."""
    return (
        "SELECT vehicle, uri, name, seq, start_ns, end_ns, frames, bytes_stored, converted "
        "FROM segments QUALIFY row_number() OVER (PARTITION BY vehicle, seq, start_ns "
        "ORDER BY converted NULLS FIRST, uri) = 1"
    )


def coverage_view(tolerance_ns: int) -> str:
    """``coverage``: per vehicle, spans with data (``kind = 'data'``) and the gaps between
    them (``'gap'``): gaps and islands over the segments by start and end; a segment that
    starts within ``tolerance_ns`` of the end of what came before continues its span."""
    return f"""
WITH o AS (
  SELECT vehicle, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY vehicle ORDER BY start_ns, end_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM segment_spans),
g AS (
  SELECT *, sum(CASE WHEN reach IS NULL OR start_ns > reach + {int(tolerance_ns)} THEN 1
                ELSE 0 END)
            OVER (PARTITION BY vehicle ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING)
            AS island
  FROM o),
i AS (
  SELECT vehicle, island, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
         count(*) AS segments
  FROM g GROUP BY vehicle, island),
spans AS (
  SELECT vehicle, 'data' AS kind, start_ns, end_ns, segments FROM i
  UNION ALL
  SELECT vehicle, 'gap' AS kind, before_ns AS start_ns, start_ns AS end_ns, 0 AS segments
  FROM (SELECT vehicle, start_ns,
               lag(end_ns) OVER (PARTITION BY vehicle ORDER BY start_ns) AS before_ns
        FROM i)
  WHERE before_ns IS NOT NULL)
SELECT vehicle, kind, start_ns, end_ns, {ts("start_ns")} AS start_time,
       {ts("end_ns")} AS end_time, (end_ns - start_ns) / 1e9 AS seconds,
       CAST(segments AS BIGINT) AS segments
FROM spans ORDER BY vehicle, start_ns"""


def drives_view(tolerance_ns: int) -> str:
    """``drives``: consecutive segments of a vehicle, each one's ``seq`` one more than the
    previous one's and its start within ``tolerance_ns`` of the previous end (either way);
    named after the first segment."""
    return f"""
WITH o AS (
  SELECT *, lag(seq) OVER w AS prev_seq, lag(end_ns) OVER w AS prev_end
  FROM segment_spans WINDOW w AS (PARTITION BY vehicle ORDER BY start_ns, seq)),
g AS (
  SELECT *, sum(CASE WHEN prev_seq IS NOT NULL AND seq >= 0 AND seq = prev_seq + 1
                     AND abs(start_ns - prev_end) <= {int(tolerance_ns)} THEN 0 ELSE 1 END)
            OVER (PARTITION BY vehicle ORDER BY start_ns, seq ROWS UNBOUNDED PRECEDING)
            AS n
  FROM o)
SELECT vehicle, arg_min(name, start_ns) AS drive, min(start_ns) AS start_ns,
       max(end_ns) AS end_ns, {ts("min(start_ns)")} AS start_time,
       {ts("max(end_ns)")} AS end_time, count(*) AS segments,
       CAST(sum(frames) AS BIGINT) AS frames, CAST(sum(bytes_stored) AS BIGINT) AS bytes
FROM g GROUP BY vehicle, n ORDER BY vehicle, start_ns"""


def event_segments_view() -> str:
    """``event_segments``: each event with every segment (raw and converted copies) of its
    vehicle that overlaps ``[start_ns, end_ns]``, one row per pair."""
    return """
SELECT e.event_id, e.vehicle, e.name, e.t_ns, e.time, e.start_ns, e.end_ns, e.pre_s,
       e.post_s, e.source, e.note, e.tags, s.uri, s.name AS segment, s.seq,
       s.start_ns AS segment_start_ns, s.end_ns AS segment_end_ns, s.converted,
       s.fingerprint, s.etag, s.sha256, s.bytes_stored
FROM events e JOIN segments s
  ON s.vehicle = e.vehicle AND s.start_ns <= e.end_ns AND s.end_ns > e.start_ns"""


@dataclass(frozen=True, slots=True)
class EventsFilter:
    """The everyday question about events, resolved: times in ns, partitions as dates."""

    vehicle: str | None = None
    name: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None
    first_date: dt.date | None = None  # the date partitions the range can touch
    last_date: dt.date | None = None
    with_streams: tuple[str, ...] = ()
    limit: int | None = None
    segment_slack_days: int = 1  # a covering segment may start the day before its event


def _where(f: EventsFilter, params: list[Any], *, segments: bool) -> str:
    parts = ["true"]
    if f.vehicle is not None:
        parts.append("vehicle = ?")
        params.append(f.vehicle)
    if f.first_date is not None:
        parts.append("date >= ?")
        params.append(f.first_date - dt.timedelta(days=f.segment_slack_days if segments else 0))
    if f.last_date is not None:
        parts.append("date <= ?")
        params.append(f.last_date)
    return " AND ".join(parts)


def events_sql(f: EventsFilter, sources: Mapping[str, str] | None = None) -> tuple[str, list[Any]]:
    """SQL and its parameters: the events matching ``f``, in time order. With
    ``with_streams``, only events whose covering segments hold every one of those streams
    with frames, recorded across the event's range (the stream's first and last frame in
    the segment overlap ``[start_ns, end_ns]``).

    ``sources``: a relation to read instead of the view, per table (``events``,
    ``segments``, ``streams``), e.g. :func:`table_view` over only the partitions the
    filter touches; the filter's own conditions still apply to it."""
    src = {t: (sources or {}).get(t, t) for t in ("events", "segments", "streams")}
    params: list[Any] = []
    where = _where(f, params, segments=False)
    if f.name is not None:
        where += " AND name = ?"
        params.append(f.name)
    if f.since_ns is not None:
        where += " AND t_ns >= ?"
        params.append(f.since_ns)
    if f.until_ns is not None:
        where += " AND t_ns < ?"
        params.append(f.until_ns)
    sql = f"WITH e AS (SELECT * FROM {src['events']} WHERE {where})"
    if f.with_streams:
        wanted = sorted(set(f.with_streams))
        seg_where = _where(f, params, segments=True)
        st_where = _where(f, params, segments=True)
        st_where += f" AND frames > 0 AND name IN ({', '.join('?' * len(wanted))})"
        params.extend(wanted)
        sql += f""",
s AS (SELECT vehicle, uri, start_ns, end_ns FROM {src["segments"]} WHERE {seg_where}),
st AS (SELECT vehicle, uri, name, first_ns, last_ns FROM {src["streams"]} WHERE {st_where}),
hits AS (
  SELECT e.event_id, count(DISTINCT st.name) AS n
  FROM e JOIN s ON s.vehicle = e.vehicle AND s.start_ns <= e.end_ns AND s.end_ns > e.start_ns
         JOIN st ON st.vehicle = s.vehicle AND st.uri = s.uri
                AND st.first_ns <= e.end_ns AND st.last_ns >= e.start_ns
  GROUP BY e.event_id)
SELECT e.* FROM e JOIN hits ON hits.event_id = e.event_id AND hits.n = {len(wanted)}"""
    else:
        sql += "\nSELECT e.* FROM e"
    sql += "\nORDER BY e.t_ns, e.vehicle, e.name"
    if f.limit is not None:
        sql += f"\nLIMIT {int(f.limit)}"
    return sql, params
