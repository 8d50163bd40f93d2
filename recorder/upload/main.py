"""``hyperframes upload --config VEHICLE.yaml [--once]``: the service's entry point."""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from hyperframes.recorder.config import VehicleConfig
from hyperframes.recorder.sdnotify import Notifier
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.service import UploadService
from hyperframes.recorder.upload.stats import UploadStats, collect

__all__ = ["upload_main"]

_log = logging.getLogger("hyperframes.recorder.upload")


def _watchdog(service: UploadService, notifier: Notifier, stop: threading.Event) -> None:
    """Ping systemd's watchdog while the loop shows progress within the timeout."""
    period = notifier.watchdog_ping_period_s()
    timeout = notifier.watchdog_interval_s()
    if period is None or timeout is None:
        return
    while not stop.wait(period):
        if time.monotonic() - service.beat < timeout:
            notifier.watchdog()


def upload_main(cfg: VehicleConfig, once: bool = False) -> int:
    """Run the uploader for ``cfg``; with ``once`` one pass. Exit status: 0, 1 on failures."""
    if cfg.upload is None:
        print(f"error: {cfg.source}: no upload: section (see docs/OPERATIONS.md, Upload)")
        return 2
    stats = UploadStats()
    try:
        service = UploadService(cfg, cfg.upload, stats=stats)
    except UploadError as exc:
        print(f"error: {exc}")
        return 2
    _log.info(
        "uploading %s segments from %s to %s", cfg.vehicle_id, cfg.output_dir, cfg.upload.dest
    )
    if once:
        failed = service.run_once()
        _log.info("%s", stats.status_line())
        return 1 if failed else 0
    exporter = None
    if cfg.upload.metrics_port is not None:
        from hyperframes.recorder.metrics import start_prometheus_exporter  # noqa: PLC0415

        exporter = start_prometheus_exporter(
            stats, cfg.upload.metrics_port, cfg.upload.metrics_host, collect=collect
        )
        _log.info("metrics at %s", exporter.url)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        _log.info("%s: stopping", signal.Signals(signum).name)
        service.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    notifier = Notifier()
    done = threading.Event()
    dog = threading.Thread(target=_watchdog, args=(service, notifier, done), daemon=True)
    dog.start()
    try:
        service.run(notifier)
    finally:
        notifier.stopping(stats.status_line())
        done.set()
        if exporter is not None:
            exporter.close()
    return 0
