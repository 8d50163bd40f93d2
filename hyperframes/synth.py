"""Deterministic synthetic sensor data: real JPEG frames, lidar sweeps, IMU samples.

Used by ``hyperframes synth`` (demo files, tests, benchmarks) and by the
recorder's simulator. The same profile, seconds and seed always give the same
frames, byte for byte.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, SensorKind, StreamInfo, TimestampSource
from hyperframes.writer import HyperframeWriter

__all__ = [
    "PROFILES",
    "Profile",
    "SynthFrame",
    "make_generator",
    "profile",
    "synth_frames",
    "write_synthetic",
]

# 2025-01-01T00:00:00Z: a fixed start so that files are reproducible.
BASE_NS = 1_735_689_600_000_000_000
_JPEG_POOL = 8  # distinct images per noisy camera, cycled; every frame still gets unique bytes
_CAMERA_POOL = 24  # distinct pictures of a camera-like stream: a pan there and back


@dataclass(frozen=True, slots=True)
class SynthFrame:
    """One synthetic frame."""

    stream_id: int
    timestamp_ns: int
    payload: bytes
    flags: int
    stream_index: int


@dataclass(frozen=True, slots=True)
class Profile:
    """A named set of streams and a window length."""

    name: str
    window_ns: int
    streams: tuple[StreamInfo, ...]


def _camera(
    sid: int, name: str, width: int, height: int, rate: float = 30.0, synth: str | None = None
) -> StreamInfo:
    extra: dict[str, object] = {"width": width, "height": height}
    if synth is not None:
        extra["synth"] = synth
    return StreamInfo(sid, name, SensorKind.CAMERA, "jpeg", rate_hz=rate, extra=extra)


def _lidar(sid: int, name: str, points: int) -> StreamInfo:
    return StreamInfo(
        sid, name, SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0, extra={"points": points}
    )


def _imu(sid: int, name: str) -> StreamInfo:
    return StreamInfo(sid, name, SensorKind.IMU, "imu-f64", rate_hz=200.0)


PROFILES: dict[str, Profile] = {
    "demo": Profile(
        "demo",
        100_000_000,
        (
            _camera(0, "cam_front", 320, 240),
            _camera(1, "cam_rear", 320, 240),
            _lidar(2, "lidar_top", 10_000),
            _imu(3, "imu"),
        ),
    ),
    # the demo streams with noisy cameras that miss the converter's default PSNR floor
    "noisy": Profile(
        "noisy",
        100_000_000,
        (
            _camera(0, "cam_front", 320, 240, synth="noisy"),
            _camera(1, "cam_rear", 320, 240, synth="noisy"),
            _lidar(2, "lidar_top", 10_000),
            _imu(3, "imu"),
        ),
    ),
    "vehicle": Profile(
        "vehicle",
        100_000_000,
        (
            *(
                _camera(i, f"cam_{pos}", 1600, 900)
                for i, pos in enumerate(
                    ("front", "front_left", "front_right", "back", "back_left", "back_right")
                )
            ),
            _lidar(6, "lidar_top", 120_000),
            _imu(7, "imu"),
        ),
    ),
}


def profile(name: str) -> Profile:
    """A profile by name, with a clear error listing the choices."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose from {', '.join(PROFILES)}") from None


# --- generators -------------------------------------------------------------

Generator = Callable[[int], bytes]


def _value_noise(rng: np.random.Generator, height: int, width: int, cell: int) -> np.ndarray:
    """Smooth noise in -1..1: a random grid of one value per ``cell`` pixels, bicubic."""
    gh, gw = max(2, height // cell + 2), max(2, width // cell + 2)
    grid = Image.fromarray(rng.integers(0, 256, (gh, gw, 3), dtype=np.uint8))
    big = grid.resize((gw * cell, gh * cell), Image.Resampling.BICUBIC)
    return np.asarray(big, np.float32)[:height, :width] / 127.5 - 1.0


def _scene(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A textured street-like scene: sky, buildings with windows, a road with lane marks."""
    yy = np.arange(height, dtype=np.float32)[:, None, None] / height
    img = np.empty((height, width, 3), np.float32)
    img[:] = np.array([150, 175, 210], np.float32) - 60 * yy  # sky, darker downwards
    horizon, road = int(height * 0.55), int(height * 0.7)
    x = 0
    while x < width:  # buildings: flat colours, a window grid, textured walls
        w = int(rng.integers(width // 14 + 8, width // 5 + 16))
        top = int(rng.integers(height // 12, horizon - height // 10))
        colour = rng.integers(60, 200, 3).astype(np.float32)
        img[top:horizon, x : x + w] = colour
        step = max(4, w // 6)
        for wy in range(top + step // 2, horizon - step, step):
            for wx in range(x + step // 3, x + w - step // 2, step):
                img[wy : wy + step // 2, wx : wx + step // 2] = colour * 0.45 + 20
        x += w + int(rng.integers(0, width // 40 + 2))
    img[horizon:road] = np.array([90, 110, 70], np.float32)  # kerb and verges
    img[road:] = np.array([80, 80, 85], np.float32)  # asphalt
    lane_y, dash = (road + height) // 2, max(8, width // 16)
    for x0 in range(0, width, 2 * dash):
        img[lane_y : lane_y + max(2, height // 90), x0 : x0 + dash] = 225
    for cell, amp in ((max(8, width // 12), 20.0), (max(6, width // 40), 4.0)):
        img += amp * _value_noise(rng, height, width, cell)
    return img


def _camera_generator(stream: StreamInfo, seed: int) -> Generator:
    """Camera-like frames: a textured scene under a slow pan and zoom, sensor noise sigma 2,
    JPEG q90. ``_CAMERA_POOL`` distinct pictures (the pan goes there and back), made when
    first needed; every frame still gets unique bytes."""
    width = int(stream.extra.get("width", 640))
    height = int(stream.extra.get("height", 480))
    rng = np.random.default_rng(seed)
    margin_x, margin_y = max(4, width // 10), max(2, height // 20)
    world = _scene(rng, height + 2 * margin_y, width + 2 * margin_x)
    world_img = Image.fromarray(np.clip(world + 0.5, 0, 255).astype(np.uint8))
    world_img = world_img.filter(ImageFilter.GaussianBlur(1.2))  # a lens is never sharp
    # sensor noise: a few fields of sigma 2, each frame takes one at its own offset
    pad = 64
    fields = [
        np.round(rng.standard_normal((height, width + pad, 3), np.float32) * 2).astype(np.int16)
        for _ in range(3)
    ]
    pool: dict[int, bytes] = {}

    def picture(j: int) -> bytes:
        frac = j / (_CAMERA_POOL - 1)
        zoom = 1.0 + 0.04 * frac  # a slow zoom in while panning right and down
        cw, ch = width / zoom, height / zoom
        x0 = frac * margin_x * 1.5 + (width - cw) / 2
        y0 = frac * margin_y + (height - ch) / 2
        view = world_img.resize(
            (width, height), Image.Resampling.BILINEAR, (x0, y0, x0 + cw, y0 + ch)
        )
        off = (j * 37) % pad
        img = np.asarray(view, np.int16) + fields[j % len(fields)][:, off : off + width]
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
        return buf.getvalue()

    def gen(i: int) -> bytes:
        period = 2 * _CAMERA_POOL - 2
        j = i % period
        j = j if j < _CAMERA_POOL else period - j  # there and back: no jump in the motion
        if j not in pool:
            pool[j] = picture(j)
        return _unique(pool[j], stream, i)

    return gen


def _noisy_camera_generator(stream: StreamInfo, seed: int) -> Generator:
    """The ``noisy`` profile's cameras: gradients under i.i.d. noise of sigma 12 (JPEG q85),
    which no codec keeps at a useful rate (~28.7 dB at CRF 28): the converter's failure path."""
    width = int(stream.extra.get("width", 640))
    height = int(stream.extra.get("height", 480))
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    pool: list[bytes] = []
    for k in range(_JPEG_POOL):
        phase = k * 2 * math.pi / _JPEG_POOL
        r = 128 + 90 * np.sin(xx / 37.0 + phase)
        g = 128 + 90 * np.cos(yy / 23.0 - phase)
        b = 128 + 60 * np.sin((xx + yy) / 51.0 + 2 * phase)
        img = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (height, width, 3))
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=85)
        pool.append(buf.getvalue())

    def gen(i: int) -> bytes:
        return _unique(pool[i % _JPEG_POOL], stream, i)

    return gen


def _unique(jpeg: bytes, stream: StreamInfo, i: int) -> bytes:
    comment = f"hyperframes synth {stream.name} frame {i}".encode()
    com = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
    return jpeg[:2] + com + jpeg[2:]  # a COM segment right after SOI: still a valid JPEG


def _jpeg_generator(stream: StreamInfo, seed: int) -> Generator:
    if stream.extra.get("synth") == "noisy":
        return _noisy_camera_generator(stream, seed)
    return _camera_generator(stream, seed)


def _lidar_generator(stream: StreamInfo, seed: int) -> Generator:
    points = int(stream.extra.get("points", 10_000))
    beams = 64 if points >= 6400 else 16
    per_beam = points // beams
    elev = np.deg2rad(np.linspace(-25.0, 15.0, beams, dtype=np.float32))[:, None]
    az0 = np.linspace(0, 2 * np.pi, per_beam, endpoint=False, dtype=np.float32)[None, :]

    def gen(i: int) -> bytes:
        rng = np.random.default_rng(seed * 1_000_003 + i)
        az = az0 + np.float32(i * 0.01)
        # a road, walls and a few objects: range varies smoothly with azimuth and beam
        ground = 1.9 / np.maximum(np.sin(-elev), 0.03)
        walls = 12.0 + 6.0 * np.abs(np.sin(az * 2.0)) + 3.0 * np.sin(az * 17.0 + i * 0.05)
        rng_m = np.where(elev < -0.05, np.minimum(ground, walls), walls * (1 + 0.2 * elev))
        rng_m = rng_m + rng.normal(0, 0.02, rng_m.shape)
        rng_m = np.round(rng_m / 0.004) * 0.004  # sensors report ranges in 4 mm steps
        x = rng_m * np.cos(elev) * np.cos(az)
        y = rng_m * np.cos(elev) * np.sin(az)
        z = np.broadcast_to(rng_m * np.sin(elev), x.shape)
        inten = np.round(np.clip(60 + 40 * np.sin(az * 5.0) + rng.normal(0, 8, x.shape), 0, 255))
        cloud = np.stack([x, y, z, inten], axis=-1).reshape(-1, 4).astype("<f4")
        return cloud.tobytes()

    return gen


def _imu_generator(stream: StreamInfo, seed: int) -> Generator:
    def gen(i: int) -> bytes:
        rng = np.random.default_rng(seed * 1_000_003 + i)
        t = i / (stream.rate_hz or 200.0)
        accel = [0.3 * math.sin(t), 0.1 * math.cos(0.5 * t), 9.81]
        gyro = [0.0, 0.0, 0.05 * math.sin(0.2 * t)]
        sample = np.array(accel + gyro) + rng.normal(0, 0.01, 6)
        return sample.astype("<f8").tobytes()

    return gen


def _bytes_generator(stream: StreamInfo, seed: int) -> Generator:
    size = int(stream.extra.get("size", 256))

    def gen(i: int) -> bytes:
        return np.random.default_rng(seed * 1_000_003 + i).bytes(size)

    return gen


_GENERATORS: dict[str, Callable[[StreamInfo, int], Generator]] = {
    "jpeg": _jpeg_generator,
    "xyzi-f32": _lidar_generator,
    "radar-f32": _lidar_generator,
    "imu-f64": _imu_generator,
}


def make_generator(stream: StreamInfo, seed: int = 0) -> Generator:
    """A function ``i -> payload of frame i`` for a stream, chosen by its encoding.

    Image sizes come from ``stream.extra['width'/'height']``, point counts from
    ``stream.extra['points']``; other encodings get random bytes of
    ``stream.extra['size']``.
    """
    return _GENERATORS.get(stream.encoding, _bytes_generator)(stream, seed + stream.id)


def synth_frames(
    prof: Profile, seconds: float, seed: int = 0, start_ns: int = BASE_NS
) -> Iterator[SynthFrame]:
    """Frames of every stream of ``prof`` in timestamp order for ``seconds`` seconds."""
    gens = {s.id: make_generator(s, seed) for s in prof.streams}
    periods = {s.id: round(1e9 / (s.rate_hz or 10.0)) for s in prof.streams}
    # small per-stream phase offsets, as real sensors are never in lock step
    phase = {s.id: 1 + (s.id * 7_919_000) % periods[s.id] for s in prof.streams}
    end = start_ns + round(seconds * 1e9)
    counts = dict.fromkeys(gens, 0)
    while True:
        sid = min(counts, key=lambda k: (start_ns + phase[k] + counts[k] * periods[k], k))
        ts = start_ns + phase[sid] + counts[sid] * periods[sid]
        if ts > end:
            return
        stream = next(s for s in prof.streams if s.id == sid)
        flags = (
            FrameFlags.HW_TIMESTAMP
            if stream.timestamp_source is TimestampSource.HARDWARE
            else FrameFlags.NONE
        )
        if stream.kind is SensorKind.CAMERA:
            flags |= FrameFlags.KEYFRAME  # every JPEG stands alone
        yield SynthFrame(sid, ts, gens[sid](counts[sid]), int(flags), counts[sid])
        counts[sid] += 1


def write_synthetic(
    path: str,
    prof: Profile,
    seconds: float,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
) -> int:
    """Write a synthetic recording to ``path``; returns the number of frames."""
    meta = FileMetadata(
        vehicle_id=f"synth-{prof.name}",
        recorder_version="hyperframes-synth",
        segment_seq=0,
        created_ns=BASE_NS,
        extra={"seed": seed},
    )
    n = 0
    last_report = BASE_NS
    with HyperframeWriter(path, prof.streams, prof.window_ns, meta) as w:
        for f in synth_frames(prof, seconds, seed):
            w.append(
                f.stream_id,
                f.timestamp_ns,
                f.payload,
                flags=f.flags,
                stream_index=f.stream_index,
                receive_ns=f.timestamp_ns + 2_000_000,
            )
            n += 1
            if progress is not None and f.timestamp_ns - last_report >= 1_000_000_000:
                last_report = f.timestamp_ns
                progress((f.timestamp_ns - BASE_NS) / 1e9)
    return n
