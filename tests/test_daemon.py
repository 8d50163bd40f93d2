"""The recorder daemon end to end: real sockets, real files, real signals.

In-process tests run :class:`hyperframes.recorder.daemon.Recorder` on an event loop and
publish from a thread with the real :class:`hyperframes.recorder.ingest.publisher.ZmqPublisher`;
subprocess tests run ``python -m hyperframes.cli record`` and signal it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
import zmq

from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import VehicleConfig, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.ingest.publisher import ZmqPublisher, encode_mqtt_payload
from hyperframes.recorder.ingest.wire import zmq_frames
from hyperframes.recorder.metrics import DropReason
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recover import recover
from hyperframes.verify import verify_file

sys.path.insert(0, str(Path(__file__).parent))
from mqtt_broker import free_port, mqtt_broker  # noqa: F401

T0 = 1_735_689_600_000_000_000
MS = 1_000_000
STREAMS = [
    {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam"},
    {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "xyzi-f32", "topic": "lidar"},
    {"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu"},
]
PERIOD = {"cam": 33 * MS, "lidar": 100 * MS, "imu": 5 * MS}

Sent = dict[tuple[str, int], bytes]  # (topic, timestamp) -> payload


def config_dict(out: Path, port: int, **over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "vehicle_id": "testcar",
        "output_dir": str(out),
        "window_ms": 50,
        "grace_ms": 300,
        "segment_seconds": 60,
        "fsync_interval_s": 0.2,
        "zmq": {"endpoint": f"tcp://127.0.0.1:{port}", "socket": "pull", "bind": True},
        "streams": STREAMS,
    }
    d.update(over)
    return d


def make_config(out: Path, **over: Any) -> VehicleConfig:
    return parse_config(config_dict(out, free_port(), **over))


def payload_for(topic: str, i: int) -> bytes:
    if topic == "lidar":
        return np.random.default_rng(i).normal(0, 10, (200, 4)).astype("<f4").tobytes()
    if topic == "imu":
        return np.full(6, i, "<f8").tobytes()
    return b"\xff\xd8" + bytes([i % 251]) * (500 + i) + b"\xff\xd9"


def traffic(seconds: float, topics: tuple[str, ...] = ("cam", "lidar", "imu"),
            start: int = T0) -> list[tuple[str, int, bytes]]:  # fmt: skip
    """(topic, timestamp, payload) in timestamp order."""
    out: list[tuple[str, int, bytes]] = []
    for topic in topics:
        t, i = start + 1 + len(out) % 7, 0
        while t < start + seconds * 1e9:
            out.append((topic, t, payload_for(topic, i)))
            t += PERIOD[topic]
            i += 1
    out.sort(key=lambda f: f[1])
    return out


def publish(endpoint: str, frames: list[tuple[str, int, bytes]]) -> Sent:
    sent: Sent = {}
    with ZmqPublisher(endpoint, send_timeout_ms=10_000) as pub:
        for topic, ts, payload in frames:
            pub.send(topic, ts, payload)
            sent[(topic, ts)] = payload
    return sent


def recorded(out: Path, vehicle: str = "testcar") -> dict[tuple[str, int], tuple[bytes, int]]:
    """(stream name, timestamp) -> (payload, flags) over every finalized segment."""
    got: dict[tuple[str, int], tuple[bytes, int]] = {}
    for path in list_segments(out, vehicle):
        with HyperframeReader(path) as r:
            for sid, info in r.streams.items():
                for f in r.frames(sid):
                    key = (info.name, f.timestamp_ns)
                    assert key not in got, f"duplicate frame {key}"
                    got[key] = (f.tobytes(), f.flags)
    return got


async def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- in-process -------------------------------------------------------------------


def test_every_frame_sent_is_in_the_files(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "out")
    frames = traffic(2.0)

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames))
        return rec

    rec = run(main())
    got = recorded(tmp_path / "out")
    assert len(got) == len(frames)
    for topic, ts, payload in frames:
        data, flags = got[(topic, ts)]
        assert data == payload
        assert flags & 2  # HW_TIMESTAMP from the wire
    assert rec.stats.dropped == 0
    assert rec.stats.segments_written == 1
    seg = list_segments(tmp_path / "out", "testcar")[0]
    parsed = parse_segment_name(seg.name)
    assert parsed is not None and parsed.seq == 0
    assert not list((tmp_path / "out").glob("*.tmp"))
    with HyperframeReader(seg) as r:
        aux = r.aux()
        assert (aux["receive_ns"] > 0).all()  # host receive time stored for every frame
        assert r.metadata.vehicle_id == "testcar"
    assert verify_file(seg).ok


def test_malformed_messages_are_counted_and_recording_continues(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "out", max_payload_mb=0.01)  # 10 KB limit
    good = traffic(0.5, ("imu",))

    def send(ep: str) -> Sent:
        s: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.connect(ep)
        hdr = zmq_frames("imu", b"x" * 48, T0 + 5, seq=0)
        s.send_multipart([b"imu", b"NOPE" + bytes(hdr[1])[4:], b"x" * 48])  # bad magic
        s.send_multipart([b"nosuch", hdr[1], b"x" * 48])  # unknown topic
        s.send_multipart([b"imu", bytes(hdr[1])[:20], b"x" * 48])  # truncated header
        s.send_multipart([b"imu", hdr[1]])  # bad framing
        s.send_multipart([b"imu", hdr[1], b"x" * 47])  # size mismatch (truncated payload)
        s.close()
        # oversized: libzmq (ZMQ_MAXMSGSIZE) cuts the sender off before allocating it
        big = zmq_frames("cam", b"y" * 20_000, T0 + 6, seq=0)
        s = zmq.Context.instance().socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.connect(ep)
        s.send_multipart([bytes(big[0]), bytes(big[1]), bytes(big[2])])
        s.close()
        return publish(ep, good)

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(send, ep)
            await wait_for(lambda: rec.stats.frames == len(good) and rec.stats.dropped == 5)
            await wait_for(lambda: rec.stats.zmq_events["default"].get("disconnected", 0) >= 2)
        return rec

    rec = run(main())
    imu = rec.stats.streams[2].drops
    assert imu == {"bad-magic": 1, "truncated": 1, "bad-framing": 1, "size-mismatch": 1}
    assert rec.stats.streams[0].drops == {} and rec.stats.streams[0].frames == 0
    assert rec.stats.drops == {"unknown-topic": 1}
    assert len(recorded(tmp_path / "out")) == len(good)


def test_sensor_dropout_window_closes_after_grace_and_stream_is_missing(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "out", grace_ms=200)
    before = traffic(0.5)
    after = traffic(0.5, ("cam", "imu"), start=T0 + 500 * MS)  # lidar unplugged

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(publish, ep, before + after)
            # without a lidar frame past them, windows close only by grace
            await wait_for(lambda: rec.stats.streams[1].stale, timeout=5)
            await wait_for(lambda: rec.stats.windows_closed >= 15, timeout=5)
        return rec

    rec = run(main())
    assert rec.stats.streams[1].stale_events == 1
    assert rec.stats.incomplete_windows > 0
    got = recorded(tmp_path / "out")
    assert len(got) == len(before) + len(after)
    with HyperframeReader(list_segments(tmp_path / "out", "testcar")[0]) as r:
        missing_lidar = [w for w, ids in r.missing.items() if 1 in ids]
        last_lidar_window = max(r.timestamps(1)) // (50 * MS)
        assert any(w > last_lidar_window for w in missing_lidar)


def test_rotation_by_duration_makes_several_files_that_add_up(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "out", segment_seconds=1)
    frames = traffic(3.5)

    async def main() -> None:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(publish, ep, frames)
            await wait_for(lambda: rec.stats.frames == len(frames))

    run(main())
    segs = list_segments(tmp_path / "out", "testcar")
    assert len(segs) == 4  # [0,1) [1,2) [2,3) [3,3.5) s of data
    seqs = [p.seq for p in map(parse_segment_name, (s.name for s in segs)) if p]
    assert seqs == [0, 1, 2, 3]
    for i, seg in enumerate(segs):
        with HyperframeReader(seg) as r:
            assert T0 + i * 10**9 <= r.start_ns and r.end_ns <= T0 + (i + 1) * 10**9 + 50 * MS
    assert len(recorded(tmp_path / "out")) == len(frames)

    # a restart continues the sequence numbers
    run(main())
    parsed = [parse_segment_name(p.name) for p in (tmp_path / "out").iterdir()]
    assert sorted(p.seq for p in parsed if p) == list(range(8))


def test_sd_notify_over_a_real_notify_socket(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    cfg = make_config(tmp_path / "out")
    messages: list[str] = []

    def listen() -> None:  # like systemd: read as they come (a full queue blocks senders)
        try:
            while True:
                messages.append(sock.recv(4096).decode())
        except TimeoutError:
            pass

    reader = threading.Thread(target=listen)
    reader.start()

    async def main() -> None:
        async with Recorder(cfg, status_period_s=0.1) as rec:
            await rec.ready.wait()
            await asyncio.sleep(0.4)

    run(main())
    reader.join()
    sock.close()
    kinds = [m.split("=", 1)[0] for m in messages]
    assert "READY" in kinds and "STOPPING" in kinds and "WATCHDOG" in kinds
    assert kinds.index("READY") < kinds.index("STOPPING")
    assert kinds.count("READY") == 1 and kinds.count("STOPPING") == 1
    assert any(m.startswith("STATUS=recording") for m in messages)


# --- subprocess: signals ----------------------------------------------------------


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], str, Path]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(**over: Any) -> tuple[subprocess.Popen[bytes], str, Path]:
        out = tmp_path / "out"
        port = free_port()
        conf = tmp_path / "car.yaml"
        conf.write_text(yaml.safe_dump(config_dict(out, port, **over)))
        notify = tmp_path / "n.sock"
        notify.unlink(missing_ok=True)  # a restart binds it again
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(str(notify))
        ns.settimeout(10)
        env = dict(os.environ, NOTIFY_SOCKET=str(notify))
        proc = subprocess.Popen(
            [sys.executable, "-m", "hyperframes.cli", "record", "--config", str(conf)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        procs.append(proc)
        while "READY=1" not in ns.recv(4096).decode():
            pass
        ns.close()
        return proc, f"tcp://127.0.0.1:{port}", out

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sigterm_during_recording_finalizes_the_segment(daemon: Any) -> None:
    proc, ep, out = daemon()
    frames = traffic(1.0)
    publish(ep, frames)
    time.sleep(0.3)
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stdout.read().decode()
    assert time.monotonic() - t < 10
    assert not list(out.glob("*.tmp"))
    got = recorded(out)
    assert len(got) == len(frames)


def test_kill_9_then_recover_gives_a_valid_file(daemon: Any, tmp_path: Path) -> None:
    proc, ep, out = daemon()
    publish(ep, traffic(2.0))
    time.sleep(1.0)  # windows written and fsynced (fsync_interval_s 0.2)
    proc.kill()
    proc.wait()
    tmps = list(out.glob("*.hf.tmp"))
    assert len(tmps) == 1
    report = recover(tmps[0], tmp_path / "recovered.hf")
    assert report.frames > 0
    assert verify_file(tmp_path / "recovered.hf").ok
    r = subprocess.run([sys.executable, "-m", "hyperframes.cli", "recover", str(tmps[0]),
                        "-o", str(tmp_path / "cli.hf")], capture_output=True, text=True,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr


# --- MQTT against a real broker -----------------------------------------------------


@pytest.mark.network
def test_mqtt_end_to_end(tmp_path: Path, mqtt_broker: int) -> None:  # noqa: F811
    import paho.mqtt.client as paho

    streams = [dict(s, transport="mqtt", topic=f"car/{s['name']}", qos=1) for s in STREAMS]
    streams[2] = dict(STREAMS[2], transport="zmq")  # both transports at once
    mqtt = {"host": "127.0.0.1", "port": mqtt_broker, "client_id": "rec-test"}
    cfg = make_config(tmp_path / "out", streams=streams, mqtt=mqtt)
    frames = traffic(1.0)

    def send(ep: str) -> None:
        api = paho.CallbackAPIVersion.VERSION2  # type: ignore[attr-defined]
        client = paho.Client(api, client_id="sensor")
        client.connect("127.0.0.1", mqtt_broker)
        client.loop_start()
        try:
            infos = []
            seq: dict[str, int] = {}
            for topic, ts, payload in frames:
                if topic == "imu":
                    continue
                n = seq.get(topic, 0)
                seq[topic] = n + 1
                body = encode_mqtt_payload(payload, ts, seq=n)
                infos.append(client.publish(f"car/{topic}", body, qos=1))
            client.publish("car/cam", b"junk" * 20, qos=1).wait_for_publish(5)
            for info in infos:
                info.wait_for_publish(5)
        finally:
            client.loop_stop()
            client.disconnect()
        publish(ep, [f for f in frames if f[0] == "imu"])

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            assert rec.mqtt is not None and rec.mqtt.connected.is_set()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(send, ep)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.dropped == 1)
        return rec

    rec = run(main())
    got = recorded(tmp_path / "out")
    assert len(got) == len(frames)
    for topic, ts, payload in frames:
        assert got[(topic, ts)][0] == payload
    assert rec.stats.streams[0].drops == {"bad-magic": 1}


def test_sequence_gaps_are_counted(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "out")

    def send(ep: str) -> None:
        with ZmqPublisher(ep) as pub:
            for seq in (0, 1, 5, 6, 10):
                pub.send("imu", T0 + seq * 5 * MS, payload_for("imu", seq), seq=seq)

    async def main() -> Recorder:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            ep = rec.endpoints["default"]
            assert ep is not None
            await asyncio.to_thread(send, ep)
            await wait_for(lambda: rec.stats.frames == 5)
        return rec

    rec = run(main())
    assert rec.stats.streams[2].drops == {DropReason.SEQUENCE_GAP: 6}
    assert len(recorded(tmp_path / "out")) == 5
