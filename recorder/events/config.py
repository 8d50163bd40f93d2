"""The ``events:`` section of the vehicle YAML, validated with precise messages.

::

    events:
      topic: events             # topic of event messages on every transport (docs/INGEST.md)
      pre_s: 10                 # kept before an event, unless its name or message says otherwise
      post_s: 5                 # kept after it
      names:                    # per event name
        hard_brake: {pre_s: 25, post_s: 10}
      peers:                    # events over the wire (zmq, mqtt): any publisher may send them
        max_pre_s: 25           # the most one may keep before it (default: the longest pre_s
        max_post_s: 10          #   and post_s configured above and in rules); longer is cut
        per_s: 20               # accepted per second on average (token bucket) ...
        burst: 200              # ... and at once; more are dropped and counted
      log_max_mb: 16            # bound of DIR/events.jsonl, in bytes ...
      log_max_events: 20000     # ... and in events (both also bound the events held in memory)
      control_socket: /run/hyperframes/control.sock   # for `hyperframes mark`
      rules:
        - {name: hard_brake, stream: imu, field: 0, below: -6.0, for_ms: 100}
        - {name: lidar_stale, stream: lidar_top, stale_ms: 500}
      clips:                    # one file per event, cut by the upload service (or clips: true)
        enabled: true
        max_mb: 2048            # bound of the clips directory (uploaded clips make room)
        dir: clips              # relative to output_dir
        names: [hard_brake]     # only these event names (default: every event)
        streams:                # per event name (default: every stream)
          hard_brake: [cam_front, imu]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from hyperframes import _yamlconf as v
from hyperframes._yamlconf import Section
from hyperframes.errors import ConfigError
from hyperframes.events import EVENT_STREAM_ID, EVENT_STREAM_NAME, EventError, check_event_name
from hyperframes.format.streams import StreamInfo
from hyperframes.recorder.events.rules import Rule, StaleRule, ThresholdRule

__all__ = [
    "EventsConfig",
    "ClipsConfig",
    "PeerLimits",
    "DEFAULT_CONTROL_SOCKET",
    "parse_events",
    "check_event_streams",
]

DEFAULT_CONTROL_SOCKET: Final = Path("/run/hyperframes/control.sock")
"""In the unit's RuntimeDirectory (deploy/hyperframes-recorder.service)."""
_MAX_S: Final = 86_400.0
_KEYS = ("topic", "pre_s", "post_s", "names", "peers", "log_max_mb", "log_max_events",
         "control_socket", "rules", "clips")  # fmt: skip
_PEER_KEYS = ("max_pre_s", "max_post_s", "per_s", "burst")
_CLIP_KEYS = ("enabled", "max_mb", "dir", "streams", "names")
_RULE_KEYS = ("name", "stream", "field", "below", "above", "for_ms", "stale_ms", "pre_s",
              "post_s")  # fmt: skip


@dataclass(frozen=True, slots=True)
class PeerLimits:
    """What an event from the wire may ask for: its window, and how many per second.

    ``mark`` and the rules are not peers: they are bounded by the config alone.
    """

    max_pre_s: float = 10.0
    max_post_s: float = 5.0
    per_s: float = 20.0
    burst: int = 200


@dataclass(frozen=True, slots=True)
class ClipsConfig:
    """``events.clips``: one file per event, cut once its post window has closed.

    ``dir`` is relative to the output directory (an absolute path stays as it
    is); ``names`` (``None``: every event name) limits which events get a clip;
    ``streams`` maps an event name to the streams its clips hold (default: all).
    Cut by the upload service (:mod:`hyperframes.recorder.upload.clipper`).
    """

    enabled: bool = False
    max_mb: float = 2048.0
    dir: Path = Path("clips")
    streams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    names: frozenset[str] | None = None

    @property
    def max_bytes(self) -> int:
        """The bound of the clips directory in bytes."""
        return int(self.max_mb * 1024 * 1024)

    def wants(self, name: str) -> bool:
        """Whether an event named ``name`` gets a clip."""
        return self.enabled and (self.names is None or name in self.names)

    def streams_for(self, name: str) -> tuple[str, ...] | None:
        """The stream names a clip of ``name`` holds; ``None``: every stream."""
        return self.streams.get(name)


@dataclass(frozen=True, slots=True)
class EventsConfig:
    """Where events arrive, how much they keep by default and per name, and the rules."""

    topic: str = "events"
    pre_s: float = 10.0
    post_s: float = 5.0
    names: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    log_max_mb: float = 16.0
    control_socket: Path = DEFAULT_CONTROL_SOCKET
    rules: tuple[Rule, ...] = ()
    peers: PeerLimits = field(default_factory=PeerLimits)
    log_max_events: int = 20_000
    clips: ClipsConfig = field(default_factory=ClipsConfig)

    def window_for(self, name: str) -> tuple[float, float]:
        """``(pre_s, post_s)`` for an event named ``name`` that gives none of its own."""
        return self.names.get(name, (self.pre_s, self.post_s))

    @property
    def log_max_bytes(self) -> int:
        """The event log's size limit in bytes."""
        return int(self.log_max_mb * 1024 * 1024)

    @property
    def longest_pre_s(self) -> float:
        """The longest pre-roll any configured name, rule or the default asks for."""
        pres = [self.pre_s, *(p for p, _ in self.names.values())]
        pres += [r.pre_s for r in self.rules]
        return max(pres)

    @property
    def longest_post_s(self) -> float:
        """The longest post-roll any configured name, rule or the default asks for."""
        posts = [self.post_s, *(p for _, p in self.names.values())]
        posts += [r.post_s for r in self.rules]
        return max(posts)


_seconds = v.number(_MAX_S, zero_ok=True)


def _event_name(key: str, value: object) -> str:
    try:
        return check_event_name(value, "event name")
    except EventError as exc:
        raise ConfigError(key, exc.problem) from None


def _field_index(s: Section, info: StreamInfo) -> int:
    key = s.key("field")
    raw = s.data.get("field")
    width = info.shape[-1] if info.shape else 1
    names = info.extra.get("fields") if isinstance(info.extra, dict) else None
    if isinstance(raw, str):
        if not isinstance(names, list) or raw not in names:
            listed = f"; named fields of {info.name}: {', '.join(map(str, names))}" if isinstance(
                names, list) else f" ({info.name} has no extra.fields list)"  # fmt: skip
            raise ConfigError(key, f"{raw!r} is not a field name{listed}")
        return names.index(raw)
    if raw is None:
        raise ConfigError(key, "required key is missing (an index, or a name from extra.fields)")
    return v.int_in(0, width - 1)(key, raw)


def _rule(data: object, i: int, by_name: Mapping[str, StreamInfo], ev: Section,
          names: Mapping[str, tuple[float, float]], pre: float, post: float) -> Rule:  # fmt: skip
    s = Section(data, f"events.rules[{i}]", _RULE_KEYS)
    name = s.need("name", _event_name)
    stream = s.need("stream", v.string)
    info = by_name.get(stream)
    if info is None:
        hint = v.suggest(stream, list(by_name))
        raise ConfigError(s.key("stream"), f"no stream named {stream!r}{hint} "
                          f"(streams: {', '.join(by_name)})")  # fmt: skip
    d_pre, d_post = names.get(name, (pre, post))
    r_pre = s.get("pre_s", _seconds, d_pre)
    r_post = s.get("post_s", _seconds, d_post)
    if s.has("stale_ms"):
        for other in ("field", "below", "above", "for_ms"):
            if s.has(other):
                raise ConfigError(s.key(other), "does not apply to a stale rule (stale_ms given)")
        stale = s.get("stale_ms", v.number(_MAX_S * 1000), 0.0)
        return StaleRule(name, info.id, round(stale * 1e6), r_pre, r_post)
    below, above = s.get("below", _finite, None), s.get("above", _finite, None)
    if (below is None) == (above is None):
        raise ConfigError(s.path, "a threshold rule needs exactly one of below: or above: "
                          "(or stale_ms: for a stale rule)")  # fmt: skip
    if info.dtype is None or np.dtype(info.dtype).kind not in "iuf":
        raise ConfigError(
            s.key("stream"),
            f"{stream!r} is not a numeric array stream (encoding {info.encoding}, "
            f"dtype {info.dtype}); a threshold needs one",
        )
    idx = _field_index(s, info)
    for_ms = s.get("for_ms", v.number(_MAX_S * 1000, zero_ok=True), 0.0)
    return ThresholdRule(name, info.id, idx, below, above, round(for_ms * 1e6), r_pre, r_post)


def _finite(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ConfigError(key, f"must be a finite number, got {v.kind(value)}")
    return float(value)


def _clips(data: object, by_name: Mapping[str, StreamInfo]) -> ClipsConfig:
    """``events.clips``: ``true``/``false``, or a mapping of :data:`_CLIP_KEYS`."""
    if isinstance(data, bool):
        return ClipsConfig(enabled=data)
    if not isinstance(data, Mapping):
        raise ConfigError("events.clips", f"must be true, false or a mapping, got {v.kind(data)}")
    s = Section(data, "events.clips", _CLIP_KEYS)
    clip_dir = s.get("dir", v.path, Path("clips"))
    if clip_dir == Path() or ".." in clip_dir.parts:
        raise ConfigError(s.key("dir"), f"{str(clip_dir)!r}: clips need a directory of their "
                          "own (inside output_dir, e.g. clips, or an absolute path)")  # fmt: skip
    names: frozenset[str] | None = None
    if s.has("names"):
        listed = v.listing(s.data["names"], s.key("names"))
        if not listed:
            raise ConfigError(s.key("names"), "empty: no event would get a clip (remove the "
                              "key for every event, or set enabled: false)")  # fmt: skip
        names = frozenset(_event_name(f"{s.key('names')}[{i}]", n) for i, n in enumerate(listed))
    allowed = [*by_name, EVENT_STREAM_NAME]
    per_name: dict[str, tuple[str, ...]] = {}
    raw_streams: dict[str, Any] = s.get("streams", v.mapping, {})
    for ev_name, raw in raw_streams.items():
        key = f"{s.key('streams')}.{ev_name}"
        _event_name(key, ev_name)
        if names is not None and ev_name not in names:
            raise ConfigError(key, f"{ev_name!r} is not in events.clips.names (it gets no clip)"
                              f"{v.suggest(ev_name, sorted(names))}")  # fmt: skip
        listed = v.listing(raw, key)
        if not listed:
            raise ConfigError(key, "empty: a clip holds at least one stream")
        chosen: list[str] = []
        for i, raw_st in enumerate(listed):
            st = v.string(f"{key}[{i}]", raw_st)
            if st not in allowed:
                hint = v.suggest(st, allowed)
                raise ConfigError(f"{key}[{i}]", f"no stream named {st!r}{hint} "
                                  f"(streams: {', '.join(by_name)})")  # fmt: skip
            if st not in chosen:
                chosen.append(st)
        per_name[ev_name] = tuple(chosen)
    return ClipsConfig(
        enabled=s.get("enabled", v.boolean, True),
        max_mb=s.get("max_mb", v.number(16 << 20), 2048.0),
        dir=clip_dir,
        streams=per_name,
        names=names,
    )


def parse_events(data: object, streams: Sequence[StreamInfo]) -> EventsConfig:
    """Validate ``events:`` (``data`` may be ``None``: the defaults) against the streams."""
    s = Section({} if data is None else data, "events", _KEYS)
    pre = s.get("pre_s", _seconds, 10.0)
    post = s.get("post_s", _seconds, 5.0)
    names: dict[str, tuple[float, float]] = {}
    raw_names: dict[str, Any] = s.get("names", v.mapping, {})
    for key, val in raw_names.items():
        path = f"events.names.{key}"
        _event_name(path, key)
        n = Section(val, path, ("pre_s", "post_s"))
        names[key] = (n.get("pre_s", _seconds, pre), n.get("post_s", _seconds, post))
    by_name = {st.name: st for st in streams}
    raw_rules = v.listing(s.data["rules"], "events.rules") if s.has("rules") else []
    rules = tuple(_rule(d, i, by_name, s, names, pre, post) for i, d in enumerate(raw_rules))
    longest = EventsConfig(pre_s=pre, post_s=post, names=names, rules=rules)
    p = Section(s.section("peers"), "events.peers", _PEER_KEYS)
    peers = PeerLimits(
        max_pre_s=p.get("max_pre_s", _seconds, longest.longest_pre_s),
        max_post_s=p.get("max_post_s", _seconds, longest.longest_post_s),
        per_s=p.get("per_s", v.number(100_000), 20.0),
        burst=p.get("burst", v.int_in(1, 1_000_000), 200),
    )
    return EventsConfig(
        topic=s.get("topic", v.string, "events"),
        pre_s=pre,
        post_s=post,
        names=names,
        log_max_mb=s.get("log_max_mb", v.number(4096), 16.0),
        control_socket=s.get("control_socket", v.path, DEFAULT_CONTROL_SOCKET),
        rules=rules,
        peers=peers,
        log_max_events=s.get("log_max_events", v.int_in(1, 10_000_000), 20_000),
        clips=_clips(s.data["clips"], by_name) if s.has("clips") else ClipsConfig(),
    )


def check_event_streams(streams: Sequence[StreamInfo], topics: Sequence[str],
                        events: EventsConfig) -> None:  # fmt: skip
    """The event stream's id, name and topic are reserved: no sensor stream may use them."""
    for i, st in enumerate(streams):
        if st.id == EVENT_STREAM_ID:
            raise ConfigError(f"streams[{i}].id", f"{EVENT_STREAM_ID} is reserved for the "
                              "event stream (use 0-65534)")  # fmt: skip
        if st.name == EVENT_STREAM_NAME:
            raise ConfigError(f"streams[{i}].name", f"{EVENT_STREAM_NAME!r} is reserved for "
                              "the event stream")  # fmt: skip
    for i, topic in enumerate(topics):
        if topic == events.topic:
            raise ConfigError(f"streams[{i}].topic", f"{topic!r} is the event topic "
                              "(events.topic); give the stream or the events another")  # fmt: skip


def check_buffer(events: EventsConfig, retention: str, buffer_s: float) -> None:
    """Snapshot mode: the rolling buffer must hold the longest configured pre-roll."""
    if retention != "events":
        return
    longest = events.longest_pre_s
    if buffer_s < longest:
        raise ConfigError(
            "disk.buffer_s",
            f"{buffer_s:g} s is shorter than the longest pre_s configured ({longest:g} s): "
            "that pre-roll would already be deleted when its event arrives",
        )
