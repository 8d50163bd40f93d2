"""The simulator against real sockets: a ZMQ PULL/SUB bound here and a real Mosquitto."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import threading
import time
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from hyperframes.recorder.config import VehicleConfig, load_config
from hyperframes.recorder.ingest.wire import decode_message, decode_multipart
from hyperframes.recorder.sim import (
    SimError,
    drop_window_ns,
    payload_source,
    publish,
    run_sim,
    simulate,
)

from mqtt_broker import free_port, mqtt_broker  # noqa: F401 - mqtt_broker is a fixture

START = 1_900_000_000_000_000_000  # a fixed capture-time origin for exact checks

STREAMS = """
streams:
  - {id: 0, name: cam, kind: camera, encoding: jpeg, topic: cam/front, rate_hz: 30,
     width: 64, height: 48}
  - {id: 1, name: lidar, kind: lidar, encoding: xyzi-f32, topic: lidar/top, rate_hz: 10,
     points: 2000}
  - {id: 2, name: imu, kind: imu, encoding: imu-f64, topic: imu, rate_hz: 200,
     timestamp_source: host}
"""


def zmq_config(tmp_path: Path, port: int, socket: str = "pull", bind: bool = True) -> VehicleConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "sim.yaml"
    path.write_text(
        f"vehicle_id: sim-test\noutput_dir: {tmp_path / 'out'}\n"
        f"zmq: {{endpoint: 'tcp://127.0.0.1:{port}', socket: {socket}, "
        f"bind: {str(bind).lower()}}}\n" + STREAMS
    )
    return load_config(path)


def mqtt_config(tmp_path: Path, mqtt_port: int, zmq_port: int) -> VehicleConfig:
    path = tmp_path / "sim-mqtt.yaml"
    path.write_text(
        f"vehicle_id: sim-test\noutput_dir: {tmp_path / 'out'}\n"
        f"zmq: {{endpoint: 'tcp://127.0.0.1:{zmq_port}'}}\n"
        f"mqtt: {{host: 127.0.0.1, port: {mqtt_port}}}\n"
        "streams:\n"
        "  - {id: 0, name: cam, kind: camera, encoding: jpeg, transport: zmq, topic: cam/front,\n"
        "     rate_hz: 30, width: 64, height: 48}\n"
        "  - {id: 1, name: imu, kind: imu, encoding: imu-f64, transport: mqtt, topic: veh/imu,\n"
        "     qos: 1, rate_hz: 200}\n"
        "  - {id: 2, name: gnss, kind: gnss, encoding: bytes, transport: mqtt, topic: veh/gnss,\n"
        "     qos: 0, rate_hz: 10}\n"
    )
    return load_config(path)


def expected_count(rate_hz: float, sid: int, seconds: float) -> int:
    period = round(1e9 / rate_hz)
    phase = 1 + (sid * 7_919_000) % period
    return (round(seconds * 1e9) - phase) // period + 1


class Receiver:
    """Drain a bound PULL (or SUB) socket on a thread; messages kept as raw parts."""

    def __init__(self, port: int, kind: int = zmq.PULL, bind: bool = True) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(kind)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if kind == zmq.SUB:
            self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        endpoint = f"tcp://127.0.0.1:{port}"
        if bind:
            self.sock.bind(endpoint)
        else:
            self.sock.connect(endpoint)
        self.messages: list[list[bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.sock.poll(50):
                self.messages.append(self.sock.recv_multipart())

    def finish(self, quiet_s: float = 0.3) -> list[list[bytes]]:
        n = -1
        while n != len(self.messages):  # until nothing new arrives for quiet_s
            n = len(self.messages)
            time.sleep(quiet_s)
        self._stop.set()
        self._thread.join()
        self.sock.close(linger=0)
        self.ctx.term()
        return self.messages


def decode_all(messages: list[list[bytes]]) -> dict[str, list[tuple[Any, bytes]]]:
    by_topic: dict[str, list[tuple[Any, bytes]]] = defaultdict(list)
    for parts in messages:
        topic, header, payload = decode_multipart(parts)  # checks header and payload CRC
        by_topic[topic.decode()].append((header, bytes(payload)))
    return by_topic


def run_zmq(tmp_path: Path, seconds: float = 1.0, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    port = free_port()
    config = zmq_config(tmp_path, port)
    rx = Receiver(port)
    kwargs.setdefault("start_ns", START)
    result = asyncio.run(simulate(config, seconds, kwargs.pop("rate_scale", 20.0), **kwargs))
    return result, decode_all(rx.finish())


def test_zmq_counts_seq_timestamps_and_flags(tmp_path: Path) -> None:
    seconds = 1.0
    result, by_topic = run_zmq(tmp_path, seconds)
    rates = {"cam/front": (30, 0), "lidar/top": (10, 1), "imu": (200, 2)}
    assert set(by_topic) == set(rates)
    names = {"cam/front": "cam", "lidar/top": "lidar", "imu": "imu"}
    for topic, (rate, sid) in rates.items():
        frames = by_topic[topic]
        n = expected_count(rate, sid, seconds)
        assert len(frames) == n == result.sent[names[topic]]
        period = round(1e9 / rate)
        phase = 1 + (sid * 7_919_000) % period
        assert [h.seq for h, _ in frames] == list(range(n))
        assert [h.timestamp_ns for h, _ in frames] == [START + phase + i * period for i in range(n)]
        assert all(h.hardware_timestamp == (topic != "imu") for h, _ in frames)
        assert all(h.keyframe == (topic == "cam/front") for h, _ in frames)
    # real payloads: JPEG images, lidar sweeps of the configured size, 6 float64 IMU values
    cam = by_topic["cam/front"]
    assert all(p[:2] == b"\xff\xd8" and p[-2:] == b"\xff\xd9" for _, p in cam)
    assert len({p for _, p in cam}) == len(cam)  # every camera frame is unique
    assert all(len(p) == 2000 * 16 for _, p in by_topic["lidar/top"])
    assert all(h.duration_ns == 100_000_000 for h, _ in by_topic["lidar/top"])
    imu = np.frombuffer(by_topic["imu"][0][1], "<f8")
    assert imu.shape == (6,) and abs(imu[2] - 9.81) < 0.1
    assert result.total_sent == sum(len(v) for v in by_topic.values())
    assert result.start_ns == START


def test_payloads_match_the_synth_generator(tmp_path: Path) -> None:
    config = zmq_config(tmp_path, free_port())
    lidar = next(s for s in config.streams if s.name == "lidar")
    source = payload_source(lidar.info, seed=3)
    assert source is payload_source(lidar.info, seed=3)  # cached per process
    from hyperframes.synth import make_generator

    assert source(4) == make_generator(lidar.info, 3)(4)


def test_pacing_follows_the_rate_scale(tmp_path: Path) -> None:
    result, by_topic = run_zmq(tmp_path, 1.0, rate_scale=4.0)
    # 1 s of sensor time at 4x: about 0.25 s of wall time, never much less
    assert 0.22 <= result.elapsed_s < 1.0
    stamps = [h.timestamp_ns for h, _ in by_topic["cam/front"]]
    assert set(np.diff(stamps)) == {33_333_333}  # capture times keep the nominal spacing


def test_drop_silences_the_middle_third(tmp_path: Path) -> None:
    seconds = 1.5
    result, by_topic = run_zmq(tmp_path, seconds, drop=["cam"])
    a, b = drop_window_ns(seconds)  # type: ignore[misc]
    assert (a, b) == (500_000_000, 1_000_000_000)
    cam = [h for h, _ in by_topic["cam/front"]]
    total = expected_count(30, 0, seconds)
    offsets = [h.timestamp_ns - START for h in cam]
    assert not any(a <= o < b for o in offsets)
    assert any(o < a for o in offsets) and any(o >= b for o in offsets)  # back afterwards
    assert result.streams["cam"].dropped == total - len(cam) > 10
    # sequence numbers keep counting while silent: the gap shows the loss
    seqs = [h.seq for h in cam]
    gaps = [(x, y) for x, y in itertools.pairwise(seqs) if y != x + 1]
    assert len(gaps) == 1 and gaps[0][1] - gaps[0][0] - 1 == result.streams["cam"].dropped
    # other streams untouched
    assert len(by_topic["imu"]) == expected_count(200, 2, seconds)
    assert result.streams["imu"].dropped == 0


def test_unknown_drop_name_is_an_error(tmp_path: Path) -> None:
    config = zmq_config(tmp_path, free_port())
    with pytest.raises(SimError, match="no stream named nope"):
        asyncio.run(publish(config, 0.1, drop=["nope"]))


def fingerprint(by_topic: dict[str, list[tuple[Any, bytes]]]) -> dict[str, list[tuple[int, ...]]]:
    return {
        t: [(h.seq, h.timestamp_ns, zlib.crc32(p)) for h, p in frames]
        for t, frames in sorted(by_topic.items())
    }


def test_jitter_and_reorder_are_deterministic_per_seed(tmp_path: Path) -> None:
    opts = {"jitter_ms": 1.0, "reorder": True, "seconds": 2.0, "rate_scale": 50.0}
    _, first = run_zmq(tmp_path / "a", seed=7, **opts)  # type: ignore[arg-type]
    _, again = run_zmq(tmp_path / "b", seed=7, **opts)  # type: ignore[arg-type]
    _, other = run_zmq(tmp_path / "c", seed=8, **opts)  # type: ignore[arg-type]
    assert fingerprint(first) == fingerprint(again)
    assert fingerprint(first) != fingerprint(other)

    imu = first["imu"]
    seqs = [h.seq for h, _ in imu]
    assert sorted(seqs) == list(range(len(seqs)))  # every frame exactly once
    swaps = [i for i in range(len(seqs) - 1) if seqs[i] == seqs[i + 1] + 1]
    assert 1 <= len(swaps) <= len(seqs) // 10  # occasional adjacent swaps only
    # jitter: gaussian around the nominal grid, sigma ~1 ms
    period = 5_000_000
    phase = 1 + (2 * 7_919_000) % period
    err = np.array([h.timestamp_ns - START - phase - h.seq * period for h, _ in imu]) / 1e6
    assert 0.7 < err.std() < 1.3 and abs(err.mean()) < 0.2


def test_pub_socket_for_a_sub_recorder(tmp_path: Path) -> None:
    port = free_port()
    config = zmq_config(tmp_path, port, socket="sub")
    rx = Receiver(port, zmq.SUB)
    sent = asyncio.run(publish(config, 0.5, 10.0, start_ns=START))
    by_topic = decode_all(rx.finish())
    assert {t: len(v) for t, v in by_topic.items()} == {
        "cam/front": sent["cam"], "lidar/top": sent["lidar"], "imu": sent["imu"],
    }  # fmt: skip


def test_simulator_binds_when_the_recorder_connects(tmp_path: Path) -> None:
    port = free_port()
    config = zmq_config(tmp_path, port, bind=False)
    rx = Receiver(port, zmq.PULL, bind=False)
    sent = asyncio.run(publish(config, 0.5, 10.0))
    assert sum(len(v) for v in decode_all(rx.finish()).values()) == sum(sent.values()) > 0


def test_run_sim_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    config = zmq_config(tmp_path, port)
    rx = Receiver(port)
    args = argparse.Namespace(
        seconds=0.5, rate_scale=10.0, drop=["lidar"], jitter_ms=0.0, reorder=False, seed=0
    )
    assert run_sim(config, args) == 0
    out = capsys.readouterr().out
    assert "cam" in out and "achieved Hz" in out and "dropping lidar" in out
    assert len(rx.finish()) > 0


def test_run_sim_reports_a_missing_recorder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # nobody listens: the PUSH queue fills (tiny HWM) and the sim gives up cleanly
    config = zmq_config(tmp_path, free_port())

    async def go() -> None:
        await simulate(config, 30.0, float("inf"), block_timeout_s=0.3)

    with pytest.raises(SimError, match="is the recorder running"):
        asyncio.run(go())


# --- MQTT against a real broker ------------------------------------------------------


@pytest.mark.network
def test_mqtt_and_zmq_together(tmp_path: Path, mqtt_broker: int) -> None:  # noqa: F811
    import aiomqtt

    zmq_port = free_port()
    config = mqtt_config(tmp_path, mqtt_broker, zmq_port)
    rx = Receiver(zmq_port)
    seconds = 1.0

    async def go() -> tuple[dict[str, int], dict[str, list[Any]]]:
        got: dict[str, list[Any]] = defaultdict(list)
        async with aiomqtt.Client("127.0.0.1", mqtt_broker, identifier="sim-test-sub") as sub:
            await sub.subscribe("veh/#", qos=1)

            async def collect() -> None:
                async for msg in sub.messages:
                    header, payload = decode_message(bytes(msg.payload))  # type: ignore[arg-type]
                    got[str(msg.topic)].append((header, bytes(payload), msg.qos))

            task = asyncio.create_task(collect())
            sent = await publish(config, seconds, 10.0, start_ns=START)
            want = sent["imu"] + sent["gnss"]
            deadline = time.monotonic() + 10
            while sum(map(len, got.values())) < want and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            task.cancel()
        return sent, got

    sent, got = asyncio.run(go())
    assert sent["imu"] == len(got["veh/imu"]) == expected_count(200, 1, seconds)
    assert sent["gnss"] == len(got["veh/gnss"]) == expected_count(10, 2, seconds)
    assert [h.seq for h, _, _ in got["veh/imu"]] == list(range(sent["imu"]))
    assert all(q == 1 for _, _, q in got["veh/imu"])
    assert all(len(p) == 256 for _, p, _ in got["veh/gnss"])
    period = 5_000_000
    phase = 1 + 7_919_000 % period
    assert got["veh/imu"][3][0].timestamp_ns == START + phase + 3 * period
    by_topic = decode_all(rx.finish())
    assert len(by_topic["cam/front"]) == sent["cam"] == expected_count(30, 0, seconds)


@pytest.mark.network
def test_mqtt_broker_down_is_a_clear_error(tmp_path: Path) -> None:
    config = mqtt_config(tmp_path, free_port(), free_port())
    with pytest.raises(SimError, match=r"mqtt broker 127\.0\.0\.1"):
        asyncio.run(publish(config, 0.2))
