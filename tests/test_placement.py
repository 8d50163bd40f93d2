"""Where late and quarantined frames live in a file (docs/FORMAT.md, "Late and quarantined")."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hyperframes import FileMetadata, FrameFlags, RecoveryError
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import HEADER_SIZE, Header
from hyperframes.format.windows import window_of
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter, WriteFrame

from conftest import T0, WINDOW_NS, small_streams

K = window_of(T0 + 1, WINDOW_NS)
IMU = bytes(48)
HW = int(FrameFlags.HW_TIMESTAMP)


def _ts(window: int, at: int = 5_000_000) -> int:
    return window * WINDOW_NS + at


def _write(path: Path, *, finalize: bool = True) -> None:
    w = HyperframeWriter(path, small_streams(), WINDOW_NS, FileMetadata(created_ns=T0), threads=1)
    w.write_window(K + 10, [WriteFrame(2, _ts(K + 10), IMU, HW, 0)])
    w.write_window(
        K + 11,
        [
            WriteFrame(2, _ts(K + 11), IMU, HW, 2),
            # a frame of the previous segment's last window, delivered late
            WriteFrame(2, _ts(K + 4), IMU, HW | FrameFlags.LATE, 1),
            # a sensor clock reset to 1970 and a stamp hours ahead
            WriteFrame(2, 1_000, IMU, HW | FrameFlags.QUARANTINED, 3),
            WriteFrame(2, T0 + 36_000 * 10**9, IMU, HW | FrameFlags.QUARANTINED, 4),
        ],
    )
    w.write_window(K + 12, [WriteFrame(2, _ts(K + 12), IMU, HW, 5)])
    if finalize:
        w.finalize()
    else:
        w.abort()


def test_quarantined_frames_live_outside_the_index_and_the_span(tmp_path: Path) -> None:
    _write(tmp_path / "q.hf")
    with HyperframeReader(tmp_path / "q.hf") as r:
        assert [int(t) for t in r.index["timestamp_ns"]] == [
            _ts(K + 4),
            _ts(K + 10),
            _ts(K + 11),
            _ts(K + 12),
        ]
        assert [int(i) for i in r.index["stream_index"]] == [1, 0, 2, 5]  # in order again
        q = r.quarantine()
        assert [int(t) for t in q["timestamp_ns"]] == [1_000, T0 + 36_000 * 10**9]
        assert [int(i) for i in q["stream_index"]] == [3, 4]
        f = r.quarantined_frame(1)
        assert f.quarantined and f.tobytes() == IMU and f.timestamp_ns == T0 + 36_000 * 10**9
        # the span is widened back to the late frame's window, and ignores quarantine
        assert (r.start_ns, r.end_ns) == ((K + 4) * WINDOW_NS, (K + 13) * WINDOW_NS)
        assert r.read_range("imu", 0, 2**64 - 1)[0].late
        h = r.header
        assert h.quarantine_count == 2 and h.quarantine_size == 96
    assert verify_file(tmp_path / "q.hf").ok


def test_a_file_without_quarantine_has_no_table(tmp_path: Path) -> None:
    with HyperframeWriter(tmp_path / "n.hf", small_streams(), WINDOW_NS) as w:
        w.append(2, T0 + 1, IMU)
    raw = (tmp_path / "n.hf").read_bytes()
    h = Header.decode(raw[:HEADER_SIZE])[0]
    assert (h.quarantine_offset, h.quarantine_size, h.quarantine_count, h.quarantine_crc) == (
        0,
        0,
        0,
        0,
    )
    assert raw[136:508] == bytes(372)


def test_recovery_rebuilds_the_same_quarantine_table(tmp_path: Path) -> None:
    _write(tmp_path / "a.hf")
    _write(tmp_path / "b.hf", finalize=False)
    report = recover(tmp_path / "b.hf.tmp", tmp_path / "c.hf")
    assert report.frames == 6
    assert (tmp_path / "c.hf").read_bytes() == (tmp_path / "a.hf").read_bytes()


def test_writer_refuses_a_frame_outside_its_window_unless_flagged(tmp_path: Path) -> None:
    with HyperframeWriter(tmp_path / "w.hf", small_streams(), WINDOW_NS) as w:
        with pytest.raises(ValueError, match="belongs to window"):
            w.write_window(K, [WriteFrame(2, _ts(K - 1), IMU)])
        with pytest.raises(ValueError, match="flagged LATE but belongs to window"):
            w.write_window(K + 1, [WriteFrame(2, _ts(K + 1), IMU, FrameFlags.LATE)])


def _reseal_header(raw: bytearray) -> None:
    struct.pack_into("<I", raw, 508, crc32c(bytes(raw[:508])))


def test_a_tmp_whose_stream_table_flipped_is_not_recovered(tmp_path: Path) -> None:
    """Issue 11, cause 1: a .tmp's metadata is checksummed and cross-checked."""
    _write(tmp_path / "t.hf", finalize=False)
    tmp = tmp_path / "t.hf.tmp"
    good = bytearray(tmp.read_bytes())
    h = Header.decode(bytes(good[:HEADER_SIZE]))[0]
    meta = bytes(good[h.meta_offset : h.meta_offset + h.meta_size])

    # one bit flips the window length in the JSON (100 ms -> 300 ms): the MetaCrc catches it
    flipped = meta.replace(b'"window_ns":100000000', b'"window_ns":300000000')
    assert flipped != meta and len(flipped) == len(meta)
    bad = bytearray(good)
    bad[h.meta_offset : h.meta_offset + h.meta_size] = flipped
    tmp.write_bytes(bad)
    with pytest.raises(RecoveryError, match="metadata: CRC32C mismatch"):
        recover(tmp, tmp_path / "o1.hf")

    # the same flip with every checksum resealed: the header disagrees
    struct.pack_into("<I", bad, 124, crc32c(flipped))
    _reseal_header(bad)
    tmp.write_bytes(bad)
    with pytest.raises(RecoveryError, match="disagree on window length"):
        recover(tmp, tmp_path / "o2.hf")

    # ... and with the header's window length edited to match: the blocks disagree
    struct.pack_into("<Q", bad, 52, 300_000_000)
    _reseal_header(bad)
    tmp.write_bytes(bad)
    with pytest.raises(RecoveryError, match="no complete window"):
        recover(tmp, tmp_path / "o3.hf")
    assert not (tmp_path / "o3.hf").exists()
