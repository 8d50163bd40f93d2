"""Live counters, the STATUS= line and the Prometheus endpoint."""

from __future__ import annotations

import builtins
import re
import urllib.request
from typing import Any

import pytest

from hyperframes.recorder import metrics
from hyperframes.recorder.metrics import (
    DropReason,
    MetricsUnavailableError,
    RecorderStats,
    StreamCounters,
    start_prometheus_exporter,
)

try:
    import prometheus_client  # noqa: F401
except ImportError:
    HAVE_PROMETHEUS = False
else:
    HAVE_PROMETHEUS = True


def _stats() -> RecorderStats:
    stats = RecorderStats(vehicle="test-01", started_monotonic=100.0)
    lidar = stats.add_stream(1, "lidar_top")
    cam = stats.add_stream(0, "cam_front")
    for _ in range(10):
        lidar.record_frame(2_000_000)
    for _ in range(30):
        cam.record_frame(500_000)
    lidar.record_stored(raw_bytes=20_000_000, stored_bytes=8_000_000, frames=10)
    cam.record_stored(raw_bytes=15_000_000, stored_bytes=15_000_000, frames=30)
    cam.record_drop(DropReason.QUEUE_FULL)
    cam.record_drop("oversized", 2)
    cam.late = 3
    lidar.quarantined = 1
    stats.record_drop(DropReason.UNKNOWN_TOPIC, 4)
    stats.segments_written = 7
    stats.disk_free_bytes = 412_300_000_000
    return stats


def test_stream_counters() -> None:
    s = StreamCounters(stream_id=3, name="imu")
    assert s.compression_ratio is None
    s.record_frame(100)
    s.record_frame(50)
    s.record_drop("bad-magic")
    s.record_drop("bad-magic")
    s.record_drop(DropReason.QUEUE_FULL, 5)
    s.record_stored(raw_bytes=150, stored_bytes=60, frames=2)
    assert (s.frames, s.bytes_in, s.frames_written) == (2, 150, 2)
    assert s.drops == {"bad-magic": 2, "queue-full": 5}
    assert s.dropped == 7
    assert s.compression_ratio == pytest.approx(2.5)


def test_stale_counts_transitions_only() -> None:
    s = StreamCounters(stream_id=0, name="cam")
    s.set_stale(True)
    s.set_stale(True)
    s.set_stale(False)
    s.set_stale(True)
    assert s.stale and s.stale_events == 2


def test_recorder_totals() -> None:
    stats = _stats()
    assert stats.add_stream(1, "ignored") is stats.streams[1]
    assert [s.name for s in stats.iter_streams()] == ["cam_front", "lidar_top"]
    assert stats.frames == 40
    assert stats.bytes_in == 35_000_000
    assert stats.dropped == 1 + 2 + 4
    assert stats.compression_ratio == pytest.approx(35 / 23)


def test_status_line_rates_between_calls() -> None:
    stats = _stats()
    first = stats.status_line(now=102.0)  # 40 frames, 35 MB in 2 s since start
    assert first == (
        "recording, 2 streams, 20 frames/s, 17.5 MB/s, ratio 1.52:1, dropped 7, late 3, "
        "quarantined 1, segments 7, disk free 412.3 GB"
    )
    stats.streams[0].record_frame(1_000_000)
    stats.streams[0].set_stale(True)
    stats.recording = False
    second = stats.status_line(now=106.0)  # 1 frame, 1 MB in 4 s
    assert second.startswith("STOPPED, 2 streams, 0 frames/s, 0.2 MB/s, ")
    assert "stale cam_front" in second
    assert "\n" not in second


def test_status_line_before_anything() -> None:
    stats = RecorderStats(started_monotonic=5.0)
    assert stats.status_line(now=5.0) == (
        "recording, 0 streams, 0 frames/s, 0.0 MB/s, dropped 0, segments 0"
    )


def test_missing_prometheus_client_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("prometheus_client"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(
        MetricsUnavailableError, match=r"pip install 'hyperframes-sensors\[recorder\]'"
    ):
        start_prometheus_exporter(RecorderStats(), port=0)
    assert issubclass(MetricsUnavailableError, ImportError)


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


@pytest.mark.skipif(not HAVE_PROMETHEUS, reason="prometheus-client not installed")
def test_prometheus_endpoint_reads_live_stats() -> None:
    stats = _stats()
    with start_prometheus_exporter(stats, port=0) as exporter:
        host, port = exporter.address
        assert host == "127.0.0.1", "must bind loopback by default"
        assert port > 0
        assert exporter.url == f"http://127.0.0.1:{port}/metrics"

        m = _scrape(exporter.url)
        assert m['hyperframes_stream_frames_total{stream="cam_front"}'] == 30
        assert m['hyperframes_stream_frames_total{stream="lidar_top"}'] == 10
        assert m['hyperframes_stream_received_bytes_total{stream="lidar_top"}'] == 20_000_000
        assert (
            m['hyperframes_stream_dropped_frames_total{reason="queue-full",stream="cam_front"}']
            == 1
        )
        assert (
            m['hyperframes_stream_dropped_frames_total{reason="oversized",stream="cam_front"}'] == 2
        )
        assert m['hyperframes_dropped_messages_total{reason="unknown-topic"}'] == 4
        assert m['hyperframes_stream_late_frames_total{stream="cam_front"}'] == 3
        assert m['hyperframes_stream_quarantined_frames_total{stream="lidar_top"}'] == 1
        assert m['hyperframes_stream_compression_ratio{stream="lidar_top"}'] == 2.5
        assert m['hyperframes_stream_stale{stream="cam_front"}'] == 0
        assert m["hyperframes_segments_written_total"] == 7
        assert m["hyperframes_disk_free_bytes"] == 412_300_000_000
        assert m["hyperframes_recording"] == 1
        assert any(k.startswith("process_") for k in m), "process metrics (CPU, memory)"

        # The collector reads the same objects at scrape time: no second bookkeeping.
        stats.streams[0].record_frame(10)
        stats.streams[0].set_stale(True)
        stats.streams[0].queue_depth = 17
        stats.add_stream(2, "imu").record_frame(64)
        stats.disk_free_bytes = 1_000
        m = _scrape(exporter.url)
        assert m['hyperframes_stream_frames_total{stream="cam_front"}'] == 31
        assert m['hyperframes_stream_stale{stream="cam_front"}'] == 1
        assert m['hyperframes_stream_stale_events_total{stream="cam_front"}'] == 1
        assert m['hyperframes_stream_queue_depth{stream="cam_front"}'] == 17
        assert m['hyperframes_stream_frames_total{stream="imu"}'] == 1
        assert 'hyperframes_stream_compression_ratio{stream="imu"}' not in m
        assert m["hyperframes_disk_free_bytes"] == 1_000
        url = exporter.url

    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


@pytest.mark.skipif(not HAVE_PROMETHEUS, reason="prometheus-client not installed")
def test_two_exporters_in_one_process() -> None:
    a, b = RecorderStats(), RecorderStats()
    a.add_stream(0, "a").record_frame(1)
    b.add_stream(0, "b").record_frame(1)
    with start_prometheus_exporter(a, port=0) as ea, start_prometheus_exporter(b, port=0) as eb:
        assert any(re.search(r'stream="a"', k) for k in _scrape(ea.url))
        assert not any(re.search(r'stream="a"', k) for k in _scrape(eb.url))


def test_module_exports() -> None:
    for name in metrics.__all__:
        assert hasattr(metrics, name), name
