"""An MCAP file to a hyperframe file, windowed with the recorder's rule.

Two passes over the MCAP file, both streaming (memory holds the windows
still open, not the file): the first finds each topic's first message, from
which :func:`hyperframes.mcap.schemas.plan_import` decides the stream; the
second reads the messages in log-time order and feeds them through a
:class:`~hyperframes.mcap.windowing.WindowAssembler` into a
:class:`~hyperframes.writer.HyperframeWriter`. A frame's timestamp is the
capture time its message carries (the ``timestamp`` of Foxglove and
hyperframes messages) or, without one, the log time.
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
from mcap.records import Channel, Message
from mcap.records import Schema as McapSchema

from hyperframes._io import check_output, fsync_dir
from hyperframes.layout import FrameFlags
from hyperframes.mcap.errors import (
    BadMappingError,
    BadMessageError,
    EmptyRangeError,
    MessageDecodeError,
    NotMcapError,
    TopicNotFoundError,
)
from hyperframes.mcap.schemas import (
    EVENT_SCHEMA,
    EVENTS_TOPIC,
    ImportPlan,
    Schema,
    plan_import,
    stream_name_for,
)
from hyperframes.mcap.windowing import PendingFrame, ReadyWindow, WindowAssembler
from hyperframes.streams import FileMetadata, StreamInfo
from hyperframes.writer import HyperframeWriter, WriteFrame

__all__ = ["TimeSource", "MCAP_MAGIC", "StreamReport", "ImportReport", "import_mcap"]

TimeSource = Literal["header", "log"]
MCAP_MAGIC = b"\x89MCAP0\r\n"
_HW = int(FrameFlags.HW_TIMESTAMP)
_KEY = int(FrameFlags.KEYFRAME)
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
    """What an import wrote."""

    output: Path
    window_ns: int
    windows: int = 0
    frames: int = 0
    late_frames: int = 0
    seconds: float = 0.0
    streams: dict[str, StreamReport] = field(default_factory=dict)
    skipped_topics: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few lines for the command line."""
        lines = [
            f"wrote {self.output}: {self.frames} frames in {self.windows} windows of "
            f"{self.window_ns / 1e6:g} ms, {self.late_frames} late, in {self.seconds:.1f} s"
        ]
        for name, s in self.streams.items():
            lines.append(
                f"  {s.topic:<32} -> {name:<20} {s.stream.kind!s:<7} "
                f"{s.stream.encoding:<9} {s.frames:>8} frames"
            )
        if self.skipped_topics:
            lines.append(f"  skipped: {', '.join(self.skipped_topics)}")
        return "\n".join(lines)


@dataclass(slots=True)
class _Topic:
    channel: Channel
    schema: McapSchema | None
    first: bytes


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
        raise NotMcapError(path, f"damaged MCAP file: {exc}") from exc


def _topics(path: Path, reader: McapReader) -> dict[str, _Topic]:
    """Every topic with a message, with its first message (in file order)."""
    try:
        summary = reader.get_summary()
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP summary: {exc}") from exc
    expected: set[int] | None = None
    if summary is not None and summary.statistics is not None:
        counts = summary.statistics.channel_message_counts
        expected = {cid for cid in summary.channels if counts.get(cid, 0) > 0}
    seen: dict[int, _Topic] = {}
    for schema, channel, message in _messages(path, reader, log_time_order=False):
        if channel.id not in seen:
            seen[channel.id] = _Topic(channel, schema, bytes(message.data))
            if expected is not None and expected <= set(seen):
                break
    topics: dict[str, _Topic] = {}
    for t in sorted(seen.values(), key=lambda t: t.channel.id):
        topics.setdefault(t.channel.topic, t)
    return topics


def _our_metadata(path: Path, reader: McapReader) -> dict[str, str]:
    """The ``hyperframes`` metadata record of a file this package exported, or {}."""
    try:
        for m in reader.iter_metadata():
            if m.name == "hyperframes":
                return dict(m.metadata)
    except _DAMAGE as exc:
        raise NotMcapError(path, f"damaged MCAP metadata: {exc}") from exc
    return {}


def _select(
    path: Path, topics: dict[str, _Topic], mapping: Mapping[str, str] | None, include_all: bool
) -> tuple[dict[str, str], list[str]]:
    """topic -> stream name of the topics to import, and the topics skipped."""
    mapping = dict(mapping or {})
    for topic in mapping:
        if topic not in topics:
            raise TopicNotFoundError(path, topic, sorted(topics))
    chosen: dict[str, str] = {}
    skipped: list[str] = []
    for topic, t in topics.items():
        is_events = topic == EVENTS_TOPIC and t.schema is not None and (
            t.schema.name == EVENT_SCHEMA.name
        )  # fmt: skip
        if topic in mapping:
            chosen[topic] = mapping[topic]
        elif is_events or (mapping and not include_all):
            skipped.append(topic)
        else:
            chosen[topic] = stream_name_for(topic)
    names = list(chosen.values())
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BadMappingError(path, f"several topics map to the stream(s) {', '.join(dup)}")
    return chosen, skipped


def _plans(path: Path, topics: dict[str, _Topic], chosen: dict[str, str]) -> dict[int, ImportPlan]:
    """channel id -> plan, with stream ids assigned (kept from our own exports when unique)."""
    plans: dict[int, ImportPlan] = {}
    for topic, name in chosen.items():
        t = topics[topic]
        schema = (
            Schema(t.schema.name, t.schema.encoding, bytes(t.schema.data))
            if t.schema is not None and t.schema.id != 0
            else None
        )
        try:
            StreamInfo(0, name)
        except ValueError as exc:
            raise BadMappingError(path, f"topic {topic!r}: {exc}") from None
        try:
            plans[t.channel.id] = plan_import(
                name, schema, t.channel.message_encoding, t.channel.metadata, t.first
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
    return dict(sorted(out.items()))


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
        topics = _topics(src, reader)
        chosen, skipped = _select(src, topics, mapping, include_all)
        if not chosen:
            raise EmptyRangeError(src, "no topic with messages to import")
        ours = _our_metadata(src, reader)
        if window_ns is None:
            if "window_ns" not in ours:
                raise BadMappingError(src, "no window length: pass --window-ms")
            window_ns = int(ours["window_ns"])
        if window_ns <= 0:
            raise ValueError(f"window length must be > 0, got {window_ns} ns")
        plans = _plans(src, topics, chosen)
        report = ImportReport(out, window_ns, skipped_topics=skipped)
        for cid, p in plans.items():
            report.streams[p.stream.name] = StreamReport(_topic_of(topics)[cid], p.stream)
        # write beside the output and rename at the end, so --force keeps the old file on failure
        target = out if not out.exists() else out.with_name(f".{out.name}.importing")
        writer = HyperframeWriter(
            target, [p.stream for p in plans.values()], window_ns, _file_metadata(src, ours)
        )
        try:
            assembler = WindowAssembler(window_ns, [p.stream.id for p in plans.values()],
                                        max_delay_ns)  # fmt: skip
            f.seek(0)
            reader = make_reader(f)
            messages = _messages(src, reader, topics=list(chosen), log_time_order=True)
            for _schema, channel, message in messages:
                plan = plans.get(channel.id)
                if plan is None:
                    continue
                frame = _frame(src, channel, plan, message, time_source)
                _write(writer, assembler.add(frame, message.log_time), report)
                report.streams[plan.stream.name].frames += 1
                if progress is not None and report.frames % 1000 == 0:
                    progress(report.frames)
            _write(writer, assembler.finish(), report)
            report.late_frames = assembler.late_frames
            writer.finalize()
        except BaseException:
            writer.abort()
            writer.tmp_path.unlink(missing_ok=True)
            raise
        if target != out:
            os.replace(target, out)
            fsync_dir(out.parent)  # the rename over the old file survives a power cut
    report.seconds = time.monotonic() - t_start
    return report


def _topic_of(topics: dict[str, _Topic]) -> dict[int, str]:
    """channel id -> topic."""
    return {t.channel.id: name for name, t in topics.items()}


def _frame(
    path: Path, channel: Channel, plan: ImportPlan, message: Message, time_source: TimeSource
) -> PendingFrame:
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
    if plan.ours:  # our export: sequence = stream index, publish time = receive time
        receive = message.publish_time if message.publish_time != message.log_time else 0
        return PendingFrame(plan.stream.id, ts, payload, flags, message.sequence, receive)
    return PendingFrame(plan.stream.id, ts, payload, flags, None, message.log_time)


def _write(writer: HyperframeWriter, windows: list[ReadyWindow], report: ImportReport) -> None:
    for w in windows:
        writer.write_window(
            w.window_id,
            [
                WriteFrame(
                    f.stream_id, f.timestamp_ns, f.payload, f.flags, f.stream_index, f.receive_ns
                )
                for f in w.frames
            ],
            w.missing,
        )
        report.windows += 1
        report.frames += len(w.frames)


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
