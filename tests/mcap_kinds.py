"""A small recording with a stream of every kind the MCAP export has a schema for.

JPEG camera (CompressedImage), H.265 camera (CompressedVideo), lidar (PointCloud), IMU
with NaN and infinities (hyperframes.Imu), raw-rgb / raw-gray8 / raw-nv12 cameras
(RawImage), a CAN-like byte stream (hyperframes.Raw) and a JSON stream (schemaless).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from hyperframes import FrameFlags, SensorKind, StreamInfo
from hyperframes.writer import HyperframeWriter, WriteFrame

from conftest import T0, WINDOW_NS, lidar_sweep

W, H = 4, 2
SC = b"\x00\x00\x00\x01"
IDR = SC + bytes([32 << 1, 1]) + b"\x0c\x01" + SC + bytes([19 << 1, 1]) + b"\xaf\x00\x11"
TRAIL = SC + bytes([1 << 1, 1]) + b"\xd0\x22"
IMU_SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 1e-310, 9.80665]

STREAMS = [
    StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=10),
    StreamInfo(1, "video", SensorKind.CAMERA, "h265", rate_hz=10),
    StreamInfo(2, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10),
    StreamInfo(3, "imu", SensorKind.IMU, "imu-f64", rate_hz=10),
    StreamInfo(4, "rgb", SensorKind.CAMERA, "raw-rgb", rate_hz=10,
               extra={"width": W, "height": H}),
    StreamInfo(5, "gray", SensorKind.CAMERA, "raw-gray8", rate_hz=10,
               extra={"width": W, "height": H}),
    StreamInfo(6, "nv12", SensorKind.CAMERA, "raw-nv12", rate_hz=10,
               extra={"width": W, "height": H}),
    StreamInfo(7, "can", SensorKind.CAN, "bytes", rate_hz=10),
    StreamInfo(8, "notes", SensorKind.OTHER, "json", rate_hz=10),
]  # fmt: skip
SCHEMAS = {
    "/cam": "foxglove.CompressedImage",
    "/video": "foxglove.CompressedVideo",
    "/lidar": "foxglove.PointCloud",
    "/imu": "hyperframes.Imu",
    "/rgb": "foxglove.RawImage",
    "/gray": "foxglove.RawImage",
    "/nv12": "foxglove.RawImage",
    "/can": "hyperframes.Raw",
    "/notes": "",
    "/hyperframes/events": "hyperframes.Event",
    "/hyperframes/blocks": "hyperframes.Block",
}


def write_every_kind(path: Path, windows: int = 6) -> None:
    """``windows`` windows of 100 ms, one frame per stream each (the IMU's first frame holds
    NaN, ±Infinity, -0.0 and a subnormal)."""
    rng = np.random.default_rng(7)
    hw = int(FrameFlags.HW_TIMESTAMP)
    with HyperframeWriter(path, STREAMS, WINDOW_NS, threads=1) as w:
        for k in range(windows):
            win = T0 // WINDOW_NS + k
            t = win * WINDOW_NS + 1_000
            imu = IMU_SPECIAL if k == 0 else [float(k)] * 6
            payloads = [
                b"\xff\xd8" + bytes([k]) * 40 + b"\xff\xd9",
                IDR if k % 3 == 0 else TRAIL + bytes([k]),
                lidar_sweep(k, 16).tobytes(),
                np.array(imu, "<f8").tobytes(),
                rng.integers(0, 256, W * H * 3, dtype=np.uint8).tobytes(),
                rng.integers(0, 256, W * H, dtype=np.uint8).tobytes(),
                rng.integers(0, 256, W * H * 3 // 2, dtype=np.uint8).tobytes(),
                bytes([k, 0x12, 0x34]),
                b'{"k": %d}' % k,
            ]
            frames = [
                WriteFrame(
                    s.id,
                    t + s.id,
                    p,
                    hw | (int(FrameFlags.KEYFRAME) if s.id == 0 else 0),
                    k,
                    t + s.id + 500,
                    1000 * s.id,
                )
                for s, p in zip(STREAMS, payloads, strict=True)
            ]
            w.write_window(win, frames)
