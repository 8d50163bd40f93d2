"""Hyperframe files to ROS 2: an MCAP file of profile ``ros2`` (or a rosbag2 directory).

``hyperframes export FILE... --mcap OUT.mcap --profile ros2`` (docs/ROS2.md,
"ROS 2 out"): every stream becomes a topic of a standard type, its messages
CDR-serialized by ``rosbags``' typestore, its schema the ``ros2msg``
definition the typestore gives, so ``rosbags`` and ``ros2 bag`` read the file.

- :func:`plan_channels` (pure): which topic, type and definition each stream
  becomes, and why a stream is left out;
- the message builders (pure: a payload and a stamp in, a CDR message out):
  :func:`compressed_image`, :func:`image`, :func:`pointcloud`, :func:`imu`,
  :func:`navsatfix`, :func:`compressed_video`;
- :func:`export_ros2`: the I/O, walking the files as
  :func:`hyperframes.mcap.export_mcap` does (one time slice in memory).

Header stamps are the frame timestamps; the log time is the receive time
(the import's log time, so a bag comes back with its log times), the frame
time where unknown. Topics and frame ids come from the stream's
``extra["ros"]`` (``topic``, ``frame_id``) where present, else ``/NAME`` and
``NAME``. Events go to an MCAP attachment (``hyperframes/events.json``), the
file metadata to the MCAP metadata record ``hyperframes``: no channel
without a schema.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hyperframes import __version__
from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.mcap.errors import EmptyRangeError, MissingExtraError
from hyperframes.reader import HyperframeReader
from hyperframes.ros.decode import CDR_ENCODING, IMU_EXTRA_ENCODING, NAVSAT_ENCODING
from hyperframes.storage.local import atomic_output

try:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError:  # pragma: no cover - the ros extra
    get_typestore = None  # type: ignore[assignment]

__all__ = [
    "RosChannel",
    "RosExportReport",
    "plan_channels",
    "compressed_image",
    "image",
    "pointcloud",
    "imu",
    "navsatfix",
    "compressed_video",
    "export_ros2",
    "typestore",
]

VIDEO_TYPE = "foxglove_msgs/msg/CompressedVideo"
# foxglove_msgs/msg/CompressedVideo as foxglove_msgs (ROS 2) defines it
VIDEO_MSGDEF = """builtin_interfaces/Time timestamp
string frame_id
uint8[] data
string format
"""
# our camera encoding -> (sensor_msgs/Image encoding, bytes per sample, samples per pixel)
IMAGE_ENCODINGS: dict[str, tuple[str, int, int]] = {
    "raw-rgb": ("rgb8", 1, 3),
    "raw-bgr": ("bgr8", 1, 3),
    "raw-gray8": ("mono8", 1, 1),
    "raw-gray16": ("mono16", 2, 1),
    "raw-f32": ("32FC1", 4, 1),
}
# numpy kind+size -> sensor_msgs/PointField datatype
_POINT_TYPES = {"i1": 1, "u1": 2, "i2": 3, "u2": 4, "i4": 5, "u4": 6, "f4": 7, "f8": 8}
_ZERO9 = np.zeros(9)


@functools.cache
def typestore() -> Any:
    """The ROS 2 Humble typestore with ``foxglove_msgs/msg/CompressedVideo`` added."""
    if get_typestore is None:
        raise MissingExtraError("rosbags", "ros")
    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(VIDEO_MSGDEF, VIDEO_TYPE))
    return store


def _types() -> dict[str, Any]:
    return typestore().types  # type: ignore[no-any-return]


def _header(stamp_ns: int, frame_id: str) -> Any:
    t = _types()
    stamp = t["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
    return t["std_msgs/msg/Header"](stamp=stamp, frame_id=frame_id)


def _cdr(msg: Any, msgtype: str) -> bytes:
    return bytes(typestore().serialize_cdr(msg, msgtype))


def compressed_image(stamp_ns: int, frame_id: str, fmt: str, data: bytes | memoryview) -> bytes:
    """A sensor_msgs/CompressedImage (CDR) holding ``data`` unchanged."""
    msg = _types()["sensor_msgs/msg/CompressedImage"](
        header=_header(stamp_ns, frame_id), format=fmt, data=np.frombuffer(data, np.uint8)
    )
    return _cdr(msg, "sensor_msgs/msg/CompressedImage")


def image(stamp_ns: int, frame_id: str, stream: StreamInfo, data: bytes | memoryview) -> bytes:
    """A sensor_msgs/Image (CDR) of a raw camera frame: rows unpadded, little endian."""
    ros_enc, sample, channels = IMAGE_ENCODINGS[stream.encoding]
    orig = _ros(stream).get("encoding")
    if isinstance(orig, str) and orig in ("8UC1", "16UC1"):  # mono8/mono16 under another name
        ros_enc = orig
    width, height = int(stream.extra["width"]), int(stream.extra["height"])
    step = width * sample * channels
    if len(data) != step * height:
        raise ValueError(f"{stream.name}: frame of {len(data)} bytes is not {width}x{height} "
                         f"{stream.encoding}")  # fmt: skip
    msg = _types()["sensor_msgs/msg/Image"](
        header=_header(stamp_ns, frame_id), height=height, width=width, encoding=ros_enc,
        is_bigendian=0, step=step, data=np.frombuffer(data, np.uint8),
    )  # fmt: skip
    return _cdr(msg, "sensor_msgs/msg/Image")


def point_dtype(stream: StreamInfo) -> tuple[np.dtype[Any], list[str]]:
    """The packed dtype of one point of a lidar stream and the ROS field names
    (``extra["fields"]`` where given; ValueError for a layout PointCloud2 cannot hold)."""
    names = stream.extra.get("fields")
    if stream.encoding in ("xyzi-f32", "points-f32") or (
        stream.dtype == "<f4" and stream.shape is not None and len(stream.shape) == 2
    ):
        if stream.shape is None or len(stream.shape) != 2 or stream.shape[1] <= 0:
            raise ValueError(f"points of shape {stream.shape}")
        k = stream.shape[1]
        if not (isinstance(names, list) and len(names) == k):
            names = ["x", "y", "z", "intensity", *(f"f{i}" for i in range(4, k))][:k]
            if k < 3:
                raise ValueError(f"{k} float32 per point without field names")
        return np.dtype({"names": [f"f{i}" for i in range(k)], "formats": ["<f4"] * k}), names
    if stream.encoding == "points" and stream.dtype is not None:
        dt = np.dtype(stream.dtype)
        if dt.names is None or not (isinstance(names, list) and len(names) == len(dt.names)):
            raise ValueError(f"structured points {stream.dtype!r} without their field names")
        return dt, [str(n) for n in names]
    raise ValueError(f"no point layout for {stream.encoding!r} {stream.dtype} {stream.shape}")


def _point_fields(dt: np.dtype[Any], names: list[str]) -> list[Any]:
    pf = _types()["sensor_msgs/msg/PointField"]
    fields = []
    for key, name in zip(dt.names or (), names, strict=True):
        sub, offset = dt.fields[key][0], dt.fields[key][1]  # type: ignore[index]
        base = sub.base
        code = _POINT_TYPES.get(f"{base.kind}{base.itemsize}")
        if code is None or base.byteorder == ">":
            raise ValueError(f"point field {name!r}: {base.str} has no PointField datatype")
        count = int(np.prod(sub.shape)) if sub.shape else 1
        fields.append(pf(name=name, offset=offset, datatype=code, count=count))
    return fields


def pointcloud(stamp_ns: int, frame_id: str, dt: np.dtype[Any], names: list[str],
               data: bytes | memoryview) -> bytes:  # fmt: skip
    """A sensor_msgs/PointCloud2 (CDR): one row of packed points, one PointField per field."""
    if len(data) % dt.itemsize:
        raise ValueError(f"{len(data)} bytes are not points of {dt.itemsize} bytes")
    n = len(data) // dt.itemsize
    msg = _types()["sensor_msgs/msg/PointCloud2"](
        header=_header(stamp_ns, frame_id), height=1, width=n, fields=_point_fields(dt, names),
        is_bigendian=False, point_step=dt.itemsize, row_step=dt.itemsize * n,
        data=np.frombuffer(data, np.uint8), is_dense=True,
    )  # fmt: skip
    return _cdr(msg, "sensor_msgs/msg/PointCloud2")


def imu(stamp_ns: int, frame_id: str, values: bytes | memoryview,
        orientation: bytes | memoryview | None) -> bytes:  # fmt: skip
    """A sensor_msgs/Imu (CDR) from ``imu-f64`` (accel xyz, gyro xyz) and, where given, the
    31 doubles of the ``NAME.orientation`` stream; without it the orientation is unknown
    (``orientation_covariance[0] = -1``, as in ROS)."""
    t = _types()
    v3, quat = t["geometry_msgs/msg/Vector3"], t["geometry_msgs/msg/Quaternion"]
    a = np.frombuffer(values, "<f8")
    if a.size != 6:
        raise ValueError(f"imu-f64 frame of {a.size} doubles, not 6")
    if orientation is not None:
        o = np.frombuffer(orientation, "<f8")
        if o.size != 31:
            raise ValueError(f"{IMU_EXTRA_ENCODING} frame of {o.size} doubles, not 31")
        q, cov = o[:4], (o[4:13].copy(), o[13:22].copy(), o[22:31].copy())
    else:
        q = np.array([0.0, 0.0, 0.0, 1.0])
        cov = (np.r_[-1.0, np.zeros(8)], _ZERO9.copy(), _ZERO9.copy())
    msg = t["sensor_msgs/msg/Imu"](
        header=_header(stamp_ns, frame_id),
        orientation=quat(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3])),
        orientation_covariance=cov[0],
        angular_velocity=v3(x=float(a[3]), y=float(a[4]), z=float(a[5])),
        angular_velocity_covariance=cov[1],
        linear_acceleration=v3(x=float(a[0]), y=float(a[1]), z=float(a[2])),
        linear_acceleration_covariance=cov[2],
    )
    return _cdr(msg, "sensor_msgs/msg/Imu")


def navsatfix(stamp_ns: int, frame_id: str, values: bytes | memoryview) -> bytes:
    """A sensor_msgs/NavSatFix (CDR) from the 15 doubles of ``navsatfix-f64``."""
    t = _types()
    v = np.frombuffer(values, "<f8")
    if v.size != 15:
        raise ValueError(f"{NAVSAT_ENCODING} frame of {v.size} doubles, not 15")
    msg = t["sensor_msgs/msg/NavSatFix"](
        header=_header(stamp_ns, frame_id),
        status=t["sensor_msgs/msg/NavSatStatus"](status=int(v[3]), service=int(v[4])),
        latitude=float(v[0]), longitude=float(v[1]), altitude=float(v[2]),
        position_covariance=v[5:14].copy(), position_covariance_type=int(v[14]),
    )  # fmt: skip
    return _cdr(msg, "sensor_msgs/msg/NavSatFix")


def compressed_video(stamp_ns: int, frame_id: str, fmt: str, data: bytes | memoryview) -> bytes:
    """A foxglove_msgs/CompressedVideo (CDR): one access unit, unchanged."""
    t = _types()
    stamp = t["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
    msg = t[VIDEO_TYPE](timestamp=stamp, frame_id=frame_id,
                        data=np.frombuffer(data, np.uint8), format=fmt)  # fmt: skip
    return _cdr(msg, VIDEO_TYPE)


# --- the plan -----------------------------------------------------------------------------

# (frame timestamp, payload, the second stream's payload (an Imu's orientation) or None)
Build = Callable[[int, memoryview, memoryview | None], bytes]


@dataclass(frozen=True)
class RosChannel:
    """What one stream (an Imu: two) becomes: a topic of a ROS type, and its messages."""

    stream: str
    topic: str
    msgtype: str
    msgdef: str  # ros2msg text
    build: Build = field(repr=False)
    second: str | None = None  # a stream whose frame of the same time joins the message


def _ros(stream: StreamInfo) -> dict[str, Any]:
    ros = stream.extra.get("ros")
    return ros if isinstance(ros, dict) else {}


def _msgdef(msgtype: str) -> str:
    text: str = typestore().generate_msgdef(msgtype, ros_version=2)[0]
    return text


def _channel(stream: StreamInfo) -> RosChannel | str:
    """The channel of one stream, or why it has none."""
    ros = _ros(stream)
    topic = str(ros.get("topic") or f"/{stream.name}")
    frame_id = str(ros.get("frame_id") or stream.name)
    enc = stream.encoding

    def chan(msgtype: str, build: Build, msgdef: str | None = None) -> RosChannel:
        return RosChannel(stream.name, topic, msgtype, msgdef or _msgdef(msgtype), build)

    if enc == CDR_ENCODING:
        msgtype, msgdef = ros.get("type"), ros.get("definition")
        if not isinstance(msgtype, str) or not isinstance(msgdef, str):
            return "ros2-cdr without its type and definition in extra['ros']"
        return chan(msgtype, lambda _t, d, _o: bytes(d), msgdef)
    if enc in ("jpeg", "png"):
        fmt = str(ros.get("format") or enc)
        return chan("sensor_msgs/msg/CompressedImage",
                    lambda t, d, _o: compressed_image(t, frame_id, fmt, d))  # fmt: skip
    if enc in IMAGE_ENCODINGS:
        if not all(isinstance(stream.extra.get(k), int) for k in ("width", "height")):
            return f"{enc} camera without width/height in extra"
        return chan("sensor_msgs/msg/Image", lambda t, d, _o: image(t, frame_id, stream, d))
    if enc in ("h264", "h265"):
        return chan(VIDEO_TYPE, lambda t, d, _o: compressed_video(t, frame_id, enc, d),
                    VIDEO_MSGDEF)  # fmt: skip
    if enc == "imu-f64":
        return chan("sensor_msgs/msg/Imu", lambda t, d, o: imu(t, frame_id, d, o))
    if enc == NAVSAT_ENCODING:
        return chan("sensor_msgs/msg/NavSatFix", lambda t, d, _o: navsatfix(t, frame_id, d))
    if stream.kind is SensorKind.LIDAR or enc in ("xyzi-f32", "points-f32", "points"):
        try:
            dt, names = point_dtype(stream)
            _point_fields(dt, names)
        except ValueError as exc:
            return f"point cloud: {exc}"
        return chan("sensor_msgs/msg/PointCloud2",
                    lambda t, d, _o: pointcloud(t, frame_id, dt, names, d))  # fmt: skip
    return f"no ROS 2 type for kind {stream.kind}, encoding {enc!r}"


def plan_channels(streams: Iterable[StreamInfo]) -> tuple[list[RosChannel], dict[str, str]]:
    """The channels of ``streams`` and the streams left out (name -> why).

    An ``imu-f64`` stream ``NAME`` takes ``NAME.orientation`` (``imu-orientation-f64``)
    as its second stream: one Imu message per pair of frames of the same time.
    """
    table = {s.name: s for s in streams}
    channels: list[RosChannel] = []
    left: dict[str, str] = {}
    joined: set[str] = set()
    for s in table.values():
        if s.encoding == IMU_EXTRA_ENCODING:
            base = s.name.removesuffix(".orientation")
            if table.get(base) is None or table[base].encoding != "imu-f64":
                left[s.name] = f"{IMU_EXTRA_ENCODING} without its imu-f64 stream {base!r}"
            continue
        got = _channel(s)
        if isinstance(got, str):
            left[s.name] = got
            continue
        second = f"{s.name[:116]}.orientation"
        if s.encoding == "imu-f64" and getattr(table.get(second), "encoding", None) == (
            IMU_EXTRA_ENCODING
        ):
            got = RosChannel(got.stream, got.topic, got.msgtype, got.msgdef, got.build, second)
            joined.add(second)
        channels.append(got)
    topics = [c.topic for c in channels]
    dup = sorted({t for t in topics if topics.count(t) > 1})
    if dup:
        for c in [c for c in channels if c.topic in dup]:
            left[c.stream] = f"topic {c.topic} is taken by another stream"
        channels = [c for c in channels if c.topic not in dup]
    return channels, left


# --- the export ---------------------------------------------------------------------------


@dataclass(slots=True)
class RosExportReport:
    """What an export to ROS 2 wrote."""

    output: Path
    messages: int = 0
    events: int = 0
    events_in: str = "attachment hyperframes/events.json"
    seconds: float = 0.0
    topics: dict[str, tuple[str, int]] = field(default_factory=dict)  # topic -> (type, count)
    left_out: dict[str, str] = field(default_factory=dict)  # stream -> why

    def summary(self) -> str:
        """A few lines for the command line."""
        lines = [f"wrote {self.output} (ROS 2, CDR): {self.messages} messages on "
                 f"{len(self.topics)} topics, {self.events} events ({self.events_in}) "
                 f"in {self.seconds:.1f} s"]  # fmt: skip
        for topic, (msgtype, n) in self.topics.items():
            lines.append(f"  {topic:<32} {msgtype:<34} {n:>8} messages")
        lines += [f"  left out: {name}: {why}" for name, why in self.left_out.items()]
        return "\n".join(lines)


class _McapSink:
    """Channels and messages on one ``mcap`` Writer, profile ``ros2``."""

    def __init__(self, f: Any, compression: str, chunk_size: int) -> None:
        import mcap  # noqa: PLC0415 - the mcap extra
        from mcap.writer import Writer  # noqa: PLC0415

        from hyperframes.mcap.export import COMPRESSIONS  # noqa: PLC0415

        self.writer = Writer(f, chunk_size=chunk_size, compression=COMPRESSIONS[compression])
        library = f"hyperframes {__version__}; mcap {mcap.__version__}"
        self.writer.start(profile="ros2", library=library)

    def channel(self, c: RosChannel) -> int:
        schema = self.writer.register_schema(c.msgtype, "ros2msg", c.msgdef.encode())
        meta = {"offered_qos_profiles": "", "hyperframes.stream": c.stream}
        channel_id: int = self.writer.register_channel(c.topic, "cdr", schema, meta)
        return channel_id

    def write(self, channel: int, log_ns: int, stamp_ns: int, data: bytes) -> None:
        self.writer.add_message(channel, log_ns, data, stamp_ns)

    def finish(self, meta: dict[str, str], events: bytes) -> None:
        self.writer.add_metadata("hyperframes", meta)
        self.writer.add_attachment(time.time_ns(), time.time_ns(), "hyperframes/events.json",
                                   "application/json", events)  # fmt: skip
        self.writer.finish()  # type: ignore[no-untyped-call]


class _BagSink:
    """Connections and messages on a ``rosbags`` rosbag2 Writer (mcap storage)."""

    def __init__(self, path: Path) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: PLC0415

        self.writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.conns: list[Any] = []

    def channel(self, c: RosChannel) -> int:
        store = typestore()
        if c.msgtype not in store.types:
            with contextlib.suppress(Exception):  # a definition rosbags cannot parse
                store.register(get_types_from_msg(c.msgdef, c.msgtype))
        rihs = store.hash_rihs01(c.msgtype) if c.msgtype in store.types else "RIHS01_" + "0" * 64
        self.conns.append(self.writer.add_connection(c.topic, c.msgtype, msgdef=c.msgdef,
                                                     rihs01=rihs))  # fmt: skip
        return len(self.conns) - 1

    def write(self, channel: int, log_ns: int, _stamp_ns: int, data: bytes) -> None:
        self.writer.write(self.conns[channel], log_ns, data)

    def finish(self, meta: dict[str, str], events: bytes) -> None:
        for k, v in meta.items():
            self.writer.set_custom_data(f"hyperframes.{k}", v)
        self.writer.set_custom_data("hyperframes.events", events.decode())
        self.writer.close()


@contextlib.contextmanager
def _atomic_dir(out: Path, overwrite: bool) -> Iterator[Path]:
    """Yields ``OUT.tmp`` (not yet there) to write a directory into; on success it becomes
    ``OUT`` (an old ``OUT`` removed only with ``overwrite``); on failure it is removed."""
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (use --force to replace it)")
    tmp = out.with_name(out.name + ".tmp")
    if os.path.lexists(tmp):
        if not overwrite:
            raise FileExistsError(f"{tmp}: already exists (remove it or use --force)")
        shutil.rmtree(tmp)
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _events_json(readers: Sequence[HyperframeReader], names: set[str], lo: int, hi: int) -> list[
    dict[str, Any]
]:  # fmt: skip
    from hyperframes.viz.events import recording_events  # noqa: PLC0415
    from hyperframes.viz.facts import facts_from_reader  # noqa: PLC0415

    out = []
    for r in readers:
        for e in recording_events(facts_from_reader(r)):
            if lo <= e.start_ns <= hi and (not e.stream or e.stream in names):
                out.append({"kind": e.kind, "stream": e.stream, "start_ns": e.start_ns,
                            "end_ns": e.end_ns, "count": e.count, "detail": e.detail,
                            "file": str(r.path)})  # fmt: skip
    return out


def export_ros2(
    files: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    rosbag2: bool = False,
    streams: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    compression: str = "zstd",
    chunk_size: int = 4 << 20,
    events: bool = True,
    overwrite: bool = False,
    progress: Callable[[float], None] | None = None,
) -> RosExportReport:
    """Write the frames of ``files`` (consecutive segments) as ROS 2 messages to ``output``:
    an MCAP file of profile ``ros2``, or with ``rosbag2`` a rosbag2 directory (mcap
    storage, ``metadata.yaml``). Options as for :func:`hyperframes.mcap.export_mcap`;
    quarantined frames are left out. A failed export leaves no output.
    """
    from hyperframes.mcap import export as mx  # noqa: PLC0415 - needs the mcap extra

    if not files:
        raise ValueError("no input files")
    t_start = time.monotonic()
    report = RosExportReport(Path(output))
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(HyperframeReader(p)) for p in files]
        readers.sort(key=lambda r: r.start_ns)
        where = ", ".join(str(r.path) for r in readers)
        table = mx.stream_table(readers, streams)
        channels, report.left_out = plan_channels(table.values())
        used = {c.stream for c in channels} | {c.second for c in channels if c.second}
        sources = []
        for r in readers:
            ids = {n: s.id for n in used for s in r.streams.values() if s.name == n}
            stream_ids = r.index["stream_id"]
            bases = {sid: int(np.searchsorted(stream_ids, sid, "left")) for sid in ids.values()}
            sources.append(mx.Source(r, ids, bases))
        lo = min(r.start_ns for r in readers) if start_ns is None else start_ns
        hi = max(r.end_ns for r in readers) if end_ns is None else end_ns
        if hi < lo:
            raise EmptyRangeError(where, f"empty time range: --to {hi} is before --from {lo}")
        total = mx.frames_in(sources, lo, hi) if used else 0
        if total == 0:
            raise EmptyRangeError(
                where,
                f"no frame of a ROS 2 topic between {lo} and {hi} ns"
                + "".join(f"; {n}: {w}" for n, w in report.left_out.items()),
            )
        notes = _events_json(readers, set(used), lo, hi) if events else []
        report.events = len(notes)
        meta = mx.file_metadata(readers, {n: table[n] for n in table if n in used})
        walk = functools.partial(_walk, channels=channels, sources=sources, lo=lo, hi=hi,
                                 window_ns=readers[0].window_ns, total=total, report=report,
                                 progress=progress)  # fmt: skip
        if rosbag2:
            report.events_in = "metadata.yaml custom_data hyperframes.events"
            with _atomic_dir(Path(output), overwrite) as tmp:
                bag = _BagSink(tmp)
                try:
                    walk(bag)
                finally:
                    bag.finish(meta, json.dumps(notes).encode())
        else:
            with atomic_output(output, overwrite) as tmp, open(tmp, "wb") as f:
                sink = _McapSink(f, compression, chunk_size)
                walk(sink)
                sink.finish(meta, json.dumps(notes).encode())
                f.flush()
    report.seconds = time.monotonic() - t_start
    return report


def _walk(
    sink: _McapSink | _BagSink,
    *,
    channels: list[RosChannel],
    sources: Sequence[Any],
    lo: int,
    hi: int,
    window_ns: int,
    total: int,
    report: RosExportReport,
    progress: Callable[[float], None] | None,
) -> None:
    """Every frame of ``sources`` between ``lo`` and ``hi``, one time slice at a time."""
    from hyperframes.mcap import export as mx  # noqa: PLC0415

    ids = {c.stream: sink.channel(c) for c in channels}
    by_stream = {c.stream: c for c in channels}
    seconds = {c.second: c for c in channels if c.second}
    for c in channels:
        report.topics[c.topic] = (c.msgtype, 0)
    done = 0
    for t_lo, t_hi in mx.time_slices(sources, lo, hi, window_ns):
        rows = mx.time_slice(sources, t_lo, t_hi)
        done += len(rows)
        # a second stream's frames (an Imu's orientation), by (its channel's stream, time)
        joins = {(seconds[r[1]].stream, r[3]): r[6] for r in rows if r[1] in seconds}
        for _t, name, _q, stamp, rx, _seq, payload in rows:
            chan = by_stream.get(name)
            if chan is None:  # a second stream: in its channel's message
                continue
            second = joins.get((name, stamp)) if chan.second else None
            sink.write(ids[name], rx or stamp, stamp, chan.build(stamp, payload, second))
            msgtype, n = report.topics[chan.topic]
            report.topics[chan.topic] = (msgtype, n + 1)
            report.messages += 1
        if progress is not None:
            progress(done / total)
