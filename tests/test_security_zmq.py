"""Issue 24 items 2 and 3: a stranger on the ZeroMQ ingest, with real sockets.

An oversized message against the real daemon (its peak RSS read from
``/proc/PID/status``), CURVE with pyzmq's ZAP handler (a known key records, an unknown
one and a plain client are refused and counted), and a stranger in a second
network namespace where the machine allows it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
import zmq
import zmq.auth
from test_daemon import STREAMS, config_dict, daemon, recorded, wait_for  # noqa: F401

from hyperframes.recorder.config import check_config_main, exposure_warnings, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.curve import client_keys, keygen_main
from hyperframes.recorder.ingest.publisher import ZmqPublisher

from mqtt_broker import free_port

MB = 1 << 20


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def test_an_oversized_message_is_cut_off_before_it_is_allocated_and_counted(
    daemon: Any,  # noqa: F811
) -> None:
    pytest.importorskip("prometheus_client")
    mport = free_port()
    proc, endpoint, out = daemon(max_payload_mb=4, metrics={"enabled": True, "port": mport})
    big = 384 * MB
    ctx = zmq.Context()
    try:
        stranger = ctx.socket(zmq.PUSH)
        stranger.setsockopt(zmq.LINGER, 5000)
        stranger.connect(endpoint)
        stranger.send_multipart([b"imu", b"\0" * 40, bytes(big)], copy=False)
        line = 'hyperframes_zmq_peer_events_total{event="disconnected",socket="default"}'
        deadline = time.monotonic() + 30
        while line not in scrape(mport):
            assert time.monotonic() < deadline, scrape(mport)
            time.sleep(0.1)
        stranger.close(0)
        with ZmqPublisher(endpoint) as pub:  # and the daemon records on
            for i in range(5):
                pub.send("imu", time.time_ns(), bytes(48), seq=i)
        time.sleep(0.5)
        # the daemon's own high-water mark (VmHWM starts anew at exec; wait4's ru_maxrss
        # would carry over a large test process's RSS from the fork)
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    finally:
        ctx.destroy(linger=0)
    proc.send_signal(signal.SIGTERM)
    _, status, _usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    peak = hwm * 1024
    assert peak < big / 2, f"the recorder's peak RSS was {peak / MB:.0f} MB"
    assert sum(1 for name, _ in recorded(out) if name == "imu") == 5


# --- CURVE --------------------------------------------------------------------------------


def keys(tmp_path: Path) -> dict[str, Path]:
    """A recorder key, an allowed driver key and a stranger's key, as ``keygen`` writes them."""
    d = tmp_path / "keys"
    for name in ("recorder", "driver", "stranger"):
        assert keygen_main(argparse.Namespace(dir=d, name=name)) == 0
    clients = tmp_path / "clients"
    clients.mkdir(mode=0o755)
    shutil.copy(d / "driver.key", clients / "driver.key")
    return {
        "secret": d / "recorder.key_secret",
        "public": d / "recorder.key",
        "clients": clients,
        "driver": d / "driver.key_secret",
        "stranger": d / "stranger.key_secret",
    }


def curve_config(tmp_path: Path, k: dict[str, Path], host: str = "127.0.0.1") -> dict[str, Any]:
    d = config_dict(tmp_path / "out", free_port())
    d["zmq"] = {
        "endpoint": f"tcp://{host}:{free_port()}",
        "socket": "pull",
        "bind": True,
        "curve": {"secret_key": str(k["secret"]), "clients": str(k["clients"])},
    }
    return d


def test_keygen_writes_a_private_secret_and_refuses_to_replace(tmp_path: Path) -> None:
    def keygen() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "hyperframes.cli", "keygen", str(tmp_path), "recorder"]
        return subprocess.run(cmd, check=False, capture_output=True, text=True)

    assert keygen().returncode == 0
    assert oct((tmp_path / "recorder.key_secret").stat().st_mode & 0o777) == "0o600"
    assert zmq.auth.load_certificate(tmp_path / "recorder.key_secret")[1]
    r = keygen()
    assert r.returncode == 2 and "exists already" in r.stderr


def test_curve_admits_listed_clients_and_refuses_and_counts_the_rest(tmp_path: Path) -> None:
    k = keys(tmp_path)
    cfg = parse_config(curve_config(tmp_path, k))
    assert exposure_warnings(cfg) == []
    known = client_keys(k["driver"], k["public"])
    unknown = client_keys(k["stranger"], k["public"])

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            now = time.time_ns()
            with ZmqPublisher(ep, curve=unknown, linger_ms=0) as bad:
                for i in range(20):
                    bad.send("imu", now + i * 10_000_000, b"\x01" * 48, seq=i)
                plain = ZmqPublisher(ep, linger_ms=0)
                plain.send("imu", now, b"\x02" * 48, seq=0)
                events = rec.stats.zmq_events
                await wait_for(lambda: events.get("default", {}).get("auth-failed", 0) >= 1)
                await wait_for(lambda: events.get("default", {}).get("handshake-failed", 0) >= 1)
                plain.close()
            with ZmqPublisher(ep, curve=known) as good:
                for i in range(20):
                    good.send("imu", now + i * 10_000_000 + 1, b"\x03" * 48, seq=100 + i)
            await wait_for(lambda: rec.stats.streams[2].frames >= 20)
            rec.stop()
        return rec

    rec = asyncio.run(main())
    got = recorded(tmp_path / "out")
    imu = [payload for (name, _), (payload, _) in got.items() if name == "imu"]
    assert len(imu) == 20 and set(imu) == {b"\x03" * 48}  # nothing from the others
    assert rec.stats.streams[2].frames == 20


def test_check_config_checks_curve_key_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    k = keys(tmp_path)
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(curve_config(tmp_path, k)))
    assert check_config_main([str(conf)]) == 0
    assert "curve (clients in" in capsys.readouterr().out
    k["secret"].chmod(0o644)
    (k["clients"] / "driver.key").unlink()
    assert check_config_main([str(conf)]) == 2
    err = capsys.readouterr().err
    assert "must not be readable by others" in err and "no client may connect" in err


def test_a_tcp_bind_beyond_loopback_without_curve_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = config_dict(tmp_path / "out", 5555)
    d["zmq"]["endpoint"] = "tcp://*:5555"
    d["metrics"] = {"enabled": True, "host": "0.0.0.0"}
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    assert check_config_main([str(conf)]) == 0
    printed = capsys.readouterr()
    assert "metrics: http://0.0.0.0:9108/metrics" in printed.out
    assert "tcp://*:5555 binds a non-loopback address without curve" in printed.err
    assert "metrics: http://0.0.0.0:9108/metrics is reachable beyond" in printed.err
    for ok in ("tcp://127.0.0.1:5555", "ipc:///run/hyperframes/ingest.sock"):
        d["zmq"]["endpoint"] = ok
        d["metrics"]["host"] = "127.0.0.1"
        assert exposure_warnings(parse_config(d)) == []


# --- a stranger in a second network namespace ----------------------------------------------

NS = f"hf24-{os.getpid()}"
HOST_IP, NS_IP = "10.224.77.1", "10.224.77.2"


@pytest.fixture
def netns() -> Any:
    """A network namespace joined to this one by a veth pair: a stranger's machine."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    host_if, ns_if = f"hf24h{os.getpid() % 10000}", f"hf24n{os.getpid() % 10000}"
    setup = [
        ["ip", "netns", "add", NS],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", NS],
        ["ip", "addr", "add", f"{HOST_IP}/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/30", "dev", ns_if],
        ["ip", "netns", "exec", NS, "ip", "link", "set", ns_if, "up"],
        ["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for cmd in setup:
            r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                pytest.skip(f"this machine does not allow network namespaces: {r.stderr.strip()}")
        yield NS
    finally:
        for cmd in (["ip", "link", "del", host_if], ["ip", "netns", "del", NS]):
            subprocess.run(cmd, check=False, capture_output=True, timeout=10)


_STRANGER = """
import sys, time
from hyperframes.recorder.ingest.curve import client_keys, keygen_main
from hyperframes.recorder.ingest.publisher import ZmqPublisher
keys = client_keys(sys.argv[2], sys.argv[3]) if len(sys.argv) > 2 else None
with ZmqPublisher(sys.argv[1], curve=keys, linger_ms=2000, send_timeout_ms=2000) as pub:
    try:
        for i in range(30):
            pub.send("imu", time.time_ns(), bytes([int(len(sys.argv) > 2)]) * 48, seq=i)
            time.sleep(0.01)
    except TimeoutError:  # refused: the socket has no peer to send to
        pass
"""


def test_a_stranger_on_another_network_is_refused_a_listed_driver_records(
    tmp_path: Path, netns: str
) -> None:
    k = keys(tmp_path)
    cfg = parse_config(curve_config(tmp_path, k, host=HOST_IP))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def from_ns(*args: str) -> None:
        subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", _STRANGER, *args],
                       check=True, timeout=60, env=env, capture_output=True)  # fmt: skip

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None and HOST_IP in ep
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, from_ns, ep)  # no key at all
            await loop.run_in_executor(None, from_ns, ep, str(k["stranger"]), str(k["public"]))
            await loop.run_in_executor(None, from_ns, ep, str(k["driver"]), str(k["public"]))
            await wait_for(lambda: rec.stats.streams[2].frames >= 30)
            rec.stop()
        return rec

    rec = asyncio.run(main())
    events = rec.stats.zmq_events["default"]
    assert events.get("auth-failed", 0) >= 1 and events.get("handshake-failed", 0) >= 1
    imu = [p for (name, _), (p, _) in recorded(tmp_path / "out").items() if name == "imu"]
    assert len(imu) == 30 and set(imu) == {b"\x01" * 48}


def test_a_publisher_closed_at_once_still_delivers_what_it_queued() -> None:
    """Found here: closing the publisher's connection monitor first lost the queued frames."""
    ctx = zmq.Context()
    try:
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        with ZmqPublisher(f"tcp://127.0.0.1:{port}") as pub:
            for i in range(5):
                pub.send("imu", time.time_ns(), bytes(48), seq=i)
        got = 0
        while got < 5 and pull.poll(5000):
            pull.recv_multipart()
            got += 1
        assert got == 5
    finally:
        ctx.destroy(linger=0)
