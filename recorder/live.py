"""The recorder's live view: frames, events and status to Foxglove, never at the recording's cost.

``live:`` in the vehicle YAML (:mod:`hyperframes.recorder.live_config`) starts a
:class:`hyperframes.live.server.LiveServer` (the Foxglove WebSocket protocol) inside
the recorder. The hand-off rule, **recording always wins**::

    pump (event loop) --offer()--> bounded queue (live.queue frames) --> "hf-live" thread
                                    put_nowait; full: dropped              LiveServer.publish

- :meth:`LiveFeed.offer` runs in the daemon's pump for every frame the router
  accepted, beside the window engine. Nobody subscribed to the frame's stream
  (no client at all, or a stream not served): it returns at once, nothing is
  enqueued. Else the stream's rate cap (``max_hz``, ``rates``) is decided on a
  per-stream next-allowed time (host monotonic), and the frame (a reference to
  the payload the recording holds anyway: no copy) goes into the queue with
  ``put_nowait``. Over the cap, or the queue full: the live copy is dropped and
  counted (``rate_cap``, ``queue_full``). The pump never waits for the live side.
- The ``hf-live`` thread drains the queue into :meth:`LiveServer.publish` (the
  encoding to Foxglove messages happens there, off the event loop), sends each
  event as it reaches the writer (the ``/events`` channel: the event stream's
  JSON, as stored in the file) and, once a second while a client subscribes to
  it, the recorder's status on ``/hyperframes/status``.
- A slow or stalled client is the server's to buffer: the SDK keeps at most
  ``live.backlog`` messages per client and drops the oldest data message when
  that fills (memory stays bounded; the SDK does not report those drops, so
  they are not in :class:`~hyperframes.recorder.metrics.LiveStats`).

Nothing here imports foxglove until :meth:`LiveFeed.start`: with ``live`` off the
recorder never loads it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from hyperframes.events import EVENT_STREAM_ID, Event, event_stream_info
from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.metrics import LiveStats, RecorderStats
from hyperframes.recorder.segments import list_segments
from hyperframes.recorder.upload.marks import uploaded_names

if TYPE_CHECKING:
    from hyperframes.live.server import LiveServer

__all__ = ["LiveFeed", "STATUS_TOPIC", "QUEUE_FULL", "RATE_CAP"]

_log = logging.getLogger(__name__)

STATUS_TOPIC: Final = "/hyperframes/status"
QUEUE_FULL: Final = "queue_full"
RATE_CAP: Final = "rate_cap"
STATUS_PERIOD_S: Final = 1.0
BACKLOG_PERIOD_S: Final = 10.0
"""How often the upload backlog is counted from ``output_dir`` (a directory listing)."""
_MAX_EVENTS: Final = 1024


class LiveFeed:
    """The recorder's side of the live view; see the module docstring.

    ``status`` returns the recorder's status document (called on the live
    thread, once a second while someone listens; it must only read counters).
    """

    def __init__(
        self,
        config: VehicleConfig,
        stats: RecorderStats,
        status: Callable[[], dict[str, Any]],
    ) -> None:
        lc = config.live
        self.config = config
        self.stats = stats.live = LiveStats()
        self._status = status
        served = lc.served(config.stream_infos())
        self._infos = [*served, event_stream_info()]
        self._names = {i.id: i.name for i in served}
        self._period: dict[int, int] = {}
        self._tolerance: dict[int, int] = {}
        self._next: dict[int, int] = {}
        for i in served:
            hz = lc.cap_hz(i.id)
            self._period[i.id] = period = 0 if hz is None else round(1e9 / hz)
            self._tolerance[i.id] = period // 4  # a frame a little early for its slot still fits
            self._next[i.id] = 0
        self._queue: queue.Queue[tuple[int, int, bytes | memoryview]] = queue.Queue(lc.queue)
        self._events: collections.deque[Event] = collections.deque(maxlen=_MAX_EVENTS)
        self.enqueued = 0
        """Frames put into the hand-off queue (event loop)."""
        self.server: LiveServer | None = None
        self._subscribed: Callable[[int], bool] = lambda _sid: False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backlog: dict[str, int] | None = None
        self._backlog_at = -1e18

    @property
    def port(self) -> int | None:
        """The port the server listens on (``None`` before :meth:`start`)."""
        return None if self.server is None else self.server.port

    def start(self) -> None:
        """Start the server (binds ``live.host:live.port``) and the ``hf-live`` thread.

        Raises what the server raises when it cannot listen (the daemon logs it
        and records without the live view)."""
        from hyperframes.live.server import LiveServer  # noqa: PLC0415 - only with live on

        lc = self.config.live
        self.server = server = LiveServer(
            self._infos,
            host=lc.host,
            port=lc.port,
            name=f"hyperframes recorder {self.config.vehicle_id}",
            backlog=lc.backlog,
            warn_exposed=False,  # beyond loopback: exposure_warnings said so at start, once
        )
        server.json_channel(STATUS_TOPIC)  # advertised from the start, like the streams
        self._subscribed = server.has_subscribers
        self._thread = threading.Thread(target=self._run, name="hf-live", daemon=True)
        self._thread.start()
        _log.info("live view: Foxglove WebSocket at ws://%s:%d (%d streams)", lc.host,
                  server.port, len(self._infos) - 1)  # fmt: skip

    # --- the event loop's side: cheap, never blocks --------------------------------

    def offer(self, stream_id: int, t_ns: int, payload: bytes | memoryview, now_ns: int) -> None:
        """One frame the router accepted (``now_ns``: host monotonic). Never blocks."""
        if not self._subscribed(stream_id):  # no client, or none on this stream: nothing
            return
        period = self._period[stream_id]
        if period:
            nxt = self._next[stream_id]
            tol = self._tolerance[stream_id]
            if now_ns < nxt - tol:
                self.stats.drop(RATE_CAP)
                return
            self._next[stream_id] = max(nxt, now_ns - tol) + period
        try:
            self._queue.put_nowait((stream_id, t_ns, payload))
        except queue.Full:
            self.stats.drop(QUEUE_FULL)
            return
        self.enqueued += 1

    def event(self, event: Event) -> None:
        """An event on its way to the writer: sent on the events channel soon after."""
        if self.server is not None:
            self._events.append(event)  # bounded: the oldest goes when 1024 wait

    # --- the live thread -------------------------------------------------------------

    def _run(self) -> None:
        server = self.server
        assert server is not None
        q, st, names = self._queue, self.stats, self._names
        next_status = time.monotonic()
        while not self._stop.is_set():
            try:
                item: tuple[int, int, bytes | memoryview] | None = q.get(timeout=0.1)
            except queue.Empty:
                item = None
            if item is not None:
                sid, t_ns, payload = item
                try:
                    server.publish(sid, t_ns, payload)
                except Exception as exc:  # a frame that does not encode must not stop the view
                    self._error(f"frame of stream {sid}", exc)
                else:
                    st.sent += 1
                    name = names[sid]
                    st.sent_by_stream[name] = st.sent_by_stream.get(name, 0) + 1
            while self._events:
                ev = self._events.popleft()
                try:
                    server.publish(EVENT_STREAM_ID, ev.t_ns, ev.to_json())
                except Exception as exc:
                    self._error("event", exc)
                else:
                    st.events_sent += 1
            now = time.monotonic()
            if now >= next_status:
                next_status = now + STATUS_PERIOD_S
                st.clients = server.client_count
                if server.topic_has_subscribers(STATUS_TOPIC):
                    try:
                        server.publish_json(STATUS_TOPIC, self.status_doc(now), time.time_ns())
                    except Exception as exc:
                        self._error("status", exc)
                    else:
                        st.status_sent += 1

    def _error(self, what: str, exc: Exception) -> None:
        self.stats.publish_errors += 1
        if self.stats.publish_errors <= 10 or self.stats.publish_errors % 1000 == 0:
            _log.warning("live view: %s not sent (%d so far): %s: %s", what,
                         self.stats.publish_errors, type(exc).__name__, exc)  # fmt: skip

    def status_doc(self, now: float | None = None) -> dict[str, Any]:
        """The status document: the recorder's (``status``) plus the live view's own counters."""
        now = time.monotonic() if now is None else now
        doc = self._status()
        st = self.stats
        doc["live"] = {
            "clients": st.clients,
            "sent": st.sent,
            "dropped": dict(st.dropped),
            "queue": self._queue.qsize(),
        }
        if self.config.upload is not None:
            if now - self._backlog_at >= BACKLOG_PERIOD_S:
                self._backlog_at = now
                self._backlog = self._upload_backlog()
            doc["upload_backlog"] = self._backlog
        return doc

    def _upload_backlog(self) -> dict[str, int] | None:
        """Finalized segments in ``output_dir`` not marked uploaded (files, bytes)."""
        out = self.config.output_dir
        try:
            done = uploaded_names(out)
            files = nbytes = 0
            for p in list_segments(out, self.config.vehicle_id):
                if p.name not in done:
                    with contextlib.suppress(OSError):
                        nbytes += p.stat().st_size
                        files += 1
        except OSError:
            return None
        return {"files": files, "bytes": nbytes}

    def close(self) -> None:
        """Stop the thread and the server (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.server is not None:
            self.server.close()
