"""The recorder survives a broker restart: it reconnects and keeps every frame it got."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.publisher import encode_mqtt_payload
from hyperframes.recorder.segments import list_segments

from mqtt_broker import BrokerUnavailable, free_port, mosquitto

T0 = 1_735_689_600_000_000_000
MS = 1_000_000


def _publish(port: int, start: int, count: int) -> list[int]:
    import paho.mqtt.client as paho

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"sensor-{start}")  # type: ignore[attr-defined]
    client.connect("127.0.0.1", port)
    client.loop_start()
    stamps = [T0 + 1 + (start + i) * 5 * MS for i in range(count)]
    try:
        infos = [
            client.publish("car/imu", encode_mqtt_payload(bytes(48), ts, seq=start + i), qos=1)
            for i, ts in enumerate(stamps)
        ]
        for info in infos:
            info.wait_for_publish(5)
    finally:
        client.loop_stop()
        client.disconnect()
    return stamps


async def _until(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.mark.network
def test_broker_restart_loses_nothing_received(tmp_path: Path) -> None:
    port = free_port()
    cfg = parse_config(
        {
            "vehicle_id": "mqttcar",
            "output_dir": str(tmp_path / "out"),
            "window_ms": 50,
            "grace_ms": 300,
            "fsync_interval_s": 0.2,
            "mqtt": {"host": "127.0.0.1", "port": port, "client_id": "rec", "reconnect_max_s": 1.0},
            "streams": [
                {
                    "id": 0,
                    "name": "imu",
                    "kind": "imu",
                    "encoding": "imu-f64",
                    "transport": "mqtt",
                    "topic": "car/imu",
                    "qos": 1,
                }
            ],
        }
    )
    sent: list[int] = []

    async def main() -> None:
        try:
            broker = mosquitto(tmp_path / "b1", port=port)
            broker.__enter__()
        except BrokerUnavailable as exc:
            pytest.skip(str(exc))
        async with Recorder(cfg) as rec:
            try:
                await rec.ready.wait()
                assert rec.mqtt is not None
                await _until(rec.mqtt.connected.is_set)
                sent.extend(await asyncio.to_thread(_publish, port, 0, 100))
                await _until(lambda: rec.stats.frames == 100)
            finally:
                broker.__exit__(None, None, None)  # the broker goes away
            await _until(lambda: not rec.mqtt.connected.is_set())
            with mosquitto(tmp_path / "b2", port=port):  # ... and comes back
                await _until(rec.mqtt.connected.is_set)
                sent.extend(await asyncio.to_thread(_publish, port, 100, 100))
                await _until(lambda: rec.stats.frames == 200)
                # the new broker had no persistence: our session was gone, and that is counted
                assert rec.stats.mqtt_sessions_lost == 1

    asyncio.run(main())
    [path] = list_segments(tmp_path / "out", "mqttcar")
    with HyperframeReader(path) as r:
        assert [int(t) for t in r.timestamps("imu")] == sorted(sent)
