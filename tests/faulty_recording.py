"""A small recording with every kind of trouble, written with the real writer.

Streams: ``cam`` (30 Hz, JPEG-like bytes), ``lidar`` (10 Hz xyzi-f32), ``imu``
(200 Hz imu-f64), 100 ms windows K .. K+19 with:

- ``cam`` silent in windows K+5..K+9 (missing there: a gap and a stale period);
- ``imu`` missing in window K+12 only (a missing window, not stale);
- ``lidar`` without its frame of window K+15 (sequence number jumps by 2: one drop);
- an ``imu`` frame of window K+3 delivered late, in the block of K+4 (flagged LATE);
- a ``cam`` frame stamped in 1970, quarantined in the block of K+10, received at RX_Q;
- no block at all for window K+17 (an absent window).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hyperframes import FileMetadata, FrameFlags
from hyperframes.format.windows import window_of
from hyperframes.writer import HyperframeWriter, WriteFrame

from conftest import T0, WINDOW_NS, lidar_sweep, small_streams

K = window_of(T0 + 1, WINDOW_NS)
HW = int(FrameFlags.HW_TIMESTAMP)
KEY = int(FrameFlags.KEYFRAME)
CAM_SILENT = range(K + 5, K + 10)
IMU_MISSING = K + 12
LIDAR_MISSING = K + 15
ABSENT = K + 17
LATE_TS = (K + 3) * WINDOW_NS + 52_500_000  # an imu sample of window K+3
RX_Q = (K + 10) * WINDOW_NS + 40_000_000
QUARANTINED_TS = 1_000


def _cam(w: int) -> list[int]:
    base = w * WINDOW_NS
    return [base + 1 + 33_333_333 * i for i in range(3)]


def _imu(w: int) -> list[int]:
    base = w * WINDOW_NS
    return [base + 2_500_000 + 5_000_000 * i for i in range(20)]


def cam_payload(i: int) -> bytes:
    return b"\xff\xd8" + bytes([i % 251]) * (500 + i) + b"\xff\xd9"


def write_faulty(path: Path, durations: bool = False) -> dict[str, list[int]]:
    """Write the file; returns the indexed timestamps per stream (sorted). ``durations``:
    camera and lidar frames carry an exposure/scan duration (aux DurationNs)."""
    cam_dur, lidar_dur = (4_000_000, 99_000_000) if durations else (0, 0)
    stamps: dict[str, list[int]] = {"cam": [], "lidar": [], "imu": []}
    seq = {0: 0, 1: 0, 2: 0}
    late_seq = 0
    meta = FileMetadata(vehicle_id="faulty", created_ns=T0)
    with HyperframeWriter(path, small_streams(), WINDOW_NS, meta, threads=1) as w:
        for win in range(K, K + 20):
            if win == ABSENT:
                seq[0] += 3
                seq[1] += 1
                seq[2] += 20
                continue
            frames: list[WriteFrame] = []
            missing: list[int] = []
            if win in CAM_SILENT:
                missing.append(0)
                seq[0] += 3
            else:
                for t in _cam(win):
                    frames.append(
                        WriteFrame(0, t, cam_payload(seq[0]), HW | KEY, seq[0], t + 2000, cam_dur)
                    )
                    stamps["cam"].append(t)
                    seq[0] += 1
            if win == LIDAR_MISSING:
                missing.append(1)
                seq[1] += 1  # the sensor counted a sweep that never arrived
            else:
                t = win * WINDOW_NS + 10_000_001
                frames.append(
                    WriteFrame(1, t, lidar_sweep(seq[1], 64).tobytes(), HW, seq[1], t, lidar_dur)
                )
                stamps["lidar"].append(t)
                seq[1] += 1
            if win == IMU_MISSING:
                missing.append(2)
                seq[2] += 20
            else:
                for t in _imu(win):
                    if t == LATE_TS:  # arrives late, in the next block
                        late_seq = seq[2]
                        seq[2] += 1
                        continue
                    frames.append(
                        WriteFrame(2, t, np.full(6, seq[2], "<f8").tobytes(), HW, seq[2], t)
                    )
                    stamps["imu"].append(t)
                    seq[2] += 1
            if win == K + 4:
                frames.append(
                    WriteFrame(2, LATE_TS, np.full(6, -1.0, "<f8").tobytes(),
                               HW | FrameFlags.LATE, late_seq, LATE_TS + 150_000_000)
                )  # fmt: skip
                stamps["imu"].append(LATE_TS)
            if win == K + 10:
                frames.append(
                    WriteFrame(0, QUARANTINED_TS, cam_payload(9999),
                               HW | KEY | FrameFlags.QUARANTINED, 9999, RX_Q)
                )  # fmt: skip
            w.write_window(win, frames, missing)
    return {k: sorted(v) for k, v in stamps.items()}
