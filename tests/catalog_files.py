"""Small real segments for the catalog's tests: an IMU, a lidar, the event stream."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hyperframes.events import EVENT_STREAM_ID, Event, event_stream_info
from hyperframes.format.codecs import CodecSpec
from hyperframes.format.layout import FrameFlags
from hyperframes.format.naming import segment_name
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.writer import HyperframeWriter

S = 1_000_000_000
MS = 1_000_000
T0 = 1_764_547_200 * S  # 2025-12-01T00:00:00Z
WINDOW = 100 * MS
VEHICLE = "veh-7"


def segment(
    folder: Path,
    seq: int,
    *,
    seconds: float = 1.0,
    events: Sequence[Event] = (),
    vehicle: str = VEHICLE,
    start: int | None = None,
    extra: dict[str, object] | None = None,
    lidar_bytes: int = 2048,
) -> Path:
    """Segment ``seq`` of ``vehicle`` (named as the recorder names it): an IMU at 100 Hz
    (zstd), a lidar at 10 Hz (``lidar_bytes`` a scan, stored raw) and the events that fall
    in its span."""
    start = T0 + int(seq * seconds * S) if start is None else start
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / segment_name(vehicle, start, seq)
    streams = [
        StreamInfo(0, "imu", "imu", "imu-f64", rate_hz=100.0),
        StreamInfo(1, "lidar_top", "lidar", "bytes", rate_hz=10.0),
        event_stream_info(),
    ]
    meta = FileMetadata(vehicle, "test-recorder 1.0", seq, start, dict(extra or {}))
    codecs = {0: CodecSpec("zstd", 3), 1: CodecSpec("none")}
    with HyperframeWriter(path, streams, WINDOW, meta, codecs=codecs, fsync_interval_s=0) as w:
        t = start + 1
        while t < start + seconds * S:
            w.append(0, t, np.full(6, t / S, "<f8"))
            if (t - start - 1) % (100 * MS) == 0:
                w.append(1, t, (bytes(range(256)) * (lidar_bytes // 256 + 1))[:lidar_bytes])
            for e in events:
                if t <= e.t_ns < t + 10 * MS:
                    w.append(EVENT_STREAM_ID, e.t_ns, e.to_json(), flags=FrameFlags.HW_TIMESTAMP)
            t += 10 * MS
    return path
