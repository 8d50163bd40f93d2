"""Golden files pin the bytes of format version 1 (see tests/golden_files.py)."""

from __future__ import annotations

import struct
from pathlib import Path

from hyperframes.format.codecs import codec_of
from hyperframes.format.layout import HEADER_SIZE, Header
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover

import golden_files as g


def test_writer_reproduces_the_golden_bytes(tmp_path: Path) -> None:
    g.write(tmp_path / "tiny-v1.hf")
    assert (tmp_path / "tiny-v1.hf").read_bytes() == (g.GOLDEN / "tiny-v1.hf").read_bytes()


def test_golden_header_fields() -> None:
    raw = (g.GOLDEN / "tiny-v1.hf").read_bytes()
    assert raw[:4] == b"HFRM"
    assert struct.unpack_from("<HHI", raw, 4) == (1, 512, 0x80000701)  # LE, lz4, zstd, shuffle
    h = Header.decode(raw[:HEADER_SIZE])[0]
    assert (h.start_ns, h.end_ns) == (g.T0, g.T0 + 6 * g.WINDOW_NS)
    assert (h.frame_count, h.stream_count, h.window_count) == (40, 3, 6)
    assert (h.index_offset, h.index_size) == (6400, 1280)
    assert h.data_offset == 1280 and h.window_ns == g.WINDOW_NS
    assert raw[136:508] == bytes(372)  # reserved bytes are zero


def test_golden_file_reads_back() -> None:
    want = {(sid, t): (payload, flags) for sid, t, payload, flags in g.frames()}
    with HyperframeReader(g.GOLDEN / "tiny-v1.hf") as r:
        assert r.metadata == g.META
        assert [s.name for s in r.streams.values()] == ["cam", "imu", "can"]
        got = {}
        for sid in r.streams:
            for f in r.frames(sid):
                got[(sid, f.timestamp_ns)] = (f.tobytes(), f.flags & 0x0F)
        assert got == want
        codecs = {int(e["stream_id"]): codec_of(int(e["flags"])) for e in r.index}
        assert codecs == {3: 0, 7: 2, 9: 1}
        assert [len(r.get_window(i)[7]) for i in range(6)] == [5, 5, 5, 5, 5, 5]
        assert [f.keyframe for f in r.read_range("cam", 0, 2**63)] == [1, 0, 0, 1, 0, 0]


def test_golden_crash_recovers_to_the_golden_file(tmp_path: Path) -> None:
    report = recover(g.GOLDEN / "tiny-v1-crashed.hf.tmp", tmp_path / "r.hf")
    assert (report.windows, report.frames, report.lost_bytes) == (6, 40, 0)
    assert (tmp_path / "r.hf").read_bytes() == (g.GOLDEN / "tiny-v1.hf").read_bytes()
