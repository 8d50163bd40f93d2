"""An MCAP file to a hyperframe file, windowed with the recorder's rule.

Two passes over the MCAP file, both streaming (memory holds the windows
still open, not the file). The first reads the file as a stream (every
channel and schema record wherever it is, each channel's first message, up
to the first message of every channel the statistics count), from which
:func:`hyperframes.mcap.schemas.plan_import` decides the streams. The second
reads the messages in log-time order (mcap's seeking reader, given the
channels and schemas a summary does not repeat) and feeds them through a
:class:`~hyperframes.mcap.windowing.WindowAssembler`, or, for our own
exports, a :class:`~hyperframes.mcap.blocks.BlockAssembler` that rebuilds
the blocks from their notes, into a :class:`~hyperframes.writer.HyperframeWriter`.
A frame's timestamp is the capture time its message carries (the
``timestamp`` of Foxglove and hyperframes messages) or, without one, the log
time. Every message not imported is counted per topic with the reason, and
the messages read are checked against the file's statistics.
"""

from __future__ import annotations

import json
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from mcap.exceptions import McapError
from mcap.reader import McapReader, make_reader
from mcap.records import Channel, DataEnd, Message, Metadata
from mcap.records import Schema as McapSchema
from mcap.stream_reader import StreamReader
from mcap.summary import Summary

from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.mcap.blocks import BlockAssembler, BlockNote
from hyperframes.mcap.errors import (
    BadMappingError,
    BadMessageError,
    EmptyRangeError,
    MessageDecodeError,
    NotMcapError,
    TopicNotFoundError,
)
from hyperframes.mcap.schemas import (
    ANNOTATION_TOPICS,
    BLOCKS_TOPIC,
    QUARANTINED_META_KEY,
    STREAM_META_KEY,
    ImportPlan,
    Schema,
    plan_import,
    quarantine_topic,
    stream_name_for,
)
from hyperframes.mcap.windowing import PendingFrame, ReadyWindow, WindowAssembler
from hyperframes.storage.local import check_output
from hyperframes.writer import HyperframeWriter, WriteFrame, replacing_writer

__all__ = ["TimeSource", "MCAP_MAGIC", "StreamReport", "ImportReport", "import_mcap"]

TimeSource = Literal["header", "log"]
MCAP_MAGIC = b"\x89MCAP0\r\n"
_HW = int(FrameFlags.HW_TIMESTAMP)
_KEY = int(FrameFlags.KEYFRAME)
_QUARANTINED = int(FrameFlags.QUARANTINED)
# what the mcap library raises on damaged bytes (it has no single root for them)
_DAMAGE = (McapError, ValueError, EOFError, struct.error, zlib.error, KeyError, IndexError)


@dataclass(slots=True)
class StreamReport:
    """One imported topic."""

    topic: str
    stream: StreamInfo
    frames: int = 0


@dataclass(slots=True)
class ImportReport:
    """What an import wrote, and what it left out.

    ``left_out`` maps a topic to the reasons its messages were not imported
    and how many each; ``problems`` lists disagreements between what the
    file's statistics (or a full read) say it holds and what was read.
    """

    output: Path
    window_ns: int
    windows: int = 0
    frames: int = 0
    late_frames: int = 0
    quarantined_frames: int = 0
    seconds: float = 0.0
    blocks: bool = False  # the windows were rebuilt from the export's block notes
    streams: dict[str, StreamReport] = field(default_factory=dict)
    skipped_topics: list[str] = field(default_factory=list)
    left_out: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def leave_out(self, topic: str, reason: str, count: int = 1) -> None:
        """Count ``count`` messages of ``topic`` not imported, for ``reason``."""
        if count > 0:
            reasons = self.left_out.setdefault(topic, {})
            reasons[reason] = reasons.get(reason, 0) + count

    def summary(self) -> str:
        """A few lines for the command line."""
        how = ", blocks as exported" if self.blocks else ""
        lines = [
            f"wrote {self.output}: {self.frames} frames in {self.windows} windows of "
            f"{self.window_ns / 1e6:g} ms{how}, {self.late_frames} late, "
            f"{self.quarantined_frames} quarantined, in {self.seconds:.1f} s"
        ]
        for name, s in self.streams.items():
            lines.append(
                f"  {s.topic:<32} -> {name:<20} {s.stream.kind!s:<7} "
                f"{s.stream.encoding:<9} {s.frames:>8} frames"
            )
        for topic, reasons in self.left_out.items():
            for reason, n in reasons.items():
                lines.append(f"  left out: {topic}: {n} messages ({reason})")
        lines += [f"  warning: {p}" for p in self.problems]
        return "\n".join(lines)


@dataclass(slots=True)
class _Topic:
    channel: Channel
    schema: McapSchema | None
    first: bytes
    others: list[Channel] = field(default_factory=list)  # more channels of the same topic


@dataclass(slots=True)
class _Scan:
    """The first pass: every schema and channel record, each channel's first message, and
    the message counts (exact when ``complete``)."""

    schemas: dict[int, McapSchema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    first: dict[int, bytes] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    complete: bool = False
    stats: dict[int, int] | None = None  # the statistics' message count per channel


def _open_reader(path: Path, f: IO[bytes]) -> McapReader:
    magic = f.read(len(MCAP_MAGIC))
    if magic != MCAP_MAGIC:
        raise NotMcapError(path, f"not an MCAP file (starts with {magic[:8].hex() or 'nothing'})")
    f.seek(0)
    return make_reader(f)


def _messages(
    path: Path, reader: McapReader, **kwargs: Any
) -> Iterator[tuple[McapSchema | None, Channel, Message]]:
    """``reader.iter_messages`` with the mcap library's errors as :class:`NotMcapError`."""
    try:
        yield from reader.iter_messages(**kwargs)
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP file: {type(exc).__name__}: {exc}") from exc


def _summary(path: Path, reader: McapReader) -> Summary | None:
    try:
        return reader.get_summary()
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP summary: {exc}") from exc


def _scan(path: Path, f: IO[bytes], summary: Summary | None) -> _Scan:
    """Read the file in file order (a stream read: channels and schemas wherever they are,
    the summary not needed), up to the first message of every channel the statistics say
    has messages; without statistics, to the end."""
    scan = _Scan()
    expected: set[int] | None = None
    if summary is not None and summary.statistics is not None:
        scan.stats = {int(c): int(n) for c, n in summary.statistics.channel_message_counts.items()}
        expected = {cid for cid, n in scan.stats.items() if n > 0} or None
    f.seek(0)
    try:
        for record in StreamReader(f, skip_magic=False).records:
            if isinstance(record, McapSchema):
                scan.schemas[record.id] = record
            elif isinstance(record, Channel):
                scan.channels[record.id] = record
            elif isinstance(record, Metadata) and record.name == "hyperframes":
                scan.metadata = dict(record.metadata)
            elif isinstance(record, Message):
                cid = record.channel_id
                if cid not in scan.channels:
                    raise NotMcapError(path, f"message of channel {cid} before its channel record")
                scan.counts[cid] = scan.counts.get(cid, 0) + 1
                if cid not in scan.first:
                    scan.first[cid] = bytes(record.data)
                    if expected is not None and expected <= scan.first.keys():
                        return scan
            elif isinstance(record, DataEnd):
                break
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP file: {type(exc).__name__}: {exc}") from exc
    scan.complete = True
    return scan


def _topics(path: Path, scan: _Scan) -> dict[str, _Topic]:
    """Every topic with a message: its first channel (by id), schema and first message."""
    topics: dict[str, _Topic] = {}
    for cid in sorted(scan.first):
        channel = scan.channels[cid]
        schema = scan.schemas.get(channel.schema_id) if channel.schema_id else None
        if channel.schema_id and schema is None:
            raise NotMcapError(
                path, f"channel {cid} ({channel.topic}): no schema {channel.schema_id}"
            )
        t = topics.get(channel.topic)
        if t is None:
            topics[channel.topic] = _Topic(channel, schema, scan.first[cid])
        else:
            t.others.append(channel)
    for topic, t in list(topics.items()):  # a stream with only quarantined frames in the file
        base = t.channel.metadata.get(QUARANTINED_META_KEY)
        if base is not None and topic == quarantine_topic(base) and base not in topics:
            topics[base] = _Topic(t.channel, t.schema, t.first)  # stands for it, no messages
    return topics


def _patch_summary(summary: Summary | None, scan: _Scan) -> None:
    """Give the seeking reader the channels and schemas a summary does not repeat (optional
    in MCAP; mcap 1.6 looks them up only there)."""
    if summary is None:
        return
    for sid, schema in scan.schemas.items():
        summary.schemas.setdefault(sid, schema)
    for cid, channel in scan.channels.items():
        summary.channels.setdefault(cid, channel)


def _our_metadata(path: Path, reader: McapReader, scan: _Scan) -> dict[str, str]:
    """The ``hyperframes`` metadata record of a file this package exported, or {}."""
    try:
        for m in reader.iter_metadata():
            if m.name == "hyperframes":
                return dict(m.metadata)
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP metadata: {exc}") from exc
    return scan.metadata  # a summary without metadata indexes: as the first pass saw it


def _annotation(topic: str, t: _Topic) -> bool:
    """A topic of :data:`ANNOTATION_TOPICS` (events, block notes) with its schema."""
    schema = ANNOTATION_TOPICS.get(topic)
    return schema is not None and t.schema is not None and t.schema.name == schema.name


def _quarantine_of(topic: str, t: _Topic, topics: Mapping[str, _Topic]) -> str | None:
    """The stream topic whose quarantined frames ``topic`` carries (our export), or None."""
    base = t.channel.metadata.get(QUARANTINED_META_KEY)
    if base is None or topic != quarantine_topic(base) or base not in topics:
        return None
    return base


def _select(
    path: Path, topics: dict[str, _Topic], mapping: Mapping[str, str] | None, include_all: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """topic -> stream name of the topics to import, and topic -> why the others are not.

    The quarantined frames of a stream (``/hyperframes/quarantined/...``) go with it.
    """
    mapping = dict(mapping or {})
    selectable = [t for t, info in topics.items() if _quarantine_of(t, info, topics) is None]
    for topic in mapping:
        if topic not in selectable:
            raise TopicNotFoundError(path, topic, sorted(selectable))
    chosen: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for topic in selectable:
        if topic in mapping:
            chosen[topic] = mapping[topic]
        elif _annotation(topic, topics[topic]):
            skipped[topic] = f"annotation topic {topics[topic].schema.name}"  # type: ignore[union-attr]
        elif mapping and not include_all:
            skipped[topic] = "not mapped: --map without --all-topics"
        else:
            chosen[topic] = stream_name_for(topic)
    for topic, t in topics.items():
        base = _quarantine_of(topic, t, topics)
        if base is not None and base not in chosen:
            skipped[topic] = f"quarantined frames of {base}, which is not imported"
    names = list(chosen.values())
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BadMappingError(path, f"several topics map to the stream(s) {', '.join(dup)}")
    return chosen, skipped


@dataclass(frozen=True, slots=True)
class _ChannelPlan:
    topic: str  # the stream's topic (for a quarantine channel: the stream it belongs to)
    plan: ImportPlan
    quarantined: bool = False


def _schema_of(t: _Topic) -> Schema | None:
    if t.schema is None or t.schema.id == 0:
        return None
    return Schema(t.schema.name, t.schema.encoding, bytes(t.schema.data))


def _same_kind(a: Channel, b: Channel) -> bool:
    return (a.schema_id, a.message_encoding) == (b.schema_id, b.message_encoding)


def _plans(
    path: Path, topics: dict[str, _Topic], chosen: dict[str, str], report: ImportReport,
    scan: _Scan,
) -> dict[int, _ChannelPlan]:  # fmt: skip
    """channel id -> plan, with stream ids assigned (kept from our own exports when unique).

    More channels of an imported topic with the same schema feed the same
    stream; one with another schema is left out (reported). The quarantine
    channel of a stream feeds that stream, its frames flagged QUARANTINED.
    """
    plans: dict[int, ImportPlan] = {}
    for topic, name in chosen.items():
        t = topics[topic]
        try:
            StreamInfo(0, name)
        except ValueError as exc:
            raise BadMappingError(path, f"topic {topic!r}: {exc}") from None
        try:
            plans[t.channel.id] = plan_import(
                name, _schema_of(t), t.channel.message_encoding, t.channel.metadata, t.first
            )
        except (MessageDecodeError, ValueError) as exc:
            raise BadMessageError(path, f"topic {topic!r}: first message: {exc}") from None
    used: set[int] = set()
    out: dict[int, ImportPlan] = {}
    for cid, p in plans.items():  # our own ids first, in channel order
        if p.ours and p.stream.id not in used:
            used.add(p.stream.id)
            out[cid] = p
    next_id = 0
    for cid, p in plans.items():
        if cid in out:
            continue
        while next_id in used:
            next_id += 1
        used.add(next_id)
        out[cid] = ImportPlan(_with_id(p.stream, next_id), p.codec, p.decode, p.keyframes, p.ours)
    result: dict[int, _ChannelPlan] = {}
    for topic in chosen:
        t = topics[topic]
        plan = out[t.channel.id]
        result[t.channel.id] = _ChannelPlan(topic, plan)
        for other in t.others:
            if _same_kind(other, t.channel):
                result[other.id] = _ChannelPlan(topic, plan)
            else:
                report.leave_out(topic, f"channel {other.id} has another schema or encoding than "
                                 f"channel {t.channel.id}", _count(scan, other.id))  # fmt: skip
    for topic, t in topics.items():
        base = _quarantine_of(topic, t, topics)
        if base is None or base not in chosen:
            continue
        base_plan = result[topics[base].channel.id]
        for channel in [t.channel, *t.others]:
            if _same_kind(channel, topics[base].channel):
                result[channel.id] = _ChannelPlan(base, base_plan.plan, quarantined=True)
            else:
                report.leave_out(topic, f"channel {channel.id} has another schema than {base}",
                                 _count(scan, channel.id))  # fmt: skip
    return dict(sorted(result.items()))


def _count(scan: _Scan, cid: int) -> int:
    """Messages of a channel: the statistics' count, else the first pass's (complete then)."""
    if scan.stats is not None and cid in scan.stats:
        return scan.stats[cid]
    return scan.counts.get(cid, 0)


def _with_id(s: StreamInfo, sid: int) -> StreamInfo:
    return StreamInfo.from_dict({**s.to_dict(), "id": sid})


def import_mcap(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    window_ns: int | None = None,
    mapping: Mapping[str, str] | None = None,
    include_all: bool = False,
    time_source: TimeSource = "header",
    max_delay_ns: int = 500_000_000,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Write the messages of the MCAP file ``source`` as the hyperframe file ``output``.

    ``mapping`` maps topics to stream names; when given, only those topics
    are imported unless ``include_all``. ``window_ns`` defaults to the window
    of a file this package exported. ``time_source="log"`` stamps frames with
    the log time even where the message carries a capture time. Frames whose
    window closed more than ``max_delay_ns`` (log time) before they appear
    are written LATE. A failed import leaves no output. Raises
    :class:`NotMcapError`, :class:`TopicNotFoundError`,
    :class:`BadMappingError`, :class:`BadMessageError`,
    :class:`EmptyRangeError` (no message to import).
    """
    t_start = time.monotonic()
    src = Path(source)
    out = check_output(output, overwrite)
    with open(src, "rb") as f:
        reader = _open_reader(src, f)
        summary = _summary(src, reader)
        scan = _scan(src, f, summary)
        topics = _topics(src, scan)
        chosen, skipped = _select(src, topics, mapping, include_all)
        if not chosen:
            raise EmptyRangeError(src, "no topic with messages to import")
        ours = _our_metadata(src, reader, scan)
        if window_ns is None:
            if "window_ns" not in ours:
                raise BadMappingError(src, "no window length: pass --window-ms")
            window_ns = int(ours["window_ns"])
        if window_ns <= 0:
            raise ValueError(f"window length must be > 0, got {window_ns} ns")
        report = ImportReport(out, window_ns)
        plans = _plans(src, topics, chosen, report, scan)
        # our own export, read with its own windows: the blocks come back as they were
        report.blocks = (
            BLOCKS_TOPIC in topics
            and _annotation(BLOCKS_TOPIC, topics[BLOCKS_TOPIC])
            and ours.get("window_ns") == str(window_ns)
            and time_source == "header"
            and all(p.plan.ours for p in plans.values())
        )
        for topic, reason in skipped.items():
            if report.blocks and topic == BLOCKS_TOPIC:
                continue  # read: the windows are rebuilt from it
            report.skipped_topics.append(topic)
            if topics[topic].channel.topic != topic:
                continue  # stands for a stream without messages: counted on its own topic
            for channel in [topics[topic].channel, *topics[topic].others]:
                report.leave_out(topic, reason, _count(scan, channel.id))
        streams = {p.plan.stream.id: p.plan.stream for p in plans.values()}
        by_id: dict[int, StreamReport] = {}
        for topic in chosen:
            stream = plans[topics[topic].channel.id].plan.stream
            by_id[stream.id] = report.streams[stream.name] = StreamReport(topic, stream)
        read = sorted({topics[t].channel.topic for t in topics if t in chosen} | {
            ch.topic for cid, p in plans.items() for ch in [scan.channels[cid]]
        } | ({BLOCKS_TOPIC} if report.blocks else set()))  # fmt: skip
        meta = _file_metadata(src, ours)
        with replacing_writer(out, list(streams.values()), window_ns, meta) as writer:
            counts = _read(src, reader, summary, scan, read, plans, writer, report, by_id,
                           time_source, max_delay_ns, progress)  # fmt: skip
    _check_counts(scan, counts, read, report)
    report.seconds = time.monotonic() - t_start
    return report


def _read(
    src: Path,
    reader: McapReader,
    summary: Summary | None,
    scan: _Scan,
    topics: list[str],
    plans: Mapping[int, _ChannelPlan],
    writer: HyperframeWriter,
    report: ImportReport,
    by_id: Mapping[int, StreamReport],
    time_source: TimeSource,
    max_delay_ns: int,
    progress: Callable[[int], None] | None,
) -> dict[int, int]:
    """The second pass: every message of ``topics`` in log-time order, into windows (rebuilt
    from block notes, or by the recorder's rule); returns the messages read per channel."""
    stream_ids = sorted({p.plan.stream.id for p in plans.values()})
    assembler = WindowAssembler(report.window_ns, stream_ids, max_delay_ns)
    blocks = BlockAssembler(
        {ch.topic: p.plan.stream.id for cid, p in plans.items() for ch in [scan.channels[cid]]},
        {_exported_name(scan.channels[cid], p.plan.stream): p.plan.stream.id
         for cid, p in plans.items()},
    )  # fmt: skip
    counts: dict[int, int] = {}
    _patch_summary(summary, scan)

    def write(windows: list[ReadyWindow]) -> None:
        try:
            _write(writer, windows, report, by_id)
        except ValueError as exc:  # a block note that does not fit the window rule
            raise BadMessageError(src, f"{BLOCKS_TOPIC}: {exc}") from None

    for _schema, channel, message in _messages(src, reader, topics=topics, log_time_order=True):
        counts[channel.id] = counts.get(channel.id, 0) + 1
        if channel.topic == BLOCKS_TOPIC and report.blocks:
            try:
                note = BlockNote.decode(message.data)
            except MessageDecodeError as exc:
                raise BadMessageError(
                    src, f"topic {channel.topic!r}, message at log time {message.log_time}: {exc}"
                ) from None
            write(blocks.add_note(note))
            continue
        cp = plans.get(channel.id)
        if cp is None:
            continue  # a channel left out (counted from the first pass)
        frame = _frame(src, channel, cp, message, time_source)
        if report.blocks:
            write(blocks.add_frame((channel.topic, message.log_time, message.sequence), frame))
        else:
            write(assembler.add(frame, message.log_time))
        if progress is not None and sum(counts.values()) % 1000 == 0:
            progress(report.frames)
    if report.blocks:
        write(blocks.finish())
        report.late_frames = blocks.late_frames
        for topic, _frame_left in blocks.unlisted:
            report.leave_out(topic, f"not listed in {BLOCKS_TOPIC}")
        for topic, n in blocks.not_found.items():
            report.problems.append(
                f"{topic}: {n} frames listed in {BLOCKS_TOPIC} are not in the file"
            )
    else:
        write(assembler.finish())
        report.late_frames = assembler.late_frames
    return counts


def _exported_name(channel: Channel, stream: StreamInfo) -> str:
    """The stream's name in the exported file (block notes use it; ``--map`` may rename)."""
    try:
        return str(json.loads(channel.metadata[STREAM_META_KEY])["name"])
    except (KeyError, ValueError, TypeError):
        return stream.name


def _check_counts(
    scan: _Scan, counts: Mapping[int, int], read: list[str], report: ImportReport
) -> None:
    """Every message the statistics (or the complete first pass) count was read."""
    wanted = set(read)
    for cid, channel in sorted(scan.channels.items()):
        if channel.topic not in wanted:
            continue
        if scan.stats is not None and cid in scan.stats:
            expected, source = scan.stats[cid], "the statistics count"
        elif scan.complete:
            expected, source = scan.counts.get(cid, 0), "a stream read finds"
        else:
            continue
        got = counts.get(cid, 0)
        if got != expected:
            report.problems.append(
                f"{channel.topic} (channel {cid}): {source} {expected} messages, {got} were read"
            )
    if scan.stats is not None:
        for cid, n in sorted(scan.stats.items()):
            if n > 0 and cid not in scan.channels:
                report.problems.append(f"channel {cid}: {n} messages counted, no channel record")


def _frame(
    path: Path, channel: Channel, cp: _ChannelPlan, message: Message, time_source: TimeSource
) -> PendingFrame:
    plan = cp.plan
    try:
        stamp, payload = plan.decode(message.data)
    except MessageDecodeError as exc:
        raise BadMessageError(
            path, f"topic {channel.topic!r}, message at log time {message.log_time}: {exc}"
        ) from None
    problem = plan.stream.size_problem(len(payload))
    if problem is not None:
        raise BadMessageError(
            path, f"topic {channel.topic!r}, message at log time {message.log_time}: {problem}"
        )
    ts = stamp if time_source == "header" and stamp else message.log_time
    flags = _HW if plan.stream.hardware_timestamps else 0
    if plan.keyframes(payload):
        flags |= _KEY
    if cp.quarantined:  # log time = arrival; publish time = receive time
        flags |= _QUARANTINED
        return PendingFrame(plan.stream.id, ts, payload, flags, message.sequence,
                            message.publish_time)  # fmt: skip
    if plan.ours:  # our export: sequence = stream index, publish time = receive time
        receive = message.publish_time if message.publish_time != message.log_time else 0
        return PendingFrame(plan.stream.id, ts, payload, flags, message.sequence, receive)
    return PendingFrame(plan.stream.id, ts, payload, flags, None, message.log_time)


def _write(
    writer: HyperframeWriter,
    windows: list[ReadyWindow],
    report: ImportReport,
    by_id: Mapping[int, StreamReport],
) -> None:
    for w in windows:
        writer.write_window(
            w.window_id,
            [
                WriteFrame(
                    f.stream_id,
                    f.timestamp_ns,
                    f.payload,
                    f.flags,
                    f.stream_index,
                    f.receive_ns,
                    f.duration_ns,
                )
                for f in w.frames
            ],
            w.missing,
        )
        report.windows += 1
        report.frames += len(w.frames)
        for f in w.frames:
            by_id[f.stream_id].frames += 1
            report.quarantined_frames += bool(f.flags & _QUARANTINED)


def _file_metadata(src: Path, ours: Mapping[str, str]) -> FileMetadata:
    """Who wrote the data: the first source file of our own export, else unknown."""
    first: dict[str, Any] = {}
    try:
        files = json.loads(ours.get("files", "[]"))
        first = files[0] if files and isinstance(files[0], dict) else {}
    except ValueError:
        pass
    return FileMetadata(
        vehicle_id=str(first.get("vehicle_id", "unknown")),
        recorder_version="hyperframes import",
        segment_seq=int(first.get("segment_seq", 0) or 0),
        created_ns=time.time_ns(),
        extra={"imported_from": src.name},
    )
