"""The timeline plot: its data (lanes, highlighted spans, counts) and the PNG drawn from it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hyperframes.cli.main import main
from hyperframes.format.times import parse_time
from hyperframes.reader import HyperframeReader
from hyperframes.viz import events as ev
from hyperframes.viz.errors import EmptyRangeError, IncompatibleFilesError
from hyperframes.viz.facts import RecordingFacts, facts_from_reader, merge_facts
from hyperframes.viz.timeline import build_timeline
from hyperframes.writer import HyperframeWriter

import faulty_recording as fr
from conftest import WINDOW_NS, small_streams

L = WINDOW_NS


def _span(w0: int, w1: int) -> ev.Span:
    """Windows w0..w1 inclusive."""
    return ev.Span(w0 * L, (w1 + 1) * L)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RecordingFacts]:
    path = tmp_path_factory.mktemp("faulty") / "faulty.hf"
    fr.write_faulty(path)
    with HyperframeReader(path) as r:
        return path, facts_from_reader(r)


def test_lanes_and_highlighted_spans(faulty: tuple[Path, RecordingFacts]) -> None:
    _path, facts = faulty
    tl = build_timeline(facts)
    assert [lane.name for lane in tl.lanes] == ["cam", "lidar", "imu"]
    cam, lidar, imu = tl.lanes
    assert (cam.frames, lidar.frames, imu.frames) == (42, 18, 360)
    assert cam.mode == lidar.mode == imu.mode == "ticks"
    # the camera's dropout: one stale period over its silent windows, and gaps around it
    assert cam.stale == (_span(fr.CAM_SILENT[0], fr.CAM_SILENT[-1]),)
    assert cam.missing == (_span(fr.CAM_SILENT[0], fr.CAM_SILENT[-1]),)
    assert any(g.start_ns < fr.CAM_SILENT[0] * L and g.end_ns > (fr.CAM_SILENT[-1] + 1) * L
               for g in cam.gaps)  # fmt: skip
    # one missing IMU window: highlighted, but not stale
    assert imu.missing == (_span(fr.IMU_MISSING, fr.IMU_MISSING),) and imu.stale == ()
    # the lidar's missing sweep: a missing window and a drop, not a gap (2 periods)
    assert lidar.missing == (_span(fr.LIDAR_MISSING, fr.LIDAR_MISSING),)
    assert [(d.count, d.timestamp_ns // L) for d in lidar.dropped] == [
        (1, fr.LIDAR_MISSING + 1),
        (1, fr.ABSENT + 1),
    ]
    assert not any(g.start_ns // L == fr.LIDAR_MISSING - 1 for g in lidar.gaps)
    # late and quarantined frames
    assert imu.late.tolist() == [fr.LATE_TS] and cam.late.size == 0
    assert cam.quarantined.tolist() == [fr.RX_Q] and cam.quarantined_unplaced == 0
    # the window without a block
    assert tl.absent == (_span(fr.ABSENT, fr.ABSENT),)
    assert tl.boundaries is not None and len(tl.boundaries) == 21


def test_frames_per_window_panel(faulty: tuple[Path, RecordingFacts]) -> None:
    tl = build_timeline(faulty[1])
    assert tl.window_ids.tolist() == list(range(fr.K, fr.K + 20))
    counts = {lane.name: tl.counts[:, i] for i, lane in enumerate(tl.lanes)}
    k = np.arange(fr.K, fr.K + 20)
    assert counts["cam"].tolist() == [0 if (w in fr.CAM_SILENT or w == fr.ABSENT) else 3 for w in k]
    assert counts["lidar"][k == fr.LIDAR_MISSING].tolist() == [0]
    # the late sample counts in its own window (K+3), not in the block that carried it
    assert counts["imu"][k == fr.K + 3].tolist() == [20]
    assert counts["imu"][k == fr.IMU_MISSING].tolist() == [0]
    assert tl.expected.tolist() == pytest.approx([3.0, 1.0, 20.0], rel=1e-5)


def test_zoomed_out_lanes_become_density_bands(faulty: tuple[Path, RecordingFacts]) -> None:
    tl = build_timeline(faulty[1], max_ticks=30)
    cam, lidar, imu = tl.lanes
    assert lidar.mode == "ticks" and cam.mode == imu.mode == "density"
    assert imu.density is not None and int(imu.density.counts.sum()) == 360
    rel = imu.density.relative
    silent = (imu.density.edges_ns[:-1] >= fr.IMU_MISSING * L) & (
        imu.density.edges_ns[1:] <= (fr.IMU_MISSING + 1) * L
    )
    assert silent.any() and np.all(rel[silent] == 0)
    assert np.nanmedian(rel) == pytest.approx(1.0, abs=0.35)


def test_time_and_stream_selection(faulty: tuple[Path, RecordingFacts]) -> None:
    facts = faulty[1]
    tl = build_timeline(facts, streams=["imu"], start_ns=(fr.K + 10) * L, end_ns=(fr.K + 15) * L)
    (imu,) = tl.lanes
    assert imu.frames == 80 and imu.late.size == 0
    assert tl.window_ids.tolist() == list(range(fr.K + 10, fr.K + 15))
    with pytest.raises(EmptyRangeError, match=r"faulty\.hf: no frame of cam"):
        build_timeline(facts, streams=["cam"], start_ns=(fr.K + 6) * L, end_ns=(fr.K + 8) * L)
    with pytest.raises(EmptyRangeError, match="empty time range"):
        build_timeline(facts, start_ns=fr.K * L + 5, end_ns=fr.K * L)
    with pytest.raises(KeyError, match="radar"):
        build_timeline(facts, streams=["radar"])


def test_events_of_a_recording(faulty: tuple[Path, RecordingFacts]) -> None:
    kinds: dict[str, int] = {}
    drops: dict[str, list[int]] = {}
    for e in ev.recording_events(faulty[1]):
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
        if e.kind == "dropped":
            drops.setdefault(e.stream, []).append(e.count)
    assert kinds["window"] == 19 and kinds["stale"] == 1 and kinds["late"] == 1
    assert kinds["quarantined"] == 1
    # the silent camera windows (15 frames) and the absent window (3) are counted drops too
    assert drops == {"cam": [15, 3], "lidar": [1, 1], "imu": [20, 20]}


def test_plot_png_for_a_recording_with_trouble(
    faulty: tuple[Path, RecordingFacts], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    from hyperframes.viz.plot import draw_timeline, plot_files

    out = tmp_path / "timeline.png"
    result = plot_files([faulty[0]], out, sync_ref="imu")
    assert result.timeline.lanes[0].stale and result.timeline.absent
    with Image.open(out) as img:
        assert img.format == "PNG" and img.width >= 1200 and img.height >= 500
    # the figure shows one labelled lane per stream and the sync histograms
    fig = draw_timeline(result.timeline)
    lanes_ax, _counts_ax, *sync_axes = fig.axes[:2] + [a for a in fig.axes[2:] if a.get_title()]
    labels = [t.get_text() for t in lanes_ax.get_yticklabels()]
    assert labels == ["imu\n360 frames", "lidar\n18 frames", "cam\n42 frames"]
    assert [p.other for p in result.timeline.sync] == ["cam", "lidar"]
    assert all(p.matched > 0 and p.max_ns is not None for p in result.timeline.sync)
    assert len(sync_axes) == 2
    # an existing output is not replaced without --force, and nothing is left behind
    with pytest.raises(FileExistsError):
        plot_files([faulty[0]], out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timeline.png"]


def test_plot_command_line(faulty: tuple[Path, RecordingFacts], tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    pytest.importorskip("matplotlib")
    out = tmp_path / "t.png"
    assert main(["plot", str(faulty[0]), "-o", str(out), "--from", "0.5", "--to", "1.2"]) == 0
    assert "3 streams" in capsys.readouterr().out and out.exists()
    assert main(["plot", str(faulty[0]), "-o", str(tmp_path / "e.png"), "--from", "9"]) == 2
    assert "--from 9: after the end of the recording, which lasts 2 s" in capsys.readouterr().err
    assert not (tmp_path / "e.png").exists()


def test_consecutive_files_merge_into_one_timeline(tmp_path: Path) -> None:
    parts = []
    for k, start in enumerate((fr.K, fr.K + 5)):
        path = tmp_path / f"s{k}.hf"
        with HyperframeWriter(path, small_streams(), L) as w:
            for win in range(start, start + 5):
                w.append(2, win * L + 7, bytes(48))
        with HyperframeReader(path) as r:
            parts.append(facts_from_reader(r))
    merged = merge_facts(parts[::-1])
    assert merged.start_ns == fr.K * L and merged.end_ns == (fr.K + 10) * L
    assert merged.stream("imu").timestamps.tolist() == [w * L + 7 for w in range(fr.K, fr.K + 10)]
    other = tmp_path / "other.hf"
    with HyperframeWriter(other, small_streams(), 2 * L) as w:
        w.append(2, fr.K * L + 7, bytes(48))
    with HyperframeReader(other) as r, pytest.raises(IncompatibleFilesError, match="window"):
        merge_facts([parts[0], facts_from_reader(r)])


def test_parse_time() -> None:
    origin = 1_735_689_600_000_000_000
    assert parse_time("2.5", origin) == origin + 2_500_000_000
    assert parse_time("+0.000000001s", origin) == origin + 1
    assert parse_time("1735689600123456789", origin) == 1_735_689_600_123_456_789
    assert parse_time("2025-01-01T00:00:02.5Z", 0) == origin + 2_500_000_000
    assert parse_time("2025-01-01T01:00:00+01:00", 0) == origin
    assert parse_time("1735689602.5", 0) == origin + 2_500_000_000  # Unix seconds
    assert parse_time("1735689600", 5) == origin
    with pytest.raises(ValueError, match="seconds from the start"):
        parse_time("yesterday", origin)


def test_without_matplotlib_the_command_names_the_extra(
    faulty: tuple[Path, RecordingFacts],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert main(["plot", str(faulty[0]), "-o", str(tmp_path / "t.png")]) == 2
    assert "pip install 'hyperframes-sensors[viz]'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
