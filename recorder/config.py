"""One YAML file per vehicle: loading, validation and the resulting frozen config.

Every problem raises :class:`ConfigError` naming the key path
(``streams[3].codec``), what was found and what is allowed. Unknown keys are
rejected with a did-you-mean suggestion, duplicate YAML keys too (plain
``yaml.safe_load`` would silently keep the last one). The schema is
documented in ``configs/vehicle-example.yaml``.

Relative paths (``output_dir``, TLS files) are relative to the daemon's
working directory, not to the config file.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import numpy as np

from hyperframes import _yamlconf as v
from hyperframes._yamlconf import Section as _Section
from hyperframes.format.codecs import (
    BLOCK_SIZE,
    DEFAULT_ARRAY_CODEC,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    CodecSpec,
)
from hyperframes.format.streams import (
    KNOWN_ENCODINGS,
    PRECOMPRESSED_ENCODINGS,
    SensorKind,
    StreamInfo,
    TimestampSource,
)
from hyperframes.recorder.errors import ConfigError
from hyperframes.recorder.events.config import (
    EventsConfig,
    check_buffer,
    check_event_streams,
    parse_events,
)
from hyperframes.recorder.ingest.curve import CurveConfig, key_problems
from hyperframes.recorder.live_config import LiveConfig, live_warning, parse_live
from hyperframes.recorder.upload.config import UploadConfig, parse_upload

__all__ = [
    "ConfigError",
    "DiskConfig",
    "EventsConfig",
    "LiveConfig",
    "MetricsConfig",
    "ZmqSocketConfig",
    "TlsConfig",
    "MqttConfig",
    "StreamConfig",
    "VehicleConfig",
    "DEFAULT_ARRAY_CODEC",
    "load_config",
    "parse_config",
    "check_config_main",
]

#: Codec for array streams with ``codec: auto`` (byte shuffle is added for
#: multi-byte dtypes). Measured on this project's 2-core box on a 1.9 MB
#: synthetic lidar sweep after byte shuffle (``bench``-style median of 5):
#:
#: ============  ========  =======  =====
#: codec         ms/sweep  MB/s     ratio
#: ============  ========  =======  =====
#: lz4            0.8      2366     1.285
#: lz4hc:1       35.0        55     1.295
#: lz4hc:3       47.6        40     1.298
#: lz4hc:9       92.1        21     1.307
#: ============  ========  =======  =====
#:
#: Every LZ4HC level costs 35-90% of a core for one 10 Hz lidar for under 2%
#: smaller files, which breaks the "most of the box free at 1x" budget; after
#: the shuffle, plain LZ4 gets nearly all of the gain. So ``auto`` is LZ4 and
#: LZ4HC stays one line of config away (``codec: lz4hc:3``). Since 0.3 ``auto``
#: is ``blosc2-lz4`` (:data:`hyperframes.format.codecs.DEFAULT_ARRAY_CODEC`): the same
#: LZ4 and byte shuffle inside Blosc2 chunks, the size of ``lz4`` + shuffle,
#: written and read faster (bench/README.md, "Codecs"); ``codec: lz4`` writes
#: what 0.2 readers read.
_MB: Final = 1024 * 1024
_VEHICLE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ZMQ_ENDPOINT_RE = re.compile(r"(tcp|ipc|inproc|pgm|epgm|ws|wss)://.+")
T = TypeVar("T")


# --- result -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiskConfig:
    """Free-space policy: stop (default) or delete the oldest unprotected segments.

    ``retention``: ``all`` keeps every segment until room is needed;
    ``events`` (snapshot mode) keeps only what events protect plus the last
    ``buffer_s`` seconds (:mod:`hyperframes.recorder.events.retention`).
    """

    min_free_mb: int = 1024
    on_full: str = "stop"  # "stop" | "delete-oldest"
    protected_glob: str | None = None
    retention: str = "all"  # "all" | "events"
    buffer_s: float = 120.0


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """The local Prometheus endpoint (off by default, loopback by default)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 9108


@dataclass(frozen=True, slots=True)
class ZmqSocketConfig:
    """One receiving ZMQ socket; ``name`` is what streams refer to (``zmq_socket``).

    ``max_connections`` (bound sockets, tcp:// and ipc://): peer connections
    held at once, 1..65536, default 256. Past it the newest connection whose
    peer has sent nothing yet (else the newest) is shut down and counted as
    ``over-limit`` (:mod:`hyperframes.recorder.ingest.peers`), so idle
    connections cannot use up the recorder's descriptors; keep it above the
    number of drivers, and its sum over the sockets below ``LimitNOFILE``.
    """

    name: str
    endpoint: str
    socket: str = "pull"  # "pull" | "sub"
    bind: bool = True
    rcvhwm: int = 10000
    curve: CurveConfig | None = (
        None  # CURVE server keys and allowed clients (hyperframes.recorder.ingest.curve)
    )
    max_connections: int = 256


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS for MQTT; without ``ca_file`` the system trust store is used."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None


_MAX_PASSWORD_FILE = 64 << 10


@dataclass(frozen=True, slots=True)
class MqttConfig:
    """One MQTT broker connection."""

    host: str
    port: int = 1883
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = None  # read when connecting, see read_password()
    tls: TlsConfig | None = None
    client_id: str | None = None
    keepalive_s: int = 30
    reconnect_max_s: float = 30.0

    def read_password(self) -> str | None:
        """The password: ``password``, else the first line of ``password_file``, else None.

        Raises :class:`ConfigError` when the file cannot be read.
        """
        if self.password is not None or self.password_file is None:
            return self.password
        try:
            with self.password_file.open("rb") as f:
                raw = f.read(_MAX_PASSWORD_FILE + 1)
        except OSError as exc:
            raise ConfigError(
                "mqtt.password_file", f"cannot read {self.password_file}: {exc.strerror or exc}"
            ) from None
        # never the file's bytes in a message: they are the secret
        if len(raw) > _MAX_PASSWORD_FILE:
            raise ConfigError(
                "mqtt.password_file", f"{self.password_file}: larger than 64 KiB (not shown)"
            )
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise ConfigError(
                "mqtt.password_file", f"{self.password_file}: not UTF-8 text (contents not shown)"
            ) from None
        return lines[0] if lines else ""


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """One sensor stream: what it is, where it arrives, how it is stored."""

    info: StreamInfo
    codec: CodecSpec
    transport: str  # "zmq" | "mqtt"
    topic: str
    qos: int | None = None  # mqtt only
    zmq_socket: str | None = None  # zmq only: a ZmqSocketConfig.name

    @property
    def id(self) -> int:
        """The stream id (as in the file's stream table)."""
        return self.info.id

    @property
    def name(self) -> str:
        """The stream name."""
        return self.info.name


@dataclass(frozen=True, slots=True)
class VehicleConfig:
    """A validated vehicle config. Build it with :func:`load_config`."""

    vehicle_id: str
    output_dir: Path
    streams: tuple[StreamConfig, ...]
    window_ms: float = 100.0
    segment_seconds: float | None = 60.0
    segment_max_mb: int | None = None
    fsync_interval_s: float = 1.0
    grace_ms: float = 500.0
    max_payload_mb: float = 64.0
    recover_on_start: bool = True
    block_kib: int = BLOCK_SIZE // 1024
    clock_max_jump_s: float = 10.0
    disk: DiskConfig = DiskConfig()
    events: EventsConfig = field(default_factory=EventsConfig)
    metrics: MetricsConfig = MetricsConfig()
    zmq: tuple[ZmqSocketConfig, ...] = ()
    mqtt: MqttConfig | None = None
    upload: UploadConfig | None = None
    live: LiveConfig = field(default_factory=LiveConfig)
    source: str | None = None

    @property
    def window_ns(self) -> int:
        """Window length in ns."""
        return round(self.window_ms * 1_000_000)

    @property
    def clock_max_jump_ns(self) -> int:
        """How far a frame's clock offset may stray from the sensors' consensus, in ns."""
        return round(self.clock_max_jump_s * 1e9)

    @property
    def grace_ns(self) -> int:
        """How long (host time) a silent stream may hold a window open, in ns."""
        return round(self.grace_ms * 1_000_000)

    @property
    def segment_ns(self) -> int | None:
        """Segment duration in ns, or None when rotating by size only."""
        return None if self.segment_seconds is None else round(self.segment_seconds * 1e9)

    @property
    def segment_max_bytes(self) -> int | None:
        """Segment size limit in bytes, or None when rotating by duration only."""
        return None if self.segment_max_mb is None else self.segment_max_mb * _MB

    @property
    def max_payload_bytes(self) -> int:
        """Largest accepted payload in bytes (for :mod:`hyperframes.recorder.ingest.wire`)."""
        return int(self.max_payload_mb * _MB)

    def stream_infos(self) -> list[StreamInfo]:
        """The file's stream table, in config order."""
        return [s.info for s in self.streams]

    def stream(self, stream_id: int) -> StreamConfig:
        """The stream with this id (KeyError if none)."""
        for s in self.streams:
            if s.id == stream_id:
                return s
        raise KeyError(f"no stream with id {stream_id}")

    def codec_for(self, stream_id: int) -> CodecSpec:
        """How frames of ``stream_id`` are compressed (``auto`` already resolved)."""
        return self.stream(stream_id).codec

    def streams_for(self, transport: str) -> list[StreamConfig]:
        """The streams arriving over ``transport`` ("zmq" or "mqtt")."""
        return [s for s in self.streams if s.transport == transport]


# --- YAML without silent duplicate keys ----------------------------------------


_stamp = v.choice("hardware", "host")


def _disk(data: object) -> DiskConfig:
    keys = ("min_free_mb", "on_full", "protected_glob", "retention", "buffer_s")
    s = _Section(data, "disk", keys)
    return DiskConfig(
        min_free_mb=s.get("min_free_mb", v.int_in(0), 1024),
        on_full=s.get("on_full", v.choice("stop", "delete-oldest"), "stop"),
        protected_glob=s.get("protected_glob", v.string, None),
        retention=s.get("retention", v.choice("all", "events"), "all"),
        buffer_s=s.get("buffer_s", v.number(30 * 86_400), 120.0),
    )


def _metrics(data: object) -> MetricsConfig:
    s = _Section(data, "metrics", ("enabled", "host", "port"))
    return MetricsConfig(
        enabled=s.get("enabled", v.boolean, False),
        host=s.get("host", v.string, "127.0.0.1"),
        port=s.get("port", v.int_in(1, 65535), 9108),
    )


_ZMQ_KEYS = ("name", "endpoint", "socket", "bind", "rcvhwm", "curve", "max_connections")
_MAX_CONNECTIONS: Final = 65536  # the unit's LimitNOFILE


def _zmq_socket(data: object, path: str, default_name: str) -> ZmqSocketConfig:
    s = _Section(data, path, _ZMQ_KEYS)
    endpoint = s.need("endpoint", v.string)
    if not _ZMQ_ENDPOINT_RE.fullmatch(endpoint):
        raise ConfigError(
            s.key("endpoint"), f"{endpoint!r} is not a ZMQ endpoint (tcp://HOST:PORT, ipc://PATH)"
        )
    curve = None
    if s.has("curve"):
        c = _Section(s.data["curve"], s.key("curve"), ("secret_key", "clients"))
        curve = CurveConfig(c.need("secret_key", v.path), c.need("clients", v.path))
    bind = s.get("bind", v.boolean, True)
    if curve is not None and not bind:
        raise ConfigError(s.key("curve"), "needs bind: true (the recorder is the CURVE server)")
    return ZmqSocketConfig(
        name=s.get("name", v.string, default_name),
        endpoint=endpoint,
        socket=s.get("socket", v.choice("pull", "sub"), "pull"),
        bind=bind,
        rcvhwm=s.get("rcvhwm", v.int_in(0), 10000),
        curve=curve,
        max_connections=s.get("max_connections", v.int_in(1, _MAX_CONNECTIONS), 256),
    )


def _zmq(data: object) -> tuple[ZmqSocketConfig, ...]:
    """``zmq:`` is one socket (a mapping) or several (a list of mappings with names)."""
    if isinstance(data, list):
        if not data:
            raise ConfigError("zmq", "an empty list; give at least one socket or drop the key")
        socks = tuple(_zmq_socket(d, f"zmq[{i}]", f"zmq{i}") for i, d in enumerate(data))
    else:
        socks = (_zmq_socket(data, "zmq", "default"),)
    names: dict[str, int] = {}
    endpoints: dict[str, int] = {}
    for i, sock in enumerate(socks):
        if sock.name in names:
            raise ConfigError(
                f"zmq[{i}].name", f"{sock.name!r} already used by zmq[{names[sock.name]}]"
            )
        if sock.endpoint in endpoints:
            other = endpoints[sock.endpoint]
            raise ConfigError(
                f"zmq[{i}].endpoint", f"{sock.endpoint!r} already used by zmq[{other}]"
            )
        names[sock.name] = endpoints[sock.endpoint] = i
    return socks


def _mqtt(data: object, vehicle_id: str) -> MqttConfig:
    keys = ("host", "port", "username", "password", "password_file", "tls", "client_id",
            "keepalive_s", "reconnect_max_s")  # fmt: skip
    s = _Section(data, "mqtt", keys)
    tls = None
    if s.has("tls"):
        t = _Section(s.data["tls"], "mqtt.tls", ("ca_file", "cert_file", "key_file"))
        tls = TlsConfig(
            ca_file=t.get("ca_file", v.path, None),
            cert_file=t.get("cert_file", v.path, None),
            key_file=t.get("key_file", v.path, None),
        )
        if (tls.cert_file is None) != (tls.key_file is None):
            raise ConfigError("mqtt.tls", "cert_file and key_file go together (client certificate)")
    password = s.get("password", v.secret, None)
    password_file = s.get("password_file", v.path, None)
    if password is not None and password_file is not None:
        raise ConfigError("mqtt.password_file", "give password or password_file, not both")
    if (password is not None or password_file is not None) and not s.has("username"):
        raise ConfigError("mqtt.username", "required when a password is given")
    return MqttConfig(
        host=s.need("host", v.string),
        port=s.get("port", v.int_in(1, 65535), 8883 if tls else 1883),
        username=s.get("username", v.string, None),
        password=password,
        password_file=password_file,
        tls=tls,
        client_id=s.get("client_id", v.string, f"hyperframes-{vehicle_id}"),
        keepalive_s=s.get("keepalive_s", v.int_in(5, 3600), 30),
        reconnect_max_s=s.get("reconnect_max_s", v.number(3600), 30.0),
    )


_STREAM_KEYS = (
    "id", "name", "kind", "encoding", "transport", "topic", "qos", "zmq_socket", "rate_hz",
    "timestamp_source", "codec", "shuffle", "dtype", "shape", "width", "height", "points",
    "extra",
)  # fmt: skip


def _codec(s: _Section, encoding: str, dtype: str | None) -> CodecSpec:
    text = s.get("codec", v.string, "auto").strip().lower()
    shuffle_opt = s.data.get("shuffle")
    if shuffle_opt is None:
        shuffle_opt = "auto"
    if shuffle_opt != "auto" and not isinstance(shuffle_opt, bool):
        raise ConfigError(
            s.key("shuffle"), f"must be auto, true or false, got {v.kind(shuffle_opt)}"
        )
    itemsize = np.dtype(dtype).itemsize if dtype else 1
    if text == "auto":
        text = "none" if encoding in PRECOMPRESSED_ENCODINGS else DEFAULT_ARRAY_CODEC
    shuffle = (itemsize > 1 and text != "none") if shuffle_opt == "auto" else bool(shuffle_opt)
    try:
        spec = CodecSpec.parse(text, shuffle)
    except ValueError as exc:
        raise ConfigError(
            s.key("codec"),
            f"{exc} (allowed: auto, none, lz4, lz4hc[:1-12], zstd[:1-22], blosc2-lz4[:1-9], "
            "blosc2-zstd[:1-9])",
        ) from None
    if spec.shuffle and spec.name == "none":
        raise ConfigError(
            s.key("shuffle"), "byte shuffle needs a codec; with codec none it does nothing"
        )
    if spec.shuffle and itemsize <= 1:
        raise ConfigError(
            s.key("shuffle"),
            f"byte shuffle needs a dtype wider than one byte (dtype here: {dtype or 'none'})",
        )
    return spec


def _stream(data: object, i: int, transports: set[str]) -> StreamConfig:
    s = _Section(data, f"streams[{i}]", _STREAM_KEYS)
    sid = s.need("id", v.int_in(0, 0xFFFF))
    name = s.need("name", v.string)
    kind = s.need("kind", v.choice(*(k.value for k in SensorKind)))
    encoding = s.need("encoding", v.choice(*KNOWN_ENCODINGS))
    default_transport = next(iter(transports)) if len(transports) == 1 else None
    if default_transport is None or s.has("transport"):
        transport = s.need("transport", v.choice("zmq", "mqtt"))
    else:
        transport = default_transport
    if transport not in transports:
        raise ConfigError(
            s.key("transport"), f"{transport!r} has no top-level {transport}: section"
        )
    topic = s.need("topic", v.string)
    if transport == "mqtt" and ("+" in topic or "#" in topic):
        raise ConfigError(s.key("topic"), f"{topic!r}: MQTT wildcards (+, #) are not allowed")
    for key, only in (("qos", "mqtt"), ("zmq_socket", "zmq")):
        if s.has(key) and transport != only:
            raise ConfigError(
                s.key(key), f"applies to {only} streams only (transport: {transport})"
            )
    try:
        StreamInfo(sid, name)
    except ValueError as exc:
        raise ConfigError(s.key("name"), str(exc).removeprefix(f"stream {sid}: ")) from None
    dtype = s.get("dtype", v.dtype, None)
    shape = s.get("shape", v.shape, None)
    extra = s.get("extra", v.mapping, None) or {}
    for key in ("width", "height", "points"):
        if s.has(key):
            extra[key] = s.get(key, v.int_in(1), 0)
    stamp = TimestampSource(s.get("timestamp_source", _stamp, "hardware"))
    rate_hz = s.get("rate_hz", v.number(1e6), None)
    try:
        info = StreamInfo(
            id=sid, name=name, kind=SensorKind(kind), encoding=encoding, dtype=dtype, shape=shape,
            timestamp_source=stamp, rate_hz=rate_hz, extra=extra,
        )  # fmt: skip
    except ValueError as exc:
        raise ConfigError(s.path, str(exc)) from None
    codec = _codec(s, encoding, info.dtype)
    info = StreamInfo(
        id=info.id, name=info.name, kind=info.kind, encoding=info.encoding, dtype=info.dtype,
        shape=info.shape, timestamp_source=info.timestamp_source, rate_hz=info.rate_hz,
        codec=codec.name, level=codec.level, shuffle=codec.shuffle, extra=info.extra,
    )  # fmt: skip
    return StreamConfig(
        info=info,
        codec=codec,
        transport=transport,
        topic=topic,
        qos=s.get("qos", v.int_in(0, 2), 1) if transport == "mqtt" else None,
        zmq_socket=s.get("zmq_socket", v.string, None) if transport == "zmq" else None,
    )


def _check_unique(
    streams: Sequence[StreamConfig], what: str, key: Callable[[StreamConfig], object]
) -> None:
    seen: dict[object, int] = {}
    for i, s in enumerate(streams):
        k = key(s)
        if k in seen:
            raise ConfigError(f"streams[{i}].{what}", f"{k!r} already used by streams[{seen[k]}]")
        seen[k] = i


_TOP_KEYS = (
    "vehicle_id", "output_dir", "window_ms", "segment_seconds", "segment_max_mb",
    "fsync_interval_s", "grace_ms", "max_payload_mb", "recover_on_start", "block_kib",
    "clock_max_jump_s", "disk", "events", "metrics", "zmq", "mqtt", "streams", "upload", "live",
)  # fmt: skip


def parse_config(data: object, source: str | None = None) -> VehicleConfig:
    """Validate an already-parsed YAML document (a mapping) into a :class:`VehicleConfig`."""
    try:
        return _parse(data, source)
    except v.ConfigError as exc:
        raise ConfigError(exc.key, exc.problem, exc.source or source) from None


def _parse(data: object, source: str | None) -> VehicleConfig:
    if data is None:
        raise ConfigError("", "the file is empty; a vehicle config is a YAML mapping")
    s = _Section(data, "", _TOP_KEYS)
    vehicle_id = s.need("vehicle_id", v.string)
    if not _VEHICLE_RE.fullmatch(vehicle_id):
        raise ConfigError(
            "vehicle_id",
            f"{vehicle_id!r} must be 1-64 letters, digits, '_', '.', '-' (it goes into file names)",
        )
    window_ms = s.get("window_ms", v.number(60_000), 100.0)
    if window_ms < 1:
        raise ConfigError("window_ms", f"must be at least 1 ms, got {window_ms}")
    if window_ms * 1_000_000 != round(window_ms * 1_000_000):
        raise ConfigError("window_ms", f"{window_ms} is not a whole number of nanoseconds")
    # absent: the 60 s default; an explicit null: rotate by size only
    segment_seconds = (
        s.get("segment_seconds", v.number(), 60.0) if "segment_seconds" not in s.data
        or s.has("segment_seconds") else None
    )  # fmt: skip
    segment_max_mb = s.get("segment_max_mb", v.int_in(1), None)
    if segment_seconds is None and segment_max_mb is None:
        raise ConfigError(
            "segment_seconds", "segment_seconds and segment_max_mb are both null; set at least one"
        )
    if segment_seconds is not None and window_ms > segment_seconds * 1000:
        raise ConfigError(
            "window_ms",
            f"{window_ms:g} ms is longer than a segment "
            f"(segment_seconds: {segment_seconds:g} = {segment_seconds * 1000:g} ms)",
        )
    transports = {t for t in ("zmq", "mqtt") if s.has(t)}
    if not s.has("streams"):
        raise ConfigError("streams", "required key is missing")
    raw_streams = v.listing(s.data["streams"], "streams")
    if not raw_streams:
        raise ConfigError("streams", "empty; a vehicle records at least one stream")
    if not transports:
        raise ConfigError("", "no transport: add a zmq: or mqtt: section")
    zmq = _zmq(s.data["zmq"]) if "zmq" in transports else ()
    mqtt = _mqtt(s.data["mqtt"], vehicle_id) if "mqtt" in transports else None
    streams = tuple(_stream(d, i, transports) for i, d in enumerate(raw_streams))
    _check_unique(streams, "id", lambda st: st.id)
    _check_unique(streams, "name", lambda st: st.name)
    _check_unique(streams, "topic", lambda st: (st.transport, st.topic))
    socket_names = [z.name for z in zmq]
    resolved = []
    for i, st in enumerate(streams):
        if st.transport == "zmq":
            if st.zmq_socket is None and len(zmq) > 1:
                raise ConfigError(
                    f"streams[{i}].zmq_socket",
                    f"required with several zmq sockets (one of: {', '.join(socket_names)})",
                )
            name = st.zmq_socket or zmq[0].name
            if name not in socket_names:
                raise ConfigError(
                    f"streams[{i}].zmq_socket",
                    f"{name!r} is not a zmq socket (one of: {', '.join(socket_names)})",
                )
            resolved.append(StreamConfig(st.info, st.codec, st.transport, st.topic, None, name))
        else:
            resolved.append(st)
    infos = [st.info for st in resolved]
    events = parse_events(s.data.get("events"), infos)
    check_event_streams(infos, [st.topic for st in resolved], events)
    disk = _disk(s.data["disk"]) if s.has("disk") else DiskConfig()
    check_buffer(events, disk.retention, disk.buffer_s)
    return VehicleConfig(
        vehicle_id=vehicle_id,
        output_dir=s.need("output_dir", v.path),
        streams=tuple(resolved),
        window_ms=window_ms,
        segment_seconds=segment_seconds,
        segment_max_mb=segment_max_mb,
        fsync_interval_s=s.get("fsync_interval_s", v.number(60), 1.0),
        grace_ms=s.get("grace_ms", v.number(3_600_000, zero_ok=True), 500.0),
        max_payload_mb=s.get("max_payload_mb", v.number(4095), 64.0),
        recover_on_start=s.get("recover_on_start", v.boolean, True),
        block_kib=s.get("block_kib", _block_kib, BLOCK_SIZE // 1024),
        clock_max_jump_s=s.get("clock_max_jump_s", v.number(86_400, lo=0.001, zero_ok=True), 10.0),
        disk=disk,
        events=events,
        metrics=_metrics(s.data["metrics"]) if s.has("metrics") else MetricsConfig(),
        zmq=zmq,
        mqtt=mqtt,
        upload=parse_upload(s.data["upload"]) if s.has("upload") else None,
        live=parse_live(s.data.get("live"), infos),
        source=source,
    )


def _block_kib(key: str, value: object) -> int:
    """0 (frames stored whole) or a block size in KiB that the writer accepts."""
    lo, hi = MIN_BLOCK_SIZE // 1024, MAX_BLOCK_SIZE // 1024
    kib = v.int_in(0, hi)(key, value)
    if 0 < kib < lo:
        raise ConfigError(key, f"must be 0 (never split frames) or {lo}..{hi}, got {kib}")
    return kib


def load_config(path: str | Path) -> VehicleConfig:
    """Read and validate one vehicle YAML file; raises :class:`ConfigError`."""
    try:
        data = v.load_yaml(path, "recorder")
    except v.ConfigError as exc:
        raise ConfigError(exc.key, exc.problem, exc.source) from None
    return parse_config(data, str(path))


def _summary(cfg: VehicleConfig) -> Iterator[str]:
    seg = []
    if cfg.segment_seconds is not None:
        seg.append(f"{cfg.segment_seconds:g} s")
    if cfg.segment_max_mb is not None:
        seg.append(f"{cfg.segment_max_mb} MB")
    yield (
        f"OK {cfg.source}: vehicle {cfg.vehicle_id}, {len(cfg.streams)} streams, "
        f"window {cfg.window_ms:g} ms, segments of {' or '.join(seg)}, output {cfg.output_dir}"
    )
    ev = cfg.events
    yield (
        f"  events: topic {ev.topic!r}, keep -{ev.pre_s:g} s/+{ev.post_s:g} s"
        f"{f' ({len(ev.names)} names)' if ev.names else ''}, {len(ev.rules)} rules, "
        f"control {ev.control_socket}, retention {cfg.disk.retention}"
        + (f" (buffer {cfg.disk.buffer_s:g} s)" if cfg.disk.retention == "events" else "")
    )
    for z in cfg.zmq:
        how = "bind" if z.bind else "connect"
        curve = f", curve (clients in {z.curve.clients})" if z.curve else ""
        cap = f" max_connections {z.max_connections}" if z.bind else ""
        yield f"  zmq {z.name}: {z.socket} {how} {z.endpoint} rcvhwm {z.rcvhwm}{cap}{curve}"
    if cfg.mqtt is not None:
        m = cfg.mqtt
        yield f"  mqtt: {m.host}:{m.port}{' tls' if m.tls else ''} client_id {m.client_id}"
    if cfg.upload is not None:
        u = cfg.upload
        when = "always" if u.when is None else f"when {u.when[0]} exits 0"
        cap = f", cap {u.bandwidth_mb_s:g} MB/s" if u.bandwidth_mb_s else ""
        extra = f", catalog {u.catalog}" if u.catalog else ""
        extra += f", requests {u.requests}" if u.requests else ""
        yield f"  upload: to {u.dest}, mode {u.mode}, parts of {u.part_mb} MiB{cap}, {when}{extra}"
    for st in cfg.streams:
        i = st.info
        rate = f"{i.rate_hz:g} Hz" if i.rate_hz else "rate ?"
        via = f"qos {st.qos}" if st.transport == "mqtt" else f"socket {st.zmq_socket}"
        yield (
            f"  [{i.id}] {i.name}: {i.kind} {i.encoding} {rate} {i.timestamp_source} stamps, "
            f"{st.transport} {st.topic!r} ({via}), codec {st.codec}"
        )


# --- what a config exposes, and the files it names ------------------------------

_LOOPBACK_NAMES = ("localhost", "lo", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """True for a loopback address or name (``127.x.y.z``, ``::1``, ``localhost``, ``lo``)."""
    return host in _LOOPBACK_NAMES or host.startswith("127.")


def _tcp_host(endpoint: str) -> str | None:
    """The host part of a ``tcp://`` endpoint (``*`` for all interfaces), else None."""
    if not endpoint.startswith("tcp://"):
        return None
    rest = endpoint[len("tcp://") :].rsplit(":", 1)[0]
    return rest.split(";")[-1]  # tcp://SOURCE;HOST:PORT binds HOST


def exposure_warnings(cfg: VehicleConfig) -> list[str]:
    """What ``cfg`` lets the network do that an operator should know (one line each)."""
    out = []
    for z in cfg.zmq:
        host = _tcp_host(z.endpoint)
        if z.bind and host is not None and not is_loopback(host) and z.curve is None:
            out.append(
                f"zmq {z.name}: {z.endpoint} binds a non-loopback address without curve: anyone "
                f"who can reach it can send frames (use ipc://, 127.0.0.1 or zmq.curve; "
                f"docs/OPERATIONS.md, threat model)"
            )
    m = cfg.mqtt
    if m is not None and (m.password is not None or m.password_file is not None) and not m.tls:
        out.append(
            f"mqtt: the password is sent to {m.host}:{m.port} in clear text (no mqtt.tls); "
            f"anyone on that network can read it"
        )
    if cfg.metrics.enabled and not is_loopback(cfg.metrics.host):
        out.append(
            f"metrics: {metrics_url(cfg)} is reachable beyond this machine (metrics.host "
            f"{cfg.metrics.host}); keep it on 127.0.0.1 and scrape through an agent or a tunnel"
        )
    live = live_warning(cfg.live, is_loopback(cfg.live.host))
    if live is not None:
        out.append(live)
    return out


def metrics_url(cfg: VehicleConfig) -> str:
    """Where the Prometheus endpoint listens (when enabled)."""
    host = cfg.metrics.host
    return f"http://{f'[{host}]' if ':' in host else host}:{cfg.metrics.port}/metrics"


def file_problems(cfg: VehicleConfig) -> list[str]:
    """The files ``cfg`` names that cannot be used: missing, unreadable, unsafe modes.

    Reads them (a password file's contents are never part of a message).
    """
    out: list[str] = []
    m = cfg.mqtt
    if m is not None:
        try:
            m.read_password()
        except ConfigError as exc:
            out.append(str(exc))
        if m.tls is not None:
            for name in ("ca_file", "cert_file", "key_file"):
                f = getattr(m.tls, name)
                if f is None:
                    continue
                try:
                    with f.open("rb") as fh:
                        fh.read(1)
                except OSError as exc:
                    out.append(f"mqtt.tls.{name}: cannot read {f}: {exc.strerror or exc}")
    for i, z in enumerate(cfg.zmq):
        if z.curve is not None:
            key = "zmq.curve" if len(cfg.zmq) == 1 else f"zmq[{i}].curve"
            out.extend(key_problems(key, z.curve))
    return out


def check_config_main(argv: Sequence[str] | None = None) -> int:
    """``hyperframes check-config FILE``: 0 and a summary when valid, 2 and the error if not.

    Also checks the files the config names (password, CA, CURVE keys) and
    warns about what it exposes (:func:`exposure_warnings`).
    """
    parser = argparse.ArgumentParser(
        prog="hyperframes check-config", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("file", help="vehicle YAML config")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = file_problems(cfg)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 2
    for line in _summary(cfg):
        print(line)
    print(f"  metrics: {metrics_url(cfg) if cfg.metrics.enabled else 'off'}")
    lv = cfg.live
    print(f"  live: {f'ws://{lv.host}:{lv.port} (Foxglove)' if lv.enabled else 'off'}")
    for warning in exposure_warnings(cfg):
        print(f"warning: {warning}", file=sys.stderr)
    return 0
