"""MQTT ingest: one aiomqtt client subscribed to every MQTT stream's topic with its QoS.

The client keeps a persistent session (``clean_session=False`` under the
configured ``client_id``), so QoS 1/2 frames published while the recorder is
reconnecting wait at the broker. Connection losses are retried with jittered
exponential backoff up to ``mqtt.reconnect_max_s``. Frames already received
are in the daemon's queue and are never lost by a reconnect; on stop the
client's own queue of received messages is drained before disconnecting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Iterable
from typing import Any

import aiomqtt

from hyperframes.recorder.config import MqttConfig, StreamConfig
from hyperframes.recorder.errors import ConfigError
from hyperframes.recorder.ingest.common import Backoff, FrameRouter, IngestFrame
from hyperframes.recorder.metrics import RecorderStats

__all__ = ["MqttSource"]

_log = logging.getLogger(__name__)


def _tls_context(cfg: MqttConfig) -> ssl.SSLContext | None:
    if cfg.tls is None:
        return None
    t = cfg.tls
    try:
        ctx = ssl.create_default_context(cafile=str(t.ca_file) if t.ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("mqtt.tls.ca_file", f"cannot load {t.ca_file}: {_why(exc)}") from None
    if t.cert_file is not None and t.key_file is not None:
        try:
            ctx.load_cert_chain(str(t.cert_file), str(t.key_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "mqtt.tls", f"cannot load {t.cert_file} / {t.key_file}: {_why(exc)}"
            ) from None
    return ctx


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or str(exc)


_AUTH_CODES = (4, 5, 134, 135)  # MQTT 3.1.1 CONNACK 4/5, MQTT 5 reason codes 0x86/0x87
_TLS_HINTS = ("SSL", "TLS", "EOF occurred", "Errno 104", "Connection reset")


def explain(cfg: MqttConfig, exc: BaseException) -> tuple[str, bool]:
    """A short reason for a failed MQTT connection, and whether the broker refused our login."""
    rc = getattr(exc, "rc", None)
    if isinstance(exc, aiomqtt.MqttCodeError) and getattr(rc, "value", rc) in _AUTH_CODES:
        return f"login refused: {exc}; check mqtt.username and the password", True
    text = str(exc)
    if cfg.tls is not None and any(h in text for h in _TLS_HINTS):
        return (
            f"TLS handshake failed ({text}): is port {cfg.port} a TLS listener, and mqtt.tls."
            f"ca_file the CA of the broker's certificate for {cfg.host}?",
            False,
        )
    return text, False


class _SessionClient(aiomqtt.Client):
    """aiomqtt's client, remembering whether the broker resumed our persistent session.

    aiomqtt drops the CONNACK flags; its ``_on_connect`` hook is the one place
    that sees them. If a later aiomqtt renames the hook, ``session_present``
    stays ``None`` and only this counter is lost.
    """

    session_present: bool | None = None

    def _on_connect(self, client: Any, userdata: Any, flags: Any, *args: Any) -> None:
        self.session_present = bool(getattr(flags, "session_present", False))
        super()._on_connect(client, userdata, flags, *args)


class MqttSource:
    """Receives frames from an MQTT broker until stopped, reconnecting as needed."""

    def __init__(
        self,
        cfg: MqttConfig,
        streams: Iterable[StreamConfig],
        stats: RecorderStats,
        queue: asyncio.Queue[IngestFrame],
        max_payload: int,
    ) -> None:
        self.config = cfg
        self._streams = [s for s in streams if s.transport == "mqtt"]
        self.router = FrameRouter(self._streams, stats, max_payload)
        self._stats = stats
        self._queue = queue
        self.connected = asyncio.Event()
        """Set while connected and subscribed (tests and READY wait on it)."""
        self.connects = 0

    @property
    def broker(self) -> str:
        """``host:port``, the label of this broker's state in the stats."""
        return f"{self.config.host}:{self.config.port}"

    def _set_connected(self, up: bool, problem: str | None = None) -> None:
        self._stats.mqtt_connected[self.broker] = up
        if up:
            self._stats.mqtt_problem.pop(self.broker, None)
        elif problem is not None:
            self._stats.mqtt_problem[self.broker] = problem.split(";")[0].split(" (")[0][:60]

    async def run(self, stopping: asyncio.Event) -> None:
        """Connect, subscribe and receive until ``stopping`` is set."""
        cfg = self.config
        backoff = Backoff(0.2, cfg.reconnect_max_s)
        self._set_connected(False)
        while not stopping.is_set():
            try:
                await self._session(stopping)
            except aiomqtt.MqttError as exc:
                self.connected.clear()
                reason, refused = explain(cfg, exc)
                self._set_connected(False, reason)
                delay = backoff.next()
                if refused:
                    failures = self._stats.mqtt_auth_failures
                    failures[self.broker] = failures.get(self.broker, 0) + 1
                    _log.error("mqtt %s: %s; retrying in %.1f s", self.broker, reason, delay)
                else:
                    _log.warning("mqtt %s: %s; reconnecting in %.1f s", self.broker, reason,
                                 delay)  # fmt: skip
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
            else:
                backoff.reset()
            finally:
                if not self.connected.is_set():
                    self._set_connected(False)
        self.connected.clear()
        self._set_connected(False, "stopped")

    async def _session(self, stopping: asyncio.Event) -> None:
        cfg = self.config
        async with _SessionClient(
            cfg.host,
            cfg.port,
            username=cfg.username,
            password=cfg.read_password(),
            identifier=cfg.client_id,
            clean_session=False,
            keepalive=cfg.keepalive_s,
            tls_context=_tls_context(cfg),
            timeout=10,
        ) as client:
            for s in self._streams:
                await client.subscribe(s.topic, qos=s.qos if s.qos is not None else 1)
            for topic in self.router.extra_topics:  # events (docs/INGEST.md)
                await client.subscribe(topic, qos=1)
            if client.session_present is False and self.connects:
                # the broker forgot us (restart without persistence, session expiry):
                # what it queued for us while we were away is gone; seq gaps will show it
                self._stats.mqtt_sessions_lost += 1
                _log.warning(
                    "mqtt %s:%d: the broker did not resume our session; frames it "
                    "queued while we were disconnected are lost",
                    cfg.host,
                    cfg.port,
                )
            self.connects += 1
            self.connected.set()
            self._set_connected(True)
            _log.info("mqtt %s:%d: connected, %d topics subscribed", cfg.host, cfg.port,
                      len(self._streams))  # fmt: skip
            consume = asyncio.create_task(self._consume(client), name="mqtt-consume")
            stop = asyncio.create_task(stopping.wait(), name="mqtt-stop-wait")
            try:
                await asyncio.wait({consume, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.connected.clear()
                self._set_connected(False, "connection lost")
                stop.cancel()
                if not consume.done():
                    consume.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await consume
            if not stopping.is_set():
                consume.result()  # raises the MqttError that ended the session
                return
            # Stopping: take what the client already received, then disconnect.
            for _ in range(len(client.messages)):
                msg = await anext(client.messages)
                await self._handle(msg)

    async def _consume(self, client: aiomqtt.Client) -> None:
        async for msg in client.messages:
            await self._handle(msg)

    async def _handle(self, msg: aiomqtt.Message) -> None:
        frame = self.router.mqtt(msg.topic.value, msg.payload, time.time_ns())
        if frame is None:
            return
        self._stats.streams[frame.stream_id].queue_depth += 1
        if not self._queue.full():
            self._queue.put_nowait(frame)
            return
        try:
            await self._queue.put(frame)
        except asyncio.CancelledError:
            # Cancelled (stopping) while the queue was full. The frame was received
            # and acknowledged to the broker: keep it. The pump is still emptying the
            # queue during shutdown (bounded by the shutdown timeout), so wait for room.
            await asyncio.shield(self._queue.put(frame))
            raise
