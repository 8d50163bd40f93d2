"""Open one segment (a file or an object) and gather what its catalog rows need.

Reads the header, the tables written at finalize (metadata, stream table,
index, window table) and the frames of its event streams: on an object, the
reader's open (two ranged GETs: the tail and the header) and, where the events
do not lie in those spans, one more for them. Never a sensor payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from hyperframes.catalog.listing import quoted_etag
from hyperframes.catalog.rows import SegmentFacts
from hyperframes.events import Event, EventError
from hyperframes.format.streams import SensorKind
from hyperframes.reader import HyperframeReader

__all__ = ["Scanned", "scan_segment"]

_HOLD_MAX: Final = 1 << 20
"""Events spread over at most this many bytes are fetched with one request."""


@dataclass(frozen=True, slots=True)
class Scanned:
    """A segment's facts and what reading them cost (requests to the store; 0 for files)."""

    facts: SegmentFacts
    requests: int


def _events(r: HyperframeReader) -> list[Event]:
    """The events in the file's event streams (kind ``event``, encoding ``json``), by time."""
    positions: list[np.ndarray] = []
    for sid, info in r.streams.items():
        if info.kind == SensorKind.EVENT and info.encoding == "json":
            lo, hi = r.stream_slice(sid)
            positions.append(np.arange(lo, hi, dtype=np.intp))
    pos = np.concatenate(positions) if positions else np.empty(0, np.intp)
    if not len(pos):
        return []
    if r.remote is not None:  # the events' span in one request, when it is small
        rows = r.index[pos]
        first = int(rows["offset"].min())
        end = int((rows["offset"] + rows["size"]).max())
        if end - first <= _HOLD_MAX:
            r.remote.hold(first, end - first)
    out: list[Event] = []
    try:
        for frame in r.read_positions(pos):
            try:
                out.append(Event.from_json(frame.tobytes()))
            except EventError:
                continue  # a foreign event stream with another schema
    finally:
        if r.remote is not None:
            r.remote.release()
    out.sort(key=lambda e: e.t_ns)
    return out


def scan_segment(
    source: str,
    *,
    uri: str | None = None,
    etag: str | None = None,
    modified_ns: int | None = None,
    sha256: str | None = None,
) -> Scanned:
    """Open ``source`` (a path or ``s3://`` URL) and gather its facts, recorded under
    ``uri`` (default: ``source``). An object's size and ETag are what its open saw.

    Raises what opening or reading it raises (a
    :class:`~hyperframes.errors.HyperframesError`, ``OSError``, ``ValueError``).
    """
    with HyperframeReader(source, verify=False) as r:
        streams = [r.streams[sid] for sid in r.streams]
        index = r.index  # every entry checked
        facts = SegmentFacts(
            uri=uri or source,
            header=r.header,
            metadata=r.metadata,
            streams=streams,
            index=index,
            windows=r.window_table,
            missing=r.missing,
            events=_events(r),
            size=r.file_size,
            etag=quoted_etag(r.remote.etag if r.remote is not None and r.remote.etag else etag),
            modified_ns=modified_ns,
            sha256=sha256,
        )
        requests = r.remote.stats.requests if r.remote is not None else 0
    return Scanned(facts, requests)
