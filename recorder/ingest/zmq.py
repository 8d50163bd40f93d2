"""ZMQ ingest: one PULL or SUB socket per configured ``zmq:`` entry (pyzmq asyncio).

Back-pressure, not drops: a received frame is put on the daemon's bounded
queue with ``await``; while the queue is full this source stops reading, the
socket's receive queue fills up to ``rcvhwm`` and the senders' PUSH sockets
then block (docs/INGEST.md). On stop the socket is drained of what it already
holds (bounded by a deadline) before it is closed.

Cost per frame matters here (the ``vehicle`` profile is ~400 frames/s at real
time, several times that when catching up): the socket is created from the
asyncio context, but messages are read with non-blocking ``recv_multipart``
on its synchronous shadow (``copy=False``: payloads stay in the zmq.Frame
buffers all the way to the writer), and the loop waits for the socket's
edge-triggered ``FD`` with ``loop.add_reader``, not with pyzmq's awaitable
``poll``/``recv`` (a Future, a poller and a timer per wake-up, measured at
about a third of the daemon's CPU at 1x).

Hostile peers: ``ZMQ_MAXMSGSIZE`` is ``max_payload_mb`` plus the largest
header, so libzmq disconnects a peer that announces a bigger message part
before allocating it; a socket monitor counts such disconnects, and CURVE
handshakes refused by the ZAP handler (:mod:`hyperframes.recorder.ingest.curve`), per socket in
:attr:`RecorderStats.zmq_events <hyperframes.recorder.metrics.RecorderStats.zmq_events>`.
Idle connections: a bound socket holds at most ``max_connections`` peers
(:mod:`hyperframes.recorder.ingest.peers` shuts down the newest beyond, counted
as ``over-limit``), and a peer that has not finished the ZMTP handshake within
:data:`HANDSHAKE_IVL_MS` is dropped by libzmq. Every peer event is logged at
most once per 10 s per socket and kind, with the count held back.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Callable, Iterable

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from hyperframes.recorder.config import StreamConfig, ZmqSocketConfig
from hyperframes.recorder.errors import EndpointError
from hyperframes.recorder.ingest.common import FrameRouter, IngestFrame, RateLimitedLog
from hyperframes.recorder.ingest.curve import apply_curve_server
from hyperframes.recorder.ingest.peers import PeerCap, parse_listener
from hyperframes.recorder.ingest.wire import MAX_HEADER_SIZE
from hyperframes.recorder.metrics import RecorderStats

__all__ = ["ZmqSource", "HANDSHAKE_IVL_MS"]

_log = logging.getLogger(__name__)
_BATCH = 256  # messages read per wake-up before yielding to the loop
_EVENTS: dict[int, str] = {  # monitor events counted, by the name counted under
    zmq.EVENT_DISCONNECTED: "disconnected",  # also: a message part over ZMQ_MAXMSGSIZE
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "auth-failed",  # CURVE: a client key not allowed
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshake-failed",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake-failed",  # e.g. a plain peer, CURVE server
}
_WATCHED = sum(_EVENTS) | zmq.EVENT_ACCEPTED  # accepted: not counted, fed to the PeerCap
_LOG_PERIOD_S = 10.0  # peer event lines: at most one per socket and kind in this time

HANDSHAKE_IVL_MS = 5_000
"""A peer that has not finished the ZMTP handshake in this time is dropped (libzmq's
default is 30 s): a driver's takes milliseconds, CURVE's included; an idle
connection holds a descriptor and a ``max_connections`` place until then."""


class ZmqSource:
    """Receives frames on one ZMQ socket; :meth:`open` binds/connects, :meth:`run` reads."""

    def __init__(
        self,
        sock_cfg: ZmqSocketConfig,
        streams: Iterable[StreamConfig],
        stats: RecorderStats,
        queue: asyncio.Queue[IngestFrame],
        max_payload: int,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        self.config = sock_cfg
        self.router = FrameRouter(streams, stats, max_payload)
        self._stats = stats
        self._queue = queue
        self._ctx = context or zmq.asyncio.Context.instance()
        self._sock: zmq.asyncio.Socket | None = None
        self._raw: zmq.Socket[bytes] | None = None  # synchronous shadow of _sock
        self._monitor: zmq.asyncio.Socket | None = None
        self._release: Callable[[], None] = lambda: None  # the CURVE ZAP handler's
        self._max_msg = max_payload + MAX_HEADER_SIZE
        self.endpoint: str | None = None  # the bound endpoint (the real port for tcp://*:0)
        self.peers: PeerCap | None = None  # bound sockets: the cap on peer connections
        self._peer_log = RateLimitedLog(_log, _LOG_PERIOD_S)

    @property
    def name(self) -> str:
        """The socket's name in the config."""
        return self.config.name

    def open(self) -> None:
        """Create, configure and bind or connect the socket."""
        c = self.config
        sock = self._ctx.socket(zmq.PULL if c.socket == "pull" else zmq.SUB)
        sock.setsockopt(zmq.RCVHWM, c.rcvhwm)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self._max_msg)  # larger parts: the peer is cut off
        sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_IVL_MS)
        if c.curve is not None:
            try:
                self._release = apply_curve_server(sock, c.name, c.curve)
            except BaseException:
                sock.close(0)
                raise
        if c.socket == "sub":
            for topic in self.router.topics:
                sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        try:
            if c.bind:
                sock.bind(c.endpoint)
                self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
            else:
                sock.connect(c.endpoint)
                self.endpoint = c.endpoint
        except zmq.ZMQError as exc:
            sock.close(0)
            self._release()
            if exc.errno == errno.EADDRINUSE:
                what = (
                    "address already in use: is another recorder running? Stop it, "
                    "or give zmq.endpoint another port in the config"
                )
            else:
                what = f"cannot {'bind' if c.bind else 'connect'}: {exc.strerror}"
            raise EndpointError(c.name, c.endpoint, what) from None
        if c.bind:
            self.peers = PeerCap(parse_listener(self.endpoint), c.max_connections)
        self._monitor = sock.get_monitor_socket(_WATCHED)
        self._sock = sock
        self._raw = zmq.Socket.shadow(sock.underlying)
        _log.info("zmq %s: %s %s %s", c.name, c.socket, "bound" if c.bind else "connected to",
                  self.endpoint)  # fmt: skip

    async def run(self, stopping: asyncio.Event, drain_s: float = 2.0) -> None:
        """Read until ``stopping`` is set, then drain what the socket holds and close it."""
        sock, raw = self._sock, self._raw
        if sock is None or raw is None:
            raise RuntimeError(f"zmq {self.name}: run() before open()")
        loop = asyncio.get_running_loop()
        fd = raw.FD
        wake = asyncio.Event()

        def on_readable() -> None:
            # Reading EVENTS re-arms the edge-triggered FD; without it the loop would
            # call back on every iteration while this task is busy or back-pressured.
            raw.get(zmq.EVENTS)
            wake.set()

        net: asyncio.TimerHandle | None = None

        def safety_net() -> None:  # wake is prompt; this only bounds a missed edge to 1 s
            nonlocal net
            wake.set()
            net = loop.call_later(1.0, safety_net)

        net = loop.call_later(1.0, safety_net)
        loop.add_reader(fd, on_readable)
        events = asyncio.create_task(self._watch_events(), name=f"zmq-{self.name}-events")
        stop_watch = asyncio.ensure_future(stopping.wait())
        stop_watch.add_done_callback(lambda _: wake.set())
        try:
            while True:
                got = await self._read_batch(raw)
                if got >= _BATCH:
                    await asyncio.sleep(0)  # let the pump and the ticker run
                    continue
                if stopping.is_set():
                    break
                # A batch short of _BATCH ended on zmq.Again, which read EVENTS: the FD is
                # edge-triggered, so a message arriving from now on makes it readable again.
                if int(raw.get(zmq.EVENTS)) & zmq.POLLIN:
                    continue
                wake.clear()
                await wake.wait()
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline and await self._read_batch(raw):
                pass
        finally:
            if net is not None:
                net.cancel()
            stop_watch.cancel()
            events.cancel()
            loop.remove_reader(fd)
            self.close()

    def close(self) -> None:
        """Close the socket (and its monitor) if :meth:`run` did not."""
        self._raw = None
        if self._sock is not None:
            if self._monitor is not None:
                with contextlib.suppress(zmq.ZMQError):
                    self._sock.disable_monitor()
                self._monitor.close(0)
                self._monitor = None
            self._sock.close(0)
            self._sock = None
            self._release()
            self._release = lambda: None

    async def _watch_events(self) -> None:
        """Count the peer events of :data:`_EVENTS`, hold the cap; log them rate-limited."""
        mon = self._monitor
        if mon is None:
            return
        counts = self._stats.zmq_events.setdefault(self.name, {})
        while True:
            try:
                parts = await mon.recv_multipart()
            except zmq.ZMQError:
                return
            self._peer_event(parts, counts)

    def _peer_event(self, parts: list[bytes], counts: dict[str, int]) -> None:
        """One monitor event: counted, fed to the cap, logged (rate-limited)."""
        msg = parse_monitor_message(parts)
        event, value = int(msg["event"]), int(msg["value"])
        if event == zmq.EVENT_ACCEPTED:
            self._accepted(value, counts)
            return
        what = _EVENTS.get(event)
        if what is None:
            return
        counts[what] = counts.get(what, 0) + 1
        if what != "disconnected":
            self._peer_log.warning(
                (self.name, what), "zmq %s: %s: a peer's handshake was refused (%s)",
                self.name, what, msg.get("endpoint", b"").decode(errors="replace"),
            )  # fmt: skip
            return
        if self.peers is not None:
            self.peers.disconnected(value)
        self._peer_log.log(
            logging.INFO, (self.name, what), "zmq %s: a peer disconnected (also what a "
            "message part over %d bytes does)", self.name, self._max_msg,
        )  # fmt: skip

    def _accepted(self, fd: int, counts: dict[str, int]) -> None:
        """A peer connected on ``fd``: shut down the newest beyond ``max_connections``."""
        cap = self.peers
        if cap is None:
            return
        cut = cap.accepted(fd)
        if cut:
            counts["over-limit"] = counts.get("over-limit", 0) + cut
            self._peer_log.warning(
                (self.name, "over-limit"), "zmq %s: shut down %d peer connection(s) over "
                "max_connections %d (the newest that had sent nothing, else the newest)",
                self.name, cut, cap.max_connections,
            )  # fmt: skip

    async def _read_batch(self, raw: zmq.Socket[bytes]) -> int:
        n = 0
        recv, route, queue = raw.recv_multipart, self.router.zmq, self._queue
        streams = self._stats.streams
        while n < _BATCH:
            try:
                parts = recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            n += 1
            frame = route([p.buffer for p in parts], time.time_ns())
            if frame is not None:
                streams[frame.stream_id].queue_depth += 1
                if queue.full():
                    await queue.put(frame)  # back-pressure: stop reading until there is room
                else:
                    queue.put_nowait(frame)
        return n
