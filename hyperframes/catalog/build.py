"""``hyperframes catalog build``: catalog the segments of directories and bucket prefixes.

:func:`build` lists the sources (:mod:`hyperframes.catalog.listing`), skips
every object the catalog already holds unchanged (same size, and the same
ETag, or for a file the same modification time), reads the rest on threads
(:func:`~hyperframes.catalog.scan.scan_segment`: header, tables and events,
never payloads) and writes one part per table and partition for the run.

Safe to run twice at once (both add rows; the views keep the newest per key,
``cataloged_ns`` being when each segment was read) and to kill (a part
appears whole or not at all; a killed run reads again what it had not
written). A segment that cannot be read becomes a ``problems`` row; a store
that fails a request (network, refusal) or an object that vanished or changed
while being read is left for the next run and counted in ``failed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Final, NamedTuple

import pyarrow as pa

from hyperframes.catalog.listing import Listed, list_sources
from hyperframes.catalog.rows import Row, one_line, problem_row, segment_rows, tables
from hyperframes.catalog.scan import scan_segment
from hyperframes.catalog.store import CatalogRoot, newest_per_key
from hyperframes.errors import HyperframesError
from hyperframes.storage.objects import RemoteError, UnexpectedObjectError

__all__ = ["BuildReport", "Known", "build", "known_objects", "unchanged", "write_rows", "read_rows"]

_log = logging.getLogger("hyperframes.catalog")
_FLUSH_EVERY: Final = 10_000
"""Segments read before their rows are written (a long run writes a part now and then)."""
_KNOWN_COLUMNS: Final = ["uri", "bytes_stored", "etag", "modified_ns", "cataloged_ns"]
_MAX_ERRORS: Final = 20

Progress = Callable[[int, int], None]
"""``progress(done, total)``: segments read so far, of those to read."""


@dataclass(slots=True)
class BuildReport:
    """What a build did."""

    listed: int = 0
    """Segments the sources named."""
    skipped: int = 0
    """Already in the catalog, unchanged: not read."""
    read: int = 0
    """Opened and cataloged (their rows written)."""
    problems: int = 0
    """Could not be read: a ``problems`` row each."""
    failed: int = 0
    """Not cataloged now (the store failed, or the object vanished or changed while being
    read): read again by the next run."""
    requests: int = 0
    """Requests to the store for the segments read (0 for local files)."""
    parts: int = 0
    """Part files written."""
    events: int = 0
    """Event rows written."""
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    """The first messages of the ``failed`` ones."""

    @property
    def requests_per_segment(self) -> float:
        """Mean requests per segment read (0.0 when none was read)."""
        return self.requests / self.read if self.read else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``requests_per_segment``."""
        return {**asdict(self), "requests_per_segment": round(self.requests_per_segment, 3)}


class Known(NamedTuple):
    """What the catalog last recorded about an object (its newest ``segments`` or
    ``problems`` row)."""

    size: int | None
    etag: str | None
    modified_ns: int | None
    cataloged_ns: int


def known_objects(root: CatalogRoot, *, workers: int = 8) -> dict[str, Known]:
    """Every URI the catalog holds (segments and problems), with its newest record."""
    parts = [p for table in ("segments", "problems") for p in root.list_parts(table)]

    def load(part: str) -> pa.Table | None:
        try:
            return root.read_part(part, _KNOWN_COLUMNS)
        except FileNotFoundError:  # compacted meanwhile: its rows are in the merged part
            return None

    with ThreadPoolExecutor(max(1, workers)) as pool:
        loaded = [t for t in pool.map(load, parts) if t is not None]
    if not loaded:
        return {}
    rows = newest_per_key(pa.concat_tables(loaded, promote_options="default"), ("uri",))
    return {
        r["uri"]: Known(r["bytes_stored"], r["etag"], r["modified_ns"], r["cataloged_ns"] or 0)
        for r in rows.to_pylist()
    }


def unchanged(obj: Listed, known: Known | None) -> bool:
    """Whether the catalog's record of ``obj`` still holds: same size, and the same ETag
    (both known), else the same modification time."""
    if known is None or known.size != obj.size:
        return False
    if obj.etag and known.etag:
        return obj.etag == known.etag
    return known.modified_ns == obj.modified_ns


class _Read(NamedTuple):
    rows: list[Row]
    requests: int
    problem: bool
    failure: str | None


def read_rows(obj: Listed, source: str | None = None, sha256: str | None = None) -> _Read:
    """The rows of one object (its segment rows, or its problem row); a store failure or a
    vanished object gives no rows and says why."""
    now = time.time_ns()
    try:
        scanned = scan_segment(
            source or obj.uri, uri=obj.uri, etag=obj.etag, modified_ns=obj.modified_ns,
            sha256=sha256,
        )  # fmt: skip
    except FileNotFoundError as exc:
        return _Read([], 0, False, f"{obj.uri}: vanished ({one_line(exc)})")
    except RemoteError as exc:
        if not isinstance(exc, UnexpectedObjectError):
            return _Read([], 0, False, one_line(exc))
        row = problem_row(obj.uri, exc, size=obj.size, etag=obj.etag,
                          modified_ns=obj.modified_ns, cataloged_ns=now)  # fmt: skip
        return _Read([row], 0, True, None)
    except (HyperframesError, OSError, ValueError) as exc:
        row = problem_row(obj.uri, exc, size=obj.size, etag=obj.etag,
                          modified_ns=obj.modified_ns, cataloged_ns=now)  # fmt: skip
        return _Read([row], 0, True, None)
    return _Read(segment_rows(scanned.facts, now), scanned.requests, False, None)


def write_rows(root: CatalogRoot, rows: Iterable[Row], *, workers: int = 8) -> tuple[int, int]:
    """Write ``rows`` as one part per (table, vehicle, date); returns (parts, event rows)."""
    batches = tables(rows)
    if not batches:
        return 0, 0

    def put(item: tuple[tuple[str, str, str], Any]) -> str:
        (table, vehicle, date), batch = item
        return root.write_part(table, vehicle, date, batch)

    with ThreadPoolExecutor(max(1, min(workers, len(batches)))) as pool:
        written = list(pool.map(put, batches.items()))
    events = sum(b.num_rows for (t, _, _), b in batches.items() if t == "events")
    return len(written), events


def build(
    sources: Sequence[str],
    root: str,
    *,
    workers: int = 8,
    progress: Progress | None = None,
    full: bool = False,
) -> BuildReport:
    """Catalog the segments under ``sources`` into the catalog at ``root`` (made if missing).

    ``sources``: directories (walked recursively for ``*.hf``), files, globs
    and ``s3://bucket/prefix/`` (listed recursively). Only new or changed
    objects are read, unless ``full``. ``workers`` threads read at once.
    Raises :class:`~hyperframes.catalog.errors.CatalogError` for a root that
    is no catalog of this version, ``FileNotFoundError`` for a missing
    source, :class:`~hyperframes.storage.objects.RemoteError` when a bucket
    cannot be listed or a part not written.
    """
    t0 = time.monotonic()
    listed = list_sources(sources)  # a missing source stops the build before the root is made
    catalog = CatalogRoot.open(root, create=True)
    report = BuildReport()
    report.listed = len(listed)
    known = {} if full else known_objects(catalog, workers=max(workers, 16))  # I/O bound
    todo = [obj for obj in listed if full or not unchanged(obj, known.get(obj.uri))]
    report.skipped = len(listed) - len(todo)
    pending: list[Row] = []
    in_batch = 0
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for done, got in enumerate(pool.map(read_rows, todo), 1):
            if got.failure is not None:
                report.failed += 1
                if len(report.errors) < _MAX_ERRORS:
                    report.errors.append(got.failure)
                _log.warning("not cataloged now: %s", got.failure)
            elif got.problem:
                report.problems += 1
            else:
                report.read += 1
                report.requests += got.requests
            pending += got.rows
            in_batch += 1
            if in_batch >= _FLUSH_EVERY:
                _flush(catalog, pending, report, workers)
                pending, in_batch = [], 0
            if progress is not None:
                progress(done, len(todo))
    _flush(catalog, pending, report, workers)
    report.seconds = round(time.monotonic() - t0, 3)
    return report


def _flush(catalog: CatalogRoot, rows: list[Row], report: BuildReport, workers: int) -> None:
    parts, events = write_rows(catalog, rows, workers=workers)
    report.parts += parts
    report.events += events
