"""Hyperframe files to one MCAP file that opens in Foxglove with no set-up.

Frames are read window by window (one coalesced read per stream and time
slice, so memory holds one slice), merged across streams and files in
capture-time order, and written as messages whose log time is the capture
time and whose publish time is the host receive time (the capture time when
unknown); the sequence number is the stream's sequence number. Channels and
schemas: :mod:`hyperframes.mcap.schemas`. Quarantined frames go to
``/hyperframes/quarantined/<topic>`` at their arrival time (their stamps are
implausible, so they stay off the sensor's timeline).

Annotation topics (:data:`~hyperframes.mcap.schemas.ANNOTATION_TOPICS`):
``/hyperframes/events`` carries window boundaries and what went wrong
(:mod:`hyperframes.viz.events`); ``/hyperframes/blocks`` one note per window
block with what the messages cannot say (block, flags, receive time,
duration, missing streams; :mod:`hyperframes.mcap.blocks`). Both are merged
into the message stream as ``(log time, before/after, source, topic, message)``
tuples (:func:`heapq.merge`); a new annotation topic is one more entry in
``ANNOTATION_TOPICS`` and an iterator of its tuples, sorted by log time.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from mcap.writer import CompressionType, Writer

from hyperframes import __version__
from hyperframes.format import search
from hyperframes.format.streams import StreamInfo
from hyperframes.format.windows import window_end, window_of
from hyperframes.mcap import messages
from hyperframes.mcap.blocks import BlockNote, file_block_notes, quarantine_log_time
from hyperframes.mcap.errors import EmptyRangeError, StreamMismatchError, UnknownStreamError
from hyperframes.mcap.schemas import (
    ANNOTATION_TOPICS,
    BLOCKS_TOPIC,
    EVENTS_TOPIC,
    QUARANTINED_META_KEY,
    ChannelSpec,
    Codec,
    channel_for,
    quarantine_topic,
)
from hyperframes.reader import HyperframeReader
from hyperframes.storage.local import atomic_output
from hyperframes.viz.events import Event, recording_events
from hyperframes.viz.facts import facts_from_reader

__all__ = [
    "Compression",
    "COMPRESSIONS",
    "TopicStats",
    "ExportReport",
    "export_mcap",
    "Source",
    "stream_table",
    "frames_in",
    "time_slices",
    "time_slice",
    "file_metadata",
]

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
    blocks: int = 0
    seconds: float = 0.0
    topics: dict[str, TopicStats] = field(default_factory=dict)

    def summary(self) -> str:
        """A few lines for the command line."""
        rate = self.payload_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0
        lines = [
            f"wrote {self.output}: {self.messages} messages, {self.events} events, "
            f"{self.blocks} block notes, "
            f"{self.payload_bytes / 1e6:.1f} MB of payload in {self.seconds:.1f} s "
            f"({rate:.0f} MB/s), {(self.end_ns - self.start_ns) / 1e9:.1f} s of recording"
        ]
        for t in self.topics.values():
            lines.append(f"  {t.topic:<32} {t.schema:<26} {t.messages:>8} messages")
        return "\n".join(lines)


@dataclass(slots=True)
class Source:
    """One input file of an export: its reader, the selected streams and its quarantine rows."""

    reader: HyperframeReader
    ids: dict[str, int]  # selected stream name -> id in this file
    bases: dict[int, int]  # stream id -> index position of its first entry
    q_times: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # sorted
    q_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # quarantine rows


def stream_table(
    readers: Sequence[HyperframeReader], names: Sequence[str] | None
) -> dict[str, StreamInfo]:
    """The streams of several files by name (``names``: those only), the same in each file
    (``StreamMismatchError`` otherwise; ``UnknownStreamError`` for a name none has)."""
    table: dict[str, tuple[StreamInfo, str]] = {}
    for r in readers:
        for s in r.streams.values():
            seen = table.get(s.name)
            if seen is None:
                table[s.name] = (s, r.name)
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
            readers[0].name if len(readers) == 1 else ", ".join(r.name for r in readers),
            f"no stream {', '.join(map(repr, unknown))}; streams: {', '.join(table)}",
        )
    return {n: table[n][0] for n in names}


def frames_in(sources: Sequence[Source], lo: int, hi: int) -> int:
    """The number of frames (quarantined ones included) with ``lo <= t <= hi``."""
    n = 0
    for src in sources:
        for sid in src.ids.values():
            a, b = search.range_between(src.reader.timestamps(sid), lo, hi)
            n += b - a
        n += int(np.searchsorted(src.q_times, hi, "right") - np.searchsorted(src.q_times, lo))
    return n


def _next_after(sources: Sequence[Source], t: int) -> int | None:
    best: int | None = None
    for src in sources:
        for sid in src.ids.values():
            ts = src.reader.timestamps(sid)
            i = search.find(ts, t, "after")
            if i is not None and (best is None or int(ts[i]) < best):
                best = int(ts[i])
        j = int(np.searchsorted(src.q_times, t, "left"))
        if j < len(src.q_times) and (best is None or int(src.q_times[j]) < best):
            best = int(src.q_times[j])
    return best


def time_slices(
    sources: Sequence[Source], lo: int, hi: int, step: int
) -> Iterator[tuple[int, int]]:
    """Inclusive time slices covering ``[lo, hi]``, each inside one window of ``step`` ns
    (so a slice ends on its window's end), skipping stretches without frames."""
    t = lo
    while t <= hi:
        t_hi = min(window_end(window_of(t, step), step), hi)
        yield t, t_hi
        nxt = _next_after(sources, t_hi + 1) if t_hi < hi else None
        if nxt is None or nxt > hi:
            return
        t = nxt


# log time, stream name, quarantined, message timestamp, receive time, stream index, payload
_Row = tuple[int, str, bool, int, int, int, memoryview]


def time_slice(sources: Sequence[Source], lo: int, hi: int) -> list[_Row]:
    """Messages with a log time ``lo <= t <= hi`` in log-time order: the indexed frames
    stamped then, and the quarantined frames that arrived then."""
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
                rows.append((f.timestamp_ns, name, False, f.timestamp_ns, rx, f.stream_index,
                             f.data.data))  # fmt: skip
        a = int(np.searchsorted(src.q_times, lo, "left"))
        b = int(np.searchsorted(src.q_times, hi, "right"))
        for t, i in zip(src.q_times[a:b].tolist(), src.q_rows[a:b].tolist(), strict=True):
            f = src.reader.quarantined_frame(i)
            rx = int(src.reader.quarantine()[i]["receive_ns"])
            rows.append((t, f.stream.name, True, f.timestamp_ns, rx, f.stream_index, f.data.data))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return rows


def _quarantined(r: HyperframeReader, ids: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Log times (sorted) and quarantine-table rows of the quarantined frames of ``ids``."""
    q = r.quarantine()
    windows = r.window_table
    keep = [i for i in range(len(q)) if int(q[i]["stream_id"]) in ids.values()]
    if not keep or len(windows) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    rows = np.searchsorted(windows["payload_offset"], q["offset"][keep], "right") - 1
    times = np.array(
        [
            quarantine_log_time(
                int(q[i]["receive_ns"]), int(windows["window_id"][max(row, 0)]), r.window_ns
            )
            for i, row in zip(keep, rows.tolist(), strict=True)
        ],
        np.int64,
    )
    order = np.argsort(times, kind="stable")
    return times[order], np.asarray(keep, np.int64)[order]


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
        table = stream_table(readers, streams)
        sources = []
        for r in readers:
            ids = {n: s.id for n in table for s in r.streams.values() if s.name == n}
            stream_ids = r.index["stream_id"]
            bases = {sid: int(np.searchsorted(stream_ids, sid, "left")) for sid in ids.values()}
            sources.append(Source(r, ids, bases, *_quarantined(r, ids)))
        lo = min(r.start_ns for r in readers) if start_ns is None else start_ns
        hi = max(r.end_ns for r in readers) if end_ns is None else end_ns
        if hi < lo:
            raise EmptyRangeError(where, f"empty time range: --to {hi} is before --from {lo}")
        total = frames_in(sources, lo, hi)
        if total == 0:
            raise EmptyRangeError(where, f"no frame of {', '.join(table)} between {lo} and {hi} ns")
        specs = {n: channel_for(s) for n, s in table.items()}
        q_specs = {
            n: _quarantine_channel(specs[n])
            for n in table
            if any(n in src.ids and _has_quarantined(src, src.ids[n], lo, hi) for src in sources)
        }
        events_list: list[_Annotation] = []
        if events:
            for r in readers:
                events_list += [
                    (max(e.start_ns, 0), _BEFORE, 0, EVENTS_TOPIC, _event_message(e, str(r.path)))
                    for e in recording_events(facts_from_reader(r))
                    if lo <= e.start_ns <= hi and (not e.stream or e.stream in table)
                ]
            events_list.sort(key=lambda a: a[:3])
        notes: list[Iterator[_Annotation]] = []
        for k, src in enumerate(sources):
            topics = {sid: specs[n].topic for n, sid in src.ids.items()}
            q_topics = {sid: q_specs[n].topic for n, sid in src.ids.items() if n in q_specs}
            blocks = file_block_notes(src.reader, topics, q_topics, lo, hi)
            notes.append((max(note.log_time, 0), _AFTER, k, BLOCKS_TOPIC, note) for note in blocks)
        # each source's notes are in window order: merged lazily, one block at a time
        annotations = heapq.merge(events_list, *notes, key=lambda a: a[:3])
        report = ExportReport(Path(output), lo, hi)
        with atomic_output(output, overwrite) as tmp, open(tmp, "wb") as f:
            out = _McapOut(f, compression, chunk_size)
            chans = {n: out.channel(spec) for n, spec in specs.items()}
            q_chans = {n: out.channel(spec) for n, spec in q_specs.items()}
            named = [*specs.items(), *((f"{n} (quarantined)", q) for n, q in q_specs.items())]
            for n, spec in named:
                schema = spec.schema.name if spec.schema is not None else spec.message_encoding
                report.topics[n] = TopicStats(spec.topic, schema)
            annotation_channels: dict[str, int] = {}  # topic -> channel, on first use
            out.writer.add_metadata("hyperframes", file_metadata(readers, table))
            pending = iter(annotations)
            nxt = next(pending, None)

            def annotate(a: _Annotation) -> None:
                t, _order, _k, topic, body = a
                if topic not in annotation_channels:
                    annotation_channels[topic] = out.channel(
                        ChannelSpec(topic, Codec.JSON, ANNOTATION_TOPICS[topic], "json", {}, "")
                    )
                data = body.encode() if isinstance(body, BlockNote) else body
                out.writer.add_message(annotation_channels[topic], t, data, t)
                if topic == EVENTS_TOPIC:
                    report.events += 1
                else:
                    report.blocks += 1

            for t_lo, t_hi in time_slices(sources, lo, hi, readers[0].window_ns):
                for row in time_slice(sources, t_lo, t_hi):
                    t, name, quarantined, stamp, rx, seq, payload = row
                    while nxt is not None and nxt[:2] < (t, _FRAME):
                        annotate(nxt)
                        nxt = next(pending, None)
                    channel = q_chans[name] if quarantined else chans[name]
                    out.writer.add_message(
                        channel, t, specs[name].encode(stamp, payload), rx or t,
                        min(seq, _MAX_SEQUENCE),
                    )  # fmt: skip
                    stats = report.topics[f"{name} (quarantined)" if quarantined else name]
                    stats.messages += 1
                    stats.payload_bytes += len(payload)
                    report.messages += 1
                    report.payload_bytes += len(payload)
                while nxt is not None and nxt[0] <= t_hi:
                    annotate(nxt)
                    nxt = next(pending, None)
                if progress is not None:
                    progress(report.messages / total)
            while nxt is not None:
                annotate(nxt)
                nxt = next(pending, None)
            out.writer.finish()  # type: ignore[no-untyped-call]
            f.flush()
    report.seconds = time.monotonic() - t_start
    return report


# where an annotation goes among the frames of its log time: before them (events) or after
# them (block notes: a block is complete once its frames are written)
_BEFORE, _FRAME, _AFTER = 0, 1, 2
# log time, order, source file, topic (of ANNOTATION_TOPICS), message
_Annotation = tuple[int, int, int, str, bytes | BlockNote]


def _quarantine_channel(spec: ChannelSpec) -> ChannelSpec:
    """The channel of a stream's quarantined frames: same schema, its own topic."""
    meta = {**spec.metadata, QUARANTINED_META_KEY: spec.topic}
    return replace(spec, topic=quarantine_topic(spec.topic), metadata=meta)


def _has_quarantined(src: Source, sid: int, lo: int, hi: int) -> bool:
    a = int(np.searchsorted(src.q_times, lo, "left"))
    b = int(np.searchsorted(src.q_times, hi, "right"))
    q = src.reader.quarantine()
    return any(int(q[i]["stream_id"]) == sid for i in src.q_rows[a:b].tolist())


def file_metadata(
    readers: Sequence[HyperframeReader], table: dict[str, StreamInfo]
) -> dict[str, str]:
    """The files exported and their streams, as MCAP metadata (string values)."""
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
