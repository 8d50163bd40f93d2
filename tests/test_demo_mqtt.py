"""configs/demo-mqtt.yaml: MQTT in one command against a broker on loopback (issue 16, item 6).

The config validates as shipped, and the README's two commands (``hyperframes
record`` and ``hyperframes sim`` on it) record every simulated frame through a
real Mosquitto (on a free port: only the port differs from the file).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import load_config
from hyperframes.recorder.segments import list_segments
from hyperframes.verify import verify_file

from mqtt_broker import mqtt_broker  # noqa: F401 - a fixture

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo-mqtt.yaml"
README = Path(__file__).resolve().parents[1] / "README.md"


def test_demo_mqtt_config_validates() -> None:
    c = load_config(CONFIG)
    assert c.mqtt is not None and c.mqtt.host == "127.0.0.1" and c.mqtt.port == 1883
    assert not c.zmq  # no ZeroMQ socket
    assert {s.transport for s in c.streams} == {"mqtt"}
    assert "configs/demo-mqtt.yaml" in README.read_text()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "hyperframes.cli", *args]


@pytest.mark.network
def test_record_and_sim_on_the_demo_config(tmp_path: Path, mqtt_broker: int) -> None:  # noqa: F811
    data = yaml.safe_load(CONFIG.read_text())
    data["mqtt"]["port"] = mqtt_broker
    data["output_dir"] = str(tmp_path / "out")
    conf = tmp_path / "demo-mqtt.yaml"
    conf.write_text(yaml.safe_dump(data))
    notify = tmp_path / "n.sock"
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(str(notify))
    ns.settimeout(20)
    env = dict(os.environ, NOTIFY_SOCKET=str(notify))
    rec = subprocess.Popen(_cli("record", "--config", str(conf)), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        while "READY=1" not in ns.recv(4096).decode():
            pass
        sim = subprocess.run(_cli("sim", "--config", str(conf), "--seconds", "1.5",
                                  "--rate-scale", "3"),
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert sim.returncode == 0, sim.stdout + sim.stderr
        sent = int(sim.stdout.split(" frames,")[0].rsplit(" ", 1)[1])
        rec.send_signal(signal.SIGTERM)
        out = rec.communicate(timeout=60)[0].decode()
        assert rec.returncode == 0, out
    finally:
        ns.close()
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    assert f"stopped: {sent} frames received" in out, out
    segments = list_segments(tmp_path / "out", data["vehicle_id"])
    assert segments and not list((tmp_path / "out").glob("*.tmp"))
    names = set()
    frames = 0
    for path in segments:
        assert verify_file(path).ok
        with HyperframeReader(path) as r:
            frames += len(r.index)
            names |= {s.name for s in r.streams.values() if len(r.timestamps(s.id))}
    assert frames == sent
    assert names == {s["name"] for s in data["streams"]}
