"""A small synchronous publisher for sensor drivers and the simulator.

Speaks the wire protocol of :mod:`hyperframes.recorder.ingest.wire` (spec: docs/INGEST.md).

Socket type: PUSH by default. Measured here, ZMQ PUB/SUB at full speed
silently dropped 24-94% of messages with default settings: a PUB socket
discards whatever exceeds a subscriber's high-water mark, and everything sent
before a subscriber has joined. PUSH never drops: when the high-water mark is
reached ``send`` blocks (back-pressure reaches the driver, which can count
its own drops). ``socket_type="pub"`` is offered for drivers that must fan out
to several consumers; it sets ``XPUB_NODROP`` so a full queue blocks instead
of dropping, but messages sent while no subscriber is connected are still
lost.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal

import zmq

from hyperframes.format.crc import PayloadLike
from hyperframes.recorder.ingest.curve import CurveClientKeys
from hyperframes.recorder.ingest.wire import encode_frame, zmq_frames

__all__ = [
    "DEFAULT_SNDHWM",
    "SequenceCounter",
    "ZmqPublisher",
    "encode_mqtt_payload",
    "event_body",
]

#: Messages queued per peer before ``send`` blocks. Bounds the driver's memory
#: (1000 lidar sweeps of 2 MB = 2 GB worst case) while absorbing a
#: recorder hiccup of several seconds at camera and IMU rates.
DEFAULT_SNDHWM = 1000


class SequenceCounter:
    """Per-topic sequence numbers: 0, 1, 2... unless a caller sets one explicitly."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def take(self, topic: str, seq: int | None = None) -> int:
        """The sequence number for this frame of ``topic``; an explicit ``seq`` resets it."""
        value = self._next.get(topic, 0) if seq is None else seq
        self._next[topic] = value + 1
        return value


class ZmqPublisher:
    """Send frames as ``[topic, header, payload]`` over one ZMQ socket.

    ``endpoint`` is a ZMQ address (``tcp://127.0.0.1:5555``); the recorder
    usually binds a PULL socket and drivers connect (``bind=False``).
    ``send_timeout_ms`` bounds how long ``send`` blocks on a full queue
    (``None``: forever) and raises :class:`TimeoutError` when it expires.
    ``linger_ms`` is how long :meth:`close` waits to deliver queued frames.
    ``curve`` (:func:`hyperframes.recorder.ingest.curve.client_keys`) connects to a CURVE socket.
    Not thread-safe (a ZMQ socket belongs to one thread).
    """

    def __init__(
        self,
        endpoint: str,
        socket_type: Literal["push", "pub"] = "push",
        *,
        bind: bool = False,
        sndhwm: int = DEFAULT_SNDHWM,
        send_timeout_ms: int | None = None,
        linger_ms: int = 2000,
        crc: bool = True,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        curve: CurveClientKeys | None = None,
    ) -> None:
        if socket_type not in ("push", "pub"):
            raise ValueError(f"socket_type must be 'push' or 'pub', got {socket_type!r}")
        self.endpoint = endpoint
        self.socket_type = socket_type
        self.crc = crc
        self._seq = SequenceCounter()
        ctx = context if context is not None else zmq.Context.instance()
        sock = ctx.socket(zmq.PUSH if socket_type == "push" else zmq.PUB)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        sock.setsockopt(zmq.LINGER, linger_ms)
        sock.setsockopt(zmq.SNDTIMEO, -1 if send_timeout_ms is None else send_timeout_ms)
        if socket_type == "pub":
            sock.setsockopt(zmq.XPUB_NODROP, 1)
        if (
            curve is not None
        ):  # a CURVE client of a recorder socket (hyperframes.recorder.ingest.curve)
            sock.curve_publickey = curve.public
            sock.curve_secretkey = curve.secret
            sock.curve_serverkey = curve.server_public
        # connection events, so a caller can tell "nobody is listening" (ZMQ queues silently)
        self._monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED)
        self._peer_seen = False
        try:
            if bind:
                sock.bind(endpoint)
            else:
                sock.connect(endpoint)
        except zmq.ZMQError:
            self._monitor.close(0)
            sock.close(0)
            raise
        self._sock = sock

    def send(
        self,
        topic: str,
        timestamp_ns: int,
        payload: PayloadLike,
        *,
        seq: int | None = None,
        hardware: bool = True,
        keyframe: bool = False,
        duration_ns: int = 0,
    ) -> int:
        """Send one frame; returns the sequence number it carried.

        ``seq`` defaults to the next number of ``topic`` (0, 1, 2...); pass
        the driver's own counter where it has one. Large payloads are sent
        without a copy: do not modify the buffer after the call.
        """
        number = self._seq.take(topic, seq)
        frames = zmq_frames(
            topic, payload, timestamp_ns, seq=number, hardware=hardware,
            keyframe=keyframe, duration_ns=duration_ns, crc=self.crc,
        )  # fmt: skip
        try:
            self._sock.send_multipart(frames, copy=False)
        except zmq.Again:
            raise TimeoutError(
                f"{self.endpoint}: send of {topic!r} seq {number} timed out "
                "(queue full: is the recorder running?)"
            ) from None
        return number

    def send_event(
        self,
        timestamp_ns: int,
        name: str,
        *,
        topic: str = "events",
        hardware: bool = True,
        **fields: Any,
    ) -> int:
        """Send one event (docs/INGEST.md, "Events"); ``fields`` as :func:`event_body`."""
        return self.send(topic, timestamp_ns, event_body(name, **fields), hardware=hardware)

    def peer_seen(self) -> bool:
        """True once a peer (the recorder) has connected to this socket, now or earlier.

        ZeroMQ queues frames for an endpoint nobody listens on without an
        error; this tells the two cases apart (a TCP or IPC connection was
        made; for PUB it does not prove that the peer subscribed).
        """
        while not self._peer_seen:
            try:
                self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            except zmq.ZMQError:  # closed
                break
            self._peer_seen = True
        return self._peer_seen

    def close(self, linger_ms: int | None = None) -> None:
        """Close the socket, waiting up to ``linger_ms`` (default: the constructor's) for
        queued frames; 0 drops them."""
        # stop the monitor first: closing its socket while it is attached made libzmq drop
        # the frames still queued for a peer not yet connected (linger did not deliver them)
        with contextlib.suppress(zmq.ZMQError):
            self._sock.disable_monitor()
        self._monitor.close(0)
        self._sock.close(linger_ms)

    def __enter__(self) -> ZmqPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


#: The body of one MQTT message (``header + payload``) for a stream's topic; publish
#: it with the stream's QoS (1 recommended) and number it with a :class:`SequenceCounter`.
encode_mqtt_payload = encode_frame


def event_body(
    name: str,
    *,
    pre_s: float | None = None,
    post_s: float | None = None,
    tags: Mapping[str, str] | None = None,
    note: str | None = None,
    payload: Any = None,
) -> bytes:
    """The JSON payload of an event message; send it on the events topic like a frame."""
    d: dict[str, Any] = {"name": name}
    for key, value in (("pre_s", pre_s), ("post_s", post_s), ("note", note), ("payload", payload)):
        if value is not None:
            d[key] = value
    if tags:
        d["tags"] = dict(tags)
    return json.dumps(d, separators=(",", ":")).encode()
