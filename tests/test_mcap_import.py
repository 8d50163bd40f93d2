"""Import of MCAP files: written by the ``mcap`` library here, and round trips of our exports."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.writer import Writer

from hyperframes import FrameFlags, SensorKind
from hyperframes.cli.main import main
from hyperframes.format.layout import INDEX_DTYPE
from hyperframes.format.windows import window_of
from hyperframes.mcap import export_mcap, import_mcap
from hyperframes.mcap import messages as msg
from hyperframes.mcap._foxglove_schemas import DESCRIPTORS
from hyperframes.mcap.errors import (
    BadMappingError,
    BadMessageError,
    NotMcapError,
    TopicNotFoundError,
)
from hyperframes.mcap.schemas import IMU_SCHEMA
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, write_synthetic

import faulty_recording as fr
import mcap_kinds

L = 50_000_000  # import window
T0 = 1_735_689_600_000_000_000
SC = b"\x00\x00\x00\x01"
IDR = SC + bytes([32 << 1, 1]) + b"\x0c\x01" + SC + bytes([19 << 1, 1]) + b"\xaf\x00\x11"
TRAIL = SC + bytes([1 << 1, 1]) + b"\xd0\x22"
ROS_SCHEMA = b"float64 latitude\nfloat64 longitude\n"


class _Mcap:
    """An MCAP file written directly with the mcap library (not with our exporter)."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "wb")  # noqa: SIM115
        self.w = Writer(self.f)
        self.w.start()
        self.channels: dict[str, int] = {}

    def channel(self, topic: str, schema: str, schema_encoding: str, data: bytes,
                encoding: str) -> None:  # fmt: skip
        sid = self.w.register_schema(schema, schema_encoding, data) if schema else 0
        self.channels[topic] = self.w.register_channel(topic, encoding, sid)

    def add(self, topic: str, log_time: int, data: bytes, sequence: int = 0) -> None:
        self.w.add_message(self.channels[topic], log_time, data, log_time, sequence)

    def close(self) -> None:
        self.w.finish()
        self.f.close()


def _foreign(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    """Mixed topics as a foreign recorder would log them; returns (capture time, payload)."""
    fx = pytest.importorskip("foxglove.messages", reason="foxglove-sdk is in the dev extra")
    img_schema = fx.CompressedImage.get_schema()
    vid_schema = fx.CompressedVideo.get_schema()
    pc_schema = fx.PointCloud.get_schema()
    m = _Mcap(path)
    m.channel("/camera/front", img_schema.name, "protobuf", img_schema.data, "protobuf")
    m.channel("/video", vid_schema.name, "protobuf", vid_schema.data, "protobuf")
    m.channel("/points", pc_schema.name, "protobuf", pc_schema.data, "protobuf")
    m.channel("/gps/fix", "sensor_msgs/msg/NavSatFix", "ros2msg", ROS_SCHEMA, "cdr")
    m.channel("/notes", "", "", b"", "json")
    expect: dict[str, list[tuple[int, bytes]]] = {k: [] for k in ("img", "vid", "pc", "gps", "js")}
    f32 = fx.PackedElementFieldNumericType.Float32
    fields = [fx.PackedElementField(name=n, offset=4 * i, type=f32)
              for i, n in enumerate(("x", "y", "z", "intensity"))]  # fmt: skip
    rows = []
    for i in range(12):  # 20 Hz camera and video, logged 20 ms after capture
        capture = T0 + (i + 1) * L  # exactly on window ends: each closes its window
        jpeg = b"\xff\xd8" + bytes([i]) * (100 + i) + b"\xff\xd9"
        ts = fx.Timestamp(sec=capture // 10**9, nsec=capture % 10**9)
        rows.append((capture + 20_000_000, "/camera/front",
                     fx.CompressedImage(timestamp=ts, frame_id="cam", data=jpeg,
                                        format="jpeg").encode()))  # fmt: skip
        expect["img"].append((capture, jpeg))
        au = IDR if i % 4 == 0 else TRAIL + bytes([i])
        rows.append((capture + 20_000_000, "/video",
                     fx.CompressedVideo(timestamp=ts, frame_id="cam", data=au,
                                        format="h265").encode()))  # fmt: skip
        expect["vid"].append((capture, au))
        if i % 2 == 0:
            pts = np.arange(8 * 4, dtype="<f4").reshape(8, 4) + i
            rows.append((capture + 5_000_000, "/points",
                         fx.PointCloud(timestamp=ts, frame_id="lidar", point_stride=16,
                                       fields=fields, data=pts.tobytes()).encode()))  # fmt: skip
            expect["pc"].append((capture, pts.tobytes()))
        if i % 3 == 0:
            cdr = struct.pack("<4x2d", 48.1 + i, 11.5)
            rows.append((capture + 7, "/gps/fix", cdr))
            expect["gps"].append((capture + 7, cdr))  # no header stamp known: the log time
            note = json.dumps({"i": i}).encode()
            rows.append((capture + 8, "/notes", note))
            expect["js"].append((capture + 8, note))
    for log_time, topic, data in sorted(rows, key=lambda r: r[0]):
        m.add(topic, log_time, data)
    m.close()
    return expect


def _frames(r: HyperframeReader, name: str) -> list[tuple[int, bytes]]:
    return [(f.timestamp_ns, f.tobytes()) for f in r.frames(name)]


def test_import_of_mixed_foreign_topics(tmp_path: Path) -> None:
    src, out = tmp_path / "foreign.mcap", tmp_path / "foreign.hf"
    expect = _foreign(src)
    report = import_mcap(src, out, window_ns=L)
    assert report.frames == sum(len(v) for v in expect.values()) and report.late_frames == 0
    with HyperframeReader(out) as r:
        streams = {s.name: s for s in r.streams.values()}
        assert set(streams) == {"camera/front", "video", "points", "gps/fix", "notes"}
        cam, vid, pc, gps = (streams[n] for n in ("camera/front", "video", "points", "gps/fix"))
        assert (cam.kind, cam.encoding) == (SensorKind.CAMERA, "jpeg")
        assert (vid.kind, vid.encoding) == (SensorKind.CAMERA, "h265")
        assert (pc.kind, pc.encoding, pc.dtype, pc.shape) == (SensorKind.LIDAR, "xyzi-f32", "<f4",
                                                              (-1, 4))  # fmt: skip
        assert (gps.kind, gps.encoding) == (SensorKind.OTHER, "bytes")
        assert gps.extra["mcap"]["schema_name"] == "sensor_msgs/msg/NavSatFix"
        assert not any(s.hardware_timestamps for s in streams.values())
        # capture times from the messages, payloads unchanged; unknown schemas as raw bytes
        assert _frames(r, "camera/front") == expect["img"]
        assert _frames(r, "video") == expect["vid"]
        assert _frames(r, "points") == expect["pc"]
        assert _frames(r, "gps/fix") == expect["gps"]
        assert _frames(r, "notes") == expect["js"]
        # keyframes: every JPEG, IDR access units only
        flags = [f.keyframe for f in r.frames("video")]
        assert flags == [i % 4 == 0 for i in range(12)]
        assert all(f.keyframe for f in r.frames("camera/front"))
        # the recorder's window rule: a frame stamped on a window's end closes that window
        for t, _ in expect["img"]:
            wid = window_of(t, L)
            assert wid * L < t == (wid + 1) * L
        hf = r.get_window(0)
        assert [f.timestamp_ns for f in hf[cam.id]] == [expect["img"][0][0]]
        assert hf.end_ns == expect["img"][0][0]
        assert r.window_ns == L


def test_foreign_schemas_survive_a_re_export(tmp_path: Path) -> None:
    src, hf, back = tmp_path / "f.mcap", tmp_path / "f.hf", tmp_path / "back.mcap"
    expect = _foreign(src)
    import_mcap(src, hf, window_ns=L)
    export_mcap([hf], back)
    with open(back, "rb") as f:
        got = [
            (schema, channel, m.data)
            for schema, channel, m in make_reader(f).iter_messages(topics=["/gps/fix"])
        ]
    assert [d for _s, _c, d in got] == [p for _t, p in expect["gps"]]
    schema, channel, _ = got[0]
    assert schema is not None and (schema.name, schema.encoding, schema.data) == (
        "sensor_msgs/msg/NavSatFix",
        "ros2msg",
        ROS_SCHEMA,
    )
    assert channel.message_encoding == "cdr"


def test_map_renames_and_selects_topics(tmp_path: Path) -> None:
    src = tmp_path / "f.mcap"
    _foreign(src)
    report = import_mcap(
        src,
        tmp_path / "a.hf",
        window_ns=L,
        mapping={"/camera/front": "cam_front", "/points": "lidar_top"},
    )
    assert set(report.streams) == {"cam_front", "lidar_top"}
    assert set(report.skipped_topics) == {"/video", "/gps/fix", "/notes"}
    report = import_mcap(src, tmp_path / "b.hf", window_ns=L, mapping={"/points": "lidar_top"},
                         include_all=True)  # fmt: skip
    assert "lidar_top" in report.streams and "camera/front" in report.streams
    with pytest.raises(TopicNotFoundError, match=r"f\.mcap: no topic '/radar'; topics: /camera"):
        import_mcap(src, tmp_path / "c.hf", window_ns=L, mapping={"/radar": "radar"})
    with pytest.raises(BadMappingError, match="several topics"):
        import_mcap(src, tmp_path / "c.hf", window_ns=L, mapping={"/video": "x", "/points": "x"})
    with pytest.raises(BadMappingError, match="name"):
        import_mcap(src, tmp_path / "c.hf", window_ns=L, mapping={"/video": "bad name!"})
    with pytest.raises(BadMappingError, match="--window-ms"):
        import_mcap(src, tmp_path / "c.hf")
    assert not (tmp_path / "c.hf").exists() and not (tmp_path / "c.hf.tmp").exists()


def _imu_mcap(path: Path, stamps: list[int], log_delay: int, bad_at: int = -1) -> None:
    m = _Mcap(path)
    m.channel("/imu", "hyperframes.Imu", "protobuf", IMU_SCHEMA.data, "protobuf")
    for i, t in enumerate(stamps):
        body = b"{oops" if i == bad_at else msg.encode_imu(t, "imu", [float(i)] * 6)
        m.add("/imu", t + log_delay, body)
    m.close()


def test_frames_later_than_the_delay_are_written_late(tmp_path: Path) -> None:
    src = tmp_path / "late.mcap"
    stamps = [T0 + 10 * L + 1, T0 + 11 * L + 1, T0 + 10 * L + 2, T0 + 12 * L + 1]
    m = _Mcap(src)
    m.channel("/imu", "hyperframes.Imu", "protobuf", IMU_SCHEMA.data, "protobuf")
    logs = [stamps[0], stamps[1], T0 + 11 * L + 2 * L // 3, stamps[3]]  # #2 logged 0.67 L late
    for i, (t, log) in enumerate(zip(stamps, logs, strict=True)):
        m.add("/imu", log, msg.encode_imu(t, "imu", [float(i)] * 6))
    m.close()
    report = import_mcap(src, tmp_path / "late.hf", window_ns=L, max_delay_ns=L // 2)
    assert report.late_frames == 1
    with HyperframeReader(tmp_path / "late.hf") as r:
        late = [f.timestamp_ns for f in r.frames("imu") if f.flags & FrameFlags.LATE]
        assert late == [stamps[2]]
    # with a long enough delay the same frame is on time
    report = import_mcap(src, tmp_path / "ok.hf", window_ns=L, max_delay_ns=L)
    assert report.late_frames == 0


def test_what_is_not_mcap_is_refused_by_name(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.mcap"
    bogus.write_bytes(b"HFRM not an mcap file")
    with pytest.raises(NotMcapError, match=r"bogus\.mcap: not an MCAP file"):
        import_mcap(bogus, tmp_path / "o.hf", window_ns=L)
    good = tmp_path / "good.mcap"
    _imu_mcap(good, [T0 + i * L for i in range(1, 30)], 0)
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(NotMcapError, match=r"cut\.mcap"):
        import_mcap(cut, tmp_path / "o.hf", window_ns=L)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bogus.mcap", "cut.mcap", "good.mcap"]


def test_a_bad_message_midway_leaves_no_output(tmp_path: Path) -> None:
    src = tmp_path / "bad.mcap"
    _imu_mcap(src, [T0 + i * L for i in range(1, 30)], 0, bad_at=20)
    out = tmp_path / "o.hf"
    out.write_bytes(b"previous")
    with pytest.raises(BadMessageError, match=r"topic '/imu', message at log time \d+"):
        import_mcap(src, out, window_ns=L, overwrite=True)
    assert out.read_bytes() == b"previous"  # --force keeps the old file when the import fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mcap", "o.hf"]


def _same_frames(a: Path, b: Path) -> None:
    with HyperframeReader(a) as ra, HyperframeReader(b) as rb:
        assert {s.name for s in ra.streams.values()} == {s.name for s in rb.streams.values()}
        for s in ra.streams.values():
            fa, fb = list(ra.frames(s.name)), list(rb.frames(s.name))
            assert [(f.timestamp_ns, f.tobytes()) for f in fa] == [
                (f.timestamp_ns, f.tobytes()) for f in fb
            ]
            assert [(f.stream_index, f.keyframe, f.hardware_timestamp) for f in fa] == [
                (f.stream_index, f.keyframe, f.hardware_timestamp) for f in fb
            ]
            assert rb.stream(s.name) == s


def _same_recording(a: Path, b: Path) -> None:
    """Everything but byte offsets: index entries (flags included), aux rows (receive time,
    duration), the quarantine table and its payloads, the window table, the missing notes."""
    no_offset = [n for n in INDEX_DTYPE.names if n != "offset"]  # type: ignore[union-attr]
    with HyperframeReader(a) as ra, HyperframeReader(b) as rb:
        assert ra.streams == rb.streams
        assert np.array_equal(ra.index[no_offset], rb.index[no_offset])
        assert np.array_equal(ra.aux(), rb.aux())
        qa, qb = ra.quarantine(), rb.quarantine()
        assert np.array_equal(qa[[n for n in qa.dtype.names if n != "offset"]],
                              qb[[n for n in qb.dtype.names if n != "offset"]])  # fmt: skip
        for i in range(len(qa)):
            assert ra.quarantined_frame(i).tobytes() == rb.quarantined_frame(i).tobytes()
        cols = ["window_id", "frame_count", "flags"]
        assert np.array_equal(ra.window_table[cols], rb.window_table[cols])
        assert ra.missing == rb.missing
        for i in range(ra.frame_count):
            assert ra.frame_at(i).tobytes() == rb.frame_at(i).tobytes()


def test_round_trip_of_a_recording_with_trouble(tmp_path: Path) -> None:
    """hf -> mcap -> hf keeps every frame where it was: late ones (LATE) in their later
    block, the quarantined one (QUARANTINED, its 1970 stamp), receive times, durations,
    flags and the missing-stream notes."""
    hf, mc, back = tmp_path / "f.hf", tmp_path / "f.mcap", tmp_path / "back.hf"
    fr.write_faulty(hf, durations=True)
    export_mcap([hf], mc)
    report = import_mcap(mc, back)  # window length from the export's metadata
    assert report.window_ns == 100_000_000 and report.blocks
    assert report.left_out == {"/hyperframes/events": {"annotation topic hyperframes.Event": 39}}
    assert report.problems == [] and report.late_frames == 1 and report.quarantined_frames == 1
    _same_frames(hf, back)
    _same_recording(hf, back)
    with HyperframeReader(back) as r:
        (late,) = [f for s in r.streams for f in r.frames(s) if f.late]
        assert late.timestamp_ns == fr.LATE_TS
        (q,) = r.quarantine()
        assert q["timestamp_ns"] == fr.QUARANTINED_TS and q["receive_ns"] == fr.RX_Q
        assert fr.IMU_MISSING in r.missing and 2 in r.missing[fr.IMU_MISSING]
        assert r.metadata.vehicle_id == "faulty"


def test_a_round_trip_through_other_windows_keeps_flags_it_can(tmp_path: Path) -> None:
    """With another window length the blocks cannot come back: frames are re-windowed by
    the recorder's rule, and the quarantined frame stays quarantined."""
    hf, mc, back = tmp_path / "f.hf", tmp_path / "f.mcap", tmp_path / "back.hf"
    fr.write_faulty(hf)
    export_mcap([hf], mc)
    report = import_mcap(mc, back, window_ns=50_000_000)
    assert not report.blocks and report.quarantined_frames == 1
    assert "/hyperframes/blocks" in report.left_out
    _same_frames(hf, back)
    with HyperframeReader(back) as r:
        (q,) = r.quarantine()
        assert q["timestamp_ns"] == fr.QUARANTINED_TS
        assert not any(f.late for s in r.streams for f in r.frames(s))


def test_round_trip_of_the_demo_profile_by_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf, mc, back = tmp_path / "d.hf", tmp_path / "d.mcap", tmp_path / "back.hf"
    write_synthetic(str(hf), profile("demo"), 1.0)
    assert main(["export", str(hf), "--mcap", str(mc), "-q"]) == 0
    assert main(["import", str(mc), str(back), "--window-ms", "100"]) == 0
    assert "-> lidar_top" in capsys.readouterr().out
    _same_frames(hf, back)
    with HyperframeReader(hf) as a, HyperframeReader(back) as b:
        assert np.array_equal(a.aux(), b.aux())  # receive times travel as publish times
        assert a.window_count() == b.window_count()
    assert main(["import", str(tmp_path / "nope.mcap"), str(back)]) == 2


def test_every_kind_of_stream_comes_back_from_its_export(tmp_path: Path) -> None:
    """Raw cameras go out as foxglove.RawImage (raw-nv12 as uyvy) and come back byte for
    byte; the IMU's NaN, infinities and -0.0 too; durations and receive times as well."""
    hf, mc, back = tmp_path / "k.hf", tmp_path / "k.mcap", tmp_path / "back.hf"
    mcap_kinds.write_every_kind(hf)
    report = export_mcap([hf], mc)
    assert {t.topic: t.schema for t in report.topics.values()}["/nv12"] == "foxglove.RawImage"
    result = import_mcap(mc, back)
    assert result.left_out == {"/hyperframes/events": {"annotation topic hyperframes.Event": 6}}
    _same_frames(hf, back)
    _same_recording(hf, back)
    with open(mc, "rb") as f:
        (raw,) = [m.data for _s, c, m in make_reader(f).iter_messages(topics=["/nv12"])][:1]
    image = msg.decode_raw_image(raw)
    assert (image.encoding, image.width, image.height, image.step) == ("uyvy", 4, 2, 8)
    with HyperframeReader(hf) as r:
        nv12 = r.frame_at(int(r.stream_slice("nv12")[0])).tobytes()
    y, u, v = nv12[:8], nv12[8::2], nv12[9::2]
    assert bytes(image.data[:4]) == bytes([u[0], y[0], v[0], y[1]])  # U Y0 V Y1
    assert bytes(image.data[8:12]) == bytes([u[0], y[4], v[0], y[5]])  # row 1: same chroma


def test_a_foreign_raw_image_topic_becomes_a_camera_stream(tmp_path: Path) -> None:
    src = tmp_path / "raw.mcap"
    m = _Mcap(src)
    m.channel("/img", "foxglove.RawImage", "protobuf", DESCRIPTORS["foxglove.RawImage"],
              "protobuf")  # fmt: skip
    m.channel("/padded", "foxglove.RawImage", "protobuf", DESCRIPTORS["foxglove.RawImage"],
              "protobuf")  # fmt: skip
    pixels = [bytes(range(i, i + 12)) for i in range(3)]
    for i, p in enumerate(pixels):
        t = T0 + (i + 1) * L
        m.add("/img", t, msg.encode_raw_image(t, "cam", 2, 2, "rgb8", 6, p))
        m.add("/padded", t, msg.encode_raw_image(t, "cam", 2, 2, "mono8", 6, p))
    m.close()
    import_mcap(src, tmp_path / "o.hf", window_ns=L)
    with HyperframeReader(tmp_path / "o.hf") as r:
        img, padded = r.stream("img"), r.stream("padded")
        assert (img.encoding, img.extra) == ("raw-rgb", {"width": 2, "height": 2})
        assert [f.tobytes() for f in r.frames("img")] == pixels
        assert padded.encoding == "bytes" and padded.extra["mcap"]["schema_name"] == (
            "foxglove.RawImage"
        )  # rows with padding: kept as whole messages, with their schema


def test_a_renamed_stream_keeps_its_flags_and_missing_notes(tmp_path: Path) -> None:
    hf, mc, back = tmp_path / "f.hf", tmp_path / "f.mcap", tmp_path / "back.hf"
    fr.write_faulty(hf)
    export_mcap([hf], mc)
    report = import_mcap(mc, back, mapping={"/imu": "imu_renamed", "/cam": "cam"})
    assert report.blocks and report.quarantined_frames == 1 and report.late_frames == 1
    assert report.left_out["/lidar"] == {"not mapped: --map without --all-topics": 18}
    with HyperframeReader(back) as r:
        imu = r.stream("imu_renamed").id
        assert imu in r.missing[fr.IMU_MISSING]
        assert [f.timestamp_ns for f in r.frames(imu) if f.late] == [fr.LATE_TS]
        assert len(r.quarantine()) == 1


def test_a_stream_with_only_quarantined_frames_in_range_comes_back_quarantined(
    tmp_path: Path,
) -> None:
    hf, mc, back = tmp_path / "f.hf", tmp_path / "f.mcap", tmp_path / "back.hf"
    fr.write_faulty(hf)
    export_mcap([hf], mc, streams=["cam"], start_ns=fr.RX_Q - 1000, end_ns=fr.RX_Q + 1000)
    report = import_mcap(mc, back)
    assert report.frames == report.quarantined_frames == 1 and report.problems == []
    with HyperframeReader(back) as r:
        assert r.frame_count == 0 and r.stream("cam").encoding == "jpeg"
        (q,) = r.quarantine()
        assert (q["timestamp_ns"], q["receive_ns"]) == (fr.QUARANTINED_TS, fr.RX_Q)
