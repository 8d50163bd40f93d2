"""``hyperframes sim``: synthetic sensor traffic for every stream of a vehicle config.

The simulator speaks to the recorder exactly as real drivers would, through
the config's own transports:

- ZMQ streams: one :class:`~hyperframes.recorder.ingest.publisher.ZmqPublisher` per configured
  socket. The recorder binds PULL (the default), so the simulator connects a
  PUSH socket; a ``socket: sub`` recorder gets a PUB publisher (with
  ``XPUB_NODROP``, and a short pause after connecting so the subscription
  arrives before the first frame); a recorder socket with ``bind: false``
  makes the simulator bind instead.
- MQTT streams: an aiomqtt client (same broker, credentials and TLS as the
  recorder, its own client id) publishing :func:`encode_mqtt_payload` bodies
  on each stream's topic with the stream's QoS.

Payloads come from :func:`hyperframes.synth.make_generator` (real JPEG images,
lidar sweeps, IMU samples), generated once per process into small pools so
that generation never limits the rate: JPEG frames are cheap (a pool of
images with a per-frame comment), array streams with payloads of 64 KiB or
more (lidar) cycle through 10 pre-built sweeps, small ones through 200.

Timing. Frame ``i`` of a stream has the nominal capture time
``start + phase + i * period`` (``period = 1 / rate_hz``, a small fixed
per-stream phase, ``start = time.time_ns()`` when sending begins) and is sent
at wall time ``(phase + i * period) / rate_scale`` after the start: a rate
scale of 4 compresses wall time four-fold while capture times stay spaced at
the nominal period. ``rate_scale=math.inf`` sends as fast as the transports
take the frames. Sequence numbers are the frame index ``i``.

Faults, all deterministic for a given ``seed``:

- ``drop``: the named streams go silent for the middle third of the run
  (frames whose capture offset lies in ``[T/3, 2T/3)``) and then come back,
  so that "a sensor drops out and returns" is testable. Their sequence
  numbers keep counting while silent (a gap, as when a link goes down); with
  no end (``seconds=None``) the streams are dropped for the whole run.
- ``jitter_ms``: gaussian noise (sigma in ms) added to every capture time.
- ``reorder``: occasionally (2% of frames) two adjacent frames of a stream
  are sent in swapped order, each with its own timestamp and sequence number.

Back-pressure: a full ZMQ queue (the recorder is slower than the simulator,
or not running) makes the simulator wait without blocking the event loop;
after ``block_timeout_s`` it gives up with :class:`SimError`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import logging
import math
import os
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import zmq

from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.recorder.config import (
    ConfigError,
    StreamConfig,
    VehicleConfig,
    ZmqSocketConfig,
    load_config,
)
from hyperframes.recorder.errors import SimError, SimOptionError
from hyperframes.recorder.ingest.curve import CurveClientKeys, client_keys, server_public_key_file
from hyperframes.recorder.ingest.publisher import ZmqPublisher, encode_mqtt_payload
from hyperframes.recorder.sim_args import add_sim_arguments
from hyperframes.synth import make_generator

__all__ = [
    "REORDER_PROBABILITY",
    "SimError",
    "SimResult",
    "StreamStats",
    "drop_window_ns",
    "payload_source",
    "publish",
    "simulate",
    "run_sim",
]

#: Chance that a frame is swapped with the next one of its stream (``reorder``).
REORDER_PROBABILITY: Final = 0.02
_LARGE_PAYLOAD: Final = 64 * 1024  # pool 10 of these (lidar), 200 of smaller ones (IMU)
_POOL_LARGE: Final = 10
_POOL_SMALL: Final = 200
_YIELD_EVERY: Final = 32  # give the event loop a turn at least this often when behind
_MQTT_IN_FLIGHT: Final = 256


@dataclass(slots=True)
class StreamStats:
    """What the simulator did for one stream."""

    name: str
    topic: str
    transport: str
    nominal_hz: float
    sent: int = 0
    dropped: int = 0  # frames deliberately withheld by ``drop``
    bytes: int = 0
    reordered: int = 0  # swapped pairs


@dataclass(slots=True)
class SimResult:
    """The outcome of one :func:`simulate` run."""

    streams: dict[str, StreamStats]
    start_ns: int  # capture-time origin (frame i: start_ns + phase + i * period)
    elapsed_s: float  # wall time spent sending
    rate_scale: float
    seconds: float | None
    stopped_early: bool = False
    #: ZMQ endpoints no recorder ever connected to: what was sent there reached nobody
    unheard: tuple[str, ...] = ()

    @property
    def sent(self) -> dict[str, int]:
        """Frames sent per stream name."""
        return {name: s.sent for name, s in self.streams.items()}

    @property
    def total_sent(self) -> int:
        """Frames sent over all streams."""
        return sum(s.sent for s in self.streams.values())

    @property
    def total_bytes(self) -> int:
        """Payload bytes sent over all streams."""
        return sum(s.bytes for s in self.streams.values())

    def summary(self) -> str:
        """A human-readable table: frames per stream, achieved vs target rate."""
        wall = max(self.elapsed_s, 1e-9)
        scale = "max" if math.isinf(self.rate_scale) else f"{self.rate_scale:g}x"
        lines = [
            f"sim: {self.total_sent} frames, {self.total_bytes / 1e6:.1f} MB in {wall:.2f} s "
            f"(rate scale {scale}, {self.total_bytes / 1e6 / wall:.1f} MB/s)"
            + (" - stopped early" if self.stopped_early else ""),
            f"  {'stream':<20} {'transport':<9} {'sent':>8} {'dropped':>8} "
            f"{'target Hz':>10} {'achieved Hz':>12}",
        ]
        for s in self.streams.values():
            target = s.nominal_hz * self.rate_scale
            target_txt = "max" if math.isinf(target) else f"{target:.1f}"
            lines.append(
                f"  {s.name:<20} {s.transport:<9} {s.sent:>8} {s.dropped:>8} "
                f"{target_txt:>10} {(s.sent + s.dropped) / wall:>12.1f}"
            )
        lines.extend(
            f"sim: nothing ever connected to {ep}: no recorder received the frames sent there "
            "(start `hyperframes record` first)"
            for ep in self.unheard
        )
        return "\n".join(lines)


# --- payloads -----------------------------------------------------------------

Payloads = Callable[[int], bytes]
_pool_cache: dict[tuple[str, int], Payloads] = {}
_pool_lock = threading.Lock()


def payload_source(info: StreamInfo, seed: int = 0) -> Payloads:
    """``i -> payload of frame i`` for a stream, cheap to call at any rate.

    Built on :func:`hyperframes.synth.make_generator` and cached per process
    (the first call for a 1600x900 camera costs about a second).
    """
    key = (repr(info), seed)
    with _pool_lock:
        cached = _pool_cache.get(key)
    if cached is not None:
        return cached
    gen = make_generator(info, seed)
    source: Payloads
    if info.encoding == "jpeg":
        source = gen  # already a pool of encoded images; each call adds a short comment
    else:
        first = gen(0)
        n = _POOL_LARGE if len(first) >= _LARGE_PAYLOAD else _POOL_SMALL
        pool = [first, *(gen(i) for i in range(1, n))]

        def source(i: int) -> bytes:
            return pool[i % n]

    with _pool_lock:
        return _pool_cache.setdefault(key, source)


def _prepare_payloads(streams: Sequence[StreamConfig], seed: int) -> list[Payloads]:
    workers = max(1, min(len(streams), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="hf-sim-payloads") as pool:
        return list(pool.map(lambda s: payload_source(s.info, seed), streams))


# --- scheduling -----------------------------------------------------------------


def drop_window_ns(seconds: float | None) -> tuple[int, int] | None:
    """Capture-offset span ``[a, b)`` in which ``drop`` streams are silent.

    The middle third of a run of ``seconds``; ``None`` (whole run) without an end.
    """
    if seconds is None:
        return None
    total = round(seconds * 1e9)
    return total // 3, 2 * total // 3


@dataclass(slots=True)
class _Stream:
    cfg: StreamConfig
    stats: StreamStats
    period_ns: int
    phase_ns: int
    payloads: Payloads
    rng: np.random.Generator
    dropped: bool
    duration_ns: int
    keyframe: bool
    slot: int = 0
    pending: int | None = None  # frame held back by a swap, sent at the next slot


def _phase_ns(sid: int, period_ns: int) -> int:
    # small fixed offsets, as real sensors are never in lock step (as in synth)
    return 1 + (sid * 7_919_000) % period_ns


def _stream_rng(seed: int, sid: int) -> np.random.Generator:
    return np.random.default_rng([seed & 0xFFFF_FFFF, sid, 0x5151])


# --- transports -----------------------------------------------------------------


@dataclass(slots=True)
class _Transports:
    context: zmq.Context[zmq.Socket[bytes]]
    zmq: dict[str, ZmqPublisher] = field(default_factory=dict)
    mqtt: Any = None  # aiomqtt.Client once connected
    mqtt_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    mqtt_errors: list[BaseException] = field(default_factory=list)
    mqtt_slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(_MQTT_IN_FLIGHT)
    )


def _curve(
    sock: ZmqSocketConfig, key: Path | None, server_key: Path | None
) -> CurveClientKeys | None:
    if sock.curve is None:
        return None
    if key is None:
        raise SimOptionError(
            f"zmq socket {sock.name!r} needs CURVE: pass --curve-key CLIENT.key_secret "
            f"(a key listed in {sock.curve.clients})"
        )
    try:
        return client_keys(key, server_key or server_public_key_file(sock.curve))
    except ValueError as exc:
        raise SimOptionError(f"zmq socket {sock.name!r}: {exc}") from None


def _zmq_publisher(
    sock: ZmqSocketConfig,
    context: zmq.Context[zmq.Socket[bytes]],
    crc: bool,
    curve: CurveClientKeys | None = None,
) -> ZmqPublisher:
    kind: Literal["push", "pub"] = "pub" if sock.socket == "sub" else "push"
    try:
        return ZmqPublisher(
            sock.endpoint, kind, bind=not sock.bind, send_timeout_ms=0, linger_ms=10_000,
            crc=crc, context=context, curve=curve,
        )  # fmt: skip
    except zmq.ZMQError as exc:
        verb = "bind" if not sock.bind else "connect"
        raise SimOptionError(
            f"zmq socket {sock.name!r}: cannot {verb} {sock.endpoint}: {exc}"
        ) from None


def _mqtt_client(config: VehicleConfig) -> Any:
    import aiomqtt  # noqa: PLC0415 - only MQTT configs need it

    mq = config.mqtt
    assert mq is not None
    tls: aiomqtt.TLSParameters | None = None
    if mq.tls is not None:
        tls = aiomqtt.TLSParameters(
            ca_certs=str(mq.tls.ca_file) if mq.tls.ca_file else None,
            certfile=str(mq.tls.cert_file) if mq.tls.cert_file else None,
            keyfile=str(mq.tls.key_file) if mq.tls.key_file else None,
            cert_reqs=ssl.CERT_REQUIRED,
        )
    # never the recorder's own client id: the broker would disconnect the recorder
    identifier = f"{mq.client_id or 'hyperframes-' + config.vehicle_id}-sim-{os.getpid()}"
    # aiomqtt warns about every pending publish beyond 10: expected when streaming
    quiet = logging.getLogger("hyperframes.recorder.sim.mqtt")
    quiet.setLevel(logging.ERROR)
    return aiomqtt.Client(
        mq.host, mq.port, username=mq.username, password=mq.read_password(),
        identifier=identifier, tls_params=tls, keepalive=mq.keepalive_s, logger=quiet,
        max_inflight_messages=_MQTT_IN_FLIGHT,
    )  # fmt: skip


async def _send_zmq(
    pub: ZmqPublisher, st: _Stream, ts: int, payload: bytes, seq: int, block_timeout_s: float
) -> None:
    deadline: float | None = None
    delay = 0.0002
    while True:
        try:
            pub.send(
                st.cfg.topic, ts, payload, seq=seq, hardware=st.cfg.info.hardware_timestamps,
                keyframe=st.keyframe, duration_ns=st.duration_ns,
            )  # fmt: skip
            return
        except TimeoutError:  # queue full: wait without blocking the event loop
            now = time.monotonic()
            if deadline is None:
                deadline = now + block_timeout_s
            elif now > deadline:
                raise SimError(
                    f"{pub.endpoint}: could not send {st.cfg.name} frame {seq} for "
                    f"{block_timeout_s:g} s (queue full: is the recorder running?)"
                ) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)


async def _send_mqtt(tr: _Transports, st: _Stream, ts: int, payload: bytes, seq: int) -> None:
    body = encode_mqtt_payload(
        payload, ts, seq=seq, hardware=st.cfg.info.hardware_timestamps, keyframe=st.keyframe,
        duration_ns=st.duration_ns,
    )  # fmt: skip
    await tr.mqtt_slots.acquire()
    if tr.mqtt_errors:
        tr.mqtt_slots.release()
        raise SimError(f"mqtt publish failed: {tr.mqtt_errors[0]}")

    async def one() -> None:
        try:
            await tr.mqtt.publish(st.cfg.topic, body, qos=st.cfg.qos or 0)
        except Exception as exc:  # reported by the scheduler
            tr.mqtt_errors.append(exc)
        finally:
            tr.mqtt_slots.release()

    # Tasks start in creation order, so paho queues the messages in send order.
    task = asyncio.get_running_loop().create_task(one())
    tr.mqtt_tasks.add(task)
    task.add_done_callback(tr.mqtt_tasks.discard)


# --- the run --------------------------------------------------------------------


async def simulate(
    config: VehicleConfig,
    seconds: float | None = 10.0,
    rate_scale: float = 1.0,
    *,
    drop: Iterable[str] = (),
    jitter_ms: float = 0.0,
    reorder: bool = False,
    seed: int = 0,
    start_ns: int | None = None,
    crc: bool = True,
    block_timeout_s: float = 30.0,
    pub_settle_s: float = 0.5,
    listen_wait_s: float = 1.0,
    stop: asyncio.Event | None = None,
    curve_key: Path | None = None,
    curve_server_key: Path | None = None,
) -> SimResult:
    """Publish synthetic frames for every stream of ``config``; see the module doc.

    ``seconds`` of sensor time (``None``: until ``stop`` is set);
    ``start_ns`` fixes the capture-time origin (default: ``time.time_ns()``
    when sending begins); ``crc`` sets the wire payload CRC. A ZMQ endpoint
    that nothing connects to within ``listen_wait_s`` gets a warning on
    stderr, and :attr:`SimResult.unheard` lists those nothing ever connected
    to (their frames were dropped at the end). Returns once
    every frame has been handed to its transport and flushed (ZMQ sockets
    closed with linger, MQTT publishes acknowledged for QoS >= 1).
    ``curve_key`` (a client's ``NAME.key_secret``) connects to the sockets
    that have ``curve``, with the server's public key from ``curve_server_key``
    (default: ``NAME.key`` beside the socket's ``curve.secret_key``).
    """
    if not (rate_scale > 0):
        raise SimOptionError(f"rate scale must be > 0, got {rate_scale!r}")
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise SimOptionError(f"seconds must be > 0, got {seconds!r}")
    if not (math.isfinite(jitter_ms) and jitter_ms >= 0):
        raise SimOptionError(f"jitter must be >= 0 ms, got {jitter_ms!r}")
    names = {s.name for s in config.streams}
    dropped_names = set(drop)
    if unknown := sorted(dropped_names - names):
        raise SimOptionError(
            f"--drop: no stream named {', '.join(unknown)} (streams: {', '.join(sorted(names))})"
        )
    if not config.streams:
        raise SimOptionError("the config has no streams")

    payloads = await asyncio.to_thread(_prepare_payloads, config.streams, seed)
    streams: list[_Stream] = []
    for cfg, source in zip(config.streams, payloads, strict=True):
        period = round(1e9 / (cfg.info.rate_hz or 10.0))
        kind = cfg.info.kind
        stats = StreamStats(cfg.name, cfg.topic, cfg.transport, 1e9 / period)
        streams.append(_Stream(
            cfg, stats, period, _phase_ns(cfg.id, period), source, _stream_rng(seed, cfg.id),
            dropped=cfg.name in dropped_names,
            duration_ns=period if kind in (SensorKind.LIDAR, SensorKind.RADAR) else 0,
            keyframe=kind is SensorKind.CAMERA,
        ))  # fmt: skip

    tr = _Transports(zmq.Context())
    sockets = {s.name: s for s in config.zmq}
    stop_event = stop if stop is not None else asyncio.Event()
    stopped_early = False
    try:
        for st in streams:
            if st.cfg.transport == "zmq":
                name = st.cfg.zmq_socket or next(iter(sockets))
                if name not in tr.zmq:
                    tr.zmq[name] = _zmq_publisher(
                        sockets[name], tr.context, crc, _curve(sockets[name], curve_key,
                                                               curve_server_key)
                    )  # fmt: skip
        async with contextlib.AsyncExitStack() as stack:
            if any(st.cfg.transport == "mqtt" for st in streams):
                if config.mqtt is None:
                    raise SimOptionError("MQTT streams but no mqtt: section in the config")
                client = _mqtt_client(config)
                try:
                    tr.mqtt = await stack.enter_async_context(client)
                except Exception as exc:
                    mq = config.mqtt
                    raise SimError(f"mqtt broker {mq.host}:{mq.port}: {exc}") from None
            if any(p.socket_type == "pub" for p in tr.zmq.values()):
                await asyncio.sleep(pub_settle_s)  # let the subscription reach the PUB
            await _warn_if_unheard(tr.zmq.values(), listen_wait_s)

            t0 = time.monotonic()
            origin = time.time_ns() if start_ns is None else start_ns
            stopped_early = await _run(
                streams, tr, sockets, seconds, rate_scale, jitter_ms, reorder, origin, t0,
                block_timeout_s, stop_event,
            )  # fmt: skip
            if tr.mqtt_tasks:
                await asyncio.gather(*tr.mqtt_tasks)
            if tr.mqtt_errors:
                raise SimError(f"mqtt publish failed: {tr.mqtt_errors[0]}")
            elapsed = time.monotonic() - t0
    except BaseException:
        for task in tr.mqtt_tasks:
            task.cancel()
        tr.context.destroy(linger=0)  # failing: do not wait for queued frames
        raise
    unheard = tuple(p.endpoint for p in tr.zmq.values() if not p.peer_seen())
    for pub in tr.zmq.values():
        pub.close(None if pub.peer_seen() else 0)  # queued for nobody: do not wait
    # term() waits (up to the linger) until queued frames reached the recorder
    await asyncio.to_thread(tr.context.term)
    return SimResult(
        {st.cfg.name: st.stats for st in streams},
        origin,
        elapsed,
        rate_scale,
        seconds,
        stopped_early,
        unheard,
    )


async def _warn_if_unheard(pubs: Iterable[ZmqPublisher], wait_s: float) -> None:
    """Wait up to ``wait_s`` for every ZMQ peer; log the endpoints nobody connected to."""
    pending = list(pubs)
    deadline = time.monotonic() + wait_s
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        pending = [p for p in pending if not p.peer_seen()]
    for p in pending:
        print(
            f"sim: warning: nothing is listening on {p.endpoint} yet (is the recorder running?); "
            "sending anyway, ZeroMQ delivers if it connects",
            file=sys.stderr,
            flush=True,
        )


async def _run(
    streams: list[_Stream],
    tr: _Transports,
    sockets: dict[str, ZmqSocketConfig],
    seconds: float | None,
    rate_scale: float,
    jitter_ms: float,
    reorder: bool,
    origin: int,
    t0: float,
    block_timeout_s: float,
    stop: asyncio.Event,
) -> bool:
    """The scheduling loop; True when ``stop`` ended it before ``seconds``."""
    end_off = None if seconds is None else round(seconds * 1e9)
    window = drop_window_ns(seconds)
    jitter_sigma = jitter_ms * 1e6
    default_socket = next(iter(sockets), None)
    heap = [(st.phase_ns, k) for k, st in enumerate(streams)]
    heapq.heapify(heap)
    paced = math.isfinite(rate_scale)
    since_yield = 0
    while heap:
        if stop.is_set():
            return True
        off, k = heap[0]
        if end_off is not None and off > end_off:
            heapq.heappop(heap)
            continue
        if paced:
            delay = t0 + off / 1e9 / rate_scale - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                since_yield = 0
                continue  # re-check stop after sleeping
        st = streams[k]
        slot = st.slot
        st.slot += 1
        heapq.heapreplace(heap, (st.phase_ns + st.slot * st.period_ns, k))

        # which frame goes out in this slot (reorder swaps two adjacent frames)
        if st.pending is not None:
            index, st.pending = st.pending, None
        elif (
            reorder
            and st.rng.random() < REORDER_PROBABILITY
            and (end_off is None or st.phase_ns + (slot + 1) * st.period_ns <= end_off)
        ):
            index, st.pending = slot + 1, slot
            st.stats.reordered += 1
        else:
            index = slot
        nominal = st.phase_ns + index * st.period_ns
        if st.dropped and (window is None or window[0] <= nominal < window[1]):
            st.stats.dropped += 1
            continue
        ts = origin + nominal
        if jitter_sigma > 0:
            ts = max(1, ts + round(float(st.rng.normal(0.0, jitter_sigma))))
        payload = st.payloads(index)
        if st.cfg.transport == "zmq":
            pub = tr.zmq[st.cfg.zmq_socket or default_socket or ""]
            await _send_zmq(pub, st, ts, payload, index, block_timeout_s)
        else:
            await _send_mqtt(tr, st, ts, payload, index)
        st.stats.sent += 1
        st.stats.bytes += len(payload)
        since_yield += 1
        if since_yield >= _YIELD_EVERY:  # behind schedule: let MQTT and signals run
            since_yield = 0
            await asyncio.sleep(0)
    return False


async def publish(
    config: VehicleConfig,
    seconds: float | None,
    rate_scale: float = 1.0,
    *,
    drop: Iterable[str] = (),
    jitter_ms: float = 0.0,
    reorder: bool = False,
    seed: int = 0,
    start_ns: int | None = None,
    crc: bool = True,
    stop: asyncio.Event | None = None,
) -> dict[str, int]:
    """Run :func:`simulate` and return the frames sent per stream name."""
    result = await simulate(
        config, seconds, rate_scale, drop=drop, jitter_ms=jitter_ms, reorder=reorder,
        seed=seed, start_ns=start_ns, crc=crc, stop=stop,
    )  # fmt: skip
    return result.sent


# --- command line -----------------------------------------------------------------


add_arguments = add_sim_arguments


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop  # noqa: PLC0415 - optional
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_sim(config: VehicleConfig | str | Path, args: argparse.Namespace) -> int:
    """The ``hyperframes sim`` command: publish, print a summary, return an exit code.

    ``args`` carries ``seconds`` (None or 0: until Ctrl-C), ``rate_scale``,
    ``drop`` (stream names), ``jitter_ms``, ``reorder`` and ``seed``.
    """
    if not isinstance(config, VehicleConfig):
        try:
            config = load_config(config)
        except (ConfigError, OSError) as exc:
            print(f"sim: error: {exc}", file=sys.stderr)
            return 2
    seconds = getattr(args, "seconds", 10.0)
    seconds = None if seconds is None or seconds == 0 else float(seconds)
    rate_scale = float(getattr(args, "rate_scale", 1.0))
    drop = list(getattr(args, "drop", None) or [])

    async def main() -> SimResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        targets = sorted({s.endpoint for s in config.zmq})
        if config.mqtt is not None:
            targets.append(f"mqtt://{config.mqtt.host}:{config.mqtt.port}")
        span = "until Ctrl-C" if seconds is None else f"{seconds:g} s"
        print(f"sim: {len(config.streams)} streams of {config.vehicle_id} -> "
              f"{', '.join(targets)}; {span} at rate scale {rate_scale:g}"
              + (f", dropping {', '.join(drop)}" if drop else ""), flush=True)  # fmt: skip
        return await simulate(
            config, seconds, rate_scale, drop=drop,
            jitter_ms=float(getattr(args, "jitter_ms", 0.0) or 0.0),
            reorder=bool(getattr(args, "reorder", False)), seed=int(getattr(args, "seed", 0)),
            stop=stop, curve_key=getattr(args, "curve_key", None),
            curve_server_key=getattr(args, "curve_server_key", None),
        )  # fmt: skip

    try:
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            result = runner.run(main())
    except SimError as exc:
        print(f"sim: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, SimOptionError) else 1
    except KeyboardInterrupt:
        return 130
    print(result.summary(), flush=True)
    return 1 if result.unheard else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hyperframes.recorder.sim --config FILE ...``."""
    parser = argparse.ArgumentParser(prog="hyperframes sim", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_sim(Path(args.config), args)


if __name__ == "__main__":
    raise SystemExit(main())
