"""Where a catalog's files live: a local directory or an ``s3://bucket/prefix``.

:class:`CatalogRoot` knows the marker (:data:`~hyperframes.catalog.schema.MARKER`),
writes part files whole or not at all (locally a hidden temporary name, fsync,
a rename that never replaces, fsync of the folder; in a bucket one PUT), lists
them, deletes them and compacts a table's partitions. It knows nothing of what
the rows mean (:mod:`hyperframes.catalog.rows`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from hyperframes.catalog.errors import CatalogError
from hyperframes.catalog.marker import check_marker, marker_bytes, missing_marker
from hyperframes.catalog.schema import (
    KEYS,
    MARKER,
    PARQUET_VERSION_KEY,
    SCHEMAS,
    VERSION,
    partition_dir,
)
from hyperframes.storage.local import fsync_dir, write_atomic
from hyperframes.storage.objects import (
    classify_error,
    client_for,
    fail,
    is_url,
    list_objects,
    split_s3_url,
)

__all__ = ["CatalogRoot", "PART_PREFIX", "PART_SUFFIX", "part_name"]

PART_PREFIX: Final = "part-"
PART_SUFFIX: Final = ".parquet"


def part_name() -> str:
    """A new part file's name: ``part-{UTC stamp}-{12 hex of a uuid4}.parquet`` (unique)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{PART_PREFIX}{stamp}-{uuid.uuid4().hex[:12]}{PART_SUFFIX}"


def _is_part(name: str) -> bool:
    return name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX)


def parquet_bytes(table: str, rows: pa.Table) -> bytes:
    """``rows`` as one Parquet file of ``table``'s schema (zstd, the layout version in its
    key-value metadata). Raises ``ValueError`` for rows that do not fit the schema."""
    schema = SCHEMAS[table].with_metadata({PARQUET_VERSION_KEY: str(VERSION).encode()})
    try:
        rows = rows.select(schema.names).cast(schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"rows of {table} do not fit its schema: {exc}") from None
    sink = io.BytesIO()
    pq.write_table(rows, sink, compression="zstd")
    return sink.getvalue()


class CatalogRoot:
    """A catalog's root folder (local) or prefix (``s3://``). Make one with :meth:`open`."""

    def __init__(self, url: str) -> None:
        """Use :meth:`open`, which checks the marker; this only names the root."""
        if is_url(url):
            bucket, key = split_s3_url(url)
            self._bucket, self._prefix = bucket, key.strip("/")
            self._url = f"s3://{bucket}/{self._prefix}".rstrip("/")
        else:
            self._bucket, self._prefix = "", ""
            self._url = str(Path(url).expanduser().absolute())

    @classmethod
    def open(cls, root: str, *, create: bool = False) -> CatalogRoot:
        """The catalog at ``root`` (a directory or ``s3://bucket/prefix``).

        With ``create`` a missing root (or marker) is made. Raises
        :class:`CatalogError` when there is no marker (and not ``create``), or
        the marker is not a catalog's or names a newer layout version than this
        hyperframes reads; ``ValueError`` for a malformed ``s3://`` URL.
        """
        self = cls(os.fspath(root))
        data = self._read(MARKER)
        if data is None:
            if not create:
                raise missing_marker(self.url)
            self._create_marker()
            data = self._read(MARKER)
            if data is None:  # pragma: no cover - a store that loses a PUT
                raise CatalogError(self.url, f"{MARKER} written but not found again")
        check_marker(self.url, data)
        return self

    # --- facts --------------------------------------------------------------

    @property
    def url(self) -> str:
        """The root: an absolute local path, or ``s3://bucket/prefix`` (no trailing ``/``)."""
        return self._url

    @property
    def is_remote(self) -> bool:
        """Whether the root is in a bucket."""
        return bool(self._bucket)

    def __repr__(self) -> str:
        return f"CatalogRoot({self._url!r})"

    # --- parts ----------------------------------------------------------------

    def write_part(self, table: str, vehicle: str, date: str, rows: pa.Table) -> str:
        """Write ``rows`` as one new part of ``table`` in partition (``vehicle``, ``date``);
        returns its path or URL. The part appears whole or not at all.

        Raises ``ValueError`` for an unknown table, a vehicle that cannot name a
        partition or rows that do not fit the schema; ``OSError`` or a
        :class:`~hyperframes.storage.objects.RemoteError` when the write fails.
        """
        rel = f"{partition_dir(table, vehicle, date)}/{part_name()}"
        data = parquet_bytes(table, rows)
        if self.is_remote:
            self._put(rel, data)
        else:
            path = Path(self._url, rel)
            _make_dirs(path.parent)
            write_atomic(path, data, replace=False)
        return self._child(rel)

    def list_parts(self, table: str) -> list[str]:
        """Every complete part file of ``table`` (paths or URLs), sorted; never a temporary."""
        if table not in SCHEMAS:
            raise ValueError(f"unknown catalog table {table!r}")
        if not self.is_remote:
            base = Path(self._url, table)
            found = [str(p) for p in base.glob("vehicle=*/date=*/*") if _is_part(p.name)]
            return sorted(found)
        return sorted(
            self._child(rel) for rel in self._list(f"{table}/") if _is_part(rel.rpartition("/")[2])
        )

    def read_part(self, path: str, columns: list[str] | None = None) -> pa.Table:
        """One part file's rows (``columns`` only, when given). Raises ``FileNotFoundError``
        for a part that is gone (compacted meanwhile)."""
        if is_url(path):
            bucket, key = split_s3_url(path)
            try:
                got = client_for().get_object(Bucket=bucket, Key=key)
                data = got["Body"].read()
            except Exception as exc:  # botocore raises many kinds
                if classify_error(exc).kind == "not-found":
                    raise FileNotFoundError(path) from None
                raise fail(path, exc) from None
            return pq.read_table(pa.BufferReader(data), columns=columns)
        return pq.read_table(path, columns=columns)

    def delete(self, path: str) -> None:
        """Delete one part file (a path or URL :meth:`list_parts` gave); gone already is fine."""
        if is_url(path):
            bucket, key = split_s3_url(path)
            try:
                client_for().delete_object(Bucket=bucket, Key=key)
            except Exception as exc:  # botocore raises many kinds
                if classify_error(exc).kind != "not-found":
                    raise fail(path, exc) from None
            return
        with contextlib.suppress(FileNotFoundError):
            Path(path).unlink()
            fsync_dir(Path(path).parent)

    def compact(self, table: str) -> int:
        """Merge each partition's parts of ``table`` into one; returns the parts removed.

        The merged part (the newest row per key, by ``cataloged_ns``) is written
        first, then the old parts are deleted: a crash in between leaves rows
        twice, which the views read once. Parts written meanwhile are left alone.
        """
        by_dir: dict[str, list[str]] = defaultdict(list)
        for part in self.list_parts(table):
            by_dir[part.rpartition("/")[0]].append(part)
        removed = 0
        for folder, parts in sorted(by_dir.items()):
            if len(parts) < 2:
                continue
            tables = []
            for part in parts:
                with contextlib.suppress(FileNotFoundError):  # another compaction took it
                    tables.append(self.read_part(part, SCHEMAS[table].names))
            if not tables:
                continue
            merged = _newest_per_key(table, pa.concat_tables(tables, promote_options="default"))
            vehicle = folder.rpartition("/vehicle=")[2].partition("/date=")[0]
            date = folder.rpartition("/date=")[2]
            self.write_part(table, vehicle, date, merged)
            for part in parts:
                self.delete(part)
                removed += 1
        return removed

    # --- internals --------------------------------------------------------------

    def _child(self, rel: str) -> str:
        return f"{self._url}/{rel}" if self.is_remote else str(Path(self._url, rel))

    def _key(self, rel: str) -> str:
        return f"{self._prefix}/{rel}" if self._prefix else rel

    def _read(self, rel: str) -> bytes | None:
        if not self.is_remote:
            try:
                return Path(self._url, rel).read_bytes()
            except FileNotFoundError:
                return None
            except NotADirectoryError:
                raise CatalogError(self.url, "is not a directory") from None
        try:
            got = client_for().get_object(Bucket=self._bucket, Key=self._key(rel))
            data: bytes = got["Body"].read()
        except Exception as exc:  # botocore raises many kinds
            if classify_error(exc).kind == "not-found":
                return None
            raise fail(self._child(rel), exc) from None
        return data

    def _put(self, rel: str, data: bytes) -> None:
        try:
            client_for().put_object(Bucket=self._bucket, Key=self._key(rel), Body=data)
        except Exception as exc:  # botocore raises many kinds
            raise fail(self._child(rel), exc) from None

    def _list(self, rel_prefix: str) -> list[str]:
        """The keys under ``rel_prefix``, relative to the root."""
        base = self._key(rel_prefix)
        cut = len(self._prefix) + 1 if self._prefix else 0
        try:
            return [obj["Key"][cut:] for obj in list_objects(self._bucket, base)]
        except Exception as exc:  # botocore raises many kinds
            raise fail(self._child(rel_prefix), exc) from None

    def _create_marker(self) -> None:
        data = marker_bytes()
        if self.is_remote:
            self._put(MARKER, data)
            return
        _make_dirs(Path(self._url))
        with contextlib.suppress(FileExistsError):  # another builder made it meanwhile
            write_atomic(Path(self._url, MARKER), data, replace=False)


def _make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each made durable in its parent folder."""
    missing = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another writer made it meanwhile
            d.mkdir(0o755)
        fsync_dir(d.parent)


def _newest_per_key(table: str, rows: pa.Table) -> pa.Table:
    """The newest row of each key of ``table``; events keep one row per segment."""
    return newest_per_key(rows, KEYS[table] if table != "events" else ("event_id", "uri"))


def newest_per_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The newest row (highest ``cataloged_ns``) of each distinct value of ``keys``: what
    the views keep (builders never rewrite parts, they add newer rows)."""
    rows = rows.sort_by([("cataloged_ns", "descending")])
    seen: set[tuple[Any, ...]] = set()
    keep: list[int] = []
    for i, key in enumerate(zip(*(rows.column(k).to_pylist() for k in keys), strict=True)):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return rows.take(pa.array(keep, pa.int64()))
