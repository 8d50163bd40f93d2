"""ZMQ ingest: one PULL or SUB socket per configured ``zmq:`` entry (pyzmq asyncio).

Back-pressure, not drops: a received frame is put on the daemon's bounded
queue with ``await``; while the queue is full this source stops reading, the
socket's receive queue fills up to ``rcvhwm`` and the senders' PUSH sockets
then block (docs/INGEST.md). On stop the socket is drained of what it already
holds (bounded by a deadline) before it is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

import zmq
import zmq.asyncio

from recorder.config import StreamConfig, ZmqSocketConfig
from recorder.ingest import FrameRouter, IngestFrame
from recorder.metrics import RecorderStats

__all__ = ["ZmqSource"]

_log = logging.getLogger(__name__)
_BATCH = 256  # messages read per wake-up before yielding to the loop


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
        self.endpoint: str | None = None  # the bound endpoint (the real port for tcp://*:0)

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
        except zmq.ZMQError:
            sock.close(0)
            raise
        self._sock = sock
        _log.info("zmq %s: %s %s %s", c.name, c.socket, "bound" if c.bind else "connected to",
                  self.endpoint)  # fmt: skip

    async def run(self, stopping: asyncio.Event, drain_s: float = 2.0) -> None:
        """Read until ``stopping`` is set, then drain what the socket holds and close it."""
        sock = self._sock
        if sock is None:
            raise RuntimeError(f"zmq {self.name}: run() before open()")
        try:
            while True:
                got = await self._read_batch(sock)
                if got:
                    continue
                if stopping.is_set():
                    break
                await sock.poll(100)
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline and await self._read_batch(sock):
                pass
        finally:
            sock.close(0)
            self._sock = None

    def close(self) -> None:
        """Close the socket if :meth:`run` never ran."""
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    async def _read_batch(self, sock: zmq.asyncio.Socket) -> int:
        n = 0
        while n < _BATCH:
            try:
                parts = await sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            n += 1
            receive_ns = time.time_ns()
            frame = self.router.zmq([p.buffer for p in parts], receive_ns)
            if frame is not None:
                self._stats.streams[frame.stream_id].queue_depth += 1
                await self._queue.put(frame)
        return n
