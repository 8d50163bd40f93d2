"""The recorder's live view (``live:``) end to end: the real recorder, the simulator and a
client of the Foxglove WebSocket protocol (tests/foxglove_client.py, which decodes with
the advertised schemas only).

What a viewer gets must be what the recording holds (JPEG bytes, points, IMU values for
the same timestamps); events arrive as they happen; the status arrives once a second;
a client that stops reading costs live frames (counted), never recorded ones; with
``live`` off foxglove is never imported, and with no client nothing is enqueued.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("foxglove")
pytest.importorskip("websockets")

from hyperframes.errors import ConfigError
from hyperframes.live.server import ExposedServerWarning
from hyperframes.recorder.config import VehicleConfig, exposure_warnings, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.live import QUEUE_FULL, RATE_CAP, STATUS_TOPIC
from hyperframes.recorder.sim import simulate

sys.path.insert(0, str(Path(__file__).parent))
from foxglove_client import FoxgloveClient, Message
from test_daemon import config_dict, free_port, recorded, run, wait_for
from test_events_daemon import cli

STREAMS = [
    {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam",
     "rate_hz": 30, "width": 64, "height": 48},
    {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "xyzi-f32", "topic": "lidar",
     "rate_hz": 10, "points": 2000},
    {"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu",
     "rate_hz": 200},
]  # fmt: skip
TOPICS = {"/cam", "/lidar", "/imu", "/events", STATUS_TOPIC}


def live_dict(tmp: Path, live: dict[str, Any] | None, **over: Any) -> dict[str, Any]:
    d = config_dict(tmp / "out", free_port(), window_ms=100, segment_seconds=60,
                    events={"control_socket": str(tmp / "control.sock")}, **over)  # fmt: skip
    d["streams"] = STREAMS
    if live is not None:
        d["live"] = live
    return d


def ts_of(stamp: Any) -> int:
    return int(stamp.seconds) * 1_000_000_000 + int(stamp.nanos)


class Reader:
    """A client on a thread: subscribes to every channel, then reads (or stops reading)."""

    def __init__(self, port: int, *, read: bool = True) -> None:
        self.client = FoxgloveClient(f"ws://127.0.0.1:{port}")
        self.client.wait_channels(len(TOPICS))
        assert {c["topic"] for c in self.client.channels.values()} == TOPICS
        self.client.subscribe()
        self.got: list[Message] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True) if read else None
        if self._thread is not None:
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.got.extend(self.client.messages(timeout=0.2))

    def finish(self, idle: float = 0.5) -> list[Message]:
        if self._thread is not None:
            n = -1
            while n != len(self.got):  # until nothing new arrives for ``idle``
                n = len(self.got)
                time.sleep(idle)
            self._stop.set()
            self._thread.join()
        self.client.close()
        return self.got


async def subscribed(rec: Recorder, ids: tuple[int, ...] = (0, 1, 2)) -> None:
    live = rec.live
    assert live is not None and live.server is not None
    server = live.server
    await wait_for(lambda: all(server.has_subscribers(i) for i in ids), timeout=10)


# --- the viewer sees what is recorded --------------------------------------------------


def test_a_viewer_gets_what_the_recording_holds(tmp_path: Path) -> None:
    d = live_dict(tmp_path, {"port": 0, "max_hz": 0, "queue": 100_000})
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    cfg = parse_config(d)

    async def mark() -> subprocess.CompletedProcess[str]:
        await asyncio.sleep(0.8)
        return await asyncio.to_thread(cli, "mark", "--config", str(conf), "pothole",
                                       "--tag", "driver=ana")  # fmt: skip

    async def main() -> tuple[Recorder, Any, Reader, subprocess.CompletedProcess[str]]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.live is not None and rec.live.port
            reader = await asyncio.to_thread(Reader, rec.live.port)
            await subscribed(rec)
            sim, marked = await asyncio.gather(simulate(cfg, seconds=2.0, listen_wait_s=0.1),
                                               mark())  # fmt: skip
            await wait_for(lambda: rec.stats.frames == sim.total_sent)
            await asyncio.sleep(1.2)  # one more status
            await asyncio.to_thread(reader.finish)
        return rec, sim, reader, marked

    rec, sim, reader, marked = run(main())
    got, decode = reader.got, reader.client.decode
    assert marked.returncode == 0, marked.stderr
    files = recorded(cfg.output_dir)
    assert sum(1 for (name, _t) in files if name != "events") == sim.total_sent
    live = rec.stats.live
    assert live is not None and live.dropped == {} and live.publish_errors == 0
    assert live.sent == sim.total_sent and live.events_sent == 1
    by_topic: dict[str, list[Message]] = {}
    for m in got:
        by_topic.setdefault(m.topic, []).append(m)
    # no cap, a queue big enough and a client that reads: every frame went live
    assert {t: len(by_topic.get(f"/{t}", [])) for t in ("cam", "lidar", "imu")} == sim.sent
    for m in by_topic["/cam"]:
        msg = decode(m)
        t = ts_of(msg.timestamp)
        assert m.log_time == t
        assert bytes(msg.data) == files[("cam", t)][0]  # the JPEG byte for byte
        assert msg.format == "jpeg"
    for m in by_topic["/lidar"]:
        msg = decode(m)
        t = ts_of(msg.timestamp)
        want = np.frombuffer(files[("lidar", t)][0], "<f4").reshape(-1, 4)
        assert msg.point_stride == 16
        assert [f.name for f in msg.fields] == ["x", "y", "z", "intensity"]
        pts = np.frombuffer(bytes(msg.data), "<f4").reshape(-1, 4)
        np.testing.assert_array_equal(pts, want)  # the points, exactly
    for m in by_topic["/imu"]:
        msg = decode(m)
        t = ts_of(msg.timestamp)
        want = np.frombuffer(files[("imu", t)][0], "<f8")
        got_values = [msg.linear_acceleration.x, msg.linear_acceleration.y,
                      msg.linear_acceleration.z, msg.angular_velocity.x,
                      msg.angular_velocity.y, msg.angular_velocity.z]  # fmt: skip
        np.testing.assert_array_equal(np.array(got_values), want)
    events = [decode(m) for m in by_topic["/events"]]
    assert [(e["name"], e["source"], e["tags"]) for e in events] == [
        ("pothole", "mark", {"driver": "ana"})
    ]
    assert events[0] == json.loads(files[("events", events[0]["t_ns"])][0])
    statuses = [decode(m) for m in by_topic[STATUS_TOPIC]]
    assert len(statuses) >= 2
    last = statuses[-1]
    assert last["vehicle"] == "testcar" and last["recording"] is True
    assert last["frames_received"] == sim.total_sent and last["dropped"] == 0
    assert last["segment"].startswith("testcar_") and last["disk_free_bytes"] > 0
    assert last["live"]["clients"] == 1 and last["live"]["dropped"] == {}
    assert set(last["streams"]) == {"cam", "lidar", "imu"}


# --- recording always wins ---------------------------------------------------------------


def test_a_stalled_client_loses_live_frames_never_recorded_ones(tmp_path: Path) -> None:
    cfg = parse_config(live_dict(tmp_path, {"port": 0, "max_hz": 0, "queue": 4, "backlog": 16}))

    async def main() -> tuple[Recorder, Any]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.live is not None and rec.live.port
            reader = await asyncio.to_thread(Reader, rec.live.port, read=False)  # never reads
            await subscribed(rec)
            sim = await simulate(cfg, seconds=3.0, rate_scale=math.inf, listen_wait_s=0.1)
            await wait_for(lambda: rec.stats.frames == sim.total_sent, timeout=20)
            await asyncio.to_thread(reader.finish)
        return rec, sim

    rec, sim = run(main())
    live = rec.stats.live
    assert live is not None
    assert live.dropped.get(QUEUE_FULL, 0) > 0, live  # the live side fell behind: counted
    assert RATE_CAP not in live.dropped  # no cap configured
    assert live.sent + live.dropped_total == sum(sim.sent.values())
    assert rec.stats.dropped == 0
    files = recorded(cfg.output_dir)
    assert {n: sum(1 for (name, _t) in files if name == n) for n in sim.sent} == sim.sent


def test_the_rate_cap_keeps_a_stream_at_max_hz(tmp_path: Path) -> None:
    live_cfg = {"port": 0, "max_hz": 5, "rates": {"imu": 0, "lidar": 100}, "queue": 10_000}
    cfg = parse_config(live_dict(tmp_path, live_cfg))

    async def main() -> tuple[Recorder, Any, Reader]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.live is not None and rec.live.port
            reader = await asyncio.to_thread(Reader, rec.live.port)
            await subscribed(rec)
            sim = await simulate(cfg, seconds=2.0, listen_wait_s=0.1)
            await wait_for(lambda: rec.stats.frames == sim.total_sent)
            await asyncio.to_thread(reader.finish)
        return rec, sim, reader

    rec, sim, reader = run(main())
    counts = {t: sum(1 for m in reader.got if m.topic == f"/{t}") for t in ("cam", "lidar", "imu")}
    assert counts["imu"] == sim.sent["imu"] and counts["lidar"] == sim.sent["lidar"]
    assert 8 <= counts["cam"] <= 12, counts  # 5 Hz of a 30 Hz camera over 2 s
    live = rec.stats.live
    assert live is not None and live.dropped == {RATE_CAP: sim.sent["cam"] - counts["cam"]}
    assert len(recorded(cfg.output_dir)) == sim.total_sent  # the recording has them all


def test_with_no_client_nothing_is_enqueued(tmp_path: Path) -> None:
    cfg = parse_config(live_dict(tmp_path, {"port": 0}))

    async def main() -> tuple[Recorder, Any]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            sim = await simulate(cfg, seconds=1.0, listen_wait_s=0.1)
            await wait_for(lambda: rec.stats.frames == sim.total_sent)
            assert rec.live is not None and rec.live.server is not None
            assert rec.live.server.client_count == 0
            assert rec.live.enqueued == 0  # not one frame handed off
        return rec, sim

    rec, sim = run(main())
    assert rec.live is None  # closed at the end
    live = rec.stats.live
    assert live is not None and (live.sent, live.dropped) == (0, {})
    assert len(recorded(cfg.output_dir)) == sim.total_sent


_IMPORTS = """
import asyncio, sys
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.sim import simulate

async def main():
    cfg = parse_config({doc!r})
    async with Recorder(cfg) as rec:
        await rec.ready.wait()
        await simulate(cfg, seconds=0.3, listen_wait_s=0.1)
asyncio.run(main())
print(sorted({{m.split(".")[0] for m in sys.modules if m.split(".")[0] == "foxglove"}}))
"""


@pytest.mark.parametrize(("live", "loaded"), [(None, "[]"), ({"enabled": False}, "[]"),
                                              ({"port": 0}, "['foxglove']")])  # fmt: skip
def test_with_live_off_foxglove_is_never_imported(
    tmp_path: Path, live: dict[str, Any] | None, loaded: str
) -> None:
    doc = live_dict(tmp_path, live)
    out = subprocess.run([sys.executable, "-c", _IMPORTS.format(doc=doc)], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == loaded


def test_a_port_in_use_costs_the_view_not_the_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg = parse_config(live_dict(tmp_path, {"port": busy.getsockname()[1]}))

        async def main() -> tuple[Recorder, Any]:
            async with Recorder(cfg) as rec:
                await rec.ready.wait()
                assert rec.live is None
                sim = await simulate(cfg, seconds=0.5, listen_wait_s=0.1)
                await wait_for(lambda: rec.stats.frames == sim.total_sent)
            return rec, sim

        rec, sim = run(main())
    assert "live view not started" in caplog.text
    assert rec.stats.live is None and len(recorded(cfg.output_dir)) == sim.total_sent


# --- the live: section --------------------------------------------------------------------


def config_of(tmp_path: Path, live: Any) -> VehicleConfig:
    return parse_config(live_dict(tmp_path, live))


def test_live_config_defaults_and_overrides(tmp_path: Path) -> None:
    assert not config_of(tmp_path, None).live.enabled
    lc = config_of(tmp_path, {}).live
    assert (lc.enabled, lc.host, lc.port, lc.streams, lc.max_hz, lc.queue) == (
        True, "127.0.0.1", 8765, None, 10.0, 64)  # fmt: skip
    lc = config_of(tmp_path, {"streams": ["imu", "cam"], "rates": {"cam": 5, "imu": 0}}).live
    assert lc.streams == (2, 0) and lc.cap_hz(0) == 5.0 and lc.cap_hz(2) is None
    assert lc.cap_hz(1) == 10.0 and config_of(tmp_path, {"max_hz": 0}).live.cap_hz(1) is None


@pytest.mark.parametrize(
    ("live", "key", "words"),
    [
        ({"max_hzz": 3}, "live.max_hzz", "did you mean 'max_hz'?"),
        ({"streams": ["camm"]}, "live.streams[0]", "did you mean 'cam'?"),
        ({"streams": []}, "live.streams", "drop the key"),
        ({"streams": ["cam", "cam"]}, "live.streams[1]", "listed twice"),
        ({"rates": {"lidr": 2}}, "live.rates.lidr", "did you mean 'lidar'?"),
        ({"streams": ["cam"], "rates": {"imu": 2}}, "live.rates.imu", "not in live.streams"),
        ({"max_hz": -1}, "live.max_hz", "must be > 0"),
        ({"port": 70000}, "live.port", "0..65535"),
        ({"queue": 0}, "live.queue", "1..100000"),
        ({"enabled": "yes"}, "live.enabled", "true or false"),
        ([1], "live", "must be a mapping"),
    ],
)
def test_live_config_errors_name_the_key(tmp_path: Path, live: Any, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_of(tmp_path, live)
    assert err.value.key == key and words in str(err.value), str(err.value)


def test_a_live_view_beyond_loopback_is_warned_about(tmp_path: Path) -> None:
    assert exposure_warnings(config_of(tmp_path, {"port": 0})) == []
    assert exposure_warnings(config_of(tmp_path, {"host": "0.0.0.0", "enabled": False})) == []
    (warning,) = exposure_warnings(config_of(tmp_path, {"host": "0.0.0.0"}))
    assert "no authentication" in warning
    assert "ssh -L 8765:127.0.0.1:8765 vehicle" in warning


def test_a_live_view_beyond_loopback_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recorder's config check warns; the server it starts does not warn again."""
    cfg = parse_config(live_dict(tmp_path, {"host": "0.0.0.0", "port": 0}))

    async def main() -> None:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.live is not None and rec.live.port

    with warnings.catch_warnings():
        warnings.simplefilter("error", ExposedServerWarning)
        run(main())
    said = [r for r in caplog.records if "no authentication" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING", [r.getMessage() for r in said]
    assert said[0].name == "hyperframes.recorder.daemon"
