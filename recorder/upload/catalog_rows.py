"""The upload service's catalog rows (``upload.catalog``): an uploaded segment's rows, and
with ``upload.mode: events`` the rows of the segments kept on the vehicle, once per
segment, under the URL each *would* have in the destination (the object is not there until
the depot requests it). A failure is logged and counted, never the upload's. Held by
:class:`~hyperframes.recorder.upload.service.UploadService` as ``catalog_rows``.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recorder.upload.config import UploadConfig
from hyperframes.recorder.upload.dest import Destination
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.plan import EntryBackoff, object_key
from hyperframes.recorder.upload.stats import UploadStats

__all__ = ["CatalogRows"]

_log = logging.getLogger("hyperframes.recorder.upload")


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class CatalogRows:
    """Sends the catalog rows of one service's segments to ``upload.catalog``.

    ``prefix``: the key prefix inside ``dest``; ``stopping``: whether the service was asked
    to stop; ``touch``: a sign of progress for its watchdog; ``clock``: monotonic seconds,
    as the service's (each segment's own backoff).
    """

    def __init__(
        self,
        cfg: VehicleConfig,
        up: UploadConfig,
        marks: MarkStore,
        dest: Destination,
        prefix: str,
        stats: UploadStats,
        *,
        rng: random.Random,
        clock: Callable[[], float],
        stopping: Callable[[], bool],
        touch: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self.up = up
        self.marks = marks
        self.dest = dest
        self.prefix = prefix
        self.stats = stats
        self._rng = rng
        self._clock = clock
        self._stopping = stopping
        self._touch = touch
        self._held = EntryBackoff(up.scan_interval_s, up.retry_max_s)
        """Mode events: segments whose catalog rows failed to go, each on its own backoff."""

    def add_uploaded(self, path: Path, doc: dict[str, Any]) -> None:
        """Add the uploaded segment to ``upload.catalog``; a failure is logged and counted,
        never the upload's."""
        try:
            from hyperframes.catalog.append import append_segment  # noqa: PLC0415 - the extra

            append_segment(str(self.up.catalog), str(path), uri=str(doc["url"]),
                           etag=doc.get("etag"), sha256=doc.get("sha256"))  # fmt: skip
        except Exception as exc:  # the upload stands whatever the catalog does
            self.stats.catalog_failures += 1
            _log.warning("uploaded %s, but adding it to the catalog %s failed: %s",
                         path.name, self.up.catalog, exc)  # fmt: skip
        else:
            self.stats.cataloged_segments += 1
            self._mark_cataloged(path.name, str(doc["url"]))

    def _mark_cataloged(self, name: str, uri: str) -> None:
        try:
            self.marks.mark_cataloged(name, {"uri": uri, "at": _now_iso()})
        except OSError as exc:  # the rows went; at worst they go once more
            _log.warning("cannot mark the catalog rows of %s sent: %s", name, exc)

    def waiting(self) -> list[Path]:
        """Mode events: finalized segments whose catalog rows were not sent yet (one marked
        uploaded got its rows with its upload, or ``catalog build`` adds them)."""
        if self.up.mode != "events" or self.up.catalog is None:
            self.stats.catalog_waiting = 0
            return []
        done = self.marks.cataloged_names() | self.marks.uploaded_names()
        waiting = [
            p for p in list_segments(self.cfg.output_dir, self.cfg.vehicle_id) if p.name not in done
        ]
        self._held.keep([p.name for p in waiting])
        self.stats.catalog_waiting = len(waiting)
        return waiting

    def send(self, waiting: list[Path]) -> int:
        """Mode events: append the rows of each segment in ``waiting`` to ``upload.catalog``
        under the URL it would have in the destination; mark each sent. The number that
        failed (each retried on its own backoff; two in a row end this pass)."""
        from hyperframes.catalog.append import append_segment  # noqa: PLC0415 - the extra

        failed = in_a_row = 0
        for path in waiting:
            if self._stopping():
                break
            if self._held.waiting(path.name, self._clock()):
                continue
            name = parse_segment_name(path.name)
            if name is None:  # pragma: no cover - list_segments parsed it already
                continue
            uri = self.dest.url(object_key(self.prefix, name.vehicle, name.start, path.name))
            try:
                append_segment(str(self.up.catalog), str(path), uri=uri)
            except FileNotFoundError:
                continue  # evicted meanwhile: its rows go nowhere
            except Exception as exc:  # never into the loop: counted, logged, retried
                failed += 1
                in_a_row += 1
                self.stats.catalog_failures += 1
                delay = self._held.failed(path.name, self._clock(), self._rng)
                _log.warning("catalog rows of %s not sent to %s (next try in %.0f s): %s",
                             path.name, self.up.catalog, delay, exc)  # fmt: skip
                if in_a_row >= 2:
                    break
                continue
            in_a_row = 0
            self._held.ok(path.name)
            self.stats.cataloged_segments += 1
            self.stats.catalog_waiting = max(0, self.stats.catalog_waiting - 1)
            self._mark_cataloged(path.name, uri)
            self._touch()
        return failed
