"""Issue 24 items 6 and 7 with a real Mosquitto: TLS, a password file, what an operator sees.

The broker gets a CA and certificate made in the test (``openssl``) and a
password file (``mosquitto_passwd``); see :func:`mqtt_broker.secure_mosquitto`.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
import yaml
from test_daemon import config_dict, recorded, wait_for

from hyperframes.recorder.config import check_config_main, exposure_warnings, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.publisher import encode_mqtt_payload
from hyperframes.recorder.metrics import _collect

from mqtt_broker import BrokerUnavailable, SecureBroker, find_mosquitto, free_port, secure_mosquitto

STREAMS = [{"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu",
            "transport": "mqtt", "qos": 1}]  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    if find_mosquitto() is None:
        pytest.skip("mosquitto not installed (Debian package 'mosquitto')")
    try:
        with secure_mosquitto(tmp_path_factory.mktemp("tls-broker")) as b:
            yield b
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))


def mqtt_cfg(tmp_path: Path, b: SecureBroker, **over: Any) -> dict[str, Any]:
    pw = tmp_path / "mqtt.pass"
    pw.write_text(b.password + "\n")
    pw.chmod(0o600)
    mqtt = {"host": "localhost", "port": b.tls_port, "username": b.username,
            "password_file": str(pw), "tls": {"ca_file": str(b.ca_file)},
            "reconnect_max_s": 0.5, **over}  # fmt: skip
    return config_dict(tmp_path / "out", free_port(), streams=STREAMS, mqtt=mqtt)


async def publish(b: SecureBroker, n: int) -> None:
    tls = aiomqtt.TLSParameters(ca_certs=str(b.ca_file), cert_reqs=ssl.CERT_REQUIRED)
    async with aiomqtt.Client("localhost", b.tls_port, username=b.username, password=b.password,
                              tls_params=tls) as c:  # fmt: skip
        now = time.time_ns()
        for i in range(n):
            await c.publish("imu", encode_mqtt_payload(bytes(48), now + i * 10_000_000, seq=i),
                            qos=1)  # fmt: skip


def test_tls_and_a_password_file_record_and_the_state_is_exported(
    tmp_path: Path, broker: SecureBroker
) -> None:
    cfg = parse_config(mqtt_cfg(tmp_path, broker))
    assert exposure_warnings(cfg) == []

    async def main() -> tuple[Recorder, str]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.mqtt is not None
            await asyncio.wait_for(rec.mqtt.connected.wait(), 10)
            status = rec.stats.status_line()
            await publish(broker, 20)
            await wait_for(lambda: rec.stats.streams[2].frames >= 20)
            rec.stop()
        return rec, status

    rec, status = asyncio.run(main())
    assert "NOT CONNECTED" not in status
    assert len(recorded(tmp_path / "out")) == 20
    assert rec.stats.mqtt_auth_failures == {}


def _state(rec: Recorder) -> dict[str, float]:
    fams = {f.name: f for f in _collect(rec.stats)}
    return {
        "connected": fams["hyperframes_mqtt_connected"].samples[0].value,
        "auth_failures": fams["hyperframes_mqtt_auth_failures"].samples[0].value,
    }


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("wrong-password", "login refused"),
        ("plain-port", "TLS handshake failed"),
        ("wrong-ca", "TLS handshake failed"),
        ("hostname-mismatch", "TLS handshake failed"),
    ],
)
def test_a_refused_connection_is_visible_never_downgraded(
    tmp_path: Path, broker: SecureBroker, case: str, expect: str
) -> None:
    pytest.importorskip("prometheus_client")
    over: dict[str, Any] = {
        "wrong-password": {},
        "plain-port": {"port": broker.plain_port},
        "wrong-ca": {"tls": {"ca_file": str(broker.other_ca_file)}},
        "hostname-mismatch": {"host": "127.0.0.1"},  # the certificate names localhost only
    }[case]
    d = mqtt_cfg(tmp_path, broker, **over)
    if case == "wrong-password":
        Path(d["mqtt"]["password_file"]).write_text("not-the-password\n")
    cfg = parse_config(d)

    async def main() -> tuple[Recorder, str, dict[str, float]]:
        async with Recorder(cfg, ready_timeout_s=0.5) as rec:
            await rec.ready.wait()
            broker_id = rec.mqtt.broker if rec.mqtt else ""
            await wait_for(lambda: broker_id in rec.stats.mqtt_problem, 20)
            if case == "wrong-password":
                await wait_for(lambda: rec.stats.mqtt_auth_failures.get(broker_id, 0) >= 2, 20)
            status = rec.stats.status_line()
            state = _state(rec)
            rec.stop()
        return rec, status, state

    rec, status, state = asyncio.run(main())
    assert f"NOT CONNECTED ({expect}" in status, status
    assert state["connected"] == 0
    assert (state["auth_failures"] >= 2) == (case == "wrong-password")
    assert rec.stats.streams[2].frames == 0


def test_check_config_refuses_missing_files_and_warns_about_a_password_in_clear(
    tmp_path: Path, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    d = mqtt_cfg(tmp_path, broker)
    conf = tmp_path / "car.yaml"
    for key, missing in (("password_file", tmp_path / "nope.pass"),
                         ("ca_file", tmp_path / "nope.crt")):  # fmt: skip
        bad = yaml.safe_load(yaml.safe_dump(d))
        if key == "ca_file":
            bad["mqtt"]["tls"]["ca_file"] = str(missing)
        else:
            bad["mqtt"]["password_file"] = str(missing)
        conf.write_text(yaml.safe_dump(bad))
        assert check_config_main([str(conf)]) == 2
        err = capsys.readouterr().err
        assert str(missing) in err and "No such file" in err
    clear = yaml.safe_load(yaml.safe_dump(d))
    del clear["mqtt"]["tls"]
    clear["mqtt"]["port"] = broker.plain_port
    conf.write_text(yaml.safe_dump(clear))
    assert check_config_main([str(conf)]) == 0
    printed = capsys.readouterr()
    assert "password is sent to localhost" in printed.err and "clear text" in printed.err
    assert broker.password not in printed.out + printed.err
    assert "metrics: off" in printed.out


def test_a_password_file_that_is_not_utf8_never_shows_its_bytes(
    tmp_path: Path, broker: SecureBroker
) -> None:
    d = mqtt_cfg(tmp_path, broker)
    Path(d["mqtt"]["password_file"]).write_bytes(b"hunter2-\xff\xfe-secret\n")
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    cmd = [sys.executable, "-m", "hyperframes.cli", "record", "--config", str(conf)]
    r = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert b"hunter2" not in out and b"secret" not in out and b"Traceback" not in out
    assert b"not UTF-8 text (contents not shown)" in out
    assert len(r.stderr.strip().splitlines()) == 1, out
