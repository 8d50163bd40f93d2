"""How the golden files in tests/golden/ were made (run this module to regenerate them).

Regenerate only for a deliberate format change, and bump the format version then.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hyperframes import CodecSpec, FileMetadata, FrameFlags, SensorKind, StreamInfo
from hyperframes.writer import HyperframeWriter

GOLDEN = Path(__file__).parent / "golden"
WINDOW_NS = 50_000_000
T0 = 1_000_000_000_000

STREAMS = [
    StreamInfo(3, "cam", SensorKind.CAMERA, "h265", rate_hz=20.0),
    StreamInfo(
        7, "imu", SensorKind.IMU, "imu-f64", rate_hz=100.0, codec="zstd", level=3, shuffle=True
    ),
    StreamInfo(9, "can", SensorKind.CAN, "bytes", timestamp_source="host", codec="lz4hc", level=9),
]
META = FileMetadata("golden-car", "golden", 42, T0)


def frames() -> list[tuple[int, int, bytes, int]]:
    """(stream, timestamp, payload, flags) of the golden recording."""
    out = []
    for i in range(6):  # 20 Hz "H.265" access units, a keyframe every 3
        flags = FrameFlags.HW_TIMESTAMP | (FrameFlags.KEYFRAME if i % 3 == 0 else 0)
        out.append((3, T0 + 1 + i * 50_000_000, bytes([0, 0, 0, 1, 0x40 + i]) * 9, int(flags)))
    for i in range(30):
        sample = b"".join(float(i * 10 + k).hex().encode()[:8] for k in range(6))
        out.append((7, T0 + 2 + i * 10_000_000, sample, int(FrameFlags.HW_TIMESTAMP)))
    for i in range(4):
        out.append((9, T0 + 3 + i * 70_000_000, b"CAN" * 20 + bytes([i]), 0))
    out.sort(key=lambda f: (f[1], f[0]))
    return out


def write(path: Path, finalize: bool = True) -> None:
    """Write the golden recording to ``path`` (finalized, or left as ``path.tmp``)."""
    w = HyperframeWriter(
        path, STREAMS, WINDOW_NS, META, threads=1, codecs={7: CodecSpec("zstd", 3, True)}
    )
    for sid, t, payload, flags in frames():
        w.append(sid, t, payload, flags=flags, receive_ns=t + 500_000)
    if finalize:
        w.finalize()
    else:
        w.abort()


if __name__ == "__main__":
    GOLDEN.mkdir(exist_ok=True)
    for p in GOLDEN.glob("tiny-v1*"):
        p.unlink()
    write(GOLDEN / "tiny-v1.hf")
    write(GOLDEN / "tiny-v1-crashed.hf", finalize=False)
    sys.exit(0)
