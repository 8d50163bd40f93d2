"""A minimal client of the Foxglove WebSocket protocol, written with ``websockets`` (tests only).

It speaks what a Foxglove viewer speaks to a server (subprotocol ``foxglove.sdk.v1``
for foxglove-sdk's server, ``foxglove.websocket.v1`` for older ones): it reads
``serverInfo`` and ``advertise``, subscribes, decodes binary ``messageData``
(opcode 1: subscription id u32, log time u64, payload), ``time`` (opcode 2) and
``playbackState`` (opcode 5: status u8, current time u64, speed f32, did-seek u8,
request id u32-prefixed),
and sends ``playbackControlRequest`` (client opcode 3: play 0 / pause 1 u8,
speed f32, had-seek u8, seek time u64, request id u32-prefixed). Payloads decode
with the advertised schemas only: protobuf through ``google.protobuf`` from the
advertised FileDescriptorSet, JSON with :mod:`json`. Nothing of hyperframes is used to decode.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import struct
import time
from dataclasses import dataclass
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]
_MESSAGE_DATA, _TIME, _PLAYBACK_STATE = 1, 2, 5
_PLAYBACK_REQUEST = 3
PLAYING, PAUSED, BUFFERING, ENDED = 0, 1, 2, 3


@dataclass(frozen=True)
class Message:
    """One ``messageData`` frame."""

    channel_id: int
    topic: str
    log_time: int
    payload: bytes
    received: float  # time.monotonic() when it arrived


@dataclass(frozen=True)
class PlaybackStateMsg:
    """A ``playbackState`` from the server."""

    status: int
    current_time: int
    speed: float
    did_seek: bool
    request_id: str


class FoxgloveClient:
    """A blocking client: ``with FoxgloveClient(f"ws://127.0.0.1:{port}") as c: ...``."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(url, subprotocols=SUBPROTOCOLS, open_timeout=timeout, max_size=None)  # type: ignore[arg-type]
        )
        self.subprotocol = self.ws.subprotocol
        self.server_info: dict[str, Any] = {}
        self.channels: dict[int, dict[str, Any]] = {}  # channel id -> advertised channel
        self.subscriptions: dict[int, int] = {}  # subscription id -> channel id
        self.states: list[PlaybackStateMsg] = []
        self.times: list[int] = []
        self.statuses: list[dict[str, Any]] = []
        self._next_sub = 1
        self._next_request = 0
        self._decoders: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while not self.server_info and time.monotonic() < deadline:
            self._pump(deadline - time.monotonic())

    # --- reading -------------------------------------------------------------------

    def _pump(self, timeout: float) -> Message | PlaybackStateMsg | None:
        """Read one frame (up to ``timeout`` s); returns a message or a playback state."""
        try:
            raw = self.ws.recv(timeout=max(timeout, 0.0))
        except TimeoutError:
            return None
        if isinstance(raw, str):
            doc = json.loads(raw)
            op = doc.get("op")
            if op == "serverInfo":
                self.server_info = doc
            elif op == "advertise":
                for ch in doc["channels"]:
                    self.channels[int(ch["id"])] = ch
            elif op == "unadvertise":
                for cid in doc["channelIds"]:
                    self.channels.pop(int(cid), None)
            elif op == "status":
                self.statuses.append(doc)
            return None
        op = raw[0]
        if op == _MESSAGE_DATA:
            sub, log_time = struct.unpack_from("<IQ", raw, 1)
            cid = self.subscriptions.get(sub, -1)
            topic = self.channels.get(cid, {}).get("topic", "")
            return Message(cid, topic, log_time, bytes(raw[13:]), time.monotonic())
        if op == _TIME:
            self.times.append(struct.unpack_from("<Q", raw, 1)[0])
            return None
        if op == _PLAYBACK_STATE:
            status, t, speed, did_seek, n = struct.unpack_from("<BQfBI", raw, 1)
            rid = bytes(raw[19 : 19 + n]).decode()
            st = PlaybackStateMsg(status, t, speed, bool(did_seek), rid)
            self.states.append(st)
            return st
        return None

    def wait_channels(self, count: int, timeout: float = 10.0) -> dict[int, dict[str, Any]]:
        """Wait until ``count`` channels are advertised; returns them."""
        deadline = time.monotonic() + timeout
        while len(self.channels) < count and time.monotonic() < deadline:
            self._pump(min(0.2, deadline - time.monotonic()))
        return self.channels

    def messages(
        self, count: int | None = None, timeout: float = 5.0, idle: float | None = None
    ) -> list[Message]:
        """Messages until ``count`` arrived, ``timeout`` s passed or none came for ``idle`` s."""
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while (count is None or len(out) < count) and time.monotonic() < deadline:
            m = self._pump(min(0.05, deadline - time.monotonic()))
            if isinstance(m, Message):
                out.append(m)
                last = time.monotonic()
            elif idle is not None and time.monotonic() - last > idle:
                break
        return out

    def wait_state(self, request_id: str, timeout: float = 5.0) -> PlaybackStateMsg | None:
        """The playback state answering ``request_id`` (messages read meanwhile are dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for s in self.states:
                if s.request_id == request_id:
                    return s
            self._pump(min(0.05, deadline - time.monotonic()))
        return None

    # --- requests ------------------------------------------------------------------

    def subscribe(self, channel_ids: list[int] | None = None) -> dict[int, int]:
        """Subscribe to ``channel_ids`` (default: every advertised channel)."""
        ids = list(self.channels) if channel_ids is None else channel_ids
        subs = []
        for cid in ids:
            sid = self._next_sub
            self._next_sub += 1
            self.subscriptions[sid] = cid
            subs.append({"id": sid, "channelId": cid})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        return {s["id"]: s["channelId"] for s in subs}

    def unsubscribe(self, subscription_ids: list[int] | None = None) -> None:
        """Unsubscribe (default: everything)."""
        ids = list(self.subscriptions) if subscription_ids is None else subscription_ids
        self.ws.send(json.dumps({"op": "unsubscribe", "subscriptionIds": ids}))

    def playback(self, state: int = PLAYING, speed: float = 1.0, seek_ns: int | None = None) -> str:
        """Send a ``playbackControlRequest`` (``state``: PLAYING or PAUSED); returns its
        request id (:meth:`wait_state` finds the answer)."""
        caps = self.server_info.get("capabilities", [])
        if "playbackControl" not in caps and "rangedPlayback" not in caps:
            raise RuntimeError(f"the server does not advertise playback control: {caps}")
        self._next_request += 1
        rid = f"req-{self._next_request}".encode()
        head = struct.pack(
            "<BBfBQI", _PLAYBACK_REQUEST, state, speed, seek_ns is not None, seek_ns or 0, len(rid)
        )
        self.ws.send(head + rid)
        return rid.decode()

    # --- decoding ------------------------------------------------------------------

    def decode(self, m: Message) -> Any:
        """The payload decoded with the channel's advertised schema: a protobuf message
        object, or a dict for JSON."""
        ch = self.channels[m.channel_id]
        if ch["encoding"] == "json":
            return json.loads(m.payload)
        if ch["encoding"] != "protobuf":
            return m.payload
        cls = self._decoders.get(m.channel_id)
        if cls is None:
            cls = self._decoders[m.channel_id] = _protobuf_class(ch["schemaName"], ch["schema"])
        return cls.FromString(m.payload)

    def close(self) -> None:
        """Close the connection."""
        with contextlib.suppress(ConnectionClosed):
            self._stack.close()

    def __enter__(self) -> FoxgloveClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _protobuf_class(name: str, schema_b64: str) -> Any:
    descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    descriptor_pool = importlib.import_module("google.protobuf.descriptor_pool")
    message_factory = importlib.import_module("google.protobuf.message_factory")
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(schema_b64))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
