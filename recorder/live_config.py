"""The ``live:`` section of the vehicle YAML: the recorder's Foxglove WebSocket view.

.. code-block:: yaml

    live:
      enabled: true            # off when the section is absent
      host: 127.0.0.1          # loopback by default; anything else logs a warning
      port: 8765               # 0: any free port (tests)
      streams: [cam_front, lidar_top]   # which streams (default: all)
      max_hz: 10               # per-stream rate cap for the live copy (null: none)
      rates: {cam_front: 5}    # per-stream caps that override max_hz
      queue: 64                # the bounded hand-off, in frames
      backlog: 256             # messages the server buffers per slow client

Validated like the rest of the file (:mod:`hyperframes._yamlconf`): the key path,
what was found, what is allowed, a did-you-mean for an unknown key or stream.
Nothing here imports foxglove: a config with ``live`` off never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from hyperframes import _yamlconf as v
from hyperframes._yamlconf import Section
from hyperframes.errors import ConfigError
from hyperframes.format.streams import StreamInfo

__all__ = ["LiveConfig", "parse_live", "live_warning", "TUNNEL_HINT"]

_KEYS: Final = ("enabled", "host", "port", "streams", "max_hz", "rates", "queue", "backlog")

TUNNEL_HINT: Final = "use an SSH tunnel: ssh -L 8765:127.0.0.1:8765 vehicle"


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """What the live view serves; see the module docstring. ``streams`` holds stream ids."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    streams: tuple[int, ...] | None = None
    """Stream ids served (``None``: every stream)."""
    max_hz: float | None = 10.0
    rates: dict[int, float | None] = field(default_factory=dict)
    """Per stream id: a cap that overrides ``max_hz`` (``None``: no cap)."""
    queue: int = 64
    backlog: int = 256

    def cap_hz(self, stream_id: int) -> float | None:
        """The live rate cap of ``stream_id`` (``None``: every frame is offered)."""
        return self.rates.get(stream_id, self.max_hz)

    def served(self, infos: Sequence[StreamInfo]) -> list[StreamInfo]:
        """The streams of ``infos`` that the live view serves, in config order."""
        if self.streams is None:
            return list(infos)
        keep = set(self.streams)
        return [i for i in infos if i.id in keep]


def _cap(key: str, value: object) -> float | None:
    """A rate in Hz (> 0, at most 10 kHz), or ``0`` / ``null`` for no cap."""
    if value == 0 and not isinstance(value, bool):
        return None
    return v.number(10_000)(key, value)


def _stream_id(key: str, value: object, by_name: dict[str, int]) -> int:
    name = v.string(key, value)
    if name not in by_name:
        names = list(by_name)
        raise ConfigError(
            key, f"{v.shown(name)} is not a stream{v.suggest(name, names)} (streams: "
            f"{', '.join(names)})",
        )  # fmt: skip
    return by_name[name]


def parse_live(data: object, infos: Sequence[StreamInfo]) -> LiveConfig:
    """Validate the ``live:`` mapping (``None``: live off) against the configured streams."""
    if data is None:
        return LiveConfig()
    s = Section(data, "live", _KEYS)
    by_name = {i.name: i.id for i in infos}
    streams = None
    if s.has("streams"):
        raw = v.listing(s.data["streams"], s.key("streams"))
        if not raw:
            raise ConfigError(s.key("streams"), "an empty list; drop the key to serve every stream")
        ids = [_stream_id(f"{s.key('streams')}[{j}]", n, by_name) for j, n in enumerate(raw)]
        for j, sid in enumerate(ids):
            if sid in ids[:j]:
                raise ConfigError(f"{s.key('streams')}[{j}]", f"{raw[j]!r} is listed twice")
        streams = tuple(ids)
    rates: dict[int, float | None] = {}
    if s.has("rates"):
        raw_rates = v.mapping(s.key("rates"), s.data["rates"])
        for name, hz in raw_rates.items():
            key = f"{s.key('rates')}.{name}"
            sid = _stream_id(key, name, by_name)
            if streams is not None and sid not in streams:
                raise ConfigError(key, f"{name!r} is not in live.streams (it is not served)")
            if hz is None:
                raise ConfigError(key, "must be a rate in Hz (or 0 for no cap), got null")
            rates[sid] = _cap(key, hz)
    return LiveConfig(
        enabled=s.get("enabled", v.boolean, True),
        host=s.get("host", v.string, "127.0.0.1"),
        port=s.get("port", v.int_in(0, 65535), 8765),
        streams=streams,
        max_hz=_cap(s.key("max_hz"), s.data["max_hz"]) if s.has("max_hz") else 10.0,
        rates=rates,
        queue=s.get("queue", v.int_in(1, 100_000), 64),
        backlog=s.get("backlog", v.int_in(1, 1_000_000), 256),
    )


def live_warning(cfg: LiveConfig, is_loopback: bool) -> str | None:
    """The warning for a live view bound beyond loopback (``None`` when bound to loopback)."""
    if not cfg.enabled or is_loopback:
        return None
    return (
        f"live: the Foxglove WebSocket server listens on {cfg.host}:{cfg.port}, beyond this "
        f"machine; there is no authentication in the Foxglove WebSocket protocol: anyone who "
        f"can reach it sees every served stream. Keep live.host on 127.0.0.1 and {TUNNEL_HINT}"
    )
