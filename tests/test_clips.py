"""Event clips (``events.clips``): which are due, their names, the budget, and real cuts.

The pure decisions (:mod:`hyperframes.recorder.events.clips`) are played on
made-up spans; the cuts (:mod:`hyperframes.recorder.upload.clipper`) on
segments the real recorder wrote, compared frame by frame with the sources;
the end-to-end test runs the recorder, ``hyperframes sim`` and ``hyperframes
mark`` twice, then cuts.
"""

from __future__ import annotations

import asyncio
import resource
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperframes.errors import ConfigError
from hyperframes.events import Event, SegmentSpan, read_event_log, read_file_events
from hyperframes.reader import HyperframeReader
from hyperframes.recorder.config import VehicleConfig, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.events.clips import (
    clip_name,
    due_clips,
    parse_clip_name,
    plan_budget,
    safe_event_name,
)
from hyperframes.recorder.events.config import ClipsConfig
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recorder.sim import simulate
from hyperframes.recorder.upload.clipper import clips_dir, cut_due_clips, list_clips
from hyperframes.verify import verify_file

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import MS, T0, config_dict, free_port, run, traffic, wait_for
from test_events_daemon import cli, endpoint, publish

S = 1_000_000_000
ON = ClipsConfig(enabled=True)


def ev(t_ns: int, name: str = "hard_brake", pre: float = 1.0, post: float = 1.0,
       **kw: Any) -> Event:  # fmt: skip
    return Event(t_ns, name, pre, post, **kw)


def span(name: str, start_s: float, end_s: float) -> SegmentSpan:
    return SegmentSpan(name, T0 + round(start_s * S), T0 + round(end_s * S))


# --- pure: names, due, budget ---------------------------------------------------


def test_clip_names_are_utc_milliseconds_and_safe() -> None:
    e = ev(T0 + 1_234_567_891, "lane:change")
    name = clip_name("car_7", e)
    assert name == "car_7_20250101T000001.234Z_lane-change.hf"
    assert parse_clip_name(name) == ("car_7", "20250101T000001.234", "lane-change")
    assert parse_clip_name("car_7_20250101T000001Z_000003.hf") is None  # a segment
    assert parse_clip_name(name + ".tmp") is None
    # the disk policy deletes what list_segments names: never a clip, wherever it lies
    assert parse_segment_name(name) is None
    assert parse_segment_name(clip_name("car_7", ev(T0, "123456"))) is None
    assert safe_event_name("a/b..") == "a-b" and safe_event_name("...") == "event"


def test_an_event_is_due_once_finalized_segments_pass_its_post_window() -> None:
    e = ev(T0 + 5 * S, pre=2.0, post=1.5)  # keeps [3 s, 6.5 s]
    segs = [span("a", 0, 4), span("b", 4, 6)]
    got = due_clips([e], segs, set(), vehicle="car", clips=ON, now_ns=T0 + 100 * S)
    assert (got.due, got.waiting) == ((), 1)  # the newest finalized ends at 6 s < 6.5 s
    segs.append(span("c", 6, 8))
    early = due_clips([e], segs, set(), vehicle="car", clips=ON, now_ns=T0 + 6 * S)
    assert early.waiting == 1  # the post window has not closed on the host clock
    (plan,) = due_clips([e], segs, set(), vehicle="car", clips=ON, now_ns=T0 + 7 * S).due
    assert (plan.start_ns, plan.end_ns) == (T0 + 3 * S, T0 + 6_500_000_000)
    assert plan.segments == ("a", "b", "c") and plan.streams is None
    assert plan.name == "car_20250101T000005.000Z_hard_brake.hf"


def test_a_stopped_recorder_clips_what_exists_after_the_grace() -> None:
    e = ev(T0 + 5 * S, pre=2.0, post=10.0)  # the recorder stopped at 6 s
    segs = [span("a", 0, 6)]
    kw: dict[str, Any] = {"vehicle": "car", "clips": ON, "grace_ns": 30 * S}
    assert due_clips([e], segs, set(), now_ns=T0 + 20 * S, recording=False, **kw).waiting == 1
    assert due_clips([e], segs, set(), now_ns=T0 + 60 * S, recording=True, **kw).waiting == 1
    (plan,) = due_clips([e], segs, set(), now_ns=T0 + 60 * S, recording=False, **kw).due
    assert (plan.start_ns, plan.end_ns) == (T0 + 3 * S, T0 + 6 * S)  # clipped to what exists


def test_evicted_done_quarantined_filtered_and_duplicate_events() -> None:
    clips = ClipsConfig(enabled=True, names=frozenset({"hard_brake", "x"}),
                        streams={"hard_brake": ("cam", "imu")})  # fmt: skip
    events = [
        ev(T0 + 1 * S, pre=0.5, post=0.5),  # its segment is gone
        ev(T0 + 5 * S),
        ev(T0 + 5 * S, tags={"again": "1"}),  # the same name, the same ms: one clip
        ev(T0 + 6 * S, "x"),
        ev(T0 + 7 * S, "x", quarantined=True),
        ev(T0 + 6 * S, "not_wanted"),
    ]
    segs = [span("b", 3, 10), span("c", 10, 20)]
    made = {clip_name("car", events[3])}
    got = due_clips(events, segs, made, vehicle="car", clips=clips, now_ns=T0 + 100 * S)
    assert [p.name for p in got.due] == [clip_name("car", events[1])]
    assert got.due[0].streams == ("cam", "imu") and got.due[0].event.tags == {}
    assert (got.evicted, got.done, got.quarantined, got.waiting) == (1, 2, 1, 0)
    off = due_clips(events, segs, set(), vehicle="car", clips=ClipsConfig(), now_ns=T0 + 100 * S)
    assert off.due == () and off.evicted == 0


def test_the_budget_deletes_only_uploaded_clips_oldest_first() -> None:
    clips = [("a", 40), ("b", 30), ("c", 20)]  # oldest first; 90 in all
    assert plan_budget(clips, set(), 10, 100).fits
    assert plan_budget(clips, set(), 11, 100).fits is False  # nothing uploaded: skip
    assert plan_budget(clips, {"b", "c"}, 35, 100).delete == ("b",)
    assert plan_budget(clips, {"a", "b", "c"}, 35, 100).delete == ("a",)
    # deleting every uploaded clip would not make room: nothing is deleted at all
    no = plan_budget(clips, {"c"}, 40, 100)
    assert (no.fits, no.delete) == (False, ())


def test_clips_config_is_checked_by_key() -> None:
    def parse(clips: object) -> ClipsConfig:
        d = config_dict(Path("/tmp/x"), 5555, events={"clips": clips})
        return parse_config(d).events.clips

    assert parse(True) == ClipsConfig(enabled=True) and parse(False).enabled is False
    c = parse({"max_mb": 10, "dir": "/data/clips", "names": ["hard_brake"],
               "streams": {"hard_brake": ["imu", "cam", "imu"]}})  # fmt: skip
    assert c.enabled and c.max_bytes == 10 << 20 and c.dir == Path("/data/clips")
    assert c.streams_for("hard_brake") == ("imu", "cam") and c.wants("hard_brake")
    assert not c.wants("bookmark") and c.streams_for("bookmark") is None
    for bad, msg in [
        ("yes", "events.clips: must be true, false or a mapping, got a string"),
        ({"max_mbb": 1}, "events.clips.max_mbb: unknown key; did you mean 'max_mb'?"),
        ({"max_mb": 0}, "events.clips.max_mb: must be > 0"),
        ({"streams": {"hard_brake": ["imu", "lidr"]}},
         "events.clips.streams.hard_brake[1]: no stream named 'lidr'; did you mean 'lidar'?"),
        ({"streams": {"hard_brake": []}}, "events.clips.streams.hard_brake: empty"),
        ({"names": ["a"], "streams": {"b": ["imu"]}}, "events.clips.streams.b: 'b' is not in"),
        ({"names": ["bad name"]}, "events.clips.names[0]: event name 'bad name' must be"),
        ({"names": []}, "events.clips.names: empty"),
        ({"dir": "."}, "events.clips.dir: '.': clips need a directory of their own"),
        ({"dir": "../up"}, "events.clips.dir: '../up'"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError) as info:
            parse(bad)
        assert msg in str(info.value), (bad, str(info.value))


# --- real segments from the real recorder ----------------------------------------

HB = T0 + 1500 * MS  # hard_brake keeps [1.3 s, 1.8 s]: one segment
BM = T0 + 1900 * MS  # bookmark keeps [1.6 s, 2.3 s]: two segments (1 s each)
PH = T0 + 500 * MS  # pothole keeps [0.4 s, 0.6 s]: the first segment


def clip_config(out: Path, **clips: Any) -> VehicleConfig:
    events = {"names": {"hard_brake": {"pre_s": 0.2, "post_s": 0.3}},
              "clips": {"streams": {"hard_brake": ["imu", "cam"]}, **clips}}  # fmt: skip
    return parse_config(config_dict(out, free_port(), segment_seconds=1, events=events))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seconds of cam, lidar and IMU in 1 s segments, with three events."""
    tmp = tmp_path_factory.mktemp("clips")
    d = config_dict(tmp / "out", free_port(), segment_seconds=1,
                    events={"control_socket": str(tmp / "control.sock")})  # fmt: skip
    cfg = parse_config(d)
    frames = traffic(3.0, ("imu", "lidar", "cam"))
    events = [
        (PH, "pothole", {"pre_s": 0.1, "post_s": 0.1}),
        (HB, "hard_brake", {"pre_s": 0.2, "post_s": 0.3, "tags": {"by": "test"},
                            "payload": {"ax": -7.5}}),
        (BM, "bookmark", {"pre_s": 0.3, "post_s": 0.4, "note": "look"}),
    ]  # fmt: skip

    async def main() -> None:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total == 3)

    run(main())
    assert len(list_segments(tmp / "out", "testcar")) >= 3
    return tmp / "out"


@pytest.fixture
def out(recording: Path, tmp_path: Path) -> Path:
    """A copy of the recording this test may change."""
    return Path(shutil.copytree(recording, tmp_path / "out"))


def source_frames(out: Path, stream: str, lo: int, hi: int) -> list[tuple[int, bytes]]:
    got = []
    for seg in list_segments(out, "testcar"):
        with HyperframeReader(seg) as r:
            if stream in {s.name for s in r.streams.values()}:
                got += [(f.timestamp_ns, f.tobytes()) for f in r.read_range(stream, lo, hi)]
    return got


def listed(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def clip_frames(clip: Path, stream: str) -> list[tuple[int, bytes]]:
    with HyperframeReader(clip) as r:
        return [(f.timestamp_ns, f.tobytes()) for f in r.frames(stream)]


def test_clips_hold_exactly_their_window_and_streams(out: Path) -> None:
    cfg = clip_config(out)
    report = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    assert (report.made, report.failed, report.skipped, report.evicted) == (3, 0, 0, 0)
    names = [p.name for p in list_clips(cfg)]
    assert names == [
        "testcar_20250101T000000.500Z_pothole.hf",
        "testcar_20250101T000001.500Z_hard_brake.hf",
        "testcar_20250101T000001.900Z_bookmark.hf",
    ]
    assert list_clips(cfg) == sorted(report.paths) and report.bytes == sum(
        p.stat().st_size for p in report.paths
    )
    assert listed(clips_dir(cfg)) == sorted(names)  # nothing else left there
    log = {e.name: e for e in read_event_log(out).events}
    for path, want in [(names[1], ("imu", "cam")), (names[2], ("imu", "lidar", "cam"))]:
        clip = clips_dir(cfg) / path
        assert verify_file(clip).ok
        e = log[parse_clip_name(path)[2]]  # type: ignore[index]
        with HyperframeReader(clip) as r:
            assert {s.name for s in r.streams.values()} == {*want, "events"}
            extra = r.metadata.extra
        assert extra["event"] == e.to_dict()
        assert (extra["clip"]["start_ns"], extra["clip"]["end_ns"]) == (e.start_ns, e.end_ns)
        for stream in want:
            expect = source_frames(out, stream, e.start_ns, e.end_ns)
            assert expect and clip_frames(clip, stream) == expect, stream
        assert [x.name for x in read_file_events(clip)] == [e.name]
        if e.name == "bookmark":  # [1.6 s, 2.3 s] crosses the 2 s boundary: one clip, two sources
            assert len(extra["clip"]["segments"]) == 2
    hb = HyperframeReader(clips_dir(cfg) / names[1])
    with hb:
        assert hb.metadata.extra["event"]["tags"] == {"by": "test"}
        assert hb.metadata.extra["event"]["payload"] == {"ax": -7.5}
    again = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    assert (again.made, again.done) == (0, 3)  # never cut twice


def test_an_evicted_event_gets_no_clip_and_uploaded_ones_are_not_cut_again(out: Path) -> None:
    cfg = clip_config(out)
    first = list_segments(out, "testcar")[0]
    first.unlink()  # what the disk policy does; the event log still knows the event
    uploaded = {"testcar_20250101T000001.500Z_hard_brake.hf"}
    report = cut_due_clips(cfg, uploaded, now_ns=T0 + 100 * S)
    assert (report.made, report.evicted, report.done) == (1, 1, 1)
    assert [p.name for p in report.paths] == ["testcar_20250101T000001.900Z_bookmark.hf"]


def test_clips_wait_for_their_post_window(out: Path) -> None:
    cfg = clip_config(out)
    report = cut_due_clips(cfg, set(), now_ns=T0 + 1700 * MS)  # only pothole's has closed
    assert (report.made, report.waiting) == (1, 2)


def test_a_crash_leftover_is_removed_and_the_clip_redone(out: Path) -> None:
    cfg = clip_config(out, names=["hard_brake"])
    name = "testcar_20250101T000001.500Z_hard_brake.hf"
    d = clips_dir(cfg)
    d.mkdir()
    (d / f"{name}.tmp").write_bytes(b"HFRM cut short by a crash")
    (d / f".{name}.tmp.cut").write_bytes(b"slice's stage")
    report = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    assert (report.leftovers, report.made) == (2, 1)
    assert listed(d) == [name] and verify_file(d / name).ok


def test_the_budget_deletes_only_uploaded_clips(out: Path) -> None:
    cfg = clip_config(out, names=["hard_brake", "bookmark"])
    made = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    (hb, hb_size), (bm, bm_size) = [(p.name, p.stat().st_size) for p in made.paths]
    (clips_dir(cfg) / bm).unlink()  # the bookmark's clip is cut again under a tighter budget
    tight = clip_config(out, names=["hard_brake", "bookmark"],
                        max_mb=(hb_size + bm_size - 1) / (1 << 20))  # fmt: skip
    kept = cut_due_clips(tight, set(), now_ns=T0 + 100 * S)
    assert (kept.made, kept.skipped, kept.deleted) == (0, 1, 0)
    assert [p.name for p in list_clips(tight)] == [hb]  # not uploaded: never deleted
    assert listed(clips_dir(tight)) == [hb]  # the cut over budget is gone
    room = cut_due_clips(tight, {hb}, now_ns=T0 + 100 * S)
    assert (room.made, room.skipped, room.deleted) == (1, 0, 1)
    assert [p.name for p in list_clips(tight)] == [bm]


def test_a_clip_that_cannot_be_written_is_counted_and_the_call_returns(
    out: Path, tmp_path: Path
) -> None:
    # the clips directory cannot even be made: its parent is a file
    (tmp_path / "afile").write_bytes(b"")
    blocked = clip_config(out, dir=str(tmp_path / "afile" / "clips"))
    report = cut_due_clips(blocked, set(), now_ns=T0 + 100 * S)
    assert (report.made, report.failed) == (0, 1) and "afile" in report.errors[0]
    # one clip's name is taken by a directory: that clip fails, the others are made
    cfg = clip_config(out)
    (clips_dir(cfg) / "testcar_20250101T000001.500Z_hard_brake.hf").mkdir(parents=True)
    report = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    assert (report.made, report.failed) == (2, 1) and "hard_brake" in report.errors[0]
    assert not [n for n in listed(clips_dir(cfg)) if n.endswith((".tmp", ".cut"))]


def test_a_full_disk_fails_the_clip_not_the_caller(
    out: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes past RLIMIT_FSIZE fail with EFBIG, as writes to a full disk fail with ENOSPC."""
    cfg = clip_config(out, names=["bookmark"], streams={})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))
    try:
        report = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert (report.made, report.failed) == (0, 1), report.errors
    (line,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "cannot write testcar_20250101T000001.900Z_bookmark.hf" in line.getMessage()
    assert listed(clips_dir(cfg)) == []  # no partial clip left behind
    again = cut_due_clips(cfg, set(), now_ns=T0 + 100 * S)  # space is back: the clip is made
    assert (again.made, again.failed) == (1, 0) and verify_file(again.paths[0]).ok


# --- end to end: the recorder, the simulator and `hyperframes mark` -----------------


def test_recorder_sim_and_two_marks_give_one_clip_each(tmp_path: Path) -> None:
    events = {"control_socket": str(tmp_path / "control.sock"), "clips": True}
    d = config_dict(tmp_path / "out", free_port(), window_ms=100, segment_seconds=1,
                    events=events)  # fmt: skip
    d["streams"] = [
        {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam",
         "rate_hz": 30, "width": 64, "height": 48},
        {"id": 1, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu",
         "rate_hz": 200},
    ]  # fmt: skip
    conf = tmp_path / "car.yaml"
    conf.write_text(yaml.safe_dump(d))
    cfg = parse_config(d)

    async def marks() -> list[Any]:
        done = []
        for name, wait in (("pothole", 1.5), ("bookmark", 0.8)):
            await asyncio.sleep(wait)
            done.append(await asyncio.to_thread(
                cli, "mark", "--config", str(conf), name, "--pre", "0.5", "--post", "0.5",
                "--tag", "driver=ana"))  # fmt: skip
        return done

    async def main() -> list[Any]:
        async with Recorder(cfg) as rec:
            await rec.ready.wait()
            sim, done = await asyncio.gather(simulate(cfg, seconds=3.5, listen_wait_s=0.1),
                                             marks())  # fmt: skip
            await wait_for(lambda: rec.stats.frames == sim.total_sent)
        return done

    for r in run(main()):
        assert r.returncode == 0, r.stderr
    report = cut_due_clips(cfg, set())
    assert (report.made, report.failed, report.evicted) == (2, 0, 0), report
    events = {e.name: e for e in read_event_log(cfg.output_dir).events}
    assert sorted(events) == ["bookmark", "pothole"]
    for path in report.paths:
        assert verify_file(path).ok
        with HyperframeReader(path) as r:
            e = Event.from_dict(r.metadata.extra["event"])
            assert r.metadata.extra["event"]["tags"] == {"driver": "ana"}
            assert e == events[e.name] and path.name == clip_name("testcar", e)
            ts = [f.timestamp_ns for f in r.frames("imu")]
            assert ts and e.start_ns <= ts[0] and ts[-1] <= e.end_ns
            assert ts[-1] - ts[0] > 0.9 * S  # the whole second around the mark
    assert cut_due_clips(cfg, set(), now_ns=time.time_ns()).made == 0
