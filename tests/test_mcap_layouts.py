"""Import of every file layout the MCAP spec allows, as the Python ``mcap`` writer makes them.

Chunked or not, each chunk compression, channels and schemas repeated in the summary or
not, statistics or not, summary offsets or not, indexes or not: a file with several
topics and schemas imports every message, and what an import leaves out is reported by
topic with the reason.
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader
from mcap.writer import CompressionType, IndexType, Writer

from hyperframes.mcap import import_mcap
from hyperframes.mcap import messages as msg
from hyperframes.mcap._foxglove_schemas import DESCRIPTORS
from hyperframes.mcap.schemas import IMU_SCHEMA
from hyperframes.reader import HyperframeReader

L = 50_000_000
T0 = 1_735_689_600_000_000_000
N = 12  # messages per topic
IMU_ENCODING = "protobuf" if IMU_SCHEMA.encoding == "protobuf" else "json"


def _write(path: Path, **options: Any) -> dict[str, list[tuple[int, bytes]]]:
    """Four topics, three schemas (one foreign), one schemaless, a topic on two channels and
    a channel without messages; returns topic -> (frame time, payload) expected."""
    w = Writer(str(path), chunk_size=2048, **options)
    w.start(profile="", library="test")
    img = w.register_schema("foxglove.CompressedImage", "protobuf",
                            DESCRIPTORS["foxglove.CompressedImage"])  # fmt: skip
    imu = w.register_schema(IMU_SCHEMA.name, IMU_SCHEMA.encoding, IMU_SCHEMA.data)
    gps = w.register_schema("sensor_msgs/msg/NavSatFix", "ros2msg", b"float64 latitude\n")
    ch = {
        "/cam": w.register_channel("/cam", "protobuf", img),
        "/cam#2": w.register_channel("/cam", "protobuf", img),  # a second channel, same topic
        "/imu": w.register_channel("/imu", IMU_ENCODING, imu),
        "/gps": w.register_channel("/gps", "cdr", gps),
        "/notes": w.register_channel("/notes", "json", 0),
    }
    w.register_channel("/silent", "json", 0)  # never has a message
    expect: dict[str, list[tuple[int, bytes]]] = {"cam": [], "imu": [], "gps": [], "notes": []}
    for i in range(N):
        t = T0 + (i + 1) * L // 2
        jpeg = b"\xff\xd8" + bytes([i]) * (50 + 20 * i) + b"\xff\xd9"
        w.add_message(ch["/cam#2" if i % 3 == 2 else "/cam"], t + 7,
                      msg.encode_compressed_image(t, "cam", jpeg, "jpeg"), t + 7, i)  # fmt: skip
        expect["cam"].append((t, jpeg))
        values = [float(i), -1.5, 9.81, 0.0, 0.25, -0.0]
        w.add_message(ch["/imu"], t + 1, msg.encode_imu(t, "imu", values), t + 1, i)
        expect["imu"].append((t, struct.pack("<6d", *values)))
        cdr = struct.pack("<4xd", 48.1 + i)
        w.add_message(ch["/gps"], t + 3, cdr, t + 3, i)
        expect["gps"].append((t + 3, cdr))  # no header stamp: the log time
        note = b'{"i": %d}' % i
        w.add_message(ch["/notes"], t + 5, note, t + 5)
        expect["notes"].append((t + 5, note))
    w.finish()  # type: ignore[no-untyped-call]
    return expect


def _check(src: Path, out: Path, expect: dict[str, list[tuple[int, bytes]]]) -> None:
    report = import_mcap(src, out, window_ns=L)
    assert report.left_out == {} and report.problems == [], report.summary()
    assert report.frames == 4 * N
    with HyperframeReader(out) as r:
        assert {s.name for s in r.streams.values()} == set(expect)
        for name, frames in expect.items():
            assert [(f.timestamp_ns, f.tobytes()) for f in r.frames(name)] == frames, name


STORAGE = [(True, c) for c in ("zstd", "lz4", "none")] + [(False, "none")]
FLAGS = list(itertools.product([True, False], repeat=4))


@pytest.mark.parametrize(("chunked", "compression"), STORAGE, ids=str)
@pytest.mark.parametrize(
    ("repeat_channels", "repeat_schemas", "statistics", "summary_offsets"),
    FLAGS,
    ids=["".join("RSTO"[i] if f else "-" for i, f in enumerate(fl)) for fl in FLAGS],
)
def test_every_layout_imports_every_message(
    tmp_path: Path, chunked: bool, compression: str, repeat_channels: bool,
    repeat_schemas: bool, statistics: bool, summary_offsets: bool,
) -> None:  # fmt: skip
    src = tmp_path / "in.mcap"
    expect = _write(
        src,
        use_chunking=chunked,
        compression=CompressionType[compression.upper()],
        repeat_channels=repeat_channels,
        repeat_schemas=repeat_schemas,
        use_statistics=statistics,
        use_summary_offsets=summary_offsets,
    )
    _check(src, tmp_path / "out.hf", expect)


@pytest.mark.parametrize("index_types", [IndexType.NONE, IndexType.CHUNK, IndexType.MESSAGE])
def test_files_without_some_indexes_import_every_message(
    tmp_path: Path, index_types: IndexType
) -> None:
    src = tmp_path / "in.mcap"
    expect = _write(src, index_types=index_types, repeat_channels=False, repeat_schemas=False)
    _check(src, tmp_path / "out.hf", expect)


def test_what_is_left_out_is_reported_by_topic_with_the_reason(tmp_path: Path) -> None:
    src = tmp_path / "in.mcap"
    _write(src, repeat_channels=False)
    report = import_mcap(src, tmp_path / "a.hf", window_ns=L, mapping={"/imu": "imu"})
    assert report.left_out == {
        t: {"not mapped: --map without --all-topics": N} for t in ("/cam", "/gps", "/notes")
    }
    assert "left out: /cam: 12 messages (not mapped" in report.summary()
    # a second channel of a topic with another schema is reported, not dropped silently
    w = Writer(str(tmp_path / "two.mcap"))
    w.start()
    a = w.register_channel("/x", "json", 0)
    b = w.register_channel("/x", "cdr", w.register_schema("other", "ros2msg", b"int8 a\n"))
    for i in range(4):
        w.add_message(a, T0 + i * L, b'{"a": 1}', T0 + i * L)
        w.add_message(b, T0 + i * L + 1, b"\x00\x01\x00\x00\x07", T0 + i * L + 1)
    w.finish()  # type: ignore[no-untyped-call]
    report = import_mcap(tmp_path / "two.mcap", tmp_path / "b.hf", window_ns=L)
    assert report.frames == 4
    assert report.left_out == {"/x": {"channel 2 has another schema or encoding than channel 1": 4}}


def test_statistics_that_disagree_with_the_data_are_reported(tmp_path: Path) -> None:
    """A file whose statistics count more messages than it holds: the import says so."""
    src = tmp_path / "lie.mcap"
    w = Writer(str(src))
    w.start()
    c = w.register_channel("/notes", "json", 0)
    for i in range(5):
        w.add_message(c, T0 + i * L, b"{}", T0 + i * L)
    w._Writer__statistics.channel_message_counts[c] += 3  # type: ignore[attr-defined]
    w.finish()  # type: ignore[no-untyped-call]
    with open(src, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics is not None
    assert summary.statistics.channel_message_counts[c] == 8
    report = import_mcap(src, tmp_path / "o.hf", window_ns=L)
    assert report.frames == 5
    assert report.problems == ["/notes (channel 1): the statistics count 8 messages, 5 were read"]
    assert "warning: /notes (channel 1)" in report.summary()
