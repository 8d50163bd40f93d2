"""A catalog as a DuckDB connection with its tables as views (``hyperframes.catalog.open``).

:func:`open_catalog` checks the root's marker (refusing a missing catalog or
one of a newer version) and defines, in a fresh in-memory DuckDB connection:

- ``segments``, ``streams``, ``events``, ``problems``: the newest row per key
  (:data:`~hyperframes.catalog.schema.KEYS`, by ``cataloged_ns``), with the
  ``vehicle`` and ``date`` partitions and ``TIMESTAMP`` columns for people
  (``start_time``/``end_time``, ``time``, ``first_time``/``last_time``,
  ``modified_time``; UTC); ``TABLE_all`` holds every row before that;
- ``coverage``: per vehicle, spans with data and the gaps between them;
- ``drives``: runs of consecutive segments (``seq`` + 1, start at the previous end);
- ``event_segments``: each event with the segments that overlap its range;
- ``catalog_info``: the root and its version.

A local catalog is read by DuckDB itself (``read_parquet`` of a glob with hive
partitions: parts written after the open are seen by the next query). A
catalog in a bucket is read through pyarrow datasets over pyarrow's S3
filesystem, listed once at the open (open again to see newer parts); in
both, filters on ``vehicle`` and ``date`` reach the files, so only the
matching folders are opened. A table with no part yet is an empty view with
the right columns.

A question that names its vehicles and dates need not glob (locally) or list
(in a bucket) a whole table first: :func:`partition_sources` lists only those
partition folders and reads the table's view over just their parts
(:func:`~hyperframes.catalog.query.find_events` does so for a vehicle).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from hyperframes.catalog import sql
from hyperframes.catalog.location import (
    PART_RE,
    Location,
    locate,
    part_paths,
    read_marker,
    s3_filesystem,
)
from hyperframes.catalog.schema import SCHEMAS, TABLES, partition_dir

__all__ = [
    "open_catalog",
    "partition_parts",
    "partition_sources",
    "DEFAULT_TOLERANCE_S",
    "PARTITIONING",
]

DEFAULT_TOLERANCE_S = 2.0
"""How far a segment may start after the previous one's end and still continue its span
(``coverage``) or drive (``drives``)."""

PARTITIONING = pa.schema([("vehicle", pa.string()), ("date", pa.date32())])

_GLOB_SPECIAL = frozenset("*?[]{}")
_DATE_FOLDERS_MAX: Final = 62
"""In a bucket, a vehicle's date range of at most this many days is listed folder by folder
(one request each, at once); a longer one (or none) by listing the vehicle's folder."""
_LIST_THREADS: Final = 16
_FILESYSTEMS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, pafs.FileSystem] = (
    weakref.WeakKeyDictionary()
)
"""The filesystem each bucket catalog's connection was opened with (for its partitions)."""
Observer = Callable[[list[str]], None]
_OBSERVERS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, Observer] = (
    weakref.WeakKeyDictionary()
)
"""The ``observe`` callback each bucket catalog's connection was opened with."""


class _ObservedDataset(pads.FileSystemDataset):  # type: ignore[misc]
    """A bucket table whose every scan first tells ``observe`` the part files it opens: the
    fragments left once the filter DuckDB pushes down has pruned the partitions (each is
    opened for its footer; its row groups are pruned after). Python runs only here, on the
    thread that asks for the scan, never in the I/O: a Python filesystem would be called
    from pyarrow's I/O threads while DuckDB's scan holds the GIL, and could deadlock."""

    observe: Observer

    def scanner(self, columns: Any = None, filter: Any = None, **kw: Any) -> pads.Scanner:
        self.observe([f.path for f in self.get_fragments(filter=filter)])
        return super().scanner(columns=columns, filter=filter, **kw)


DateRange = tuple[dt.date | None, dt.date | None]


def _bucket_parts(
    fs: pafs.FileSystem, loc: Location, table: str, folder: str, dates: DateRange = (None, None)
) -> list[pafs.FileInfo]:
    """The part files below ``folder`` (a table's, a vehicle's or a date's prefix) whose
    date lies in ``dates``, as listed (with their sizes)."""
    base = loc.path(table)
    sel = pafs.FileSelector(folder, recursive=True, allow_not_found=True)
    out = []
    for info in fs.get_file_info(sel):
        if info.type != pafs.FileType.File or not info.path.startswith(base + "/"):
            continue
        rel = info.path[len(base) + 1 :]
        if PART_RE.match(rel) and (dates == (None, None) or _in_range(rel.split("/")[1], dates)):
            out.append(info)
    return out


def _arrow_dataset(
    loc: Location,
    table: str,
    fs: pafs.FileSystem,
    parts: list[pafs.FileInfo] | None = None,
    observe: Observer | None = None,
) -> pads.Dataset | None:
    """A dataset of ``parts`` (default: every part of the table, listed now), with the hive
    partitions; each fragment knows its size from the listing, so reading a part costs no
    request for it (a HEAD per part, before). With ``observe``: a :class:`_ObservedDataset`."""
    if parts is None:
        parts = _bucket_parts(fs, loc, table, loc.path(table))
    if not parts:
        return None
    schema = pa.schema([*SCHEMAS[table], *PARTITIONING])
    fmt = pads.ParquetFileFormat()
    hive = pads.partitioning(PARTITIONING, flavor="hive")
    base = loc.path(table)
    fragments = []
    for info in sorted(parts, key=lambda i: i.path):
        where = hive.parse(info.path[len(base) :])
        try:
            frag = fmt.make_fragment(
                info.path, filesystem=fs, partition_expression=where, file_size=info.size
            )
        except TypeError:  # pyarrow < 16 takes no size
            frag = fmt.make_fragment(info.path, filesystem=fs, partition_expression=where)
        fragments.append(frag)
    if observe is None:
        return pads.FileSystemDataset(fragments, schema, fmt, fs)
    observed = _ObservedDataset(fragments, schema, fmt, fs)
    observed.observe = observe
    return observed


def _local_source(loc: Location, table: str) -> str:
    """``read_parquet`` of the table's glob (or, for a root with glob characters, its
    files as listed now); an empty relation when it has no part yet."""
    if _GLOB_SPECIAL.isdisjoint(loc.base):
        if not _has_part(loc, table):
            return f"({sql.empty_relation(table)})"
        return f"({sql.parquet_relation(table, loc.path(table, '*', '*', 'part-*.parquet'))})"
    paths = part_paths(loc, table)
    if not paths:
        return f"({sql.empty_relation(table)})"
    return f"({sql.parquet_relation(table, paths)})"


def _has_part(loc: Location, table: str) -> bool:
    """Whether a local table has a part file (stops at the first found: no full listing)."""
    base = Path(loc.path(table))
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for vehicle in os.scandir(base):
            if not vehicle.is_dir() or not vehicle.name.startswith("vehicle="):
                continue
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                for day in os.scandir(vehicle.path):
                    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                        for f in os.scandir(day.path):
                            if PART_RE.match(f"{vehicle.name}/{day.name}/{f.name}"):
                                return True
    return False


def open_catalog(
    root: str | os.PathLike[str],
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    filesystem: pafs.FileSystem | None = None,
    threads: int | None = None,
    observe: Observer | None = None,
) -> duckdb.DuckDBPyConnection:
    """A fresh DuckDB connection with the catalog at ``root`` (a directory or ``s3://B/P``)
    as views (see the module doc).

    ``tolerance_s``: the gap that still joins two segments in ``coverage`` and ``drives``.
    ``filesystem``: the pyarrow filesystem for a root in a bucket (default: S3 from the
    environment). ``threads``: DuckDB's threads (default: its own choice). ``observe``
    (a root in a bucket): called with the part files each scan of a table opens.

    Raises :class:`~hyperframes.catalog.errors.CatalogError` for a root with no catalog,
    or one of a newer version than this reader.
    """
    loc = locate(root)
    fs = (filesystem or s3_filesystem()) if loc.s3 else None
    marker = read_marker(loc, fs)
    con = duckdb.connect(":memory:")
    try:
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        source: Callable[[str], str]
        if fs is not None:

            def source(table: str) -> str:
                dataset = _arrow_dataset(loc, table, fs, observe=observe)
                if dataset is None:
                    return f"({sql.empty_relation(table)})"
                con.register(f"_arrow_{table}", dataset)
                return f"_arrow_{table}"

        else:

            def source(table: str) -> str:
                return _local_source(loc, table)

        # DuckDB binds a view when it is made, which expands a local table's glob (a
        # walk of every folder): the views are made over empty stand-ins first, and each
        # TABLE_all then replaced by its parts once (one walk per table, not one per view
        # that reads it). Views are bound again when queried, so they read the parts.
        for table in TABLES:
            con.execute(f"CREATE VIEW {table}_all AS {sql.empty_relation(table)}")
            con.execute(f"CREATE VIEW {table} AS {sql.table_view(table, f'{table}_all')}")
        tol = round(tolerance_s * 1e9)
        con.execute(f"CREATE VIEW segment_spans AS {sql.spans_view()}")
        con.execute(f"CREATE VIEW coverage AS {sql.coverage_view(tol)}")
        con.execute(f"CREATE VIEW drives AS {sql.drives_view(tol)}")
        con.execute(f"CREATE VIEW event_segments AS {sql.event_segments_view()}")
        for table in TABLES:
            con.execute(f"CREATE OR REPLACE VIEW {table}_all AS SELECT * FROM {source(table)}")
        con.execute(
            "CREATE TABLE catalog_info AS SELECT ? AS root, ? AS version, ? AS s3",
            [loc.root, int(marker["version"]), loc.s3],
        )
    except BaseException:
        con.close()
        raise
    if fs is not None:
        _FILESYSTEMS[con] = fs
        if observe is not None:
            _OBSERVERS[con] = observe
    return con


def _in_range(name: str, dates: DateRange) -> bool:
    """Whether a ``date=YYYY-MM-DD`` folder name lies in ``dates`` (either end open)."""
    try:
        day = dt.date.fromisoformat(name.removeprefix("date="))
    except ValueError:
        return False
    first, last = dates
    return (first is None or day >= first) and (last is None or day <= last)


def _local_parts(loc: Location, table: str, vehicle: str, dates: DateRange) -> list[str]:
    """The part files of one vehicle's date folders in ``dates`` (a local catalog)."""
    base = Path(loc.path(table))
    try:
        folder = Path(loc.path(partition_dir(table, vehicle, "x"))).parent
        days = [d for d in os.scandir(folder) if d.name.startswith("date=")]
    except (ValueError, FileNotFoundError, NotADirectoryError):  # no such vehicle
        return []
    out = []
    for day in days:
        if not _in_range(day.name, dates):
            continue
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for f in os.scandir(day.path):
                rel = Path(f.path).relative_to(base).as_posix()
                if PART_RE.match(rel):
                    out.append(f.path)
    return out


def _bucket_selectors(loc: Location, table: str, vehicle: str, dates: DateRange) -> list[str]:
    """The folders to list (below ``loc.base``) for one vehicle's ``dates``: each date's,
    or, for an open or long range, the vehicle's (recursively)."""
    try:
        vdir = partition_dir(table, vehicle, "x").rpartition("/")[0]
    except ValueError:  # a name no partition can have
        return []
    first, last = dates
    if first is None or last is None or (last - first).days >= _DATE_FOLDERS_MAX:
        return [loc.path(vdir)]
    days = ((first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1))
    return [loc.path(vdir, f"date={d}") for d in days]


def partition_parts(
    loc: Location,
    ranges: Mapping[str, DateRange],
    vehicles: Iterable[str],
    fs: pafs.FileSystem | None = None,
) -> dict[str, list[str]]:
    """Per table of ``ranges``, the part files of ``vehicles`` whose date partition lies in
    that table's ``(first, last)`` (inclusive; ``None`` leaves that end open), sorted.

    Only those folders are listed: locally the vehicle's date folders, in a bucket
    (``fs``) each date's prefix (a short range) or the vehicle's prefix, on threads."""
    if fs is None:
        wanted = sorted(set(vehicles))
        return {
            t: sorted(p for v in wanted for p in _local_parts(loc, t, v, r))
            for t, r in ranges.items()
        }
    infos = _partition_infos(loc, ranges, vehicles, fs)
    return {t: sorted({i.path for i in got}) for t, got in infos.items()}


def _partition_infos(
    loc: Location, ranges: Mapping[str, DateRange], vehicles: Iterable[str], fs: pafs.FileSystem
) -> dict[str, list[pafs.FileInfo]]:
    wanted = sorted(set(vehicles))
    jobs = [
        (t, folder)
        for t, r in ranges.items()
        for v in wanted
        for folder in _bucket_selectors(loc, t, v, r)
    ]

    found: dict[str, list[pafs.FileInfo]] = {t: [] for t in ranges}
    if jobs:
        with ThreadPoolExecutor(min(_LIST_THREADS, len(jobs))) as pool:
            got = pool.map(lambda j: _bucket_parts(fs, loc, j[0], j[1], ranges[j[0]]), jobs)
            for (table, _), infos in zip(jobs, got, strict=True):
                found[table] += infos
    return found


@contextlib.contextmanager
def partition_sources(
    con: duckdb.DuckDBPyConnection,
    ranges: Mapping[str, DateRange],
    vehicles: Iterable[str],
) -> Iterator[dict[str, str]]:
    """Relations (SQL text) that read, per table of ``ranges``, only the partitions of
    ``vehicles`` in that table's date range: the table's view (newest row per key within
    a partition, as the views keep it) over just those part files, found by listing just
    those folders (no glob, nor listing, of the whole table). Rows of other partitions
    are not in them: a question must not ask for them.

    ``con``: a connection of :func:`open_catalog`. In a bucket the parts are registered
    on ``con`` as Arrow datasets for the ``with`` block's time."""
    rows = con.execute("SELECT root, s3 FROM catalog_info").fetchall()
    root, s3 = str(rows[0][0]), bool(rows[0][1])
    loc = locate(root)
    fs = (_FILESYSTEMS.get(con) or s3_filesystem()) if s3 else None
    parts: Mapping[str, list[Any]] = (
        partition_parts(loc, ranges, vehicles)
        if fs is None
        else _partition_infos(loc, ranges, vehicles, fs)
    )
    registered: list[str] = []
    out: dict[str, str] = {}
    try:
        for table, found in parts.items():
            if not found:
                source = f"({sql.empty_relation(table)})"
            elif fs is None:
                source = f"({sql.parquet_relation(table, found)})"
            else:
                name = f"_parts_{table}_{uuid.uuid4().hex[:12]}"
                con.register(name, _arrow_dataset(loc, table, fs, found, _OBSERVERS.get(con)))
                registered.append(name)
                source = name
            out[table] = f"({sql.table_view(table, source)})"
        yield out
    finally:
        for name in registered:
            with contextlib.suppress(duckdb.Error):
                con.unregister(name)
