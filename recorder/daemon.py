"""The recorder daemon: sockets in, finalized segment files out.

One :class:`Recorder` per ``async with``; it owns an :class:`asyncio.TaskGroup`
of named tasks on the event loop and one writer thread::

    zmq-NAME / mqtt  --IngestFrame-->  ingest queue (bounded: back-pressure)
    pump             push() into the WindowEngine (sans-IO), host monotonic time
    ticker           tick() the engine so silent streams cannot hold windows open
                     --ClosedWindow-->  write queue (bounded)
    writer           hands each window to SegmentSink on the single "hf-writer"
                     thread (order preserved); fsync cadence; finalize at the end
    keepalive        sd_notify WATCHDOG=1 and STATUS= from the event loop
    hf-live          (``live:`` on) a thread: frames the pump offered, events and the
                     status to the Foxglove server (:mod:`.live`; the pump never waits)
    events           events (wire, rules, ``mark`` over the control socket) into the
                     write queue, in order with the windows (:mod:`.events.intake`)
    control          the control socket for ``hyperframes mark`` (:mod:`.events.control`)
    ready            sd_notify READY=1 once sockets are bound (MQTT: subscribed,
                     or after a short wait)

Shutdown (``stop()``, SIGTERM/SIGINT, ``--seconds``, leaving the block) is
ordered: STOPPING=1; sources stop receiving and drain their sockets; the pump
empties the ingest queue and flushes the engine; the writer writes every
remaining window and finalizes the current segment. Bounded by
``shutdown_timeout_s`` (well inside systemd's 30 s stop timeout); if that
expires, or a task failed, the segment is finalized with what was written.

:class:`SegmentSink` is the synchronous file side (rotation, disk policy,
per-stream written counters); it only ever runs on the writer thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from hyperframes import __version__
from hyperframes.events import Event, EventError, SegmentSpan, event_stream_info, parse_event_body
from hyperframes.format.codecs import preload
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata
from hyperframes.format.windows import window_of
from hyperframes.recorder.config import VehicleConfig, exposure_warnings, file_problems
from hyperframes.recorder.diskpolicy import decide, free_bytes
from hyperframes.recorder.engine import ClosedWindow, WindowEngine
from hyperframes.recorder.errors import ConfigError
from hyperframes.recorder.events.control import ControlServer
from hyperframes.recorder.events.intake import EventIntake, EventStore
from hyperframes.recorder.events.retention import OnDisk, snapshot_expired
from hyperframes.recorder.events.rules import RuleEngine
from hyperframes.recorder.ingest.common import FrameRouter, IngestFrame
from hyperframes.recorder.ingest.mqtt import MqttSource
from hyperframes.recorder.ingest.zmq import ZmqSource
from hyperframes.recorder.leftovers import DAMAGED_DIR, Outcome, recover_leftovers
from hyperframes.recorder.limits import private_descriptor_table, raise_nofile
from hyperframes.recorder.live import LiveFeed
from hyperframes.recorder.metrics import (
    DropReason,
    PrometheusExporter,
    RecorderStats,
    start_prometheus_exporter,
)
from hyperframes.recorder.sdnotify import Notifier
from hyperframes.recorder.segments import RotationPolicy, list_segments, next_sequence, segment_name
from hyperframes.recorder.upload.marks import uploaded_names
from hyperframes.writer import HyperframeWriter, WriteFrame

__all__ = ["Recorder", "SegmentSink", "run_recorder", "record_main"]

_log = logging.getLogger(__name__)
_MB = 1024 * 1024
_U32 = 0xFFFFFFFF

RECORDER_VERSION = __version__

Window = ClosedWindow[IngestFrame]


class SegmentSink:
    """Writes closed windows into rotating segment files. Synchronous; one thread only.

    Never raises from :meth:`write`: an I/O error is logged, the segment is
    aborted (its ``.tmp`` stays recoverable), the window's frames are counted
    as dropped (``write-error``) and the next window opens a new segment.
    """

    def __init__(
        self,
        config: VehicleConfig,
        stats: RecorderStats,
        *,
        disk_check_s: float = 1.0,
        compress_threads: int | None = None,
    ) -> None:
        self.config = config
        self.stats = stats
        self.dir = Path(config.output_dir)
        self.dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.policy = RotationPolicy(
            round(config.segment_seconds * 1e9) if config.segment_seconds else None,
            config.segment_max_mb * _MB if config.segment_max_mb else None,
        )
        damaged = self.dir / DAMAGED_DIR
        names = [p.name for p in self.dir.iterdir()]
        if damaged.is_dir():  # a leftover moved aside keeps its number too
            names += [p.name for p in damaged.iterdir()]
        self.seq = next_sequence(names, config.vehicle_id)
        self.finalized: list[Path] = []
        self._streams = [*(s.info for s in config.streams), event_stream_info()]
        self._codecs = {s.id: s.codec for s in config.streams}
        preload(self._codecs.values())  # python-blosc2: at start, not on the first window
        self._seen: dict[int, list[int]] = {}  # stream -> totals already counted
        self._writer: HyperframeWriter | None = None
        self._first_start = 0
        self._dirty = False
        self._recording = True
        self._disk_check_s = disk_check_s
        self._last_disk_check = -1e18
        self._threads = compress_threads
        self.events = EventStore(self.dir, config.events, stats.events)
        self._last_end = 0  # end of the last window written to the current segment
        self._last_wid = -(1 << 62)
        self._latest_end = 0  # end of the newest window written, any segment

    @property
    def current(self) -> Path | None:
        """The ``.tmp`` path being written, if any."""
        return None if self._writer is None else self._writer.tmp_path

    @property
    def recording(self) -> bool:
        """False while the disk policy has stopped recording."""
        return self._recording

    def add_event(self, event: Event) -> None:
        """Log ``event`` now; it is written with the window that holds its time."""
        self.events.add(event, self._existing)

    def write(self, window: Window) -> None:
        """Write one closed window (rotating and applying the disk policy first)."""
        try:
            if not self._check_disk(force=self._writer is None):
                self._drop(window, DropReason.DISK_FULL)
                return
            w = self._writer
            if w is not None and self.policy.should_rotate(
                self._first_start, window.start_ns, w.bytes_written
            ):
                self._finalize()
                if not self._check_disk(force=True):
                    self._drop(window, DropReason.DISK_FULL)
                    return
            if self._writer is None:
                self._open(window.start_ns)
            assert self._writer is not None
            self._write(self._writer, window)
        except OSError as exc:
            _log.error("writing window %d failed: %s; segment aborted", window.window_id, exc)
            self._drop(window, DropReason.WRITE_ERROR)
            self.abort()

    def sync(self) -> None:
        """fsync the current segment if anything was written since the last sync."""
        if self._writer is not None and self._dirty:
            try:
                self._writer.sync()
                self._dirty = False
            except OSError as exc:
                _log.error("fsync of %s failed: %s", self._writer.tmp_path, exc)

    def close(self) -> Path | None:
        """Finalize the current segment; returns its path (``None`` if there was none)."""
        if self._writer is None:
            return None
        try:
            self._write_pending_events()
            return self._finalize()
        except OSError as exc:
            _log.error("finalizing %s failed: %s; the .tmp is recoverable", self.current, exc)
            self.abort()
            return None

    def abort(self) -> None:
        """Stop the current segment without finalizing (its ``.tmp`` stays)."""
        w, self._writer = self._writer, None
        if w is not None:
            with contextlib.suppress(OSError):
                w.abort()
            self._account(w)
            self._seen.clear()

    # --- internals ----------------------------------------------------------

    def _open(self, start_ns: int) -> None:
        name = segment_name(self.config.vehicle_id, start_ns, self.seq)
        meta = FileMetadata(
            vehicle_id=self.config.vehicle_id,
            recorder_version=RECORDER_VERSION,
            segment_seq=self.seq,
            created_ns=time.time_ns(),
            extra={"config": self.config.source} if self.config.source else {},
        )
        self._writer = HyperframeWriter(
            self.dir / name,
            self._streams,
            self.config.window_ns,
            meta,
            codecs=self._codecs,
            fsync_interval_s=self.config.fsync_interval_s,
            threads=self._threads,
            block_size=self.config.block_kib * 1024,
        )
        self.seq += 1
        self._first_start = start_ns
        self._last_end = start_ns
        self._last_wid = -(1 << 62)
        _log.info("segment %s started", name)

    def _finalize(self) -> Path:
        w, self._writer = self._writer, None
        assert w is not None
        path = w.finalize()
        if w.frame_count:
            self.events.segment_done(SegmentSpan(path.name, self._first_start, self._last_end),
                                     self._existing)  # fmt: skip
        self._account(w)
        self._seen.clear()
        self._dirty = False
        self.finalized.append(path)
        self.stats.segments_written += 1
        _log.info("segment %s finalized: %d frames, %.1f MB", path.name, w.frame_count,
                  path.stat().st_size / 1e6)  # fmt: skip
        return path

    def _write(self, w: HyperframeWriter, window: Window) -> None:
        frames: list[WriteFrame] = []
        for bucket, extra in (
            (window.frames, 0),
            (window.late, FrameFlags.LATE),
            (window.quarantined, FrameFlags.QUARANTINED),
        ):
            for f in bucket:
                frames.append(WriteFrame(f.stream_id, f.timestamp_ns, f.payload,
                                         f.flags | extra, f.seq & _U32, f.receive_ns,
                                         f.duration_ns))  # fmt: skip
        frames += self.events.frames_for(window.start_ns, window.end_ns)
        w.write_window(window.window_id, frames, missing=window.missing)
        self._dirty = True
        self._last_end = max(self._last_end, window.end_ns)
        self._last_wid = window.window_id
        self._latest_end = max(self._latest_end, window.end_ns)
        self._account(w)

    def _write_pending_events(self) -> None:
        """Events stamped after the last window go into windows of their own before finalize."""
        w = self._writer
        if w is None or not self.events.pending:
            return
        by_window: dict[int, list[WriteFrame]] = {}
        for e in self.events.drain():
            wid = max(window_of(e.t_ns, self.config.window_ns), self._last_wid + 1)
            start = wid * self.config.window_ns
            by_window.setdefault(wid, []).append(self.events.frame_of(e, start))
        for wid, frames in sorted(by_window.items()):
            w.write_window(wid, frames)
            self._last_end = max(self._last_end, (wid + 1) * self.config.window_ns)

    def _existing(self) -> list[str]:
        with contextlib.suppress(OSError):
            return [p.name for p in list_segments(self.dir, self.config.vehicle_id)]
        return []

    def _account(self, w: HyperframeWriter) -> None:
        """Move the writer's per-stream totals (frames, raw, stored bytes) into the stats."""
        for sid, (frames, raw, stored) in w.stream_totals.items():
            seen = self._seen.setdefault(sid, [0, 0, 0])
            if frames != seen[0] and sid in self.stats.streams:  # not the event stream
                self.stats.streams[sid].record_stored(raw - seen[1], stored - seen[2],
                                                      frames - seen[0])  # fmt: skip
                seen[:] = frames, raw, stored

    def _drop(self, window: Window, reason: str) -> None:
        for f in (*window.frames, *window.late, *window.quarantined):
            self.stats.streams[f.stream_id].record_drop(reason)

    def _check_disk(self, *, force: bool) -> bool:
        now = time.monotonic()
        if not force and now - self._last_disk_check < self._disk_check_s:
            return self._recording
        self._last_disk_check = now
        disk = self.config.disk
        free = free_bytes(self.dir)
        self.stats.disk_free_bytes = free
        segments: list[tuple[Path, int]] = []
        snapshot = disk.retention == "events"
        protects: dict[str, list[Event]] = {}
        if snapshot or (disk.on_full == "delete-oldest" and free < disk.min_free_mb * _MB):
            for p in list_segments(self.dir, self.config.vehicle_id):
                with contextlib.suppress(OSError):
                    segments.append((p, p.stat().st_size))
            on_disk = self.events.on_disk(segments)
            protects = self.events.protected(on_disk)
            if snapshot and self._snapshot(on_disk, set(protects)):
                segments = [(p, n) for p, n in segments if p.exists()]
                free = free_bytes(self.dir)
                self.stats.disk_free_bytes = free
        decision = decide(
            free, disk.min_free_mb * _MB, disk.on_full, segments,
            protected_glob=disk.protected_glob, current=self.current, stopped=not self._recording,
            protected={p for p, _ in segments if p.name in protects},
            uploaded=uploaded_names(self.dir) if segments else (),
        )  # fmt: skip
        for path in decision.delete:
            try:
                path.unlink()
            except OSError as exc:
                _log.error("disk policy: cannot delete %s: %s", path, exc)
                continue
            self.stats.segments_deleted += 1
            if path in decision.protected:
                self.stats.events.protected_deleted += 1
                names = sorted({e.name for e in protects.get(path.name, [])})
                _log.critical(
                    "disk policy: DELETED PROTECTED SEGMENT %s (kept for events: %s) to keep "
                    "%d MB free: every unprotected segment is already gone; the disk is too "
                    "small for what the events keep", path.name, ", ".join(names),
                    disk.min_free_mb,
                )  # fmt: skip
                continue
            _log.warning("disk policy: deleted %s to keep %d MB free", path.name,
                         disk.min_free_mb)  # fmt: skip
        if decision.record and not self._recording:
            _log.warning("disk policy: %.0f MB free again, recording resumes", free / _MB)
        elif not decision.record and self._recording:
            _log.critical(
                "DISK FULL: %.0f MB free on %s, below min_free_mb %d (policy %s): "
                "RECORDING STOPPED; frames are counted as dropped (disk-full) until space "
                "is freed", free / _MB, self.dir, disk.min_free_mb, disk.on_full,
            )  # fmt: skip
            if self._writer is not None:
                self.close()
        self._recording = decision.record
        self.stats.recording = decision.record
        return decision.record

    def _snapshot(self, on_disk: list[OnDisk], protected: set[str]) -> int:
        """Snapshot mode: delete what left the rolling buffer unprotected; returns how many."""
        buffer_ns = round(self.config.disk.buffer_s * 1e9)
        gone = 0
        ev = self.stats.events
        for seg in snapshot_expired(on_disk, protected, self._latest_end, buffer_ns, self.current):
            try:
                seg.path.unlink()
            except OSError as exc:
                _log.error("snapshot mode: cannot delete %s: %s", seg.path, exc)
                continue
            gone += 1
            ev.snapshot_deleted += 1
            ev.discarded_bytes += seg.size
            ev.discarded_ns += max(0, seg.span.end_ns - seg.span.start_ns)
            _log.info("snapshot mode: deleted %s (%.1f s, %.1f MB, no event keeps it)",
                      seg.path.name, seg.seconds, seg.size / 1e6)  # fmt: skip
        return gone


class Recorder:
    """The daemon as one async context manager; see the module docstring.

    ``async with Recorder(cfg) as rec: await rec.wait()`` records until
    :meth:`stop` is called (or a task fails); leaving the block shuts down in
    order and finalizes the current segment.
    """

    def __init__(
        self,
        config: VehicleConfig,
        *,
        stats: RecorderStats | None = None,
        notifier: Notifier | None = None,
        queue_size: int = 10_000,
        write_queue_size: int = 256,
        tick_s: float | None = None,
        status_period_s: float = 5.0,
        ready_timeout_s: float = 5.0,
        shutdown_timeout_s: float = 20.0,
    ) -> None:
        self.config = config
        self.stats = stats or RecorderStats(vehicle=config.vehicle_id)
        for s in config.streams:
            self.stats.add_stream(s.id, s.name)
        self.notifier = notifier or Notifier()
        self._queue: asyncio.Queue[IngestFrame | Event | None] = asyncio.Queue(queue_size)
        self._wq: asyncio.Queue[Window | Event | None] = asyncio.Queue(write_queue_size)
        self._tick_s = tick_s if tick_s is not None else min(0.05, config.window_ms / 2000)
        self._status_period_s = status_period_s
        self._ready_timeout_s = ready_timeout_s
        self._shutdown_timeout_s = shutdown_timeout_s
        self.engine: WindowEngine[IngestFrame] = WindowEngine(
            [s.id for s in config.streams],
            window_ns=config.window_ns,
            grace_ns=config.grace_ns,
            max_jump_ns=config.clock_max_jump_ns,
        )
        self.intake = EventIntake(
            config.events, self.stats.events, self._anchor, config.clock_max_jump_ns
        )
        self.rules = RuleEngine(
            config.events.rules, {s.id: s.info for s in config.streams}, time.monotonic_ns()
        )
        self.intake.ingest = self._ingest_event
        self.control: ControlServer | None = None
        self.zmq_sources: list[ZmqSource] = []
        self.mqtt: MqttSource | None = None
        self.sink: SegmentSink | None = None
        self.exporter: PrometheusExporter | None = None
        self.live: LiveFeed | None = None
        """The live view (``live:`` on and its server listening)."""
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._stop_ingest = asyncio.Event()
        self._emit_lock = asyncio.Lock()
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._entered = False
        self.failed: BaseException | None = None
        self.recovered: list[Outcome] = []
        """What recovery on start did with each leftover ``.tmp`` (once it has run)."""

    # --- public -------------------------------------------------------------

    def stop(self) -> None:
        """Ask the recorder to stop (idempotent; safe from a signal handler)."""
        if not self._stop.is_set():
            _log.info("stop requested")
        self._stop.set()

    async def wait(self) -> None:
        """Return once a stop was requested or a task failed."""
        await self._stop.wait()

    @property
    def endpoints(self) -> dict[str, str | None]:
        """ZMQ socket name -> bound endpoint (the real port for ``tcp://*:0``)."""
        return {z.name: z.endpoint for z in self.zmq_sources}

    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("a Recorder can be entered only once")
        self._entered = True
        cfg = self.config
        problems = file_problems(cfg)
        if problems:  # a missing CA or key file: say which now, not at each reconnect
            more = f" (and {len(problems) - 1} more: hyperframes check-config)"
            raise ConfigError("", problems[0] + (more if problems[1:] else ""), cfg.source)
        for warning in exposure_warnings(cfg):
            _log.warning("%s", warning)
        raise_nofile(sum(z.max_connections for z in cfg.zmq if z.bind))
        max_payload = round(cfg.max_payload_mb * _MB)
        self._executor = ThreadPoolExecutor(
            1, thread_name_prefix="hf-writer", initializer=private_descriptor_table
        )
        loop = asyncio.get_running_loop()
        self.sink = await loop.run_in_executor(self._executor, SegmentSink, cfg, self.stats)
        # listed before the first segment opens: every .tmp here is a crash's leftover
        leftovers = (
            list_segments(cfg.output_dir, cfg.vehicle_id, unfinished=True)
            if cfg.recover_on_start
            else []
        )
        queue: asyncio.Queue[IngestFrame] = self._queue  # type: ignore[assignment]
        try:
            for z in cfg.zmq:
                streams = [s for s in cfg.streams if s.zmq_socket == z.name]
                src = ZmqSource(z, streams, self.stats, queue, max_payload)
                src.router.attach_events(cfg.events.topic, self.intake, "zmq")
                src.open()
                self.zmq_sources.append(src)
            if cfg.mqtt is not None:
                self.mqtt = MqttSource(cfg.mqtt, cfg.streams, self.stats, queue, max_payload)
                self.mqtt.router.attach_events(cfg.events.topic, self.intake, "mqtt")
            if cfg.metrics.enabled:
                self.exporter = start_prometheus_exporter(
                    self.stats, cfg.metrics.port, cfg.metrics.host
                )
                _log.info("metrics at %s", self.exporter.url)
            if cfg.live.enabled:
                self._start_live()
        except BaseException:
            self._close_resources()
            raise
        self.control = ControlServer(cfg.events.control_socket, self._control)
        if not await self.control.start():
            self.control = None
        self._tg = asyncio.TaskGroup()
        await self._tg.__aenter__()
        for src in self.zmq_sources:
            self._spawn(f"zmq-{src.name}", src.run(self._stop_ingest))
        if self.mqtt is not None:
            self._spawn("mqtt", self.mqtt.run(self._stop_ingest))
        self._spawn("pump", self._pump())
        self._spawn("ticker", self._ticker())
        self._spawn("writer", self._writer())
        self._spawn("events", self._events())
        self._spawn("ready", self._ready())
        self._spawn("keepalive", self.notifier.keepalive(self._status, self._status_period_s))
        if leftovers:
            self._spawn("recover", self._recover(leftovers))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._stop.set()
        self.notifier.stopping("stopping: writing the last windows")
        orderly = self.failed is None and exc_type is None
        try:
            if orderly:
                try:
                    async with asyncio.timeout(self._shutdown_timeout_s):
                        await self._shutdown()
                except TimeoutError:
                    _log.error("shutdown took over %.0f s; finalizing what was written",
                               self._shutdown_timeout_s)  # fmt: skip
            for task in self._tasks.values():
                task.cancel()
            await self._tg.__aexit__(exc_type, exc, tb)
            return None
        finally:
            if self.control is not None:
                await self.control.close()
            self._count_abandoned()
            await self._finish_sink()
            self._close_resources()

    def _start_live(self) -> None:
        """The live view; one that cannot start is logged and the recording goes on."""
        live = LiveFeed(self.config, self.stats, self._live_status)
        try:
            live.start()
        except Exception as exc:  # a port in use, the extra not installed: no view, still recording
            _log.error("live view not started (recording goes on without it): %s: %s",
                       type(exc).__name__, exc)  # fmt: skip
            live.close()
            self.stats.live = None
            return
        self.live = live

    def _live_status(self) -> dict[str, Any]:
        """The recorder's status for the live view (read on its thread: counters only)."""
        st = self.stats
        streams = list(st.iter_streams())
        drops: dict[str, int] = dict(st.drops)
        for s in streams:
            for reason, n in dict(s.drops).items():
                drops[reason] = drops.get(reason, 0) + n
        current = self.sink.current if self.sink is not None else None
        return {
            "vehicle": self.config.vehicle_id,
            "recording": st.recording,
            "uptime_s": round(time.monotonic() - st.started_monotonic, 3),
            "frames_received": sum(s.frames for s in streams),
            "frames_recorded": sum(s.frames_written for s in streams),
            "dropped": st.dropped,
            "drops": drops,
            "late_frames": sum(s.late for s in streams),
            "quarantined_frames": sum(s.quarantined for s in streams),
            "windows_closed": st.windows_closed,
            "incomplete_windows": st.incomplete_windows,
            "stale": [s.name for s in streams if s.stale],
            "disk_free_bytes": st.disk_free_bytes,
            "segment": None if current is None else current.name.removesuffix(".tmp"),
            "segments_written": st.segments_written,
            "write_queue_depth": st.write_queue_depth,
            "events": st.events.total,
            "streams": {
                s.name: {"received": s.frames, "recorded": s.frames_written,
                         "dropped": s.dropped, "late": s.late, "stale": s.stale}
                for s in streams
            },
        }  # fmt: skip

    def _routers(self) -> list[FrameRouter]:
        routers = [z.router for z in self.zmq_sources]
        return routers if self.mqtt is None else [*routers, self.mqtt.router]

    def _flush_routers(self) -> None:
        """Sequence gaps still open when ingest stops are final: count them as lost."""
        for router in self._routers():
            router.flush()

    def _count_abandoned(self) -> None:
        """Count what a cut-short shutdown leaves unwritten (nothing after an orderly one)."""
        self._flush_routers()
        left: list[IngestFrame] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, Event):
                self.stats.events.queue_full += 1  # cut short: neither logged nor written
            elif item is not None:
                left.append(item)
        windows: list[Window] = []
        while not self._wq.empty():
            w = self._wq.get_nowait()
            if isinstance(w, Event):
                self.stats.events.queue_full += 1  # logged already; never reached its segment
            elif w is not None:
                windows.append(w)
        windows.extend(self.engine.flush())
        for w in windows:
            left.extend((*w.frames, *w.late, *w.quarantined))
        for f in left:
            self.stats.streams[f.stream_id].record_drop(DropReason.SHUTDOWN)
        if left:
            _log.error("shutdown left %d received frames unwritten (counted as dropped)", len(left))

    # --- tasks --------------------------------------------------------------

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        assert self._tg is not None
        self._tasks[name] = self._tg.create_task(self._guard(name, coro), name=name)

    async def _guard(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # str, not repr: a repr can carry the bytes being decoded (a password file's)
            _log.critical("task %s failed: %s: %s", name, type(exc).__name__, exc)
            self.failed = exc
            self._stop.set()
            raise

    async def _shutdown(self) -> None:
        self._stop_ingest.set()
        if self.control is not None:
            await self.control.close()
        sources = [t for n, t in self._tasks.items() if n.startswith(("zmq-", "mqtt"))]
        await asyncio.gather(*sources)
        self._flush_routers()
        await self._queue.put(None)
        await self._tasks["pump"]
        await self._tasks["writer"]

    async def _ready(self) -> None:
        if self.mqtt is not None:
            try:
                async with asyncio.timeout(self._ready_timeout_s):
                    await self.mqtt.connected.wait()
            except TimeoutError:
                _log.warning("mqtt not connected after %.0f s; ready anyway, still trying",
                             self._ready_timeout_s)  # fmt: skip
        self.ready.set()
        self.notifier.ready(self._status())
        _log.info("recording: %s", ", ".join(f"{n} {e}" for n, e in self.endpoints.items())
                  or "mqtt")  # fmt: skip

    def _status(self) -> str:
        line = self.stats.status_line()
        return f"stopping: {line}" if self._stop.is_set() else line

    async def _pump(self) -> None:
        queue, engine, streams = self._queue, self.engine, self.stats.streams
        watched = self.rules.watched
        live = self.live
        while True:
            frame = await queue.get()
            if frame is None:
                break
            if isinstance(frame, Event):  # in order with the frames around it
                async with self._emit_lock:
                    await self._wq.put(frame)
                continue
            streams[frame.stream_id].queue_depth -= 1
            if frame.stream_id in watched:
                for ev in self.rules.on_frame(frame.stream_id, frame.timestamp_ns, frame.payload,
                                              time.monotonic_ns()):  # fmt: skip
                    async with self._emit_lock:  # before the window this frame may close
                        await self._wq.put(self.intake.accept(ev, time.monotonic_ns()))
            now = time.monotonic_ns()
            if live is not None:  # the live copy: bounded, dropped when full, never awaited
                live.offer(frame.stream_id, frame.timestamp_ns, frame.payload, now)
            closed = engine.push(frame, now)
            if closed:
                await self._emit(closed)
        await self._emit(engine.flush())
        self.intake.release(final=True)  # peer events never judged: quarantined
        async with self._emit_lock:  # events still queued (rules fired by the last frames)
            while not self.intake.queue.empty():
                await self._wq.put(self.intake.queue.get_nowait())
        await self._wq.put(None)

    async def _ticker(self) -> None:
        last_expire = 0.0
        while not self._stop_ingest.is_set():
            await asyncio.sleep(self._tick_s)
            mono = time.monotonic_ns()
            closed = self.engine.tick(mono)
            if closed:
                await self._emit(closed)
            self.intake.release()  # peer events that came before the clock settled
            if self.rules.stale:
                anchor = self._anchor()
                sensor_now = time.time_ns() if anchor is None else mono + anchor
                for ev in self.rules.tick(mono, sensor_now):
                    self.intake.submit(ev, mono)
            now = time.monotonic()
            if now - last_expire >= 0.5:  # sequence gaps past their horizon count as lost
                last_expire = now
                wall = time.time_ns()
                for router in self._routers():
                    router.expire(wall)

    def _ingest_event(self, event: Event) -> bool:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            return False
        return True

    def _anchor(self) -> int | None:
        clock = self.engine.clock
        return None if clock is None else clock.provisional_ns()

    async def _events(self) -> None:
        """Events into the write queue, between windows (so each finds its window)."""
        q = self.intake.queue
        while True:
            ev = await q.get()
            async with self._emit_lock:
                await self._wq.put(ev)

    def _control(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one control-socket request (``mark``, ``ping``)."""
        op = req.get("op")
        if op == "ping":
            return {"ok": True, "vehicle": self.config.vehicle_id}
        if op != "mark":
            self.stats.events.control_errors += 1
            return {"ok": False, "error": f"unknown op {op!r} (mark, ping)"}
        body = {k: val for k, val in req.items() if k != "op"}
        ev_cfg = self.config.events
        try:
            event = parse_event_body(
                json.dumps(body), time.time_ns(), clock="host", source="mark",
                defaults=ev_cfg.names, default=(ev_cfg.pre_s, ev_cfg.post_s), raw_payload=True,
            )  # fmt: skip
        except (EventError, ValueError) as exc:
            self.stats.events.control_errors += 1
            return {"ok": False, "error": str(exc)}
        event = self.intake.submit(event, time.monotonic_ns())
        return {"ok": True, "t_ns": event.t_ns, "name": event.name, "pre_s": event.pre_s,
                "post_s": event.post_s, "quarantined": event.quarantined}  # fmt: skip

    async def _emit(self, closed: Iterable[Window]) -> None:
        async with self._emit_lock:  # windows enter the write queue in engine order
            for w in closed:
                self._account(w)
                await self._wq.put(w)
                self.stats.write_queue_depth = self._wq.qsize()

    def _account(self, w: Window) -> None:
        st = self.stats
        st.windows_closed += 1
        clock = self.engine.clock
        if clock is not None and clock.reanchors > st.clock_reanchors:
            _log.warning("every sensor clock moved at once: re-anchored plausibility checks "
                         "(%d times so far)", clock.reanchors)  # fmt: skip
            st.clock_reanchors = clock.reanchors
        if w.missing:
            st.incomplete_windows += 1
        for sid, counters in st.streams.items():
            counters.late += w.stats.late.get(sid, 0)
            counters.quarantined += w.stats.quarantined.get(sid, 0)
            counters.set_stale(sid in w.stale)

    async def _writer(self) -> None:
        loop = asyncio.get_running_loop()
        sink, ex = self.sink, self._executor
        assert sink is not None and ex is not None
        period = self.config.fsync_interval_s
        while True:
            try:
                async with asyncio.timeout(period):
                    item = await self._wq.get()
            except TimeoutError:
                await loop.run_in_executor(ex, sink.sync)
                continue
            self.stats.write_queue_depth = self._wq.qsize()
            if item is None:
                break
            if isinstance(item, Event):
                if self.live is not None:
                    self.live.event(item)
                await loop.run_in_executor(ex, sink.add_event, item)
                continue
            await loop.run_in_executor(ex, sink.write, item)
        await loop.run_in_executor(ex, sink.close)

    async def _recover(self, leftovers: list[Path]) -> None:
        """Finish the crash leftovers on a thread of their own while recording goes on."""
        _log.warning("recovery on start: %d unfinished segment(s): %s", len(leftovers),
                     ", ".join(p.name for p in leftovers))  # fmt: skip
        stop = threading.Event()
        ex = ThreadPoolExecutor(
            1, thread_name_prefix="hf-recover", initializer=private_descriptor_table
        )
        try:
            self.recovered = await asyncio.get_running_loop().run_in_executor(
                ex, recover_leftovers, leftovers, self.stats, stop
            )
        except Exception:  # a bug in recovery must not stop the recording
            _log.exception("recovery on start failed; the .tmp files stay for the next start")
        finally:
            stop.set()  # on cancellation: finish the file in hand, start no other
            ex.shutdown(wait=False)

    async def _finish_sink(self) -> None:
        """Finalize whatever segment is still open (after a failure or a timeout)."""
        if self.sink is None or self._executor is None or self.sink.current is None:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.sink.close)

    def _close_resources(self) -> None:
        for src in self.zmq_sources:
            src.close()
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None
        if self.live is not None:
            self.live.close()
            self.live = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)


async def run_recorder(
    config: VehicleConfig,
    seconds: float | None = None,
    *,
    on_ready: Callable[[Recorder], None] | None = None,
) -> int:
    """Record until SIGTERM/SIGINT (or ``seconds``); returns the process exit code."""
    loop = asyncio.get_running_loop()
    async with Recorder(config) as rec:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, rec.stop)
        if seconds is not None:
            loop.call_later(seconds, rec.stop)
        if on_ready is not None:
            await rec.ready.wait()
            on_ready(rec)
        await rec.wait()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
    st = rec.stats
    _log.info("stopped: %d frames received, %d windows, %d segments, %d dropped", st.frames,
              st.windows_closed, st.segments_written, st.dropped)  # fmt: skip
    return 0 if rec.failed is None else 1


def record_main(config: VehicleConfig, seconds: float | None = None) -> int:
    """Run :func:`run_recorder` on uvloop when available, else on the default loop."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop  # noqa: PLC0415 - optional dependency

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(run_recorder(config, seconds))
