"""``hyperframes serve`` against a real Foxglove WebSocket client (tests/foxglove_client.py).

The client decodes with the schemas the server advertises (google.protobuf from the
FileDescriptorSet, json), never with hyperframes' code, and compares with the frames
the reader returns: JPEG bytes, lidar points, IMU values. Playback: seek (the first
messages are at or after the time; H.265 from the newest keyframe), pause, speed.
From a moto bucket the drive opens with the table reads only.
"""

from __future__ import annotations

import json
import logging
import os
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("foxglove")
pytest.importorskip("websockets")

from foxglove_client import PAUSED, PLAYING, FoxgloveClient, Message
from s3_stores import S3Store, store_params

from hyperframes.events import EVENT_STREAM_ID, Event, event_stream_info
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, SensorKind, StreamInfo
from hyperframes.live import serve as serve_module
from hyperframes.live.serve import Player, resolve_sources, serve
from hyperframes.live.server import ExposedServerWarning, LiveServer
from hyperframes.reader import HyperframeReader
from hyperframes.synth import BASE_NS, profile, write_synthetic
from hyperframes.writer import HyperframeWriter

S = 1_000_000_000
MS = 1_000_000
Frames = Sequence[tuple[int, int, bytes, int]]  # stream id, time, payload, flags
CAM = StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=1.0)
IMU = StreamInfo(1, "imu", SensorKind.IMU, "imu-f64", "<f8", (6,), rate_hz=100.0)


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo drive of two 1.5 s segments (two cameras, lidar, IMU)."""
    d = tmp_path_factory.mktemp("drive")
    write_synthetic(str(d / "a.hf"), profile("demo"), 3.0, seed=1)
    return d


def write(path: Path, streams: Sequence[StreamInfo], frames: Frames) -> Path:
    """A file of ``frames`` written by hyperframes' writer (100 ms windows)."""
    meta = FileMetadata(vehicle_id="v", recorder_version="t", segment_seq=0, created_ns=BASE_NS)
    with HyperframeWriter(str(path), list(streams), 100 * MS, meta) as w:
        for sid, t, payload, flags in frames:
            w.append(sid, t, payload, flags=flags)
    return path


def slow_drive(d: Path, files: int) -> list[Path]:
    """``files`` consecutive 1 s files: a 1 Hz JPEG camera (at +0.5 s), a 100 Hz IMU."""
    d.mkdir(exist_ok=True)
    out = []
    for k in range(files):
        rows: list[tuple[int, int, bytes, int]] = []
        for i in range(100):
            t = BASE_NS + k * S + i * 10 * MS + 1
            if i == 50:
                rows.append((0, t, b"\xff\xd8cam%d\xff\xd9" % k, 0))
            rows.append((1, t, struct.pack("<6d", *([float(k * 100 + i)] * 6)), 0))
        out.append(write(d / f"seg{k:03d}.hf", [CAM, IMU], rows))
    return out


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files serve opens (constructs a HyperframeReader for): the real class, counted."""
    paths: list[str] = []
    real = HyperframeReader

    def counting(path: str, **kw: Any) -> HyperframeReader:
        paths.append(Path(path).name)
        return real(path, **kw)

    monkeypatch.setattr(serve_module, "HyperframeReader", counting)
    return paths


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
        # each stream first sends its newest frame at or before the seek time, at once
        want = {
            "/" + n: max(t for t, _ in f if t <= seek) for n, f in stored(drive / "a.hf").items()
        }
        assert {m.topic: m.log_time for m in first} == want
        assert first[-1].received - t0 < 1.0
        st = c.wait_state(rid)
        assert st is not None and st.did_seek and st.current_time == seek
        ms = c.messages(timeout=0.6)
        assert min(m.log_time for m in ms) >= seek
        span_1x = (ms[-1].log_time - seek) / S
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
    imu = [m.log_time for m in ms if m.topic == "/imu"]  # the sample before the seek first
    assert imu[:2] == [BASE_NS + 1_540_000_001, BASE_NS + 1_550_000_001]


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
def test_serve_from_a_bucket_reads_tables_only_until_played(bucket: Any, opened: list[str]) -> None:
    store, local = bucket
    urls = resolve_sources(store.url("drive/"))
    assert [u.rsplit("/", 1)[1] for u in urls] == ["seg0.hf", "seg1.hf"]
    with serve(store.url("drive/"), port=0) as p:
        assert opened == ["seg0.hf"]  # the other file: its header only, until played
        remote = p.reader(0).remote  # the open one: the first in time and by name
        assert opened == ["seg0.hf"] and remote is not None and remote.stats.requests <= 3
        with connect(p) as c:
            c.playback(PLAYING, 20.0, p.start_ns)
            got = c.messages(timeout=10, idle=1.0)
        want = sorted(f for i in range(2) for f in stored(local / f"seg{i}.hf")["cam_front"])
    # both segments start at the synth's start: their frames interleave
    cams = sorted((m.log_time, c.decode(m).data) for m in got if m.topic == "/cam_front")
    assert cams == want


def test_seek_starts_each_stream_with_its_frame_before_the_time(tmp_path: Path) -> None:
    """A 1 Hz JPEG camera: a seek between two of its frames first sends the one before
    (bytes and time), at once, also from the file before (the frames at +0.5 s)."""
    slow_drive(tmp_path, 3)
    with serve(tmp_path, port=0) as p, connect(p) as c:
        for seek, frame in ((BASE_NS + 1_200 * MS, 0), (BASE_NS + 2_700 * MS, 2)):
            t0 = time.monotonic()
            c.playback(PLAYING, 1.0, seek)
            ms = c.messages(timeout=0.5)
            c.playback(PAUSED, 1.0)
            cam = [m for m in ms if m.topic == "/cam"]
            assert cam and cam[0].log_time == BASE_NS + frame * S + 500 * MS + 1
            assert c.decode(cam[0]).data == b"\xff\xd8cam%d\xff\xd9" % frame
            assert cam[0].received - t0 < 0.3  # at once, not when the next frame is due
            imu = [m.log_time for m in ms if m.topic == "/imu"]
            assert imu[0] == seek - 10 * MS + 1 and imu[1] == seek + 1
            c.messages(timeout=0.2)  # in flight when paused


def test_events_play_on_the_recorder_s_channel_and_quarantine_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A recorder file's event stream plays on the live recorder's events channel (its
    LiveServer's: topic, encoding, schema), each event's stored JSON at its time; a
    quarantined entry is not played, and is logged once."""
    events = [
        Event(BASE_NS + 300 * MS, "mark", tags={"by": "driver"}, payload={"n": 1}, source="mark"),
        Event(BASE_NS + 700 * MS, "hard_brake", pre_s=5.0, post_s=2.0, source="rule"),
    ]
    rows = [(1, BASE_NS + i * 10 * MS + 1, struct.pack("<6d", *([0.0] * 6)), 0) for i in range(100)]
    rows += [(EVENT_STREAM_ID, e.t_ns, e.to_json(), 0) for e in events]
    rows.sort(key=lambda r: r[1])
    bad = Event(BASE_NS + 500 * MS, "late_clock", quarantined=True)
    rows.insert(60, (EVENT_STREAM_ID, bad.t_ns, bad.to_json(), int(FrameFlags.QUARANTINED)))
    path = write(tmp_path / "ev.hf", [IMU, event_stream_info()], rows)
    with HyperframeReader(path) as r:
        assert len(r.quarantine()) == 1
    with (
        LiveServer([event_stream_info()], port=0) as live,
        FoxgloveClient(f"ws://127.0.0.1:{live.port}") as lc,
    ):  # what the recorder's live view advertises (recorder/live.py)
        (recorder_channel,) = lc.wait_channels(1).values()
    with caplog.at_level(logging.INFO, "hyperframes.live.serve"):
        p = serve(path, port=0)
    with p, connect(p) as c:
        (ch,) = [ch for ch in c.channels.values() if ch["topic"] == recorder_channel["topic"]]
        keys = ("topic", "encoding", "schemaName", "schema", "schemaEncoding")
        assert {k: ch.get(k) for k in keys} == {k: recorder_channel.get(k) for k in keys}
        c.playback(PLAYING, 4.0, p.start_ns)
        got = [m for m in c.messages(timeout=5, idle=0.6) if m.topic == ch["topic"]]
    assert [(m.log_time, c.decode(m)) for m in got] == [
        (e.t_ns, json.loads(e.to_json())) for e in events
    ]
    said = [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()]
    assert said == [f"{path}: 1 quarantined frame(s) left out (not played)"]


def _fds_to(d: Path) -> int:
    """This process's open file descriptors on files in ``d``."""
    fds = Path("/proc/self/fd")
    return sum(1 for f in fds.iterdir() if os.path.realpath(f).startswith(str(d.resolve())))


def test_serve_opens_only_the_files_playback_reaches(tmp_path: Path, opened: list[str]) -> None:
    """12 files: starting opens the first (its stream table) and reads every other
    header only; a seek opens the file it lands in and the one before (the camera's
    frame before the time); at most 4 stay open however many were played."""
    slow_drive(tmp_path, 12)
    with serve(tmp_path, port=0) as p, connect(p) as c:
        assert opened == ["seg000.hf"] and len(p.segments) == 12
        assert (p.start_ns, p.end_ns) == (BASE_NS, BASE_NS + 12 * S)
        c.playback(PLAYING, 1.0, BASE_NS + 7_300 * MS)
        assert c.messages(25, timeout=5)[-1].log_time < BASE_NS + 7_800 * MS
        c.playback(PAUSED, 1.0)
        c.messages(timeout=0.3)
        assert opened == ["seg000.hf", "seg007.hf", "seg006.hf"]
        if Path("/proc/self/fd").is_dir():
            for k in (2, 4, 9, 11):  # past the camera frame: one file each; four stay open
                c.playback(PLAYING, 1.0, BASE_NS + k * S + 600 * MS)
                c.messages(3, timeout=5)
                c.playback(PAUSED, 1.0)
                c.messages(timeout=0.2)
            assert opened[3:] == ["seg002.hf", "seg004.hf", "seg009.hf", "seg011.hf"]
            assert _fds_to(tmp_path) == 4
    if Path("/proc/self/fd").is_dir():
        assert _fds_to(tmp_path) == 0


def test_a_file_damaged_after_start_is_left_out_and_playback_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its header read at start, its index damaged before playback reaches it: logged
    once, its frames skipped, the next file's played."""
    seg = slow_drive(tmp_path, 3)[1]
    with HyperframeReader(seg) as r:
        at = r.header.index_offset
    with serve(tmp_path, port=0) as p, connect(p) as c:
        with seg.open("r+b") as f:  # one flipped byte: the index's CRC fails
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0xFF]))
        with caplog.at_level(logging.ERROR, "hyperframes.live.serve"):
            c.playback(PLAYING, 8.0, p.start_ns)
            got = c.messages(timeout=5, idle=0.5)
    cams = [c.decode(m).data for m in got if m.topic == "/cam"]
    assert cams == [b"\xff\xd8cam0\xff\xd9", b"\xff\xd8cam2\xff\xd9"]
    said = [r.getMessage() for r in caplog.records if "does not open" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{seg}: left out")
