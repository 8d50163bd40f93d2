"""Export to MCAP, read back with the ``mcap`` library's own reader."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from hyperframes.cli.main import main
from hyperframes.errors import ChecksumError
from hyperframes.mcap import check_mcap, export_mcap
from hyperframes.mcap import messages as msg
from hyperframes.mcap.errors import EmptyRangeError, UnknownStreamError
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, write_synthetic
from hyperframes.writer import HyperframeWriter

import faulty_recording as fr
from conftest import WINDOW_NS, small_streams

SCHEMAS = {
    "/cam_front": "foxglove.CompressedImage",
    "/cam_rear": "foxglove.CompressedImage",
    "/lidar_top": "foxglove.PointCloud",
    "/imu": "hyperframes.Imu",
    "/hyperframes/events": "hyperframes.Event",
    "/hyperframes/blocks": "hyperframes.Block",
    "/hyperframes/quarantined/cam": "foxglove.CompressedImage",
    "/cam": "foxglove.CompressedImage",  # the streams of tests/conftest.py
    "/lidar": "foxglove.PointCloud",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.hf"
    write_synthetic(str(path), profile("demo"), 2.0)
    return path


def _payload(schema: str, data: bytes) -> tuple[int | None, bytes]:
    if schema == "foxglove.CompressedImage":
        m = msg.decode_compressed_image(data)
        return m.timestamp_ns, bytes(m.data)
    if schema == "foxglove.CompressedVideo":
        v = msg.decode_compressed_video(data)
        return v.timestamp_ns, bytes(v.data)
    if schema == "foxglove.PointCloud":
        p = msg.decode_point_cloud(data)
        return p.timestamp_ns, bytes(p.data)
    if schema == "hyperframes.Imu":
        ts, values = msg.decode_imu(data)
        return ts, np.array(values, "<f8").tobytes()
    raise AssertionError(schema)


def _read_back(path: Path) -> dict[str, list[tuple[int, int, int, int, bytes]]]:
    """topic -> (log time, publish time, sequence, header stamp, payload) in log-time order."""
    out: dict[str, list[tuple[int, int, int, int, bytes]]] = defaultdict(list)
    with open(path, "rb") as f:
        for schema, channel, m in make_reader(f, validate_crcs=True).iter_messages():
            assert schema is not None and schema.name == SCHEMAS[channel.topic]
            if channel.topic in ("/hyperframes/events", "/hyperframes/blocks"):
                continue
            stamp, payload = _payload(schema.name, m.data)
            assert stamp is not None
            out[channel.topic].append((m.log_time, m.publish_time, m.sequence, stamp, payload))
    return out


def test_every_frame_comes_back_with_its_time_bytes_and_schema(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.mcap"
    report = export_mcap([demo], out)
    got = _read_back(out)
    with HyperframeReader(demo) as r:
        aux = r.aux()
        assert report.messages == r.frame_count
        for sid, s in r.streams.items():
            rows = got["/" + s.name]
            frames = list(r.frames(sid))
            assert len(rows) == len(frames) == report.topics[s.name].messages
            base = int(np.searchsorted(r.index["stream_id"], sid))
            for k, (f, row) in enumerate(zip(frames, rows, strict=True)):
                log, publish, seq, stamp, payload = row
                assert log == stamp == f.timestamp_ns  # log time = capture time
                assert publish == int(aux["receive_ns"][base + k])
                assert seq == f.stream_index
                assert payload == f.tobytes()


@pytest.mark.slow
def test_vehicle_export_passes_the_mcap_checks(tmp_path: Path) -> None:
    hf, out = tmp_path / "vehicle.hf", tmp_path / "vehicle.mcap"
    n = write_synthetic(str(hf), profile("vehicle"), 0.5)
    export_mcap([hf], out, compression="lz4", chunk_size=1 << 20)
    check = check_mcap(out)
    assert check.ok, check.problems
    assert check.chunks > 10 and check.message_indexes >= check.chunks
    with open(out, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics is not None
    assert summary.statistics.message_count == check.messages > n  # frames + events
    assert {c.topic for c in summary.channels.values()} == {
        *(f"/cam_{p}" for p in ("front", "front_left", "front_right", "back", "back_left",
                                "back_right")),
        "/lidar_top", "/imu", "/hyperframes/events", "/hyperframes/blocks",
    }  # fmt: skip
    # the checks do look at the bytes: one flipped byte inside a chunk is a CRC mismatch
    raw = bytearray(out.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    broken = tmp_path / "broken.mcap"
    broken.write_bytes(raw)
    assert not check_mcap(broken).ok


def _events(path: Path) -> list[dict[str, object]]:
    with open(path, "rb") as f:
        return [
            json.loads(m.data)
            for _s, _c, m in make_reader(f).iter_messages(topics=["/hyperframes/events"])
        ]


def test_annotations_carry_windows_and_what_went_wrong(tmp_path: Path) -> None:
    hf, out = tmp_path / "faulty.hf", tmp_path / "faulty.mcap"
    stamps = fr.write_faulty(hf)
    report = export_mcap([hf], out)
    events = _events(out)
    assert report.events == len(events)
    by_kind: dict[str, list[dict[str, object]]] = defaultdict(list)
    for e in events:
        by_kind[str(e["kind"])].append(e)
    assert len(by_kind["window"]) == 19  # one per block; window K+17 has none
    ends = {e["end_ns"] for e in by_kind["window"]}
    assert (fr.ABSENT + 1) * WINDOW_NS not in ends
    (stale,) = by_kind["stale"]
    assert (stale["stream"], stale["start_ns"], stale["end_ns"], stale["count"]) == (
        "cam",
        fr.CAM_SILENT[0] * WINDOW_NS,
        (fr.CAM_SILENT[-1] + 1) * WINDOW_NS,
        5,
    )
    missing = {(e["stream"], e["start_ns"]) for e in by_kind["missing"]}
    assert ("imu", fr.IMU_MISSING * WINDOW_NS) in missing
    assert ("lidar", fr.LIDAR_MISSING * WINDOW_NS) in missing
    assert [(e["stream"], e["start_ns"]) for e in by_kind["late"]] == [("imu", fr.LATE_TS)]
    (q,) = by_kind["quarantined"]
    assert q["stream"] == "cam" and q["start_ns"] == fr.RX_Q and "1000 ns" in str(q["detail"])
    drops = {(e["stream"], e["count"]) for e in by_kind["dropped"]}
    assert ("lidar", 1) in drops and ("imu", 20) in drops
    assert {e["stream"] for e in by_kind["gap"]} == {"cam", "imu"}
    # messages are in time order, events included
    with open(out, "rb") as f:
        times = [m.log_time for _s, _c, m in make_reader(f).iter_messages(log_time_order=False)]
    assert times == sorted(times)
    # the quarantined frame's payload is not on the camera topic; indexed frames all are
    got = _read_back(out)
    assert [row[0] for row in got["/cam"]] == stamps["cam"]


def test_stream_and_time_selection(demo: Path, tmp_path: Path) -> None:
    with HyperframeReader(demo) as r:
        t0 = r.start_ns
        want = [int(t) for t in r.timestamps("lidar_top") if t0 + 5 * 10**8 <= t <= t0 + 10**9]
    out = tmp_path / "part.mcap"
    report = export_mcap([demo], out, streams=["lidar_top"], start_ns=t0 + 5 * 10**8,
                         end_ns=t0 + 10**9)  # fmt: skip
    got = _read_back(out)
    assert set(got) == {"/lidar_top"} and [row[0] for row in got["/lidar_top"]] == want
    assert report.messages == len(want) == 5


def test_bad_selections_are_refused_and_leave_no_output(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.mcap"
    with HyperframeReader(demo) as r:
        t0 = r.start_ns
    with pytest.raises(EmptyRangeError, match=r"demo\.hf.*no frame"):
        export_mcap([demo], out, start_ns=t0 - 10**9, end_ns=t0 - 1)
    with pytest.raises(EmptyRangeError, match="before"):
        export_mcap([demo], out, start_ns=t0 + 10, end_ns=t0)
    with pytest.raises(UnknownStreamError, match=r"'radar'.*cam_front"):
        export_mcap([demo], out, streams=["radar"])
    assert list(tmp_path.iterdir()) == []


def test_a_failed_export_leaves_no_output(demo: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.hf"
    raw = bytearray(demo.read_bytes())
    with HyperframeReader(demo) as r:
        last = r.index[np.argmax(r.index["offset"])]
    raw[int(last["offset"]) + 10] ^= 0xFF  # the last payload written: its CRC fails
    damaged.write_bytes(raw)
    out = tmp_path / "out.mcap"
    with pytest.raises(ChecksumError):
        export_mcap([damaged], out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.hf"]


def test_consecutive_segments_become_one_file(tmp_path: Path) -> None:
    stamps = []
    paths = []
    for k, start in enumerate((fr.K, fr.K + 10)):
        path = tmp_path / f"seg{k}.hf"
        with HyperframeWriter(path, small_streams(), WINDOW_NS) as w:
            for win in range(start, start + 10):
                t = win * WINDOW_NS + 1_000
                w.append(2, t, np.full(6, win, "<f8").tobytes())
                stamps.append(t)
        paths.append(path)
    out = tmp_path / "all.mcap"
    export_mcap(list(reversed(paths)), out, streams=["imu"])
    assert [row[0] for row in _read_back(out)["/imu"]] == stamps


def test_command_line(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.mcap"
    assert main(["export", str(demo), "--mcap", str(out), "--streams", "imu", "--from", "1",
                 "--to", "1.5", "-q"]) == 0  # fmt: skip
    assert "/imu" in capsys.readouterr().out
    assert len(_read_back(out)["/imu"]) == 100
    assert main(["export", str(demo), "--mcap", str(out), "-q"]) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["export", str(demo), "--mcap", str(out), "-q", "--force"]) == 0


def test_without_the_mcap_library_the_command_names_the_extra(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcap", None)  # as if it were not installed
    assert main(["export", str(demo), "--mcap", str(tmp_path / "x.mcap")]) == 2
    assert "pip install 'hyperframes-sensors[mcap]'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
