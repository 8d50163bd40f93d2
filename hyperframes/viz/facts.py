"""What a recording's tables say, as plain arrays: the input of the timeline and the events.

:func:`facts_from_reader` is the only I/O here: it reads the index, aux and
quarantine tables of an open file (32 + 16 bytes per frame), never a payload.
Everything downstream (:mod:`hyperframes.viz.events`,
:mod:`hyperframes.viz.timeline`) is pure and works on :class:`RecordingFacts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hyperframes.reader import HyperframeReader
from hyperframes.viz.errors import IncompatibleFilesError

__all__ = ["StreamFacts", "QuarantinedFrame", "RecordingFacts", "facts_from_reader", "merge_facts"]


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """One stream's frames as the index lists them (timestamp order)."""

    id: int
    name: str
    kind: str
    encoding: str
    rate_hz: float | None
    hardware: bool  # sensor capture clock (False: host clock)
    timestamps: np.ndarray  # uint64, sorted
    flags: np.ndarray  # uint16, aligned with timestamps
    stream_index: np.ndarray  # uint32, aligned with timestamps
    receive_ns: np.ndarray  # uint64, aligned with timestamps (0 = unknown)

    @property
    def frames(self) -> int:
        """Number of indexed frames."""
        return len(self.timestamps)


@dataclass(frozen=True, slots=True)
class QuarantinedFrame:
    """A frame the recorder quarantined: not in the index, its stamp implausible."""

    stream_id: int
    timestamp_ns: int
    stream_index: int
    receive_ns: int  # 0 = unknown
    size: int


@dataclass(frozen=True, slots=True)
class RecordingFacts:
    """The tables of one file (or of several consecutive files, merged)."""

    path: str
    window_ns: int
    start_ns: int  # span of the file(s), header TimeWindowStartNs
    end_ns: int
    window_ids: np.ndarray  # int64, windows that have a block, sorted
    missing: dict[int, tuple[int, ...]]  # window id -> stream ids without an on-time frame
    streams: tuple[StreamFacts, ...]
    quarantined: tuple[QuarantinedFrame, ...] = field(default=())
    #: where each file after the first begins (its first window), for merged files
    segment_starts: tuple[int, ...] = field(default=())

    def stream(self, name: str) -> StreamFacts:
        """A stream by name (KeyError listing the names otherwise)."""
        for s in self.streams:
            if s.name == name:
                return s
        raise KeyError(
            f"{self.path}: no stream {name!r}; streams: {[s.name for s in self.streams]}"
        )


def facts_from_reader(reader: HyperframeReader) -> RecordingFacts:
    """The facts of an open file (index, aux and quarantine tables; no payload is read)."""
    index = reader.index
    aux = reader.aux()
    streams = []
    for sid, info in sorted(reader.streams.items()):
        mask = index["stream_id"] == sid
        streams.append(
            StreamFacts(
                id=sid,
                name=info.name,
                kind=str(info.kind),
                encoding=info.encoding,
                rate_hz=info.rate_hz,
                hardware=info.hardware_timestamps,
                timestamps=np.ascontiguousarray(index["timestamp_ns"][mask]),
                flags=np.ascontiguousarray(index["flags"][mask]),
                stream_index=np.ascontiguousarray(index["stream_index"][mask]),
                receive_ns=(
                    np.ascontiguousarray(aux["receive_ns"][mask])
                    if len(aux) == len(index)
                    else np.zeros(int(mask.sum()), np.uint64)
                ),
            )
        )
    quarantined = tuple(
        QuarantinedFrame(
            int(q["stream_id"]),
            int(q["timestamp_ns"]),
            int(q["stream_index"]),
            int(q["receive_ns"]),
            int(q["size"]),
        )
        for q in reader.quarantine()
    )
    return RecordingFacts(
        path=reader.name,
        window_ns=reader.window_ns,
        start_ns=reader.start_ns,
        end_ns=reader.end_ns,
        window_ids=np.asarray(reader.window_ids, dtype=np.int64),
        missing=dict(reader.missing),
        streams=tuple(streams),
        quarantined=quarantined,
    )


def merge_facts(parts: Sequence[RecordingFacts]) -> RecordingFacts:
    """Consecutive files as one recording: streams matched by name, ids of the first file.

    All files must share the window length. Raises
    :class:`IncompatibleFilesError` otherwise.
    """
    if not parts:
        raise ValueError("no files to merge")
    if len(parts) == 1:
        return parts[0]
    parts = sorted(parts, key=lambda p: p.start_ns)
    window_ns = parts[0].window_ns
    for p in parts[1:]:
        if p.window_ns != window_ns:
            raise IncompatibleFilesError(
                p.path, f"window length {p.window_ns} ns differs from {parts[0].path} ({window_ns})"
            )
    names: dict[str, StreamFacts] = {}
    order: list[str] = []
    id_of: dict[str, int] = {}
    for p in parts:
        for s in p.streams:
            if s.name not in names:
                order.append(s.name)
                id_of[s.name] = s.id if s.id not in id_of.values() else max(id_of.values()) + 1
            names[s.name] = s
    streams = []
    for name in order:
        pieces = [s for p in parts for s in p.streams if s.name == name]
        ts = np.concatenate([s.timestamps for s in pieces])
        order_ts = np.argsort(ts, kind="stable")
        first = pieces[0]
        streams.append(
            StreamFacts(
                id=id_of[name], name=name, kind=first.kind, encoding=first.encoding,
                rate_hz=first.rate_hz, hardware=first.hardware, timestamps=ts[order_ts],
                flags=np.concatenate([s.flags for s in pieces])[order_ts],
                stream_index=np.concatenate([s.stream_index for s in pieces])[order_ts],
                receive_ns=np.concatenate([s.receive_ns for s in pieces])[order_ts],
            )
        )  # fmt: skip
    missing: dict[int, set[int]] = {}
    quarantined: list[QuarantinedFrame] = []
    for p in parts:
        local = {s.id: id_of[s.name] for s in p.streams}
        for wid, sids in p.missing.items():
            missing.setdefault(wid, set()).update(local[i] for i in sids if i in local)
        quarantined += [
            QuarantinedFrame(local.get(q.stream_id, q.stream_id), q.timestamp_ns,
                             q.stream_index, q.receive_ns, q.size)
            for q in p.quarantined
        ]  # fmt: skip
    return RecordingFacts(
        path=", ".join(p.path for p in parts),
        window_ns=window_ns,
        start_ns=min(p.start_ns for p in parts),
        end_ns=max(p.end_ns for p in parts),
        window_ids=np.unique(np.concatenate([p.window_ids for p in parts])),
        missing={k: tuple(sorted(v)) for k, v in sorted(missing.items())},
        streams=tuple(streams),
        quarantined=tuple(quarantined),
        segment_starts=tuple(
            int(p.window_ids[0]) * window_ns if len(p.window_ids) else p.start_ns for p in parts[1:]
        ),
    )
