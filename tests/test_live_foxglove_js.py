"""The live view read by Foxglove's own WebSocket client, from npm.

``tests/js/live_client.cjs`` connects with ``@foxglove/ws-protocol``'s ``FoxgloveClient``
(the package Foxglove's apps and Lichtblick grew from), subscribes to every channel the
server advertises and decodes every message with the advertised schema (protobufjs over
the FileDescriptorSet). Camera bytes, points and IMU values must arrive as published.

foxglove-sdk 0.30's server accepts only the ``foxglove.sdk.v1`` subprotocols; clients that
ask for ``foxglove.websocket.v1`` alone (that package's default, older Foxglove Studio,
Lichtblick) are refused at the handshake. The last test keeps that fact in view
(docs/LIVE.md, "Clients").
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("foxglove")

from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.live.server import LiveServer
from hyperframes.synth import make_generator

import npm_packages

CAM = StreamInfo(0, "cam_front", SensorKind.CAMERA, "jpeg", rate_hz=10.0)
LIDAR = StreamInfo(1, "lidar_top", SensorKind.LIDAR, "xyzi-f32", "<f4", (-1, 4), rate_hz=10.0)
IMU = StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", "<f8", (6,), rate_hz=100.0)
T0 = 1_750_000_000_000_000_000


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The npm packages of tests/js, installed once per lock file into the user's cache."""
    return npm_packages.node_modules()


def _client(node_modules: Path, port: int, subprotocol: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["node", str(npm_packages.JS / "live_client.cjs"), f"ws://127.0.0.1:{port}",
         subprotocol, str(count), "20000"],
        env={**os.environ, "NODE_PATH": str(node_modules)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    result: dict[str, Any] = json.loads(out)
    return result


def test_foxgloves_client_decodes_every_stream_as_published(node_modules: Path) -> None:
    frames = {s.id: [make_generator(s, 7)(i) for i in range(3)] for s in (CAM, LIDAR, IMU)}
    with LiveServer([CAM, LIDAR, IMU], port=0) as server:
        proc = _client(node_modules, server.port, "foxglove.sdk.v1", 3)
        deadline = time.monotonic() + 30
        while not all(server.has_subscribers(s.id) for s in (CAM, LIDAR, IMU)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        for i in range(3):
            for s in (CAM, LIDAR, IMU):
                server.publish(s.id, T0 + i * 100_000_000, frames[s.id][i])
        result = _result(proc)
    assert "error" not in result, result
    assert result["info"]["name"] == "hyperframes"
    assert {(c["topic"], c["schemaName"]) for c in result["channels"]} == {
        ("/cam_front", "foxglove.CompressedImage"),
        ("/lidar_top", "foxglove.PointCloud"),
        ("/imu", "hyperframes.Imu"),
    }
    got = result["got"]
    for i in range(3):
        cam = got["/cam_front"][i]
        assert cam["logTime"] == str(T0 + i * 100_000_000)
        assert cam["format"] == "jpeg"
        assert cam["sha256"] == hashlib.sha256(frames[CAM.id][i]).hexdigest()
        lidar = got["/lidar_top"][i]
        points = np.frombuffer(frames[LIDAR.id][i], "<f4").reshape(-1, 4)
        assert lidar["pointStride"] == 16 and lidar["fields"] == ["x", "y", "z", "intensity"]
        assert lidar["sha256"] == hashlib.sha256(points.tobytes()).hexdigest()
        imu = got["/imu"][i]
        values = np.frombuffer(frames[IMU.id][i], "<f8")
        sent = [*imu["linear_acceleration"].values(), *imu["angular_velocity"].values()]
        np.testing.assert_array_equal(np.array(sent, dtype="<f8"), values)


def test_clients_asking_only_for_the_old_subprotocol_are_refused(node_modules: Path) -> None:
    with LiveServer([CAM], port=0) as server:
        result = _result(_client(node_modules, server.port, "foxglove.websocket.v1", 1))
    assert "400" in result.get("error", ""), result
