"""Recordings for the hyperframes.torch tests, written by the real writer (deterministic)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from hyperframes import FrameFlags, SensorKind, StreamInfo
from hyperframes.synth import PROFILES, write_synthetic
from hyperframes.writer import HyperframeWriter

T0 = 1_735_689_600_000_000_000
MS = 1_000_000
WINDOW_NS = 100 * MS
HW = int(FrameFlags.HW_TIMESTAMP)
KEY = int(FrameFlags.KEYFRAME)


def write_demo(path: Path, seconds: float = 2.0, seed: int = 0) -> Path:
    """``hyperframes synth --profile demo``: two 320x240 JPEG cameras, lidar, IMU."""
    write_synthetic(str(path), PROFILES["demo"], seconds, seed=seed)
    return path


def tiny_jpeg(i: int, width: int = 48, height: int = 32) -> bytes:
    rng = np.random.default_rng(i)
    img = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=90)
    return buf.getvalue()


DROPOUT_STREAMS = [
    StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=31.0),
    StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
    StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", rate_hz=200.0),
]
CAM_GONE = (3, 4)  # windows (relative) where the camera delivers nothing
LIDAR_GONE = (6,)
GAP = (10, 11)  # windows where nothing at all was recorded


def dropout_frames(windows: int = 16) -> list[tuple[int, int, bytes]]:
    """(stream, timestamp, payload): a 31 Hz camera (3 or 4 frames per window), lidar sweeps of
    varying size, a 200 Hz IMU; the camera drops out in CAM_GONE, the lidar in LIDAR_GONE,
    everything in GAP."""
    end = T0 + windows * WINDOW_NS
    frames = []
    for sid, period, phase in ((0, 32_258_064, 3 * MS), (1, 100 * MS, 7 * MS), (2, 5 * MS, MS)):
        t, i = T0 + phase, 0
        while t <= end:
            w = (t - T0 - 1) // WINDOW_NS
            gone = w in GAP or (sid == 0 and w in CAM_GONE) or (sid == 1 and w in LIDAR_GONE)
            if not gone:
                if sid == 0:
                    payload = tiny_jpeg(i)
                elif sid == 1:
                    payload = np.full((50 + 10 * (i % 4), 4), i, "<f4").tobytes()
                else:
                    payload = (np.arange(6, dtype="<f8") + i).tobytes()
                frames.append((sid, t, payload))
            t += period
            i += 1
    frames.sort(key=lambda f: (f[1], f[0]))
    return frames


def write_dropout(path: Path) -> Path:
    with HyperframeWriter(path, DROPOUT_STREAMS, WINDOW_NS) as w:
        for sid, t, payload in dropout_frames():
            w.append(sid, t, payload)
    return path


def write_h265(
    path: Path,
    frames: int = 30,
    width: int = 128,
    height: int = 96,
    cameras: int = 2,
    k: int = 3,
    seed: int = 0,
) -> tuple[Path, dict[int, list[bytes]]]:
    """H.265 cameras at 30 Hz (IDR every k windows, x265 ultrafast) plus a 10 Hz lidar.

    Returns the path and each camera's access units in order.
    """
    from hyperframes.video import EncoderSettings, IdrPlanner, create_encoder, encode_pictures
    from hyperframes.video.testing import moving_scene

    streams = [
        StreamInfo(c, f"cam_{c}", SensorKind.CAMERA, "h265", rate_hz=30.0) for c in range(cameras)
    ]
    streams.append(StreamInfo(cameras, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0))
    rows = []
    aus: dict[int, list[bytes]] = {}
    for c in range(cameras):
        stamps = [T0 + 5 * MS + c * 1000 + i * 33_333_333 for i in range(frames)]  # 3 a window
        enc = create_encoder("x265", EncoderSettings(width, height, preset="ultrafast"))
        pictures = moving_scene(width, height, frames, seed=seed + c)
        out = list(
            encode_pictures(zip(stamps, pictures, strict=True), enc, IdrPlanner(WINDOW_NS, k=k))
        )
        enc.close()
        aus[c] = [f.data for f in out]
        rows += [(f.timestamp_ns, c, f.data, HW | (KEY if f.keyframe else 0)) for f in out]
    for i in range(frames // 3):
        rows.append((T0 + 5 + i * WINDOW_NS, cameras, np.full((64, 4), i, "<f4").tobytes(), HW))
    rows.sort(key=lambda r: (r[0], r[1]))
    with HyperframeWriter(path, streams, WINDOW_NS) as w:
        for t, sid, payload, flags in rows:
            w.append(sid, t, payload, flags=flags)
    return path, aus


def tag_pid(sample: dict[str, object]) -> dict[str, object]:
    """A dataset transform recording which process loaded the sample (picklable for spawn)."""
    import os

    sample["pid"] = os.getpid()
    return sample


def collate_without_cuda(samples: list[dict[str, object]]) -> dict[str, object]:
    """``collate``, run in a DataLoader worker, recording whether CUDA was initialised there."""
    import torch

    from hyperframes.torch import collate

    batch = collate(samples)  # type: ignore[arg-type]
    batch["cuda_in_worker"] = torch.cuda.is_initialized()
    return batch


def same_sample(a: Any, b: Any) -> bool:
    """Two dataset samples hold equal values (tensors compared exactly), ``file`` aside."""
    import torch

    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_sample(a[k], b[k]) for k in a if k != "file")
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same_sample, a, b))
    if isinstance(a, torch.Tensor):
        return bool(torch.equal(a, b))
    return bool(a == b)
