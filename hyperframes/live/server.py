"""A Foxglove WebSocket server for hyperframes streams (live from the recorder, or playback).

API (for the recorder's ``live:`` section and for ``hyperframes serve``)::

    from hyperframes.live.server import LiveServer

    srv = LiveServer(streams, host="127.0.0.1", port=8765)   # port=0: a free port
    srv.port                       # the port it listens on
    srv.has_subscribers(sid)       # any client subscribed to stream sid? (a set lookup)
    srv.client_count               # clients with at least one subscription
    srv.publish(sid, t_ns, payload)            # one frame: encoded as the MCAP export does
    srv.publish_json("/hyperframes/status", {...}, t_ns)   # JSON documents (status, events)
    srv.close()                    # or ``with LiveServer(...) as srv:``

``streams`` are :class:`~hyperframes.format.streams.StreamInfo`; each becomes one
channel (:mod:`hyperframes.live.channels`: the same schemas and message bytes as
the MCAP export). :meth:`LiveServer.publish` is thread-safe and cheap when nobody
listens: call :meth:`LiveServer.has_subscribers` first to skip the encoding too.
Messages go to the SDK's per-client queue (``backlog`` messages; the oldest data
message is dropped when a client is slow: the caller is never blocked).

``playback_range=(start_ns, end_ns)`` advertises the playback-control capability;
``listener`` then gets ``on_playback_control_request(request) -> PlaybackState | None``
(:class:`foxglove.websocket.PlaybackControlRequest`); :meth:`LiveServer.broadcast_playback_state`
and :meth:`LiveServer.broadcast_time` tell clients where playback is.

The protocol has no authentication: a host other than a loopback address draws an
:class:`ExposedServerWarning` and a logged warning (reach a vehicle through an SSH
tunnel instead: ``ssh -L 8765:127.0.0.1:8765 vehicle``); ``warn_exposed=False`` for a
caller that has warned already (the recorder: its config check says it once).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import foxglove
from foxglove.websocket import (
    Capability,
    ChannelView,
    Client,
    PlaybackControlRequest,
    PlaybackState,
    ServerListener,
)

from hyperframes.format.streams import StreamInfo
from hyperframes.live.channels import LiveChannel, json_channel_schema, live_channel
from hyperframes.mcap.messages import encode_json

__all__ = ["LiveServer", "PlaybackListener", "ExposedServerWarning", "is_loopback"]

log = logging.getLogger(__name__)


class ExposedServerWarning(UserWarning):
    """The server listens on a non-loopback address: anyone who reaches it sees the data."""


class PlaybackListener(Protocol):
    """What a player gives :class:`LiveServer` to answer the clients' playback controls."""

    def on_playback_control_request(self, request: PlaybackControlRequest) -> PlaybackState | None:
        """Play, pause, seek or change speed; return the new state (sent to the client)."""
        ...


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Listener(ServerListener):
    """The SDK's ServerListener: subscriptions by channel id, playback to the player."""

    def __init__(self, playback: PlaybackListener | None) -> None:
        self._lock = threading.Lock()
        self._subs: dict[int, set[int]] = {}  # foxglove channel id -> client ids
        self._playback = playback
        self.subscribed: frozenset[int] = frozenset()  # channel ids with a subscriber
        self.clients: frozenset[int] = frozenset()

    def _update(self) -> None:
        self.subscribed = frozenset(c for c, ids in self._subs.items() if ids)
        self.clients = frozenset(i for ids in self._subs.values() for i in ids)

    def on_subscribe(self, client: Client, channel: ChannelView) -> None:
        with self._lock:
            self._subs.setdefault(channel.id, set()).add(client.id)
            self._update()

    def on_unsubscribe(self, client: Client, channel: ChannelView) -> None:
        with self._lock:
            self._subs.get(channel.id, set()).discard(client.id)
            self._update()

    def on_playback_control_request(
        self, playback_control_request: PlaybackControlRequest
    ) -> PlaybackState | None:
        if self._playback is None:
            return None
        try:
            return self._playback.on_playback_control_request(playback_control_request)
        except Exception:  # an exception here would only be logged by the SDK
            log.exception("playback control request failed")
            return None


class LiveServer:
    """A Foxglove WebSocket server with one channel per stream (see the module docstring)."""

    def __init__(
        self,
        streams: Sequence[StreamInfo],
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        name: str = "hyperframes",
        playback_range: tuple[int, int] | None = None,
        listener: PlaybackListener | None = None,
        backlog: int | None = None,
        warn_exposed: bool = True,
    ) -> None:
        if warn_exposed and not is_loopback(host):
            msg = (
                f"the live server listens on {host}:{port}: the Foxglove WebSocket protocol has "
                "no authentication, anyone who reaches that address sees the data; prefer "
                f"127.0.0.1 and an SSH tunnel (ssh -L {port}:127.0.0.1:{port} <vehicle>)"
            )
            warnings.warn(msg, ExposedServerWarning, stacklevel=2)
            log.warning(msg)
        self._context = foxglove.Context()
        self._listener = _Listener(listener)
        self.channels: dict[int, LiveChannel] = {}
        self._fox: dict[int, foxglove.Channel] = {}
        self._fox_ids: dict[int, int] = {}  # stream id -> foxglove channel id
        self._json: dict[str, foxglove.Channel] = {}
        self._lock = threading.Lock()
        for s in streams:
            ch = live_channel(s)
            self.channels[s.id] = ch
            schema = None
            if ch.schema is not None:
                schema = foxglove.Schema(
                    name=ch.schema.name, encoding=ch.schema.encoding, data=ch.schema.data
                )
            fc = foxglove.Channel(
                ch.topic,
                schema=schema,
                message_encoding=ch.message_encoding,
                context=self._context,
                metadata=ch.metadata,
            )
            self._fox[s.id] = fc
            self._fox_ids[s.id] = fc.id()
        capabilities = [Capability.Time] if playback_range is not None else []
        self._server = foxglove.start_server(
            name=name,
            host=host,
            port=port,
            capabilities=capabilities,
            server_listener=self._listener,
            context=self._context,
            playback_time_range=playback_range,
            message_backlog_size=backlog,
        )
        self._closed = False

    @property
    def port(self) -> int:
        """The port the server listens on (the one picked when constructed with port 0)."""
        return int(self._server.port)

    @property
    def client_count(self) -> int:
        """Clients subscribed to at least one channel."""
        return len(self._listener.clients)

    def has_subscribers(self, stream_id: int) -> bool:
        """Whether any client is subscribed to ``stream_id``'s channel (no lock: a set lookup)."""
        fid = self._fox_ids.get(stream_id)
        return fid is not None and fid in self._listener.subscribed

    def topic_has_subscribers(self, topic: str) -> bool:
        """Whether any client is subscribed to the JSON channel ``topic``."""
        ch = self._json.get(topic)
        return ch is not None and ch.id() in self._listener.subscribed

    def publish(self, stream_id: int, t_ns: int, payload: bytes | memoryview) -> None:
        """Send one frame of ``stream_id`` captured at ``t_ns`` (encoded as in the MCAP export).

        Nothing is encoded when no client is subscribed to the stream."""
        if self._closed or not self.has_subscribers(stream_id):
            return
        body = self.channels[stream_id].encode(t_ns, payload)
        self._fox[stream_id].log(body, log_time=t_ns)

    def json_channel(self, topic: str, schema: dict[str, Any] | None = None) -> None:
        """Advertise the JSON channel ``topic`` now (``schema``: its JSON schema); otherwise
        :meth:`publish_json` advertises it on first use."""
        with self._lock:
            if topic in self._json:
                return
            s = json_channel_schema(topic, schema)
            self._json[topic] = foxglove.Channel(
                topic,
                schema=foxglove.Schema(name=s.name, encoding=s.encoding, data=s.data),
                message_encoding="json",
                context=self._context,
            )

    def publish_json(self, topic: str, doc: dict[str, Any], t_ns: int) -> None:
        """Send a JSON document on ``topic`` (events, the recorder's status) at ``t_ns``."""
        if self._closed:
            return
        if topic not in self._json:
            self.json_channel(topic)
        ch = self._json[topic]
        if ch.id() in self._listener.subscribed:
            ch.log(encode_json(doc), log_time=t_ns)

    def broadcast_playback_state(self, state: PlaybackState) -> None:
        """Tell every client the playback state (after a change not asked by a client)."""
        if not self._closed:
            self._server.broadcast_playback_state(state)

    def broadcast_time(self, t_ns: int) -> None:
        """Tell every client the current (playback) time."""
        if not self._closed:
            self._server.broadcast_time(t_ns)

    def close(self) -> None:
        """Stop the server and close the channels (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._server.stop()
        for ch in [*self._fox.values(), *self._json.values()]:
            ch.close()

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
