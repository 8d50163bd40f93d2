"""Recordings cut into segments as the recorder cuts them, late frames at the cuts included.

A *run* is a list of blocks (window id, frames written into that block); a
late frame of window ``w`` sits in the block of a later window, flagged
LATE, as the recorder writes it. :func:`write_segments` cuts the blocks into
segment files named as the recorder names them; :func:`write_whole` writes
the same blocks into one file, the reference a drive must equal.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hyperframes import FileMetadata, FrameFlags, SensorKind, StreamInfo
from hyperframes.format.naming import segment_name
from hyperframes.format.windows import window_of
from hyperframes.writer import HyperframeWriter, WriteFrame

WINDOW_NS = 100_000_000
T0 = 1_735_689_600_000_000_000
STREAMS = (
    StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=30.0),
    StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
    StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", rate_hz=200.0, codec="zstd", level=1),
)


@dataclass
class Block:
    """One window block: its id, its frames (LATE ones of earlier windows included)."""

    window_id: int
    frames: list[WriteFrame] = field(default_factory=list)
    missing: tuple[int, ...] = ()


def payload(sid: int, i: int) -> bytes:
    """A payload that fits stream ``sid``'s dtype, unique per (sid, i)."""
    if sid == 0:
        return b"\xff\xd8" + bytes([i % 256]) * (200 + i % 50) + b"\xff\xd9"
    if sid == 1:
        return np.full((20 + i % 7, 4), i, "<f4").tobytes()
    return np.full(6, i, "<f8").tobytes()


def make_run(
    windows: int,
    rng: np.random.Generator,
    late_windows: Sequence[int] = (),
    streams: Sequence[int] = (0, 1, 2),
) -> list[Block]:
    """``windows`` consecutive windows from T0 of random frames; frames of the windows in
    ``late_windows`` arrive one or two blocks later, flagged LATE."""
    w0 = window_of(T0 + 1, WINDOW_NS)
    blocks = [Block(w0 + k) for k in range(windows)]
    counters = dict.fromkeys(streams, 0)
    for k in range(windows):
        wid = w0 + k
        lo = wid * WINDOW_NS
        for sid in streams:
            n = int(rng.integers(0, 4))
            stamps = sorted({lo + 1 + int(x) for x in rng.integers(0, WINDOW_NS, n)})
            if not stamps:
                blocks[k].missing += (sid,)
            for t in stamps:
                i = counters[sid]
                counters[sid] += 1
                late = k in late_windows and k + 1 < windows and rng.random() < 0.6
                flags = int(FrameFlags.LATE) if late else 0
                target = min(windows - 1, k + 1 + int(rng.integers(0, 2))) if late else k
                f = WriteFrame(sid, t, payload(sid, i), flags, i, receive_ns=t + 7)
                blocks[target].frames.append(f)
    return blocks


def _write(path: Path, blocks: Sequence[Block], seq: int, vehicle: str) -> Path:
    meta = FileMetadata(vehicle, "test", seq, T0)
    with HyperframeWriter(path, list(STREAMS), WINDOW_NS, meta) as w:
        for b in blocks:
            w.write_window(b.window_id, b.frames, b.missing)
    return path


def write_segments(
    directory: Path,
    blocks: Sequence[Block],
    cuts: Sequence[int],
    vehicle: str = "car-7",
    first_seq: int = 0,
) -> list[Path]:
    """Cut ``blocks`` before each block position in ``cuts`` into recorder-named segments."""
    directory.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(blocks)}), len(blocks)]
    paths = []
    for seq, (a, b) in enumerate(itertools.pairwise(bounds), start=first_seq):
        part = [blk for blk in blocks[a:b] if blk.frames]
        if not part:
            continue
        name = segment_name(vehicle, part[0].window_id * WINDOW_NS, seq)
        paths.append(_write(directory / name, part, seq, vehicle))
    return paths


def write_whole(path: Path, blocks: Sequence[Block], vehicle: str = "car-7") -> Path:
    """All ``blocks`` in one file."""
    return _write(path, [b for b in blocks if b.frames], 0, vehicle)


def frame_key(f: object) -> tuple[str, int, int, int, bytes]:
    """What two reads of the same frame share (not the path)."""
    return (
        f.stream.name,  # type: ignore[attr-defined]
        f.timestamp_ns,  # type: ignore[attr-defined]
        f.stream_index,  # type: ignore[attr-defined]
        f.flags,  # type: ignore[attr-defined]
        f.tobytes(),  # type: ignore[attr-defined]
    )
