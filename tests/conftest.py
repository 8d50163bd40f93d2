"""Shared fixtures: small stream tables and files written with the real writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

# S3 servers for the tests (moto, rclone serve s3, Ceph RGW): s3_servers (session), s3_store
from s3_stores import s3_servers, s3_store  # noqa: F401

from hyperframes import FileMetadata, SensorKind, StreamInfo
from hyperframes.writer import HyperframeWriter

WINDOW_NS = 100_000_000
T0 = 1_735_689_600_000_000_000


def small_streams() -> list[StreamInfo]:
    """A camera (opaque bytes standing in for JPEG), a lidar (float32 xyzi), an IMU."""
    return [
        StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=30.0),
        StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
        StreamInfo(
            2, "imu", SensorKind.IMU, "imu-f64", rate_hz=200.0, codec="zstd", level=1, shuffle=True
        ),
    ]


def lidar_sweep(i: int, points: int = 500) -> np.ndarray:
    rng = np.random.default_rng(i)
    return np.round(rng.normal(0, 10, (points, 4)), 2).astype("<f4")


def small_frames(seconds: float = 1.0) -> list[tuple[int, int, bytes]]:
    """(stream, timestamp, payload) in timestamp order: cam 30 Hz, lidar 10 Hz, imu 200 Hz."""
    frames = []
    end = T0 + int(seconds * 1e9)
    for sid, period in ((0, 33_333_333), (1, 100_000_000), (2, 5_000_000)):
        t, i = T0 + 1 + sid * 1_000_000, 0
        while t <= end:
            if sid == 0:
                payload = b"\xff\xd8" + bytes([i % 256]) * (1000 + i) + b"\xff\xd9"
            elif sid == 1:
                payload = lidar_sweep(i).tobytes()
            else:
                payload = np.full(6, i, "<f8").tobytes()
            frames.append((sid, t, payload))
            t += period
            i += 1
    frames.sort(key=lambda f: (f[1], f[0]))
    return frames


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[..., tuple[Path, list[tuple[int, int, bytes]]]]:
    """Write ``small_frames`` (or given frames) to a fresh file; returns (path, frames)."""

    def write(
        name: str = "f.hf", frames: list[tuple[int, int, bytes]] | None = None, **kwargs: object
    ) -> tuple[Path, list[tuple[int, int, bytes]]]:
        frames = small_frames() if frames is None else frames
        path = tmp_path / name
        meta = FileMetadata(
            vehicle_id="test-car", recorder_version="t", segment_seq=7, created_ns=T0
        )
        with HyperframeWriter(path, small_streams(), WINDOW_NS, meta, **kwargs) as w:  # type: ignore[arg-type]
            for sid, t, payload in frames:
                w.append(sid, t, payload, receive_ns=t + 1000)
        return path, frames

    return write
