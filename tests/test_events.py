"""Events without a daemon: the model, the event log, protection, rules, retention, config."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hyperframes.events import (
    EVENT_LOG_NAME,
    Event,
    EventError,
    SegmentSpan,
    event_windows,
    list_events,
    log_line,
    parse_event_body,
    parse_log_line,
    protected_segments,
    protection,
    read_event_log,
)
from hyperframes.format.streams import StreamInfo
from hyperframes.recorder.config import ConfigError, parse_config
from hyperframes.recorder.diskpolicy import decide
from hyperframes.recorder.events.log import EventLogWriter
from hyperframes.recorder.events.retention import OnDisk, snapshot_expired
from hyperframes.recorder.events.rules import RuleEngine, StaleRule, ThresholdRule

S = 1_000_000_000
MS = 1_000_000


# --- the model ----------------------------------------------------------------------


def test_event_json_round_trip_and_window() -> None:
    e = Event(10 * S, "hard_brake", 2.0, 3.5, {"k": "v"}, {"ax": -7.2, "n": [1, 2]}, "zmq",
              "hardware")  # fmt: skip
    assert Event.from_json(e.to_json()) == e
    assert (e.start_ns, e.end_ns) == (8 * S, 13_500_000_000)
    assert parse_log_line(log_line(e)) == e
    span = SegmentSpan("a.hf", 1, 2)
    assert parse_log_line(log_line(span)) == span


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"nope", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "a JSON object, got list"),
        (b'{"pre_s": 1}', "missing key 'name'"),
        (b'{"name": ""}', "name '' must be 1-64"),
        (b'{"name": "a/b"}', "name 'a/b' must be"),
        (b'{"name": "a", "pre_s": -1}', "pre_s must be between 0 and 86400 s, got -1"),
        (b'{"name": "a", "post_s": "5"}', "post_s must be a number of seconds"),
        (b'{"name": "a", "tags": {"k": 1}}', "tag 'k' must be a string"),
        (b'{"name": "a", "tags": ["x"]}', "tags must be an object of strings"),
        (b'{"name": "a", "colour": 1}', "unknown key 'colour'"),
        (b'{"name": "a", "payload": NaN}', "not valid JSON"),
        (b"{" + b" " * 70_000 + b"}", "over the limit of 65536"),
        # what once escaped as OverflowError and RecursionError and stopped the recorder
        (b'{"name": "x", "pre_s": 1' + b"0" * 400 + b"}", "wider than 64 bits"),
        (b'{"name": "x", "pre_s": 1' + b"0" * 18 + b"}", "pre_s must be between 0 and 86400"),
        (b'{"name": "x", "pre_s": 1e400}', "not valid JSON"),
        (b'{"name": "x", "payload": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested deeper"),
        (b'{"name": "x", "payload": {"n": 1' + b"0" * 400 + b"}}", "wider than 64 bits"),
        (b'{"name": "x", "payload": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32"),
        (b'{"name": "x", "payload": [' + b"1e9," * 8000 + b"1]}", "as stored is over 65536"),
        (b'{"name": "odd\\n"}', "must be 1-64"),
        (b'{"name": "x", "tags": {"k\\n": "v"}}', "tag key"),
    ],
)
def test_bad_event_bodies_say_what_is_wrong(body: bytes, problem: str) -> None:
    with pytest.raises(EventError, match=problem.replace("(", r"\(")):
        parse_event_body(body, 1, clock="host", source="zmq")


def test_defaults_per_name_then_global_and_the_message_wins() -> None:
    names = {"hard_brake": (25.0, 10.0)}
    hb = parse_event_body(b'{"name": "hard_brake"}', 1, clock="host", source="x",
                          defaults=names, default=(10.0, 5.0))  # fmt: skip
    other = parse_event_body(b'{"name": "bookmark", "note": "hi"}', 1, clock="host",
                             source="x", defaults=names, default=(10.0, 5.0))  # fmt: skip
    own = parse_event_body(b'{"name": "hard_brake", "post_s": 1}', 1, clock="host",
                           source="x", defaults=names)  # fmt: skip
    assert (hb.pre_s, hb.post_s) == (25.0, 10.0)
    assert (other.pre_s, other.post_s, other.tags) == (10.0, 5.0, {"note": "hi"})
    assert (own.pre_s, own.post_s) == (25.0, 1.0)


def test_protection_is_overlap_of_the_window_and_quarantine_protects_nothing() -> None:
    spans = [SegmentSpan(f"s{i}", i * 10 * S, (i + 1) * 10 * S) for i in range(5)]
    e = Event(25 * S, "x", 5.0, 5.0)  # [20, 30] s: touches s1's end and s3's start
    assert protected_segments(e, spans) == ["s1", "s2", "s3"]
    assert protected_segments(Event(25 * S, "x", 4.0, 4.0), spans) == ["s2"]
    assert protected_segments(Event(25 * S, "x", 50.0, 0.0, quarantined=True), spans) == []
    late = Event(45 * S, "y", 1.0, 100.0)  # its post window is still open
    got = protection([e, late], reversed(spans))
    assert sorted(got) == ["s1", "s2", "s3", "s4"] and got["s4"] == [late]


def test_event_windows_merge_overlaps_and_take_overrides() -> None:
    evs = [Event(10 * S, "b", 1, 1), Event(11 * S, "b", 1, 1), Event(20 * S, "b", 1, 1),
           Event(15 * S, "other", 9, 9)]  # fmt: skip
    assert event_windows(evs, "b") == [(9 * S, 12 * S), (19 * S, 21 * S)]
    short = event_windows(evs, "b", pre_s=0, post_s=0.1)
    assert short == [(t * S, t * S + 100 * MS) for t in (10, 11, 20)]


# --- the event log ------------------------------------------------------------------


def test_event_log_survives_a_torn_line_and_skips_garbage(tmp_path: Path) -> None:
    w = EventLogWriter(tmp_path, 1 << 20)
    for i in range(3):
        assert w.append_event(Event(i * S, f"e{i}"), lambda: ())
    assert w.append_segment(SegmentSpan("a.hf", 0, S), lambda: ())
    log = tmp_path / EVENT_LOG_NAME
    with log.open("ab") as f:
        f.write(b'{"type": "event", "t_ns": 1, "na')  # a crash mid-append
    got = read_event_log(tmp_path)
    assert [e.name for e in got.events] == ["e0", "e1", "e2"] and got.bad_lines == 1
    w2 = EventLogWriter(tmp_path, 1 << 20)  # the restart cuts the torn line off
    assert w2.append_event(Event(9 * S, "after"), lambda: ())
    got = read_event_log(tmp_path)
    assert [e.name for e in got.events] == ["e0", "e1", "e2", "after"] and got.bad_lines == 0
    assert got.segments == {"a.hf": SegmentSpan("a.hf", 0, S)}
    with log.open("ab") as f:
        f.write(b"garbage\n[1]\n")
    assert read_event_log(tmp_path).bad_lines == 2
    assert oct(log.stat().st_mode & 0o777) == "0o640"


def test_a_full_event_log_compacts_then_refuses_and_never_raises(tmp_path: Path) -> None:
    line = len(log_line(Event(0, "e0000")))
    w = EventLogWriter(tmp_path, 40 * line)
    existing: set[str] = set()
    for i in range(30):  # 30 events, each protecting its own 1 s segment
        name = f"seg{i:04d}.hf"
        w.append_segment(SegmentSpan(name, i * S, (i + 1) * S - 1), lambda: existing)
        w.append_event(Event(i * S + S // 2, f"e{i:04d}"), lambda: existing)
        existing.add(name)
    assert w.compactions >= 1
    existing = {f"seg{i:04d}.hf" for i in range(25, 30)}  # the disk policy deleted 0..24
    for i in range(30, 40):
        w.append_event(Event(i * S, f"e{i:04d}"), lambda: existing)
    events = read_event_log(tmp_path).events
    names = [e.name for e in events]
    # the log was full of events protecting segments on disk: later ones were refused (not
    # logged, not held, protecting nothing) until the disk policy deleted 0..24
    assert w.refused > 0 and "e0000" not in names and "e0039" in names
    assert names == [e.name for e in w.events]  # memory holds what the log holds, no more
    assert (tmp_path / EVENT_LOG_NAME).stat().st_size <= 40 * line
    # a limit nothing fits into: refused, counted, recording goes on
    tiny = EventLogWriter(tmp_path / "t", 10) if (tmp_path / "t").mkdir() is None else None
    assert tiny is not None and not tiny.append_event(Event(0, "x"), lambda: ())
    assert tiny.errors == 1


def test_an_unwritable_event_log_is_counted(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = tmp_path / "gone"  # root ignores permissions: use a directory that vanishes
        target.mkdir()
        w = EventLogWriter(target, 1 << 20)
        target.rmdir()
    else:
        tmp_path.chmod(0o500)
        w = EventLogWriter(tmp_path, 1 << 20)
    try:
        assert not w.append_event(Event(0, "x"), lambda: ())
        assert w.errors == 1
    finally:
        tmp_path.chmod(0o700)


def test_list_events_of_a_directory_and_of_a_file_without_a_log(tmp_path: Path) -> None:
    w = EventLogWriter(tmp_path, 1 << 20)
    w.append_segment(SegmentSpan("a.hf", 0, 10 * S), lambda: ())
    w.append_segment(SegmentSpan("b.hf", 10 * S + 1, 20 * S), lambda: ())
    w.append_event(Event(9 * S, "x", 1, 2), lambda: ())
    (tmp_path / "b.hf").write_bytes(b"")  # a.hf was deleted
    (row,) = list_events(tmp_path)
    assert row.segments == ("a.hf", "b.hf") and row.existing == ("b.hf",)
    assert json.loads(json.dumps(row.to_dict()))["existing"] == ["b.hf"]
    assert list_events(tmp_path, name="nope") == []
    with pytest.raises(FileNotFoundError, match="nope"):
        list_events(tmp_path / "nope")


# --- retention ----------------------------------------------------------------------


def test_disk_policy_deletes_unprotected_first_then_protected_as_a_last_resort() -> None:
    segs = [(Path(f"v_{i}.hf"), 100) for i in range(6)]
    prot = {Path("v_0.hf"), Path("v_1.hf"), Path("v_4.hf")}
    d = decide(0, 250, "delete-oldest", segs, protected=prot)
    assert d.delete == (Path("v_2.hf"), Path("v_3.hf"), Path("v_5.hf")) and d.protected == ()
    d = decide(0, 450, "delete-oldest", segs, protected=prot)
    assert d.delete[:3] == (Path("v_2.hf"), Path("v_3.hf"), Path("v_5.hf"))
    assert d.protected == (Path("v_0.hf"), Path("v_1.hf")) and d.record
    d = decide(0, 10_000, "delete-oldest", segs, protected=prot, protected_glob="v_1*")
    assert Path("v_1.hf") not in d.delete and not d.record


def test_snapshot_expiry_spares_the_buffer_the_protected_and_the_current() -> None:
    segs = [OnDisk(Path(f"s{i}"), 10, SegmentSpan(f"s{i}", i * S, (i + 1) * S)) for i in range(10)]
    gone = snapshot_expired(segs, {"s2", "s3"}, latest_ns=10 * S, buffer_ns=3 * S,
                            current=Path("s0"))  # fmt: skip
    assert [s.path.name for s in gone] == ["s1", "s4", "s5"]  # s6 ends at the horizon
    assert gone[0].seconds == 1.0


# --- rules --------------------------------------------------------------------------

IMU = StreamInfo(2, "imu", "imu", "imu-f64")


def imu(ax: float, rows: int = 1) -> memoryview:
    a = np.zeros((rows, 6), "<f8")
    a[:, 0] = ax
    return memoryview(a.tobytes())


def test_threshold_must_hold_for_the_duration_and_fires_once_per_run() -> None:
    rule = ThresholdRule("hard_brake", 2, 0, below=-6.0, for_ns=100 * MS, pre_s=2, post_s=1)
    eng = RuleEngine([rule], {2: IMU}, 0)
    fired: list[Event] = []
    for i in range(200):  # 5 ms IMU: a 50 ms dip, then a 300 ms brake, then a second one
        ms = i * 5
        ax = -8.0 if 100 <= ms < 150 or 300 <= ms < 600 or 800 <= ms < 950 else -1.0
        fired += eng.on_frame(2, ms * MS, imu(ax), 0)
    assert [e.t_ns for e in fired] == [300 * MS, 800 * MS]
    e = fired[0]
    assert (e.name, e.pre_s, e.post_s, e.source, e.clock) == ("hard_brake", 2, 1, "rule",
                                                              "hardware")  # fmt: skip
    assert e.payload["held_ms"] == 100.0 and e.payload["value"] == -8.0
    assert e.tags == {"rule": "threshold", "stream": "imu"}


def test_threshold_on_multi_row_frames_above_and_unreadable_payloads() -> None:
    rule = ThresholdRule("spin", 2, 5, above=3.0)
    eng = RuleEngine([rule], {2: IMU}, 0)
    a = np.zeros((4, 6), "<f8")
    a[:, 5] = [4, 5, 3.5, 2.9]  # one row under the limit: the frame does not satisfy it
    assert eng.on_frame(2, S, memoryview(a.tobytes()), 0) == []
    a[3, 5] = 3.1
    (e,) = eng.on_frame(2, 2 * S, memoryview(a.tobytes()), 0)
    assert e.payload["value"] == pytest.approx(3.1)
    assert eng.on_frame(2, 3 * S, memoryview(b"xyz"), 0) == [] and eng.unreadable == 1


def test_stale_rule_fires_once_and_rearms_when_the_stream_returns() -> None:
    eng = RuleEngine([StaleRule("lidar_quiet", 1, 500 * MS)], {1: StreamInfo(1, "lidar")}, 0)
    assert eng.tick(400 * MS, 0) == []
    (never,) = eng.tick(600 * MS, 1000 * S)  # never seen since the start
    assert never.t_ns == 1000 * S - 100 * MS and never.payload["never_seen"]
    assert eng.tick(700 * MS, 0) == []
    eng.on_frame(1, 77 * S, memoryview(b""), 1 * S)
    assert eng.tick(1400 * MS, 0) == []
    (e,) = eng.tick(1600 * MS, 0)
    assert e.t_ns == 77 * S + 500 * MS and e.tags["stream"] == "lidar"
    assert eng.tick(5 * S, 0) == []


# --- config -------------------------------------------------------------------------


def cfg(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "vehicle_id": "car",
        "output_dir": "/tmp/x",
        "zmq": {"endpoint": "tcp://127.0.0.1:5555"},
        "streams": [
            {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam"},
            {"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu",
             "extra": {"fields": ["ax", "ay", "az", "gx", "gy", "gz"]}},
        ],
    }  # fmt: skip
    d.update(over)
    return d


def test_events_config_defaults_names_and_rules() -> None:
    c = parse_config(cfg(
        events={"pre_s": 20, "names": {"hard_brake": {"pre_s": 25, "post_s": 10}},
                "control_socket": "/run/x.sock", "rules": [
                    {"name": "hard_brake", "stream": "imu", "field": "ax", "below": -6,
                     "for_ms": 100},
                    {"name": "imu_quiet", "stream": "imu", "stale_ms": 250, "post_s": 1}]},
        disk={"retention": "events", "buffer_s": 30},
    ))  # fmt: skip
    ev = c.events
    assert ev.window_for("hard_brake") == (25.0, 10.0) and ev.window_for("x") == (20.0, 5.0)
    assert ev.rules == (
        ThresholdRule("hard_brake", 2, 0, below=-6.0, for_ns=100 * MS, pre_s=25.0, post_s=10.0),
        StaleRule("imu_quiet", 2, 250 * MS, pre_s=20.0, post_s=1.0),
    )
    assert str(ev.control_socket) == "/run/x.sock"
    assert (c.disk.retention, c.disk.buffer_s) == ("events", 30.0)
    assert parse_config(cfg()).events.topic == "events"


@pytest.mark.parametrize(
    ("over", "key", "problem"),
    [
        ({"events": {"rules": [{"name": "x", "stream": "imus", "below": 1, "field": 0}]}},
         "events.rules[0].stream", "no stream named 'imus'; did you mean 'imu'?"),
        ({"events": {"rules": [{"name": "x", "stream": "cam", "below": 1, "field": 0}]}},
         "events.rules[0].stream", "'cam' is not a numeric array stream"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "below": 1, "field": 6}]}},
         "events.rules[0].field", "must be 0..5, got 6"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "below": 1, "field": "vx"}]}},
         "events.rules[0].field", "'vx' is not a field name; named fields of imu: ax"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "field": 0}]}},
         "events.rules[0]", "exactly one of below: or above:"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "field": 0, "below": 1,
                                "above": 2}]}},
         "events.rules[0]", "exactly one of below: or above:"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "stale_ms": 9, "below": 1}]}},
         "events.rules[0].below", "does not apply to a stale rule"),
        ({"events": {"rules": [{"name": "a b", "stream": "imu", "stale_ms": 9}]}},
         "events.rules[0].name", "event name 'a b' must be 1-64"),
        ({"events": {"rules": [{"name": "x", "stream": "imu", "stale_ms": 9, "every": 1}]}},
         "events.rules[0].every", "unknown key"),
        ({"events": {"names": {"bad/name": {}}}}, "events.names.bad/name", "must be 1-64"),
        ({"events": {"names": {"ok": {"pre_s": -2}}}}, "events.names.ok.pre_s", "must be >= 0"),
        ({"events": {"topic": "imu"}}, "streams[1].topic", "'imu' is the event topic"),
        ({"events": {"pre_s": 60}, "disk": {"retention": "events", "buffer_s": 30}},
         "disk.buffer_s", "30 s is shorter than the longest pre_s configured (60 s)"),
        ({"disk": {"retention": "some"}}, "disk.retention", "'some' is not allowed"),
    ],
)  # fmt: skip
def test_events_config_errors_name_the_key(over: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(cfg(**over))
    assert info.value.key == key
    assert problem in info.value.problem


def test_reserved_event_stream_id_and_name() -> None:
    streams = cfg()["streams"]
    bad = [*streams, {"id": 65535, "name": "x", "kind": "other", "encoding": "bytes",
                      "topic": "x"}]  # fmt: skip
    with pytest.raises(ConfigError, match="65535 is reserved"):
        parse_config(cfg(streams=bad))
    bad = [*streams, {"id": 9, "name": "events", "kind": "other", "encoding": "bytes",
                      "topic": "x"}]  # fmt: skip
    with pytest.raises(ConfigError, match="'events' is reserved"):
        parse_config(cfg(streams=bad))
