"""The clock guard, error statistics and the sync report of files written by the real writer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameFlags, SensorKind, StreamInfo
from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader
from hyperframes.sync import (
    ClockMismatchError,
    check_clocks,
    clock_of,
    counter_gaps,
    error_stats,
    missing_windows,
    sync_report,
)
from hyperframes.writer import HyperframeWriter

T0 = 1_735_689_600_000_000_000
MS = 1_000_000
HW, HOST = int(FrameFlags.HW_TIMESTAMP), 0


def test_clock_of_and_the_guard() -> None:
    hw, host = np.full(3, HW | 1, np.uint16), np.zeros(3, np.uint16)
    assert clock_of(hw) == "hardware" and clock_of(host) == "host"
    assert clock_of(np.array([HW, 0], np.uint16)) == "mixed" and clock_of(host[:0]) == "none"
    ok = check_clocks("cam", hw, "lidar", hw, allow_mixed_clocks=False)
    assert not ok.mixed and "both hardware" in ok.describe()
    with pytest.raises(ClockMismatchError, match=r"rec.hf: stream 'gnss' is stamped by the host"):
        check_clocks("cam", hw, "gnss", host, allow_mixed_clocks=False, path="rec.hf")
    forced = check_clocks("cam", hw, "gnss", host, allow_mixed_clocks=True)
    assert (
        forced.mixed
        and forced.allowed
        and "MIXED CLOCKS, matched on explicit opt-in" in (forced.describe())
    )
    with pytest.raises(ClockMismatchError) as info:  # a stream that lost sync mid-way
        check_clocks("cam", hw, "radar", np.array([HW, 0]), allow_mixed_clocks=False)
    assert (info.value.ref_clock, info.value.other_clock) == ("hardware", "mixed")
    assert not check_clocks("a", host, "b", host, allow_mixed_clocks=False).mixed
    assert not check_clocks("a", hw, "b", host[:0], allow_mixed_clocks=False).mixed


def test_error_stats_are_nearest_rank_and_binned() -> None:
    err = np.array([-3, 1, 2, -2, 4, 100, 5, 6, 7, -8, 0], np.int64) * MS
    pad = np.zeros(len(err), bool)
    pad[5] = True  # the 100 ms outlier did not match: excluded
    s = error_stats(err, pad, edges_ns=(0, 2 * MS, 5 * MS))
    assert (s.matched, s.unmatched) == (10, 1)
    assert (s.max_ns, s.p99_ns, s.p50_ns) == (8 * MS, 8 * MS, 3 * MS)
    assert s.median_signed_ns == 1 * MS  # sorted signed: -8 -3 -2 0 1 | 2 4 5 6 7
    assert s.histogram == (2, 4, 4)  # [0,2): 1 0  [2,5): 3 2 2 4  [5,inf): 5 6 7 8
    empty = error_stats(err[:0], pad[:0])
    assert empty.max_ns is None and sum(empty.histogram) == 0
    with pytest.raises(ValueError, match="edges_ns"):
        error_stats(err, pad, edges_ns=(1, 2))


def test_counter_gaps_and_missing_windows() -> None:
    idx = np.array([0, 1, 2, 5, 6, 6, 10, 0, 1])
    ts = np.arange(len(idx)) * 10 + T0
    g = counter_gaps(idx, ts, quarantined_indices=np.array([8, 3]))
    # 2 -> 5: 3 and 4 missing, 3 was quarantined (kept): 1 dropped; 6 -> 10: 7, 9 (8 kept)
    assert [(x.after_index, x.next_index, x.dropped) for x in g.gaps] == [(2, 5, 1), (6, 10, 2)]
    assert g.dropped == 3 and g.resets == 2  # 6 -> 6 and 10 -> 0
    assert g.gaps[0].start_ns == T0 + 20 and g.gaps[0].end_ns == T0 + 30
    L = 100 * MS
    stamps = np.array([T0 + 1, T0 + L, T0 + 3 * L + 5], np.uint64)  # windows w0, w0, w0+3
    w0 = T0 // L
    assert missing_windows(np.arange(w0, w0 + 5), stamps, L).tolist() == [w0 + 1, w0 + 2, w0 + 4]


def write_recording(path: Path) -> None:
    """1 s: a 40 Hz camera (hardware), a 10 Hz lidar (hardware), a 20 Hz host-stamped GNSS.

    The camera drops counters 10..12 (frames 10-12 never arrive) and delivers nothing in
    window 5 (frames 20-23 dropped too); one camera frame is quarantined (counter 30, a 1970
    stamp) and one lidar frame arrives late.
    """
    streams = [
        StreamInfo(0, "cam", SensorKind.CAMERA, "bytes", rate_hz=40.0),
        StreamInfo(1, "lidar", SensorKind.LIDAR, "bytes", rate_hz=10.0),
        StreamInfo(2, "gnss", SensorKind.GNSS, "bytes", rate_hz=20.0, timestamp_source="host"),
    ]
    frames = []
    for i in range(40):
        if 10 <= i <= 12 or 20 <= i <= 23:
            continue
        frames.append((T0 + 3 * MS + i * 25 * MS, 0, i, HW))
    for i in range(10):
        frames.append((T0 + 10 * MS + i * 100 * MS, 1, i, HW))
    for i in range(20):
        frames.append((T0 + 40 * MS + i * 50 * MS, 2, i, HOST))
    frames.sort()
    late = next(f for f in frames if f[1] == 1 and f[2] == 4)
    frames.remove(late)
    with HyperframeWriter(path, streams, 100 * MS) as w:
        for t, sid, i, flags in frames:
            w.append(sid, t, b"x" * 10, flags=flags, stream_index=i, duration_ns=MS)
            if sid == 1 and i == 5:
                w.append(1, late[0], b"late", flags=HW, stream_index=4)
        w.append(0, 5, b"q", flags=HW | int(FrameFlags.QUARANTINED), stream_index=30)


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "rec.hf"
    write_recording(path)
    return path


def test_report_against_the_lidar(recording: Path) -> None:
    with HyperframeReader(recording) as r:
        rep = sync_report(r, "lidar")
        w0 = int(r.window_ids[0])
    assert [p.other for p in rep.pairs] == ["cam", "gnss"]
    cam, gnss = rep.pairs
    # lidar at 10 + 100k ms; camera at 3 + 25j ms: nearest is 3 ms earlier ... except
    # around the dropped frames: lidar 310 ms -> cam 303 (j=12 dropped) -> 278 or 328: 18 ms;
    # lidar 510 -> cam 503..578 dropped -> 478: 32 ms; lidar 610 -> 603 fine
    assert cam.stats is not None and cam.stats.matched == 10
    assert (cam.stats.max_ns, cam.stats.p50_ns) == (32 * MS, 7 * MS)
    assert not cam.clocks.mixed
    assert gnss.stats is None and gnss.clocks.mixed and "mixed clocks" in gnss.note
    by_name = {s.name: s for s in rep.streams}
    assert by_name["cam"].dropped == 7 and len(by_name["cam"].gaps) == 2
    assert by_name["cam"].quarantined == 1 and by_name["cam"].missing_windows == (w0 + 5,)
    assert by_name["lidar"].late == 1 and by_name["lidar"].dropped == 0
    assert by_name["lidar"].counter_resets == 0  # sorted by time: the late frame is in order
    assert by_name["gnss"].clock == "host" and by_name["gnss"].declared_clock == "host"
    assert by_name["cam"].with_duration == 33


def test_mixed_clocks_only_on_opt_in_and_flagged(recording: Path) -> None:
    with HyperframeReader(recording) as r:
        rep = sync_report(r, "lidar", allow_mixed_clocks=True, tolerance_ns=15 * MS)
    gnss = rep.pairs[1]
    assert gnss.clocks.mixed and gnss.clocks.allowed and "MIXED" in gnss.note
    # lidar 10 + 100k vs gnss 40 + 50j: 30 ms off for k=0 (tolerance 15 -> unmatched), else 20
    assert gnss.stats is not None and (gnss.stats.matched, gnss.stats.unmatched) == (0, 10)
    cam = rep.pairs[0]
    assert cam.stats is not None and cam.stats.unmatched == 2  # the 18 and 32 ms matches


def test_interval_method_uses_recorded_durations(recording: Path) -> None:
    with HyperframeReader(recording) as r:
        rep = sync_report(r, "cam", method="interval")
    lidar = rep.pairs[0]
    # 1 ms exposures never overlap 1 ms scans 7 ms away
    assert lidar.stats is not None and lidar.stats.matched == 0
    assert rep.notes == ()


def test_cli_text_and_json(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync-report", str(recording), "--ref", "lidar"]) == 0
    text = capsys.readouterr().out
    assert "MIXED" in text and "not matched" in text
    assert "gap cam: 3 frame(s) dropped between counter 9" in text
    assert (
        main(
            [
                "sync-report",
                str(recording),
                "--ref",
                "lidar",
                "--json",
                "--allow-mixed-clocks",
                "--tolerance-ms",
                "15",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"][1]["clocks"] == {
        "ref": "hardware",
        "other": "host",
        "mixed": True,
        "allowed": True,
    }
    assert doc["pairs"][0]["tolerance_ns"] == 15 * MS
    assert main(["sync-report", str(recording), "--ref", "nope"]) != 0
    assert "no stream named 'nope'" in capsys.readouterr().err
