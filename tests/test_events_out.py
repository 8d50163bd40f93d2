"""Events out: info, the datasets' ``around=``, the timeline's marks, the MCAP export.

The recordings are written with the real writer and the recorder's event
stream (the same frames the daemon writes; the daemon itself is tested in
tests/test_events_daemon.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hyperframes.cli.main import main
from hyperframes.events import EVENT_STREAM_ID, Event, event_stream_info, read_file_events
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import StreamInfo
from hyperframes.writer import HyperframeWriter

S = 1_000_000_000
MS = 1_000_000
T0 = 1_735_689_600 * S
WINDOW = 100 * MS


def recording(path: Path, start: int, seconds: float, events: list[Event]) -> Path:
    """An IMU at 100 Hz and the event stream, one window of 100 ms at a time."""
    streams = [StreamInfo(0, "imu", "imu", "imu-f64", rate_hz=100), event_stream_info()]
    with HyperframeWriter(path, streams, WINDOW) as w:
        t = start + 1
        while t < start + seconds * S:
            w.append(0, t, np.full(6, t / S, "<f8"))
            for e in events:
                if t <= e.t_ns < t + 10 * MS:
                    w.append(EVENT_STREAM_ID, e.t_ns, e.to_json(), flags=FrameFlags.HW_TIMESTAMP)
            t += 10 * MS
    return path


@pytest.fixture
def two_segments(tmp_path: Path) -> list[Path]:
    evs = [Event(T0 + 4500 * MS, "hard_brake", 2.0, 1.0, source="rule", clock="hardware"),
           Event(T0 + 8 * S, "bookmark", 0.5, 0.5, {"note": "x"}, source="mark")]  # fmt: skip
    return [
        recording(tmp_path / "a.hf", T0, 5.0, evs),
        recording(tmp_path / "b.hf", T0 + 5 * S, 5.0, evs),
    ]


def test_the_reader_and_info_see_the_event_stream(
    two_segments: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (e,) = read_file_events(two_segments[0])
    assert (e.name, e.t_ns, e.pre_s) == ("hard_brake", T0 + 4500 * MS, 2.0)
    assert main(["info", "--json", str(two_segments[0])]) == 0
    doc = json.loads(capsys.readouterr().out)
    ev = next(s for s in doc["streams"] if s["name"] == "events")
    assert (ev["id"], ev["kind"], ev["encoding"], ev["frames"]) == (65535, "event", "json", 1)
    assert main(["events", str(two_segments[1].parent)]) == 0  # no log: the files' streams
    out = capsys.readouterr().out
    assert "hard_brake" in out and "bookmark" in out and "note=x" in out


def test_dataset_windows_around_an_event_across_files(two_segments: list[Path]) -> None:
    pytest.importorskip("torch")
    from hyperframes.torch import HyperframeDataset

    full = HyperframeDataset(two_segments, streams=["imu"])
    ds = HyperframeDataset(two_segments, streams=["imu"], around="hard_brake")
    # its own window: [2.5 s, 5.5 s], across the two files
    assert len(full) == 100 and len(ds) == 30
    starts = [ds[i]["start_ns"] - T0 for i in range(len(ds))]
    assert starts[0] == 2500 * MS and starts[-1] == 5400 * MS
    assert {ds.locate(i)[0] for i in range(len(ds))} == {str(p) for p in two_segments}
    narrow = HyperframeDataset(two_segments, streams=["imu"], around="bookmark", pre_s=0.2,
                               post_s=0.05)  # fmt: skip
    assert [narrow[i]["start_ns"] - T0 for i in range(len(narrow))] == [7800 * MS, 7900 * MS,
                                                                        8000 * MS]  # fmt: skip
    with pytest.raises(ValueError, match=r"no event named 'nope'.*bookmark, hard_brake"):
        HyperframeDataset(two_segments, around="nope")
    with pytest.raises(ValueError, match="pre_s and post_s go with around="):
        HyperframeDataset(two_segments, pre_s=1)
    with pytest.raises(ValueError, match="post_s must be >= 0"):
        HyperframeDataset(two_segments, around="bookmark", post_s=-1)


def test_timeline_marks_events(two_segments: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from hyperframes.viz.plot import plot_files

    res = plot_files(two_segments, tmp_path / "t.png")
    marks = [(m.name, m.t_ns - T0, m.start_ns - T0, m.end_ns - T0) for m in res.timeline.marks]
    assert marks == [("hard_brake", 4500 * MS, 2500 * MS, 5500 * MS),
                     ("bookmark", 8 * S, 7500 * MS, 8500 * MS)]  # fmt: skip
    assert (tmp_path / "t.png").stat().st_size > 10_000
    part = plot_files(two_segments[:1], tmp_path / "a.png")  # only the events in view
    assert [m.name for m in part.timeline.marks] == ["hard_brake"]


def test_mcap_export_has_an_events_topic(two_segments: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("mcap")
    from mcap.reader import make_reader

    from hyperframes.mcap import export_mcap

    export_mcap(two_segments, tmp_path / "out.mcap")
    with (tmp_path / "out.mcap").open("rb") as f:
        got = [(ch.topic, ch.message_encoding, json.loads(m.data), m.log_time)
               for _, ch, m in make_reader(f).iter_messages(topics=["/events"])]  # fmt: skip
    assert [(t, enc, d["name"], lt - T0) for t, enc, d, lt in got] == [
        ("/events", "json", "hard_brake", 4500 * MS),
        ("/events", "json", "bookmark", 8 * S),
    ]
    assert Event.from_dict(got[1][2]).tags == {"note": "x"}
