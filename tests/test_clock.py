"""Timestamp plausibility (recorder.clock) and its use by the engine: pure, host time given."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import BASE, CAM, IMU, K0, LIDAR, MS, Frame, L, S, carried, frame, rig

from hyperframes.recorder.clock import ClockAnchor, pick_anchor
from hyperframes.recorder.engine import WindowEngine

JUMP = 10 * S


# -- pick_anchor ----------------------------------------------------------------


def test_the_freshest_cluster_two_streams_agree_on_wins_over_a_bigger_backlog() -> None:
    backlog = [(0, -60 * S + i * MS) for i in range(500)]  # 500 old frames of one stream...
    backlog += [(1, -60 * S + i * MS) for i in range(100)]  # ...and of another
    fresh = [(0, -3 * MS), (1, -1 * MS), (0, -2 * MS)]
    assert pick_anchor(backlog + fresh, JUMP) == -1 * MS


def test_one_stream_alone_in_the_future_does_not_win() -> None:
    samples = [(0, 0), (1, 2 * MS), (2, 10 * 3600 * S), (2, 10 * 3600 * S + 5 * MS)]
    assert pick_anchor(samples, JUMP) == 2 * MS


def test_with_one_stream_two_frames_beat_a_lone_frame() -> None:
    assert pick_anchor([(0, 5 * 3600 * S), (0, 0), (0, 5 * MS)], JUMP) == 5 * MS
    assert pick_anchor([(0, 7)], JUMP) == 7
    with pytest.raises(ValueError, match="at least one"):
        pick_anchor([], JUMP)


# -- ClockAnchor ------------------------------------------------------------------


def test_frames_wait_for_settling_then_are_judged_in_arrival_order() -> None:
    clock = ClockAnchor[str](JUMP, settle_ns=300 * MS, reanchor_ns=300 * MS)
    host = 1_000 * S
    assert clock.offer("old", 0, host - 60 * S, host) == []  # a 60 s old backlog frame first
    assert clock.offer("a", 0, host + 10 * MS, host + 10 * MS) == []
    assert clock.offer("b", 1, host + 20 * MS, host + 20 * MS) == []
    assert clock.poll(host + 299 * MS) == []
    assert clock.poll(host + 300 * MS) == [("old", False), ("a", True), ("b", True)]
    assert clock.anchor_ns == 0
    assert clock.offer("c", 1, host + 400 * MS, host + 400 * MS) == [("c", True)]
    assert clock.reanchors == 0


def test_a_doubted_frame_is_condemned_by_the_next_good_one() -> None:
    clock = ClockAnchor[str](JUMP, settle_ns=0, reanchor_ns=500 * MS)
    assert clock.offer("first", 0, 0, 0) == [("first", True)]
    assert clock.offer("1970", 0, -5 * 3600 * S, 1 * MS) == []
    assert clock.held == 1
    assert clock.offer("good", 1, 2 * MS, 2 * MS) == [("1970", False), ("good", True)]
    assert clock.held == 0


def test_when_every_clock_moves_the_anchor_follows_and_nothing_is_quarantined() -> None:
    clock = ClockAnchor[int](JUMP, settle_ns=0, reanchor_ns=500 * MS)
    clock.offer(0, 0, 0, 0)
    step = 3600 * S  # a GNSS time step: every sensor an hour ahead
    verdicts = []
    for i in range(1, 200):
        verdicts += clock.offer(i, i % 2, step + i * 5 * MS, i * 5 * MS)
    assert clock.reanchors == 1
    assert [v for _, v in verdicts] == [True] * 199
    assert [i for i, _ in verdicts] == list(range(1, 200))  # arrival order kept


def test_zero_max_jump_is_refused() -> None:
    with pytest.raises(ValueError, match="max_jump_ns"):
        ClockAnchor[int](0, 0, 0)


# -- through the engine -------------------------------------------------------------


def test_a_stale_first_frame_does_not_quarantine_the_fresh_run() -> None:
    """Issue 10, defect 1: a backlog frame 60 s old arrives first, then real-time data."""
    eng = WindowEngine[Frame]((CAM, LIDAR, IMU), window_ns=L, grace_ns=300 * MS)
    old = frame(IMU, BASE - 60 * S)
    out = eng.push(old, BASE)
    fresh = rig(BASE, BASE + 2 * S)
    for f in fresh:
        out += eng.push(f, f.timestamp_ns + 2 * MS)
    out += eng.flush()
    assert [w.window_id for w in out if w.frames] == list(range(K0, K0 + 20))
    assert [f for w in out for f in w.quarantined] == [old]
    assert sum(len(w.frames) for w in out) == len(fresh)
    assert not any(w.late for w in out)


def test_one_stream_with_a_wrong_clock_never_moves_the_anchor() -> None:
    eng = WindowEngine[Frame]((CAM, LIDAR, IMU), window_ns=L, grace_ns=300 * MS)
    frames = [
        frame(LIDAR, f.timestamp_ns + 3600 * S) if f.stream_id == LIDAR else f
        for f in rig(BASE, BASE + 3 * S)
    ]
    out = []
    for f in frames:
        out += eng.push(f, f.timestamp_ns % (3600 * S))
    out += eng.flush()
    assert eng.clock is not None and eng.clock.reanchors == 0
    assert eng.counters[LIDAR].quarantined == 30
    assert sum(len(w.frames) for w in out) == len(frames) - 30


@settings(max_examples=150, deadline=None)
@given(
    backlog=st.integers(0, 30),
    age_s=st.integers(11, 7200),
    settle_ms=st.integers(0, 500),
    latency_ms=st.integers(0, 40),
)
def test_settling_keeps_every_frame_and_windows_the_fresh_ones(
    backlog: int, age_s: int, settle_ms: int, latency_ms: int
) -> None:
    eng = WindowEngine[Frame](
        (CAM, LIDAR, IMU), window_ns=L, grace_ns=600 * MS, settle_ns=settle_ms * MS
    )
    old = [frame(CAM, BASE - age_s * S + i * 33 * MS) for i in range(backlog)]
    fresh = rig(BASE, BASE + 1 * S)
    out = []
    for f in old:
        out += eng.push(f, BASE)
    for f in fresh:
        out += eng.push(f, f.timestamp_ns + latency_ms * MS)
    out += eng.flush()
    emitted = Counter(f.uid for f in carried(out))
    assert emitted == Counter(f.uid for f in old + fresh)
    if settle_ms >= 100 or backlog == 0:  # long enough to hear two fresh streams
        assert Counter(f.uid for w in out for f in w.quarantined) == Counter(f.uid for f in old)
