"""Late frames and clock jumps through the whole daemon: real sockets, real files."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hyperframes import FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import VehicleConfig, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.publisher import ZmqPublisher
from hyperframes.recorder.segments import list_segments

from mqtt_broker import free_port

T0 = 1_735_689_600_000_000_000
MS = 1_000_000
HOUR = 3_600_000 * MS


def _config(out: Path) -> VehicleConfig:
    return parse_config(
        {
            "vehicle_id": "clockcar",
            "output_dir": str(out),
            "window_ms": 50,
            "grace_ms": 300,
            "fsync_interval_s": 0.2,
            "zmq": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "socket": "pull", "bind": True},
            "streams": [
                {"id": 0, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu"},
                {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "bytes", "topic": "lidar"},
            ],
        }
    )


def test_late_and_jumping_frames_are_kept_and_flagged(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "out")
    sample = bytes(48)
    plan: list[tuple[str, int]] = []
    for i in range(200):  # 1 s of IMU at 200 Hz, lidar at 10 Hz
        plan.append(("imu", T0 + 1 + i * 5 * MS))
        if i % 20 == 0:
            plan.append(("lidar", T0 + 2 + i * 5 * MS))
        if i == 120:
            plan.append(("imu", 1_000))  # sensor clock reset to 1970
            plan.append(("imu", T0 + 10 * HOUR))  # ... and hours into the future
            plan.append(("lidar", T0 + 3 + 20 * MS))  # its window closed long ago: late

    def publish(endpoint: str) -> None:
        with ZmqPublisher(endpoint, send_timeout_ms=10_000) as pub:
            for i, (topic, ts) in enumerate(plan):
                if i == 100:  # let the recorder settle its clock and close the first windows
                    time.sleep(0.8)
                pub.send(topic, ts, sample)

    async def main() -> None:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            endpoint = rec.endpoints["default"]
            assert endpoint is not None
            await asyncio.to_thread(publish, endpoint)
            for _ in range(500):
                if rec.stats.frames == len(plan):
                    break
                await asyncio.sleep(0.01)
            rec.stop()

    asyncio.run(main())
    files = list_segments(tmp_path / "out", "clockcar")
    assert len(files) == 1
    with HyperframeReader(files[0]) as r:
        flags = {
            (r.streams[int(e["stream_id"])].name, int(e["timestamp_ns"])): int(e["flags"])
            for e in (*r.index, *r.quarantine())
        }
        quarantined = {
            (r.streams[int(e["stream_id"])].name, int(e["timestamp_ns"])) for e in r.quarantine()
        }
        windows = r.window_count()
        # quarantined stamps stay out of the index, the windows and the header span
        assert r.start_ns <= min(int(t) for t in r.index["timestamp_ns"])
        assert r.end_ns - r.start_ns < 2_000 * MS
    assert set(flags) == set(plan)  # nothing lost, nothing invented
    assert quarantined == {("imu", 1_000), ("imu", T0 + 10 * HOUR)}
    assert flags[("imu", 1_000)] & FrameFlags.QUARANTINED
    assert flags[("imu", T0 + 10 * HOUR)] & FrameFlags.QUARANTINED
    assert flags[("lidar", T0 + 3 + 20 * MS)] & FrameFlags.LATE
    normal = [
        k
        for k in flags
        if k not in {("imu", 1_000), ("imu", T0 + 10 * HOUR), ("lidar", T0 + 3 + 20 * MS)}
    ]
    assert not any(flags[k] & (FrameFlags.QUARANTINED | FrameFlags.LATE) for k in normal)
    assert windows <= 22  # 1 s of 50 ms windows, plus at most one for stragglers
