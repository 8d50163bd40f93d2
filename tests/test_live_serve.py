"""``hyperframes serve`` against a real Foxglove WebSocket client (tests/foxglove_client.py).

The client decodes with the schemas the server advertises (google.protobuf from the
FileDescriptorSet, json), never with hyperframes' code, and compares with the frames
the reader returns: JPEG bytes, lidar points, IMU values. Playback: seek (the first
messages are at or after the time; H.265 from the newest keyframe), pause, speed.
From a moto bucket the drive opens with the table reads only.
"""

from __future__ import annotations

import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("foxglove")
pytest.importorskip("websockets")

from foxglove_client import PAUSED, PLAYING, FoxgloveClient, Message
from s3_stores import S3Store, store_params

from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, SensorKind, StreamInfo
from hyperframes.live.serve import Player, resolve_sources, serve
from hyperframes.live.server import ExposedServerWarning, LiveServer
from hyperframes.reader import HyperframeReader
from hyperframes.synth import BASE_NS, profile, write_synthetic
from hyperframes.writer import HyperframeWriter

S = 1_000_000_000


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo drive of two 1.5 s segments (two cameras, lidar, IMU)."""
    d = tmp_path_factory.mktemp("drive")
    write_synthetic(str(d / "a.hf"), profile("demo"), 3.0, seed=1)
    return d


def connect(player: Player) -> FoxgloveClient:
    c = FoxgloveClient(f"ws://127.0.0.1:{player.port}")
    c.wait_channels(len(player.streams))
    c.subscribe()
    deadline = time.monotonic() + 5
    while player.server.client_count == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(player.server.has_subscribers(s.id) for s in player.streams)
    return c


def stored(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    with HyperframeReader(path) as r:
        return {
            s.name: [(f.timestamp_ns, f.tobytes()) for f in r.frames(s.id)]
            for s in r.streams.values()
        }


def check_decoded(c: FoxgloveClient, m: Message, payload: bytes, stream: StreamInfo) -> None:
    d = c.decode(m)
    stamp = d.timestamp.seconds * S + d.timestamp.nanos
    assert stamp == m.log_time
    if stream.encoding == "jpeg":
        assert d.format == "jpeg" and d.data == payload
    elif stream.kind == SensorKind.LIDAR:
        pts = np.frombuffer(d.data, "<f4").reshape(-1, d.point_stride // 4)
        assert [f.name for f in d.fields] == ["x", "y", "z", "intensity"]
        assert np.array_equal(pts, np.frombuffer(payload, "<f4").reshape(-1, 4))
    elif stream.kind == SensorKind.IMU:
        a, g = d.linear_acceleration, d.angular_velocity
        assert [a.x, a.y, a.z, g.x, g.y, g.z] == list(struct.unpack("<6d", payload))
    else:
        raise AssertionError(stream)


def test_channels_and_every_message_decode_to_the_stored_frames(drive: Path) -> None:
    want = stored(drive / "a.hf")
    with serve(drive, port=0) as p, connect(p) as c:
        chans = {ch["topic"]: ch for ch in c.channels.values()}
        assert set(chans) == {"/" + s.name for s in p.streams}
        kinds = {s.name: chans["/" + s.name]["schemaName"] for s in p.streams}
        assert kinds == {"cam_front": "foxglove.CompressedImage",
                         "cam_rear": "foxglove.CompressedImage",
                         "lidar_top": "foxglove.PointCloud", "imu": "hyperframes.Imu"}  # fmt: skip
        assert "playbackControl" in c.server_info["capabilities"]
        assert c.server_info["dataStartTime"] == {"sec": p.start_ns // S, "nsec": p.start_ns % S}
        rid = c.playback(PLAYING, 10.0, p.start_ns)
        got = c.messages(timeout=10, idle=1.0)
        assert c.wait_state(rid) is not None
    streams = {"/" + s.name: s for s in p.streams}
    by_topic: dict[str, list[Message]] = {}
    for m in got:
        by_topic.setdefault(m.topic, []).append(m)
    for name, frames in want.items():
        msgs = by_topic["/" + name]
        assert [m.log_time for m in msgs] == [t for t, _ in frames], name
        for m, (_t, payload) in zip(msgs[:40], frames[:40], strict=True):
            check_decoded(c, m, payload, streams[m.topic])
    assert [m.log_time for m in got] == sorted(m.log_time for m in got)


def test_seek_pause_and_speed(drive: Path) -> None:
    with serve(drive, port=0) as p, connect(p) as c:
        assert c.messages(timeout=0.3) == []  # paused at the start until asked
        seek = p.start_ns + 1_500_000_000
        t0 = time.monotonic()
        rid = c.playback(PLAYING, 1.0, seek)
        first = c.messages(4, timeout=5)
        assert first and min(m.log_time for m in first) >= seek
        assert first[0].received - t0 < 1.0
        st = c.wait_state(rid)
        assert st is not None and st.did_seek and st.current_time == seek
        ms = c.messages(timeout=0.6)
        span_1x = (ms[-1].log_time - first[0].log_time) / S
        c.playback(PAUSED, 1.0)
        c.messages(timeout=0.3)  # in flight
        assert c.messages(timeout=0.5) == []  # paused: nothing
        c.playback(PLAYING, 0.25)
        t1 = time.monotonic()
        slow = c.messages(timeout=0.8)
        span_quarter = (slow[-1].log_time - slow[0].log_time) / S
        wall = time.monotonic() - t1
    assert 0.4 < span_1x < 1.0, span_1x  # ~0.6 s of drive in 0.6 s
    assert span_quarter < wall * 0.25 + 0.1, (span_quarter, wall)  # a quarter of real time


def test_seek_starts_video_at_the_newest_keyframe(tmp_path: Path) -> None:
    """An H.265 stream (stored access units; only the index's KEYFRAME flags matter here):
    a seek between keyframes starts with the keyframe, the IMU at the seek time."""
    cam = StreamInfo(0, "cam", SensorKind.CAMERA, "h265", rate_hz=10.0)
    imu = StreamInfo(1, "imu", SensorKind.IMU, "imu-f64", "<f8", (6,), rate_hz=100.0)
    path = tmp_path / "v.hf"
    meta = FileMetadata(vehicle_id="v", recorder_version="t", segment_seq=0, created_ns=BASE_NS)
    with HyperframeWriter(str(path), [cam, imu], 100_000_000, meta) as w:
        for i in range(200):
            t = BASE_NS + i * 10_000_000
            if i % 10 == 0:
                key = int(FrameFlags.KEYFRAME) if (i // 10) % 10 == 0 else 0
                w.append(0, t, f"au{i // 10}".encode(), flags=key)
            w.append(1, t + 1, struct.pack("<6d", *([float(i)] * 6)))
    with serve(path, port=0) as p, connect(p) as c:
        seek = BASE_NS + 1_550_000_000  # keyframes at 0 and 1.0 s
        c.playback(PLAYING, 1.0, seek)
        ms = c.messages(8, timeout=5)
    video = [m for m in ms if m.topic == "/cam"]
    assert video and video[0].log_time == BASE_NS + 1_000_000_000
    assert c.decode(video[0]).data == b"au10" and c.decode(video[0]).format == "h265"
    assert [m.log_time for m in video[:6]] == [BASE_NS + k * 100_000_000 for k in range(10, 16)]
    assert min(m.log_time for m in ms if m.topic == "/imu") >= seek


def test_live_server_publish_json_and_loopback_warning() -> None:
    streams = profile("demo").streams
    with pytest.warns(ExposedServerWarning):
        LiveServer(streams, host="0.0.0.0", port=0).close()
    with warnings.catch_warnings():  # a caller that warned already (the recorder)
        warnings.simplefilter("error", ExposedServerWarning)
        LiveServer(streams, host="0.0.0.0", port=0, warn_exposed=False).close()
    with LiveServer(streams, port=0) as srv:
        assert not srv.has_subscribers(0) and srv.client_count == 0
        srv.publish(0, 1, b"\xff\xd8")  # nobody listens: nothing happens
        srv.json_channel("/hyperframes/status")
        with FoxgloveClient(f"ws://127.0.0.1:{srv.port}") as c:
            c.wait_channels(len(streams) + 1)
            c.subscribe()
            deadline = time.monotonic() + 5
            while (
                not srv.topic_has_subscribers("/hyperframes/status") and time.monotonic() < deadline
            ):
                time.sleep(0.01)
            srv.publish_json("/hyperframes/status", {"drops": 3}, 42)
            (m,) = c.messages(1, timeout=5)
            assert (m.topic, m.log_time, c.decode(m)) == ("/hyperframes/status", 42, {"drops": 3})


def test_the_serve_command_prints_where_to_connect_and_stops_on_ctrl_c(drive: Path) -> None:
    """``hyperframes serve`` itself: port 0 picks a free port and the line it prints says
    which; a client connects there and plays; SIGINT (Ctrl-C) stops it cleanly: exit 0
    (the command's normal end: hyperframes/cli/live.py), the port closed."""
    # cwd: not the checkout, where a stale *.egg-info could hide the entry point of serve
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframes.cli", "serve", str(drive), "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=drive,
    )  # fmt: skip
    try:
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stderr is not None
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
        said = ""
        while "serving" not in said:
            said = lines.get(timeout=60)
        found = re.search(r"ws://127\.0\.0\.1:(\d+)", said)
        assert found and "4 streams" in said and "Ctrl-C stops" in said, said
        port = int(found.group(1))
        assert port > 0
        with FoxgloveClient(f"ws://127.0.0.1:{port}") as c:
            c.wait_channels(4)
            c.subscribe()
            time.sleep(0.3)  # the subscriptions reach the server
            with HyperframeReader(drive / "a.hf") as r:
                infos = {"/" + s.name: s for s in r.streams.values()}
            want = {"/" + name: dict(frames) for name, frames in stored(drive / "a.hf").items()}
            start = min(t for frames in want.values() for t in frames)
            c.playback(PLAYING, 1.0, start)
            got = c.messages(5, timeout=10)
            assert len(got) == 5
            for m in got:  # the stored frames, decoded with the advertised schemas
                check_decoded(c, m, want[m.topic][m.log_time], infos[m.topic])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        with socket.socket() as s, pytest.raises(OSError):
            s.connect(("127.0.0.1", port))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def bucket(s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    client = s3_store.client()
    for i in range(2):
        path = tmp_path / f"seg{i}.hf"
        write_synthetic(str(path), profile("demo"), 1.0, seed=i)
        client.put_object(Bucket=s3_store.bucket, Key=f"drive/{path.name}", Body=path.read_bytes())
    yield s3_store, tmp_path


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_serve_from_a_bucket_reads_tables_only_until_played(bucket: Any) -> None:
    store, local = bucket
    urls = resolve_sources(store.url("drive/"))
    assert [u.rsplit("/", 1)[1] for u in urls] == ["seg0.hf", "seg1.hf"]
    with serve(store.url("drive/"), port=0) as p:
        opened = [r.remote.stats.requests for r in p.readers if r.remote is not None]
        assert len(opened) == 2 and all(n <= 3 for n in opened), opened  # tail, head, trailer
        with connect(p) as c:
            c.playback(PLAYING, 20.0, p.start_ns)
            got = c.messages(timeout=10, idle=1.0)
        want = sorted(f for i in range(2) for f in stored(local / f"seg{i}.hf")["cam_front"])
    # both segments start at the synth's start: their frames interleave
    cams = sorted((m.log_time, c.decode(m).data) for m in got if m.topic == "/cam_front")
    assert cams == want
