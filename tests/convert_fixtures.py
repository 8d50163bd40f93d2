"""Small real archives for the converter tests: JPEG cameras, lidar, IMU, CAN, late and
quarantined frames, written with the real writer window by window."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from hyperframes import FileMetadata, FrameFlags, SensorKind, StreamInfo
from hyperframes.format.windows import window_of
from hyperframes.video.testing import moving_scene
from hyperframes.writer import HyperframeWriter, WriteFrame

T0 = 1_735_689_600_000_000_000
WINDOW_NS = 100_000_000
HW = int(FrameFlags.HW_TIMESTAMP)
KEY = int(FrameFlags.KEYFRAME)
LATE = int(FrameFlags.LATE)
QUARANTINED = int(FrameFlags.QUARANTINED)


def jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def archive_streams(cameras: int = 1) -> list[StreamInfo]:
    cams = [
        StreamInfo(i, f"cam{i}", SensorKind.CAMERA, "jpeg", rate_hz=30.0) for i in range(cameras)
    ]
    return [
        *cams,
        StreamInfo(10, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
        StreamInfo(
            11,
            "imu",
            SensorKind.IMU,
            "imu-f64",
            rate_hz=200.0,
            codec="lz4hc",
            level=3,
            shuffle=True,
        ),
        StreamInfo(12, "can", SensorKind.CAN, "bytes", rate_hz=50.0, timestamp_source="host"),
    ]


def write_archive(
    path: Path,
    seconds: float = 1.0,
    *,
    cameras: int = 1,
    width: int = 96,
    height: int = 64,
    seed: int = 0,
    late: bool = True,
    quarantined: bool = True,
    drop_windows: Sequence[int] = (),
    pictures: list[np.ndarray] | None = None,
) -> Path:
    """Write a small archive; returns its path.

    Cameras at 30 Hz (JPEG of a camera-like moving scene), a 10 Hz lidar, a
    200 Hz IMU (lz4hc + shuffle), a 50 Hz host-stamped CAN stream. With
    ``late`` one camera frame and one IMU sample of window 2 are stored in
    window 4's block flagged LATE; with ``quarantined`` a camera frame and a
    CAN frame stamped in 1970 are stored quarantined in window 3's block.
    ``drop_windows``: window numbers (0-based) where the lidar delivers nothing.
    """
    streams = archive_streams(cameras)
    n_pics = int(seconds * 30) + 2
    pics = pictures or moving_scene(width, height, n_pics, seed=seed)
    jpegs = [jpeg(p) for p in pics]
    periods = {s.id: round(1e9 / (s.rate_hz or 10.0)) for s in streams}
    end = T0 + int(seconds * 1e9)
    frames: list[WriteFrame] = []
    for s in streams:
        t, i = T0 + 1 + s.id * 1_000_000, 0
        while t <= end:
            if s.kind is SensorKind.CAMERA:
                payload: bytes = jpegs[(i + 3 * s.id) % len(jpegs)]
                flags = HW | KEY
            elif s.name == "lidar":
                rng = np.random.default_rng(seed * 1000 + i)
                payload = np.round(rng.normal(0, 10, (400, 4)), 2).astype("<f4").tobytes()
                flags = HW
            elif s.name == "imu":
                payload = np.array([0.1 * i, 0, 9.81, 0, 0, 0.01 * i], "<f8").tobytes()
                flags = HW
            else:
                payload = bytes([(i * 7) % 256]) * (8 + i % 5)
                flags = 0
            frames.append(WriteFrame(s.id, t, payload, flags, i, t + 2_000_000 + i, 10 * s.id))
            t += periods[s.id]
            i += 1
    first = window_of(T0 + 1, WINDOW_NS)
    by_window: dict[int, list[WriteFrame]] = {}
    moved: list[WriteFrame] = []
    for f in sorted(frames, key=lambda f: (f.timestamp_ns, f.stream_id)):
        w = window_of(f.timestamp_ns, WINDOW_NS)
        if f.stream_id == 10 and w - first in drop_windows:
            continue
        # the last camera frame and the last IMU sample of window 2 arrive late
        by_window.setdefault(w, []).append(f)
    if late:
        w2 = by_window[first + 2]
        for sid in (0, 11):
            last = max((f for f in w2 if f.stream_id == sid), key=lambda f: f.timestamp_ns)
            w2.remove(last)
            moved.append(last._replace(flags=(last.flags or 0) | LATE))
        by_window[first + 4] = [*moved, *by_window[first + 4]]
    if quarantined:
        q = [
            WriteFrame(0, 17 + k, jpegs[k], HW | KEY | QUARANTINED, 100_000 + k, 5, 0)
            for k in range(2)
        ]
        q.append(WriteFrame(12, 3, b"quarantined can", QUARANTINED, 100_000, 7, 0))
        by_window[first + 3] = [*by_window[first + 3], *q]
    meta = FileMetadata(
        vehicle_id="car-7",
        recorder_version="test",
        segment_seq=4,
        created_ns=T0,
        extra={"route": "depot"},
    )
    with HyperframeWriter(path, streams, WINDOW_NS, meta) as w:
        for wid in sorted(by_window):
            sids = {f.stream_id for f in by_window[wid]}
            missing = [10] if wid - first in drop_windows else []
            assert not missing or 10 not in sids
            w.write_window(wid, by_window[wid], missing=missing)
    return path
