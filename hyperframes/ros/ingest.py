"""A rosbag2 (a directory with its splits, or one ``.mcap``/``.db3`` file) to a hyperframe file.

``rosbags`` reads the bag (both storage plugins, the splits in the order of
``metadata.yaml``, file and message compression) and deserializes CDR with
the definitions stored in the bag (the built-in Humble typestore for a bag
without them). Every connection of any split is a stream, ids in topic
order, so the splits of a bag are one recording with one stream table.
:func:`~hyperframes.ros.decode.plan_topic` decides each topic's streams from its
first message; the messages (log-time order) go through the MCAP importer's
:class:`~hyperframes.mcap.windowing.WindowAssembler` into a
:class:`~hyperframes.writer.HyperframeWriter`. Frame time: ``header.stamp``
where the message has one (``time_source="header"``), else the log time; the
log time is each frame's receive time. ``/tf_static`` is also kept decoded in
the file metadata (``extra["ros"]["tf_static"]``). Each decoded stream's codec
comes from its first frame (:func:`_codecs`); payloads go to the writer as
views of the messages where they are already laid out as stored.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hyperframes.format.codecs import CODEC_NONE, CodecSpec, encode_frame
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.mcap.errors import (
    BadMappingError,
    BadMessageError,
    EmptyRangeError,
    McapToolError,
    MissingExtraError,
    TopicNotFoundError,
)
from hyperframes.mcap.schemas import stream_name_for
from hyperframes.mcap.windowing import PendingFrame, ReadyWindow, WindowAssembler
from hyperframes.ros.decode import (
    Decode,
    Payload,
    TopicPlan,
    camera_intrinsics,
    camera_namespace,
    header_stamp,
    plan_topic,
)
from hyperframes.ros.probe import is_zstd_split
from hyperframes.storage.local import check_output
from hyperframes.writer import HyperframeWriter, WriteFrame, default_codec, replacing_writer

try:
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.interfaces import Connection
    from rosbags.rosbag2 import ReaderError
    from rosbags.typesys import Stores, get_typestore
except ImportError as exc:  # the optional extra
    if exc.name is None or exc.name.split(".")[0] != "rosbags":
        raise
    raise MissingExtraError("rosbags", "ros") from None

__all__ = ["NotRosbagError", "RosTopicReport", "RosImportReport", "import_bag"]

TimeSource = Literal["header", "log"]
_KEY = int(FrameFlags.KEYFRAME)


class NotRosbagError(McapToolError, ValueError):
    """The input is not a readable rosbag2 (directory, ``.mcap`` or ``.db3``)."""


@dataclass(slots=True)
class RosTopicReport:
    """One imported topic: its type, streams, frames and where frame times came from."""

    topic: str
    msgtype: str
    streams: tuple[StreamInfo, ...]
    time: str  # "header.stamp" or "log time"
    messages: int = 0  # the bag's count (metadata)
    frames: int = 0
    cdr_reason: str | None = None


@dataclass(slots=True)
class RosImportReport:
    """What :func:`import_bag` wrote."""

    output: Path
    window_ns: int
    storage: str = ""
    windows: int = 0
    frames: int = 0
    late_frames: int = 0
    seconds: float = 0.0
    topics: dict[str, RosTopicReport] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)  # topic -> why
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few lines for the command line: per topic what it became."""
        lines = [
            f"wrote {self.output} from a rosbag2 ({self.storage}): {self.frames} frames in "
            f"{self.windows} windows of {self.window_ns / 1e6:g} ms, {self.late_frames} late, "
            f"in {self.seconds:.1f} s"
        ]
        for t in self.topics.values():
            s = t.streams[0]
            more = "".join(f" + {o.name}" for o in t.streams[1:])
            lines.append(
                f"  {t.topic:<28} -> {s.name + more:<28} {s.kind!s:<6} {s.encoding:<13} "
                f"{t.frames:>7} frames  time: {t.time}"
            )
        no_header = [t.topic for t in self.topics.values() if t.time == "log time (no header)"]
        if no_header:
            lines.append(f"  no header (log time): {', '.join(no_header)}")
        for t in self.topics.values():
            if t.cdr_reason is not None:
                lines.append(f"  kept as CDR: {t.topic} ({t.msgtype}): {t.cdr_reason}")
        lines += [f"  left out: {topic}: {why}" for topic, why in self.left_out.items()]
        lines += [f"  warning: {p}" for p in self.problems]
        return "\n".join(lines)


def _open(src: Path) -> AnyReader:
    if src.is_file() and is_zstd_split(src):
        bag = src.parent if (src.parent / "metadata.yaml").is_file() else None
        instead = (
            f"pass the bag directory {bag}"
            if bag
            else "pass the bag directory (the one with metadata.yaml) or the file decompressed"
        )
        raise NotRosbagError(src, f"a split of a file-compressed rosbag2 is read through its "
                                  f"directory: {instead}")  # fmt: skip
    try:
        reader = AnyReader([src], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
        reader.open()
    except (AnyReaderError, ReaderError, FileNotFoundError, ValueError, KeyError) as exc:
        raise NotRosbagError(src, f"not a readable rosbag2: {exc}") from None
    return reader


def _storage(src: Path) -> str:
    if src.is_dir():
        meta = (src / "metadata.yaml").read_text(errors="replace")
        plugin = next((ln.split(":", 1)[1].strip() for ln in meta.splitlines()
                       if ln.strip().startswith("storage_identifier:")), "?")  # fmt: skip
        return f"{plugin} directory"
    return src.suffix.lstrip(".")


def _first(reader: AnyReader, conns: list[Connection]) -> Any:
    for conn, _t, raw in reader.messages(connections=conns):
        try:
            return reader.deserialize(raw, conn.msgtype)
        except (AnyReaderError, ValueError, KeyError, IndexError):
            return None
    return None


def _plans(
    src: Path, reader: AnyReader, mapping: Mapping[str, str], include_all: bool,
    time_source: TimeSource, report: RosImportReport,
) -> dict[str, tuple[TopicPlan, list[Connection]]]:  # fmt: skip
    by_topic: dict[str, list[Connection]] = {}
    for conn in reader.connections:
        by_topic.setdefault(conn.topic, []).append(conn)
    for topic in mapping:
        if topic not in by_topic:
            raise TopicNotFoundError(src, topic, sorted(by_topic))
    plans: dict[str, tuple[TopicPlan, list[Connection]]] = {}
    next_id = 0
    for topic in sorted(by_topic):
        conns = by_topic[topic]
        count = sum(c.msgcount for c in conns)
        if mapping and topic not in mapping and not include_all:
            report.left_out[topic] = f"{count} messages: not mapped (--map without --all-topics)"
            continue
        types = {c.msgtype for c in conns}
        if len(types) > 1:
            report.left_out[topic] = f"{count} messages: several types {sorted(types)}"
            continue
        name = mapping.get(topic) or stream_name_for(topic)
        msgtype = conns[0].msgtype
        first = _first(reader, conns)
        plan = plan_topic(name, msgtype, _definition(reader, conns[0]), first)
        frame_id = getattr(getattr(first, "header", None), "frame_id", None)
        streams = []
        for s in plan.streams:
            try:
                streams.append(StreamInfo.from_dict({**s.to_dict(), "id": next_id}))
            except ValueError as exc:
                raise BadMappingError(src, f"topic {topic!r}: {exc}") from None
            next_id += 1
        plan = replace(plan, streams=_codecs(tuple(streams), plan, first))
        use_header = plan.has_header and time_source == "header"
        when = "header.stamp" if use_header else "log time" if plan.has_header else None
        report.topics[topic] = RosTopicReport(
            topic, msgtype, plan.streams, when or "log time (no header)", count,
            cdr_reason=plan.cdr_reason,
        )  # fmt: skip
        for s in plan.streams:  # what the ROS export gives back: the topic, the frame
            ros = s.extra.setdefault("ros", {})
            ros.update(time=report.topics[topic].time, topic=topic)
            if isinstance(frame_id, str) and frame_id:
                ros["frame_id"] = frame_id
        plans[topic] = (plan, conns)
    _intrinsics(reader, by_topic, report)
    names = [s.name for p, _ in plans.values() for s in p.streams]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BadMappingError(src, f"several topics map to the stream(s) {', '.join(dup)}")
    return plans


#: A stream is compressed only where its first frame shrinks by at least this share.
_MIN_GAIN = 0.1
_PLAIN_LZ4 = CodecSpec("lz4")


def _codecs(streams: tuple[StreamInfo, ...], plan: TopicPlan, first: Any) -> tuple[StreamInfo, ...]:
    """``streams`` with the codec their first frame compresses best with, or ``none``.

    Of the writer's default (``blosc2-lz4`` with byte shuffle for arrays) and plain LZ4,
    the one that stores the first message's frame smaller; codec ``none`` where neither
    gains ``_MIN_GAIN``. Compressing what does not shrink costs write time for nothing
    (a cloud of noisy float points: ~2 ms per 1.6 MB cloud; an IMU sample: ~15 us per
    48-byte frame, 200 a second), and plain LZ4 stores an Imu's orientation record
    (constant covariances) in a quarter of the bytes of the shuffled codec, 5 times
    faster. Decided once, before the first frame is written, and kept in the stream
    table like any codec. CDR and precompressed streams keep the writer's codec.
    """
    if plan.cdr_reason is not None or first is None:
        return streams
    try:
        payloads = plan.decode(first, b"")
    except (ValueError, AttributeError, IndexError, KeyError):
        return streams
    return tuple(_codec(s, p) for s, p in zip(streams, payloads, strict=True))


def _codec(stream: StreamInfo, payload: Payload) -> StreamInfo:
    spec = default_codec(stream)
    size = memoryview(payload).nbytes
    if spec.codec_id == CODEC_NONE or stream.codec is not None or size == 0:
        return stream
    default = len(encode_frame(payload, spec, stream.itemsize)[0])
    plain = len(encode_frame(payload, _PLAIN_LZ4, stream.itemsize)[0])
    if min(default, plain) > (1 - _MIN_GAIN) * size:
        return replace(stream, codec="none")
    if plain < default:
        return replace(stream, codec="lz4")
    return stream


def _definition(reader: AnyReader, conn: Connection) -> str:
    """The connection's stored ``ros2msg`` definition; for a bag without them the one of
    the typestore the bag is read with (empty for a type it does not know)."""
    if conn.msgdef.data:
        return str(conn.msgdef.data)
    try:
        return str(reader.typestore.generate_msgdef(conn.msgtype, ros_version=2)[0])
    except (KeyError, ValueError):
        return ""


_CAMERA_INFO = ("sensor_msgs/msg/CameraInfo", "sensor_msgs/CameraInfo")


def _intrinsics(
    reader: AnyReader, by_topic: Mapping[str, list[Connection]], report: RosImportReport
) -> None:
    """Each CameraInfo topic's first message into ``extra["intrinsics"]`` of the camera
    streams in its namespace (``/cam/front/camera_info`` -> ``/cam/front/image_raw``...);
    the CameraInfo topic itself stays CDR."""
    cameras = [t for t in report.topics.values() if t.streams[0].kind == "camera"]
    for topic in sorted(by_topic):
        conns = by_topic[topic]
        if len({c.msgtype for c in conns}) != 1 or conns[0].msgtype not in _CAMERA_INFO:
            continue
        ns = camera_namespace(topic)
        matched = [t for t in cameras if camera_namespace(t.topic) == ns]
        first = _first(reader, conns) if matched else None
        if first is None:
            continue
        for t in matched:
            t.streams[0].extra["intrinsics"] = {**camera_intrinsics(first), "topic": topic}
        if topic in report.topics:
            names = ", ".join(t.streams[0].name for t in matched)
            why = f"camera intrinsics: kept as CDR, and in extra['intrinsics'] of {names}"
            report.topics[topic].cdr_reason = why


def import_bag(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    window_ns: int,
    mapping: Mapping[str, str] | None = None,
    include_all: bool = False,
    time_source: TimeSource = "header",
    max_delay_ns: int = 500_000_000,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RosImportReport:
    """Write the rosbag2 ``source`` (directory, ``.mcap`` or ``.db3``) as ``output``.

    ``mapping``, ``include_all``, ``max_delay_ns`` and ``overwrite`` as for
    :func:`hyperframes.mcap.import_mcap`. A failed import leaves no output.
    Raises :class:`NotRosbagError`, :class:`TopicNotFoundError`,
    :class:`BadMappingError`, :class:`BadMessageError`, :class:`EmptyRangeError`.
    """
    t_start = time.monotonic()
    src = Path(source)
    out = check_output(output, overwrite)
    if window_ns <= 0:
        raise BadMappingError(src, "no window length: pass --window-ms")
    report = RosImportReport(out, window_ns, _storage(src))
    reader = _open(src)
    try:
        plans = _plans(src, reader, dict(mapping or {}), include_all, time_source, report)
        if not plans:
            raise EmptyRangeError(src, "no topic to import")
        streams = [s for p, _ in plans.values() for s in p.streams]
        meta = FileMetadata(recorder_version="hyperframes import", created_ns=time.time_ns())
        with replacing_writer(out, streams, window_ns, meta) as writer:
            tf_static = _read(src, reader, plans, writer, report, time_source, max_delay_ns,
                              progress)  # fmt: skip
            ros: dict[str, Any] = {"storage": report.storage, "tf_static": tf_static}
            writer.metadata = replace(meta, extra={"imported_from": src.name, "ros": ros})
    finally:
        reader.close()
    for t in report.topics.values():
        if t.frames != t.messages:
            report.problems.append(f"{t.topic}: the bag counts {t.messages} messages, "
                                   f"{t.frames} were imported")  # fmt: skip
    report.seconds = time.monotonic() - t_start
    return report


def _messages(src: Path, reader: AnyReader, conns: list[Connection]) -> Iterator[Any]:
    try:
        yield from reader.messages(connections=conns)
    except (AnyReaderError, ReaderError, ValueError, KeyError) as exc:
        raise NotRosbagError(src, f"damaged rosbag2: {exc}") from None


def _transforms(msg: Any) -> list[dict[str, Any]]:
    out = []
    for t in msg.transforms:
        tr, q = t.transform.translation, t.transform.rotation
        out.append({
            "parent": t.header.frame_id, "child": t.child_frame_id,
            "stamp_ns": header_stamp(t), "translation": [tr.x, tr.y, tr.z],
            "rotation_xyzw": [q.x, q.y, q.z, q.w],
        })  # fmt: skip
    return out


def _read(
    src: Path,
    reader: AnyReader,
    plans: Mapping[str, tuple[TopicPlan, list[Connection]]],
    writer: HyperframeWriter,
    report: RosImportReport,
    time_source: TimeSource,
    max_delay_ns: int,
    progress: Callable[[int], None] | None,
) -> list[dict[str, Any]]:
    """Every message in log-time order into windows; returns /tf_static's transforms."""
    ids = [s.id for p, _ in plans.values() for s in p.streams]
    assembler = WindowAssembler(report.window_ns, ids, max_delay_ns)
    add = assembler.add
    # per topic, worked out once: its plan, (stream id, flags) per stream, whether its
    # messages are deserialized, and its report
    routes: dict[str, tuple[Decode, tuple[tuple[int, int], ...], bool, RosTopicReport]] = {}
    for topic, (plan, _) in plans.items():
        needs = plan.cdr_reason is None or plan.has_header or topic == "/tf_static"
        out = tuple((s.id, _KEY if s.kind == "camera" else 0) for s in plan.streams)
        routes[topic] = (plan.decode, out, needs, report.topics[topic])
    conns = [c for _, cs in plans.values() for c in cs]
    header_time = time_source == "header"
    tf_static: list[dict[str, Any]] = []
    for n, (conn, log_time, raw) in enumerate(_messages(src, reader, conns), 1):
        decode, out, needs, topic_report = routes[conn.topic]
        try:
            # rosbags slices the CDR header off: a memoryview's slice is no copy, bytes' is
            view: Any = memoryview(raw)
            msg = reader.deserialize(view, conn.msgtype) if needs else None
            payloads = decode(msg, raw)
        except (AnyReaderError, ValueError, AttributeError, IndexError) as exc:
            raise BadMessageError(
                src, f"topic {conn.topic!r}, message at log time {log_time}: {exc}"
            ) from None
        if conn.topic == "/tf_static" and msg is not None and hasattr(msg, "transforms"):
            tf_static += _transforms(msg)
        stamp = header_stamp(msg) if header_time and msg is not None else None
        ts = stamp if stamp else log_time
        for (sid, flags), payload in zip(out, payloads, strict=True):
            ready = add(PendingFrame(sid, ts, payload, flags, None, log_time), log_time)
            if ready:
                _write(writer, ready, report)
        topic_report.frames += 1  # every frame added is written (late ones too)
        if progress is not None and n % 1000 == 0:
            progress(report.frames)
    _write(writer, assembler.finish(), report)
    report.late_frames = assembler.late_frames
    return tf_static


def _write(writer: HyperframeWriter, windows: list[ReadyWindow], report: RosImportReport) -> None:
    for w in windows:
        frames = [WriteFrame(f.stream_id, f.timestamp_ns, f.payload, f.flags, None, f.receive_ns)
                  for f in w.frames]  # fmt: skip
        writer.write_window(w.window_id, frames, w.missing)
        report.windows += 1
        report.frames += len(frames)
