"""The windowing engine, tested directly: no sockets, no threads, host time passed in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperframes.format.windows import window_end, window_of
from hyperframes.recorder.engine import ClosedWindow, UnknownStreamError, WindowEngine

MS = 1_000_000
S = 1_000 * MS
L = 100 * MS
BASE = 1_700_000_000 * S  # a multiple of L: window BASE // L starts here
K0 = BASE // L
CAM, LIDAR, IMU = 0, 1, 2

_uid = count()


@dataclass(frozen=True)
class Frame:
    stream_id: int
    timestamp_ns: int
    size: int = 10
    uid: int = 0


def frame(stream_id: int, ts: int, size: int = 10) -> Frame:
    return Frame(stream_id, ts, size, next(_uid))


def periodic(
    stream_id: int, period_ns: float, offset_ns: int, start: int, stop: int
) -> list[Frame]:
    """Frames stamped ``start + offset + int(i * period)`` below ``stop``."""
    out: list[Frame] = []
    i = 0
    while True:
        ts = start + offset_ns + int(i * period_ns)
        if ts >= stop:
            return out
        out.append(frame(stream_id, ts))
        i += 1


def rig(start: int, stop: int) -> list[Frame]:
    """30 Hz camera, 10 Hz lidar, 200 Hz IMU, in timestamp order."""
    frames = (
        periodic(CAM, 100 * MS / 3, 10 * MS, start, stop)
        + periodic(LIDAR, 100 * MS, 50 * MS, start, stop)
        + periodic(IMU, 5 * MS, 1 * MS, start, stop)
    )
    return sorted(frames, key=lambda f: f.timestamp_ns)


def engine(
    streams: Iterable[int] = (CAM, LIDAR, IMU),
    grace_ns: int = 500 * MS,
    max_jump_ns: int | None = 10 * S,
    reorder_ns: int = 0,
    settle_ns: int = 0,
) -> WindowEngine[Frame]:
    # settle_ns=0: the first frame anchors the clock at once (settling has its own tests)
    return WindowEngine(
        streams,
        window_ns=L,
        grace_ns=grace_ns,
        max_jump_ns=max_jump_ns,
        reorder_ns=reorder_ns,
        settle_ns=settle_ns,
    )


def push_all(
    eng: WindowEngine[Frame], frames: Iterable[Frame], latency_ns: int = 0
) -> list[ClosedWindow[Frame]]:
    out = []
    for f in frames:
        out += eng.push(f, f.timestamp_ns + latency_ns)
    return out


def counts(w: ClosedWindow[Frame]) -> dict[int, int]:
    return dict(w.stats.frames)


def carried(windows: Iterable[ClosedWindow[Frame]]) -> list[Frame]:
    return [f for w in windows for f in (*w.frames, *w.late, *w.quarantined)]


# -- the brief's example rig ----------------------------------------------------


def test_rig_gives_3_camera_1_lidar_20_imu_per_window() -> None:
    eng = engine()
    frames = rig(BASE, BASE + 2 * S)
    closed = push_all(eng, frames)
    assert [w.window_id for w in closed] == list(range(K0, K0 + 19))  # closed on the fly
    closed += eng.flush()
    assert [w.window_id for w in closed] == list(range(K0, K0 + 20))
    for w in closed:
        assert counts(w) == {CAM: 3, LIDAR: 1, IMU: 20}
        assert w.missing == frozenset()
        assert w.stale == frozenset()
        assert w.late == w.quarantined == ()
        assert w.stats.nbytes == {CAM: 30, LIDAR: 10, IMU: 200}
        assert (w.start_ns, w.end_ns) == (w.window_id * L, (w.window_id + 1) * L)
    assert sorted(f.uid for f in carried(closed)) == sorted(f.uid for f in frames)
    assert not eng.open_window_ids


def test_31hz_camera_gives_3_or_4_frames() -> None:
    eng = engine()
    frames = sorted(
        periodic(CAM, S / 31, 3 * MS, BASE, BASE + 10 * S)
        + periodic(LIDAR, 100 * MS, 50 * MS, BASE, BASE + 10 * S)
        + periodic(IMU, 5 * MS, 1 * MS, BASE, BASE + 10 * S),
        key=lambda f: f.timestamp_ns,
    )
    closed = push_all(eng, frames) + eng.flush()
    cams = [w.stats.frames[CAM] for w in closed]
    assert set(cams) == {3, 4}
    assert sum(cams) == 310
    assert cams.count(4) == 10


def test_frame_exactly_at_window_end_belongs_to_that_window() -> None:
    eng = engine([0])
    end = window_end(K0, L)
    assert window_of(end, L) == K0
    assert eng.push(frame(0, end - 5 * MS), 0) == []
    assert eng.push(frame(0, end), 0) == []  # at the end, not past it: still open
    (w,) = eng.push(frame(0, end + 1), 0)
    assert w.window_id == K0
    assert sorted(f.timestamp_ns for f in w.frames) == [end - 5 * MS, end]
    assert eng.open_window_ids == (K0 + 1,)


def test_window_waits_for_every_live_stream() -> None:
    eng = engine([0, 1])
    end = window_end(K0, L)
    assert eng.push(frame(0, end - 1), 0) == []
    assert eng.push(frame(0, end + 1), 0) == []  # stream 1 has not passed the end
    assert eng.push(frame(1, end), 0) == []  # at the end is not past it
    (w,) = eng.push(frame(1, end + 1), 0)
    assert w.window_id == K0
    assert counts(w) == {0: 1, 1: 1}


def test_unknown_stream_raises_and_changes_nothing() -> None:
    eng = engine([0, 1])
    with pytest.raises(ValueError, match="unknown stream id 7") as info:
        eng.push(frame(7, BASE + 1), 0)
    assert isinstance(info.value, UnknownStreamError)
    assert info.value.stream_id == 7
    assert all(c.frames == 0 for c in eng.counters.values())
    assert not eng.open_window_ids


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"stream_ids": []}, "at least one"),
        ({"stream_ids": [1, 2, 1]}, "duplicate stream ids: \\[1\\]"),
        ({"window_ns": 0}, "window_ns"),
        ({"grace_ns": -1}, "grace_ns"),
        ({"max_jump_ns": 0}, "max_jump_ns"),
        ({"reorder_ns": -1}, "reorder_ns"),
    ],
)
def test_constructor_validates(kw: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"stream_ids": [0], "window_ns": L, "grace_ns": 0}
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        WindowEngine(**args)  # type: ignore[arg-type]


# -- a sensor that stops --------------------------------------------------------


def test_dead_sensor_does_not_block_after_grace_is_stale_and_missing_then_rejoins() -> None:
    eng = engine(grace_ns=500 * MS)
    frames = [
        f
        for f in rig(BASE, BASE + 5 * S)
        if not (f.stream_id == LIDAR and BASE + 1 * S <= f.timestamp_ns < BASE + 3 * S)
    ]
    closed: list[ClosedWindow[Frame]] = []
    when: dict[int, int] = {}  # window id -> host time it closed
    for f in frames:
        for w in eng.push(f, f.timestamp_ns):
            when[w.window_id] = f.timestamp_ns
            closed.append(w)
    closed += eng.flush()
    by_id = {w.window_id: w for w in closed}
    assert list(by_id) == list(range(K0, K0 + 50))

    # Lidar's last frame (0.95 s) made window 9 the oldest open window; it
    # waits the full grace for lidar to pass 1.0 s, no longer.
    # (the first push at or after host 1.45 s is the IMU sample at 1.451 s)
    assert when[K0 + 9] == BASE + 1451 * MS
    assert all(when[k] < BASE + 1450 * MS for k in range(K0, K0 + 9))
    assert by_id[K0 + 9].stale == {LIDAR}
    assert by_id[K0 + 9].missing == frozenset()  # it has its 0.95 s lidar frame

    # While stale, lidar holds nothing up: windows close as camera and IMU pass.
    for k in range(K0 + 10, K0 + 30):
        w = by_id[k]
        assert w.missing == {LIDAR}
        assert w.stale == {LIDAR}
        assert counts(w) == {CAM: 3, LIDAR: 0, IMU: 20}
        if k > K0 + 15:
            assert when[k] < window_end(k + 1, L)  # no grace wait any more

    # It rejoins with its first frame back and is expected again.
    for k in range(K0 + 30, K0 + 50):
        assert counts(by_id[k]) == {CAM: 3, LIDAR: 1, IMU: 20}
        assert by_id[k].stale == frozenset()
    assert eng.stale_streams == frozenset()
    assert eng.counters[LIDAR].stale_events == 1
    assert sum(c.late for c in eng.counters.values()) == 0
    assert sorted(f.uid for f in carried(closed)) == sorted(f.uid for f in frames)


def test_tick_closes_on_grace_without_frames_and_sensor_never_heard_from() -> None:
    eng = engine(grace_ns=500 * MS)
    assert eng.push(frame(CAM, BASE + 10 * MS), host_ns=1_000) == []
    assert eng.tick(1_000 + 499 * MS) == []
    (w,) = eng.tick(1_000 + 500 * MS)
    assert w.window_id == K0
    assert w.missing == {LIDAR, IMU}
    assert w.stale == {CAM, LIDAR, IMU}  # nobody passed its end
    assert eng.stale_streams == {CAM, LIDAR, IMU}
    assert not eng.open_window_ids


def test_every_stream_stopping_still_closes_windows() -> None:
    eng = engine(grace_ns=300 * MS)
    closed = push_all(eng, rig(BASE, BASE + 1 * S))
    assert eng.open_window_ids == (K0 + 9,)
    closed += eng.tick(BASE + 1 * S + 300 * MS)
    assert [w.window_id for w in closed] == list(range(K0, K0 + 10))
    assert not eng.open_window_ids


# -- late frames ----------------------------------------------------------------


def test_late_frame_is_emitted_with_next_window_and_counted() -> None:
    eng = engine([0, 1])
    closed = push_all(
        eng,
        [
            frame(0, BASE + 50 * MS),
            frame(1, BASE + 60 * MS),
            frame(0, BASE + 150 * MS),
            frame(1, BASE + 160 * MS),
        ],
    )
    assert [w.window_id for w in closed] == [K0]
    late = frame(1, BASE + 70 * MS)
    assert eng.push(late, BASE + 170 * MS) == []
    assert eng.counters[1].late == 1
    (w,) = push_all(eng, [frame(0, BASE + 250 * MS), frame(1, BASE + 260 * MS)])
    assert w.window_id == K0 + 1
    assert w.late == (late,)
    assert late not in w.frames
    assert w.stats.late == {0: 0, 1: 1}
    assert w.stats.frames == {0: 1, 1: 1}
    assert w.stats.total_frames == 3


def test_late_frame_with_no_window_open_leaves_after_grace() -> None:
    eng = engine([0], grace_ns=500 * MS)
    closed = push_all(eng, [frame(0, BASE + 50 * MS), frame(0, BASE + 150 * MS)])
    assert [w.window_id for w in closed] == [K0]
    (w,) = eng.tick(BASE + 650 * MS)  # the sensor went quiet: window K0+1 on grace
    assert w.window_id == K0 + 1
    late = frame(0, BASE + 60 * MS)
    assert eng.push(late, BASE + 700 * MS) == []
    assert eng.tick(BASE + 1199 * MS) == []
    (w,) = eng.tick(BASE + 1200 * MS)
    assert (w.window_id, w.frames, w.late) == (K0 + 2, (), (late,))
    assert w.missing == {0}


def test_small_reordering_within_a_window_is_fine() -> None:
    eng = engine([0, 1])
    frames = [frame(0, BASE + t * MS) for t in (30, 10, 20, 99, 60)] + [
        frame(1, BASE + t * MS) for t in (50, 40)
    ]
    closed = push_all(eng, frames)
    closed += push_all(eng, [frame(0, BASE + 101 * MS), frame(1, BASE + 101 * MS)])
    (w,) = closed
    assert counts(w) == {0: 5, 1: 2}
    assert w.late == ()


def test_reorder_slack_keeps_a_frame_across_the_boundary_on_time() -> None:
    eng = engine([0], reorder_ns=10 * MS)
    assert eng.push(frame(0, BASE + 95 * MS), 0) == []
    assert eng.push(frame(0, BASE + 105 * MS), 0) == []  # within the slack: K0 stays open
    assert eng.push(frame(0, BASE + 99 * MS), 0) == []
    (w,) = eng.push(frame(0, BASE + 111 * MS), 0)
    assert counts(w) == {0: 2}
    assert w.late == ()


# -- implausible timestamps -----------------------------------------------------


@pytest.mark.parametrize("jump", ["1970", "+10h"])
def test_clock_jump_is_quarantined_without_windows_or_time(jump: str) -> None:
    eng = engine()
    before = rig(BASE, BASE + 1 * S)
    closed = push_all(eng, before)
    opened, latest = eng.open_window_ids, eng.latest_ns
    assert latest is not None
    ts = 5 * MS if jump == "1970" else latest + 10 * 3600 * S
    bad = frame(CAM, ts)
    assert eng.push(bad, latest) == []
    assert eng.open_window_ids == opened  # no window for it, not millions of them
    assert eng.latest_ns == latest  # time did not move
    assert eng.clock is not None and eng.clock.held == 1  # in doubt until the next good frame
    after = rig(BASE + 1 * S, BASE + 2 * S)
    more = push_all(eng, after[:1])
    assert eng.counters[CAM].quarantined == 1
    assert eng.counters[CAM].late == 0

    more += push_all(eng, after[1:])
    assert more[0].window_id == K0 + 9
    assert more[0].quarantined == (bad,)
    assert more[0].stats.quarantined[CAM] == 1
    closed += more + eng.flush()
    assert [w.window_id for w in closed] == list(range(K0, K0 + 20))
    assert all(counts(w) == {CAM: 3, LIDAR: 1, IMU: 20} for w in closed)


def test_stream_with_a_broken_clock_goes_stale_and_does_not_block() -> None:
    eng = engine(grace_ns=500 * MS)
    frames = [
        f if f.stream_id != LIDAR or f.timestamp_ns < BASE + 1 * S else frame(LIDAR, 7 * MS)
        for f in rig(BASE, BASE + 3 * S)
    ]
    closed = push_all(eng, frames) + eng.flush()
    assert [w.window_id for w in closed] == list(range(K0, K0 + 30))
    assert eng.counters[LIDAR].quarantined == 20
    assert LIDAR in eng.stale_streams
    assert all(w.missing == {LIDAR} for w in closed[10:])
    assert sum(len(w.quarantined) for w in closed) == 20


def test_sensor_back_after_a_long_silence_is_not_quarantined() -> None:
    eng = engine([0, 1], grace_ns=500 * MS, max_jump_ns=10 * S)
    push_all(eng, [frame(0, BASE + 50 * MS), frame(1, BASE + 50 * MS)])
    ts = BASE + 3600 * S  # an hour later on both clocks
    closed = eng.push(frame(0, ts), ts) + eng.push(frame(1, ts), ts)
    assert eng.counters[0].quarantined == eng.counters[1].quarantined == 0
    assert eng.latest_ns == ts
    assert [w.window_id for w in closed] == [K0]
    assert eng.open_window_ids == (window_of(ts, L),)


def test_first_frame_of_a_stream_is_checked_against_the_others() -> None:
    eng = engine([0, 1])
    eng.push(frame(0, BASE + 50 * MS), BASE + 50 * MS)
    eng.push(frame(1, 50 * MS), BASE + 60 * MS)
    eng.push(frame(0, BASE + 70 * MS), BASE + 70 * MS)
    assert eng.counters[1].quarantined == 1


def test_quarantine_can_be_switched_off() -> None:
    eng = engine([0], max_jump_ns=None)
    eng.push(frame(0, BASE + 50 * MS), 0)
    eng.push(frame(0, 50 * MS), 0)
    assert eng.counters[0].quarantined == 0
    assert eng.counters[0].late == 1


# -- shutdown -------------------------------------------------------------------


def test_flush_closes_every_open_window_in_order() -> None:
    eng = engine([0, 1])
    push_all(eng, [frame(0, BASE + t * MS) for t in (50, 150, 250, 450)])
    assert list(eng.open_window_ids) == [K0, K0 + 1, K0 + 2, K0 + 4]
    closed = eng.flush()
    assert [w.window_id for w in closed] == [K0, K0 + 1, K0 + 2, K0 + 4]  # K0+3 is empty
    assert all(w.missing == {1} for w in closed)
    assert not eng.open_window_ids
    assert eng.flush() == []
    # Still usable, and what was flushed is now in the past.
    eng.push(frame(1, BASE + 420 * MS), 0)
    assert eng.counters[1].late == 1
    (w,) = eng.flush()
    assert w.window_id == K0 + 5
    assert len(w.late) == 1


# -- properties -----------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, Frame]], list[int], int, int]:
    """Per-stream monotonic sequences, delivered with jitter (small reordering)."""
    n_streams = draw(st.integers(1, 4))
    deliveries: list[tuple[int, Frame]] = []
    for sid in range(n_streams):
        t = BASE + draw(st.integers(0, 300 * MS))
        gaps = draw(st.lists(st.integers(1, 150 * MS), max_size=40))
        for gap in gaps:
            t += gap
            delay = draw(st.integers(0, 40 * MS))
            ts = t
            if draw(st.integers(0, 30)) == 0:  # an occasional wild clock
                ts = draw(st.sampled_from([3 * MS, t + 10 * 3600 * S, t - 3600 * S]))
            deliveries.append((t + delay, frame(sid, ts, draw(st.integers(0, 99)))))
    deliveries.sort(key=lambda d: d[0])
    ticks = draw(st.lists(st.integers(0, 2 * S), max_size=len(deliveries)))
    grace = draw(st.integers(0, 1 * S))
    reorder = draw(st.integers(0, 20 * MS))
    return list(range(n_streams)), deliveries, ticks, grace, reorder


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_every_frame_comes_out_once_in_order(
    scenario: tuple[list[int], list[tuple[int, Frame]], list[int], int, int],
) -> None:
    streams, deliveries, ticks, grace, reorder = scenario
    eng = WindowEngine[Frame](streams, window_ns=L, grace_ns=grace, reorder_ns=reorder)
    out: list[ClosedWindow[Frame]] = []
    for i, (host, f) in enumerate(deliveries):
        out += eng.push(f, host)
        if i < len(ticks) and ticks[i] % 3 == 0:
            out += eng.tick(host + ticks[i])
    out += eng.flush()
    assert not eng.open_window_ids

    pushed = Counter(f.uid for _, f in deliveries)
    emitted = Counter(f.uid for f in carried(out))
    assert emitted == pushed
    assert max(emitted.values(), default=1) == 1

    ids = [w.window_id for w in out]
    assert ids == sorted(set(ids))
    for w in out:
        assert w.stats.total_frames > 0  # no empty windows
        assert all(window_of(f.timestamp_ns, L) == w.window_id for f in w.frames)
        assert all(window_of(f.timestamp_ns, L) < w.window_id for f in w.late)
        assert w.missing == {s for s in streams if w.stats.frames[s] == 0}
        assert sum(w.stats.frames.values()) == len(w.frames)
        assert sum(w.stats.late.values()) == len(w.late)
        assert sum(w.stats.quarantined.values()) == len(w.quarantined)

    counters = eng.counters
    assert sum(c.frames for c in counters.values()) == len(deliveries)
    assert sum(c.late for c in counters.values()) == sum(len(w.late) for w in out)
    assert sum(c.quarantined for c in counters.values()) == sum(len(w.quarantined) for w in out)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=4),
    st.integers(1, 5 * S),
)
def test_in_order_healthy_streams_are_never_late(rates_tenths: list[int], span: int) -> None:
    """Timestamp-ordered delivery, every stream alive: no late, no missing, no stale."""
    streams = list(range(len(rates_tenths)))
    frames = sorted(
        (
            f
            for sid, r in enumerate(rates_tenths)
            for f in periodic(sid, L / r, 1, BASE, BASE + span + L)
        ),
        key=lambda f: f.timestamp_ns,
    )
    eng = WindowEngine[Frame](streams, window_ns=L, grace_ns=1 * S)
    out = push_all(eng, frames) + eng.flush()
    assert all(w.late == () and w.quarantined == () for w in out)
    assert all(w.missing == frozenset() and w.stale == frozenset() for w in out)
    assert sum(len(w.frames) for w in out) == len(frames)
