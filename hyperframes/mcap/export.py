"""Hyperframe files to one MCAP file that opens in Foxglove with no set-up.

Frames are read window by window (one coalesced read per stream and time
slice, so memory holds one slice), merged across streams and files in
capture-time order, and written as messages whose log time is the capture
time and whose publish time is the host receive time (the capture time when
unknown); the sequence number is the stream's sequence number. Channels and
schemas: :mod:`hyperframes.mcap.schemas`. The annotation topic
(``/hyperframes/events``) carries window boundaries and what went wrong
(:mod:`hyperframes.viz.events`). Quarantined frames appear there only: their
stamps are implausible, so they are not put on a sensor's timeline.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from mcap.writer import CompressionType, Writer

from hyperframes import __version__, search
from hyperframes._io import atomic_output
from hyperframes.mcap import messages
from hyperframes.mcap.errors import EmptyRangeError, StreamMismatchError, UnknownStreamError
from hyperframes.mcap.schemas import EVENT_SCHEMA, EVENTS_TOPIC, ChannelSpec, Codec, channel_for
from hyperframes.reader import HyperframeReader
from hyperframes.streams import StreamInfo
from hyperframes.viz.events import Event, recording_events
from hyperframes.viz.facts import facts_from_reader

__all__ = ["Compression", "COMPRESSIONS", "TopicStats", "ExportReport", "export_mcap"]

Compression = Literal["zstd", "lz4", "none"]
COMPRESSIONS: dict[str, CompressionType] = {
    "zstd": CompressionType.ZSTD,
    "lz4": CompressionType.LZ4,
    "none": CompressionType.NONE,
}
_MAX_SEQUENCE = (1 << 32) - 1


@dataclass(slots=True)
class TopicStats:
    """Messages written to one topic."""

    topic: str
    schema: str
    messages: int = 0
    payload_bytes: int = 0


@dataclass(slots=True)
class ExportReport:
    """What an export wrote."""

    output: Path
    start_ns: int
    end_ns: int
    messages: int = 0
    payload_bytes: int = 0
    events: int = 0
    seconds: float = 0.0
    topics: dict[str, TopicStats] = field(default_factory=dict)

    def summary(self) -> str:
        """A few lines for the command line."""
        rate = self.payload_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0
        lines = [
            f"wrote {self.output}: {self.messages} messages, {self.events} events, "
            f"{self.payload_bytes / 1e6:.1f} MB of payload in {self.seconds:.1f} s "
            f"({rate:.0f} MB/s), {(self.end_ns - self.start_ns) / 1e9:.1f} s of recording"
        ]
        for t in self.topics.values():
            lines.append(f"  {t.topic:<32} {t.schema:<26} {t.messages:>8} messages")
        return "\n".join(lines)


@dataclass(slots=True)
class _Source:
    reader: HyperframeReader
    ids: dict[str, int]  # selected stream name -> id in this file
    bases: dict[int, int]  # stream id -> index position of its first entry


def _stream_table(
    readers: Sequence[HyperframeReader], names: Sequence[str] | None
) -> dict[str, StreamInfo]:
    table: dict[str, tuple[StreamInfo, str]] = {}
    for r in readers:
        for s in r.streams.values():
            seen = table.get(s.name)
            if seen is None:
                table[s.name] = (s, str(r.path))
                continue
            a, where = seen
            if (a.kind, a.encoding, a.dtype, a.shape) != (s.kind, s.encoding, s.dtype, s.shape):
                raise StreamMismatchError(
                    r.path,
                    f"stream {s.name!r} is {s.kind}/{s.encoding} {s.dtype} {s.shape} here but "
                    f"{a.kind}/{a.encoding} {a.dtype} {a.shape} in {where}",
                )
    if names is None:
        return {n: s for n, (s, _) in table.items()}
    unknown = [n for n in names if n not in table]
    if unknown:
        raise UnknownStreamError(
            readers[0].path if len(readers) == 1 else ", ".join(str(r.path) for r in readers),
            f"no stream {', '.join(map(repr, unknown))}; streams: {', '.join(table)}",
        )
    return {n: table[n][0] for n in names}


def _frames_in(sources: Sequence[_Source], lo: int, hi: int) -> int:
    n = 0
    for src in sources:
        for sid in src.ids.values():
            a, b = search.range_between(src.reader.timestamps(sid), lo, hi)
            n += b - a
    return n


def _next_after(sources: Sequence[_Source], t: int) -> int | None:
    best: int | None = None
    for src in sources:
        for sid in src.ids.values():
            ts = src.reader.timestamps(sid)
            i = search.find(ts, t, "after")
            if i is not None and (best is None or int(ts[i]) < best):
                best = int(ts[i])
    return best


def _slices(sources: Sequence[_Source], lo: int, hi: int, step: int) -> Iterator[tuple[int, int]]:
    """Inclusive time slices of ``step`` ns covering the frames in ``[lo, hi]``, skipping
    stretches without frames."""
    t = lo
    while t <= hi:
        t_hi = min(t + step - 1, hi)
        yield t, t_hi
        nxt = _next_after(sources, t_hi + 1) if t_hi < hi else None
        if nxt is None or nxt > hi:
            return
        t = nxt


_Row = tuple[int, int, str, int, memoryview]  # t, receive, stream name, stream index, payload


def _slice(sources: Sequence[_Source], lo: int, hi: int) -> list[_Row]:
    """Frames with ``lo <= t <= hi`` in time order."""
    rows: list[_Row] = []
    for src in sources:
        aux = src.reader.aux()
        for name, sid in src.ids.items():
            a, b = search.range_between(src.reader.timestamps(sid), lo, hi)
            if b <= a:
                continue
            frames = src.reader.read_range(sid, lo, hi)
            base = src.bases[sid]
            receive = (
                aux["receive_ns"][base + a : base + b] if len(aux) else np.zeros(b - a, np.uint64)
            )
            if len(frames) != b - a:  # read_range uses the same search: cannot differ
                raise RuntimeError(f"{src.reader.path}: {name}: {len(frames)} != {b - a} frames")
            for f, rx in zip(frames, receive.tolist(), strict=True):
                rows.append((f.timestamp_ns, rx, name, f.stream_index, f.data.data))
    rows.sort(key=lambda r: (r[0], r[2]))
    return rows


def _event_message(e: Event, file: str) -> bytes:
    doc: dict[str, Any] = {
        "timestamp": messages.json_timestamp(e.start_ns),
        "kind": e.kind,
        "stream": e.stream,
        "start_ns": e.start_ns,
        "end_ns": e.end_ns,
        "count": e.count,
        "detail": e.detail,
        "file": file,
    }
    return messages.encode_json(doc)


class _McapOut:
    """Channel registration and message writing on one mcap Writer."""

    def __init__(self, f: IO[bytes], compression: Compression, chunk_size: int) -> None:
        import mcap  # noqa: PLC0415 - for its version only

        self.writer = Writer(f, chunk_size=chunk_size, compression=COMPRESSIONS[compression])
        self.writer.start(profile="", library=f"hyperframes {__version__}; mcap {mcap.__version__}")
        self._schemas: dict[tuple[str, str, bytes], int] = {}

    def channel(self, spec: ChannelSpec) -> int:
        schema_id = 0
        if spec.schema is not None:
            key = (spec.schema.name, spec.schema.encoding, spec.schema.data)
            if key not in self._schemas:
                self._schemas[key] = self.writer.register_schema(*key)
            schema_id = self._schemas[key]
        channel_id: int = self.writer.register_channel(
            spec.topic, spec.message_encoding, schema_id, spec.metadata
        )
        return channel_id


def export_mcap(
    files: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    streams: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    compression: Compression = "zstd",
    chunk_size: int = 4 << 20,
    events: bool = True,
    overwrite: bool = False,
    progress: Callable[[float], None] | None = None,
) -> ExportReport:
    """Write the frames of ``files`` (consecutive segments) to the MCAP file ``output``.

    ``streams`` selects streams by name (default: all); ``start_ns``/``end_ns``
    an inclusive capture-time range (default: everything). ``compression`` is
    the chunk compression. ``progress`` is called with the fraction done.
    Raises :class:`EmptyRangeError` when nothing would be written and
    :class:`StreamMismatchError`/:class:`UnknownStreamError` on bad stream
    selections; a failed export leaves no output.
    """
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}")
    if not files:
        raise ValueError("no input files")
    t_start = time.monotonic()
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(HyperframeReader(p)) for p in files]
        readers.sort(key=lambda r: r.start_ns)
        where = ", ".join(str(r.path) for r in readers)
        table = _stream_table(readers, streams)
        sources = []
        for r in readers:
            ids = {n: s.id for n in table for s in r.streams.values() if s.name == n}
            stream_ids = r.index["stream_id"]
            bases = {sid: int(np.searchsorted(stream_ids, sid, "left")) for sid in ids.values()}
            sources.append(_Source(r, ids, bases))
        lo = min(r.start_ns for r in readers) if start_ns is None else start_ns
        hi = max(r.end_ns for r in readers) if end_ns is None else end_ns
        if hi < lo:
            raise EmptyRangeError(where, f"empty time range: --to {hi} is before --from {lo}")
        total = _frames_in(sources, lo, hi)
        if total == 0:
            raise EmptyRangeError(where, f"no frame of {', '.join(table)} between {lo} and {hi} ns")
        event_list: list[tuple[Event, str]] = []
        if events:
            for r in readers:
                event_list += [
                    (e, str(r.path))
                    for e in recording_events(facts_from_reader(r))
                    if lo <= e.start_ns <= hi and (not e.stream or e.stream in table)
                ]
            event_list.sort(key=lambda pair: pair[0].start_ns)
        report = ExportReport(Path(output), lo, hi)
        with atomic_output(output, overwrite) as tmp, open(tmp, "wb") as f:
            out = _McapOut(f, compression, chunk_size)
            specs = {n: channel_for(s) for n, s in table.items()}
            chans = {n: out.channel(spec) for n, spec in specs.items()}
            for n, spec in specs.items():
                schema = spec.schema.name if spec.schema is not None else spec.message_encoding
                report.topics[n] = TopicStats(spec.topic, schema)
            event_channel = 0
            if events:
                spec = ChannelSpec(EVENTS_TOPIC, Codec.JSON, EVENT_SCHEMA, "json", {}, "")
                event_channel = out.channel(spec)
            out.writer.add_metadata("hyperframes", _file_metadata(readers, table))
            pending = iter(event_list)
            next_event = next(pending, None)
            for t_lo, t_hi in _slices(sources, lo, hi, readers[0].window_ns):
                due: list[tuple[Event, str]] = []
                while next_event is not None and next_event[0].start_ns <= t_hi:
                    due.append(next_event)
                    next_event = next(pending, None)
                frames = _slice(sources, t_lo, t_hi)
                order = sorted(
                    [(max(e.start_ns, 0), 0, i) for i, (e, _) in enumerate(due)]
                    + [(row[0], 1, i) for i, row in enumerate(frames)]
                )
                for t, is_frame, i in order:
                    if not is_frame:
                        e, file = due[i]
                        out.writer.add_message(event_channel, t, _event_message(e, file), t)
                        report.events += 1
                        continue
                    ts, rx, name, seq, payload = frames[i]
                    out.writer.add_message(
                        chans[name], ts, specs[name].encode(ts, payload), rx or ts,
                        min(seq, _MAX_SEQUENCE),
                    )  # fmt: skip
                    stats = report.topics[name]
                    stats.messages += 1
                    stats.payload_bytes += len(payload)
                    report.messages += 1
                    report.payload_bytes += len(payload)
                if progress is not None:
                    progress(report.messages / total)
            for e, file in [*([next_event] if next_event else []), *pending]:
                t0 = max(e.start_ns, 0)
                out.writer.add_message(event_channel, t0, _event_message(e, file), t0)
                report.events += 1
            out.writer.finish()  # type: ignore[no-untyped-call]
            f.flush()
    report.seconds = time.monotonic() - t_start
    return report


def _file_metadata(
    readers: Sequence[HyperframeReader], table: dict[str, StreamInfo]
) -> dict[str, str]:
    files = [
        {
            "path": str(r.path),
            "start_ns": r.start_ns,
            "end_ns": r.end_ns,
            "window_ns": r.window_ns,
            **r.metadata.to_dict(),
        }
        for r in readers
    ]
    return {
        "exported_by": f"hyperframes {__version__}",
        "window_ns": str(readers[0].window_ns),
        "files": json.dumps(files, separators=(",", ":")),
        "streams": json.dumps([s.to_dict() for s in table.values()], separators=(",", ":")),
    }
