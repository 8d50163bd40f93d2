"""The everyday questions without SQL, and SQL with one-line errors (``hyperframes catalog``).

Each returns a ``pyarrow.Table`` (``table.to_pandas()`` when pandas is
installed; pandas is not required). :func:`find_events` turns ``since`` and
``until`` into the ``date`` partitions they touch; for a question that names
the vehicle it reads just those partition folders of the vehicle (listed
alone, :func:`~hyperframes.catalog.views.partition_sources`: neither globbing
nor listing the whole table), otherwise the views, whose filters on
``vehicle`` and ``date`` DuckDB pushes down to the files.
:func:`files_opened` shows how many part files a query really opens.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from hyperframes.catalog.errors import CatalogError
from hyperframes.catalog.sql import EventsFilter, events_sql
from hyperframes.catalog.when import When, date_range, to_ns

__all__ = [
    "EventsQuery",
    "QueryError",
    "find_events",
    "run_sql",
    "catalog_root",
    "files_opened",
    "events_query_sql",
]


class QueryError(CatalogError, ValueError):
    """A query DuckDB refused (bad SQL, unknown column): ``problem`` is its one-line message."""


@dataclass(frozen=True, slots=True)
class EventsQuery:
    """The arguments of :func:`find_events`, kept to run again (a snapshot records it)."""

    vehicle: str | None = None
    name: str | None = None
    since: When | None = None
    until: When | None = None
    with_streams: tuple[str, ...] = ()
    limit: int | None = None

    def resolve(self, now_ns: int | None = None) -> EventsFilter:
        """Times as ns (durations back from ``now_ns``, default the present) and the date
        partitions they touch."""
        now = time.time_ns() if now_ns is None else now_ns
        since = None if self.since is None else to_ns(self.since, now)
        until = None if self.until is None else to_ns(self.until, now, end=True)
        if since is not None and until is not None and until <= since:
            raise ValueError(f"until ({self.until}) is not after since ({self.since})")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit must be >= 0, got {self.limit}")
        first, last = date_range(since, until)
        streams = tuple(s.strip() for s in self.with_streams if s.strip())
        return EventsFilter(self.vehicle, self.name, since, until, first, last, streams, self.limit)

    def describe(self) -> str:
        """The query as JSON text (for a manifest's metadata)."""

        def text(v: When | None) -> Any:
            return v.isoformat() if isinstance(v, dt.date) else v

        return json.dumps(
            {
                "vehicle": self.vehicle,
                "name": self.name,
                "since": text(self.since),
                "until": text(self.until),
                "with_streams": list(self.with_streams),
                "limit": self.limit,
            }
        )


def _root_of(con: duckdb.DuckDBPyConnection) -> str:
    try:
        rows = con.execute("SELECT root FROM catalog_info").fetchall()
    except duckdb.Error:
        rows = []
    return str(rows[0][0]) if rows else "(catalog)"


catalog_root = _root_of


def run_sql(
    con: duckdb.DuckDBPyConnection, query: str, params: Sequence[Any] | None = None
) -> pa.Table:
    """``query`` against the catalog's views, as an Arrow table.

    Raises :class:`QueryError` (one line: DuckDB's message) for SQL DuckDB refuses.
    """
    try:
        rel: duckdb.DuckDBPyRelation | None = con.sql(
            query, params=list(params) if params else None
        )
        if rel is None:  # a statement that returns no rows
            return pa.table({})
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow  # DuckDB < 1.4: arrow()
        table: pa.Table = fetch()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(_root_of(con), " ".join(first.split())) from None
    return table


def find_events(
    con: duckdb.DuckDBPyConnection,
    *,
    vehicle: str | None = None,
    name: str | None = None,
    since: When | None = None,
    until: When | None = None,
    with_streams: Iterable[str] = (),
    limit: int | None = None,
    now_ns: int | None = None,
) -> pa.Table:
    """Events in time order: of ``vehicle``, called ``name``, at or after ``since`` and
    before ``until`` (``7d``, ``36h``, ``90m``, ISO dates or times, ns, datetimes; a bare
    date as ``until`` includes that day), whose covering segments hold every stream of
    ``with_streams`` with frames across the event's range; at most ``limit``.

    Raises ``ValueError`` for a time it cannot read, :class:`QueryError` if DuckDB fails.
    """
    q = EventsQuery(vehicle, name, since, until, tuple(with_streams), limit)
    with events_query_sql(con, q.resolve(now_ns)) as (sql, params):
        return run_sql(con, sql, params)


@contextlib.contextmanager
def events_query_sql(
    con: duckdb.DuckDBPyConnection, f: EventsFilter
) -> Iterator[tuple[str, list[Any]]]:
    """The SQL (and parameters) of ``f`` to run on ``con`` inside the ``with`` block.

    With a vehicle, it reads only that vehicle's partition folders in the dates the
    question touches (:func:`~hyperframes.catalog.views.partition_sources`; the same
    rows as the views give it); without one, the views."""
    if f.vehicle is None:
        yield events_sql(f)
        return
    from hyperframes.catalog.views import partition_sources  # noqa: PLC0415

    seg_first = (
        None if f.first_date is None else f.first_date - dt.timedelta(days=f.segment_slack_days)
    )
    ranges = {"events": (f.first_date, f.last_date)}
    if f.with_streams:
        ranges["segments"] = ranges["streams"] = (seg_first, f.last_date)
    try:
        with partition_sources(con, ranges, [f.vehicle]) as sources:
            yield events_sql(f, sources)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QueryError(_root_of(con), " ".join(first.split())) from None


def _scans(node: Any, out: list[tuple[int, list[str]]]) -> None:
    """Each Parquet scan of a JSON profile: (files read, the names it lists)."""
    if isinstance(node, dict):
        info = node.get("extra_info")
        if isinstance(info, dict) and "Total Files Read" in info:
            names = str(info.get("Filename(s)") or "")
            out.append((int(info["Total Files Read"]), [n.strip() for n in names.split(",")]))
        for value in node.values():
            _scans(value, out)
    elif isinstance(node, list):
        for value in node:
            _scans(value, out)


def _count_local(base: str, scans: list[tuple[int, list[str]]]) -> int:
    """Distinct files over the scans, per table: a table scanned twice (DuckDB reads the
    rows a dedupe keeps in a second pass) counts its files once; a scan that names a glob
    (not the files) counts what it says it read."""
    named: dict[str, set[str]] = {}
    counted: dict[str, int] = {}
    for count, names in scans:
        table = names[0][len(base) + 1 :].split("/", 1)[0] if names[0].startswith(base) else ""
        concrete = [n for n in names if n and not any(c in n for c in "*?[")]
        if len(concrete) == count:
            named.setdefault(table, set()).update(concrete)
        else:
            counted[table] = max(counted.get(table, 0), count)
    tables = named.keys() | counted.keys()
    return sum(max(len(named.get(t, ())), counted.get(t, 0)) for t in tables)


def files_opened(
    con: duckdb.DuckDBPyConnection,
    query: str | EventsQuery,
    params: Sequence[Any] | None = None,
    *,
    now_ns: int | None = None,
) -> int:
    """How many part files ``query`` opens (partition pruning at work): SQL, or an
    :class:`EventsQuery` as :func:`find_events` runs it (reading only the partition
    folders of a question that names its vehicle).

    A local catalog: DuckDB's own count (``EXPLAIN ANALYZE``: the files each Parquet scan
    read, each counted once). A catalog in a bucket: the query runs again on a fresh
    connection whose table scans record the part files left once the pushed-down filter
    has pruned the partitions (``open_catalog(observe=...)``).
    """
    if isinstance(query, EventsQuery):
        f = query.resolve(now_ns)
        if _is_s3(con):
            return _s3_opened(con, f, None)
        with events_query_sql(con, f) as (text, args):
            return _local_opened(con, text, args)
    if _is_s3(con):
        return _s3_opened(con, query, params)
    return _local_opened(con, query, params)


def _is_s3(con: duckdb.DuckDBPyConnection) -> bool:
    from hyperframes.catalog.location import locate  # noqa: PLC0415

    return locate(_root_of(con)).s3


def _local_opened(con: duckdb.DuckDBPyConnection, query: str, params: Sequence[Any] | None) -> int:
    from hyperframes.catalog.location import locate  # noqa: PLC0415

    root = _root_of(con)
    try:
        rows = con.execute(f"EXPLAIN (ANALYZE, FORMAT json) {query}", params or None).fetchall()
    except duckdb.Error as exc:
        raise QueryError(root, " ".join(str(exc).split())) from None
    scans: list[tuple[int, list[str]]] = []
    for row in rows:
        _scans(json.loads(row[1]), scans)
    return _count_local(locate(root).base, scans)


def _s3_opened(
    con: duckdb.DuckDBPyConnection, query: str | EventsFilter, params: Sequence[Any] | None
) -> int:
    from hyperframes.catalog.views import open_catalog  # noqa: PLC0415

    opened: set[str] = set()
    counted = open_catalog(_root_of(con), observe=opened.update)
    try:
        if isinstance(query, EventsFilter):
            with events_query_sql(counted, query) as (text, args):
                run_sql(counted, text, args)
        else:
            run_sql(counted, query, list(params) if params else None)
    finally:
        counted.close()
    return len(opened)
