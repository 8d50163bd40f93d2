"""Nearest-neighbour and interval matching against signals with known offsets and rates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperframes.sync import frame_intervals, intersect, nearest

T0 = 1_735_689_600_000_000_000  # a real epoch: float64 would lose ~256 ns here
MS = 1_000_000


def grid(n: int, period: int, phase: int = 0) -> np.ndarray:
    return (T0 + phase + np.arange(n, dtype=np.int64) * period).astype(np.uint64)


def test_known_phase_offsets_give_exact_errors() -> None:
    imu40 = grid(400, 25 * MS)  # 40 Hz, 10 s
    for phase, expected in ((7 * MS, -7 * MS), (20 * MS, 5 * MS), (0, 0), (12_500_001, 12_499_999)):
        lidar = grid(99, 100 * MS, phase)  # 10 Hz, phase-shifted against the 40 Hz grid
        m = nearest(lidar, imu40, tolerance_ns=None)
        assert not m.is_pad.any()
        assert (m.error_ns == expected).all(), phase
        assert (imu40[m.index].astype(np.int64) - lidar.astype(np.int64) == expected).all()


def test_a_tie_goes_to_the_earlier_frame() -> None:
    m = nearest(grid(5, 100 * MS, 12_500_000), grid(200, 25 * MS), tolerance_ns=None)
    assert (m.error_ns == -12_500_000).all()


def test_tolerance_is_inclusive_and_pads() -> None:
    lidar, imu = grid(10, 100 * MS, 7 * MS), grid(400, 25 * MS)
    assert nearest(lidar, imu, tolerance_ns=7 * MS).is_pad.sum() == 0
    m = nearest(lidar, imu, tolerance_ns=7 * MS - 1)
    assert m.is_pad.all() and (m.index == -1).all() and (m.error_ns == 0).all()


def test_nearest_error_is_at_most_half_the_frame_period() -> None:
    cam = grid(400, 30 * MS)  # a 33.3 Hz camera: period 30 ms
    # 10 Hz lidar at every phase in 1 ms steps: residues mod 30 ms cover 0..29 ms
    lidar = np.sort(np.concatenate([grid(30, 100 * MS, p * MS) for p in range(30)]))
    m = nearest(lidar, cam, tolerance_ns=None)
    residue = (lidar.astype(np.int64) - T0) % (30 * MS)
    expected = np.where(residue <= 15 * MS, -residue, 30 * MS - residue)  # tie -> earlier
    assert (m.error_ns == expected).all()
    assert np.abs(m.error_ns).max() == 15 * MS  # the seed's bound: half the frame interval


def test_causal_and_forward_modes() -> None:
    ts = grid(10, 100 * MS)
    q = np.array([T0 - 1, T0, T0 + 150 * MS, T0 + 900 * MS, T0 + 901 * MS], np.uint64)
    before = nearest(q, ts, tolerance_ns=None, mode="before")
    assert before.is_pad.tolist() == [True, False, False, False, False]
    assert before.index.tolist() == [-1, 0, 1, 9, 9]
    assert before.error_ns.tolist() == [0, 0, -50 * MS, 0, -MS]
    after = nearest(q, ts, tolerance_ns=None, mode="after")
    assert after.index.tolist() == [0, 0, 2, 9, -1]
    assert after.is_pad.tolist() == [False, False, False, False, True]
    with pytest.raises(ValueError, match="mode"):
        nearest(q, ts, tolerance_ns=None, mode="middle")  # type: ignore[arg-type]


def test_input_checks() -> None:
    assert nearest([T0], np.empty(0, np.uint64), tolerance_ns=5).is_pad.tolist() == [True]
    with pytest.raises(ValueError, match="sorted; position 1"):
        nearest([T0], [T0 + 5, T0], tolerance_ns=None)
    with pytest.raises(TypeError, match="integer ns"):
        nearest(np.array([1.5]), [T0], tolerance_ns=None)
    with pytest.raises(ValueError, match="tolerance_ns"):
        nearest([T0], [T0], tolerance_ns=-1)
    with pytest.raises(ValueError, match="int64"):
        nearest(np.array([1 << 63], np.uint64), [T0], tolerance_ns=None)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=40),
    st.lists(st.integers(-100, 10_100), min_size=1, max_size=40),
    st.one_of(st.none(), st.integers(0, 500)),
)
def test_nearest_equals_brute_force(stamps: list[int], queries: list[int], tol: int | None) -> None:
    ts = np.sort(np.array(stamps, np.int64))
    m = nearest(queries, ts, tolerance_ns=tol)
    for k, q in enumerate(queries):
        dist = np.abs(ts - q)
        best = int(np.flatnonzero(dist == dist.min())[0])  # earliest among the closest
        if tol is not None and dist[best] > tol:
            assert m.is_pad[k] and m.index[k] == -1
        else:
            assert not m.is_pad[k] and m.error_ns[k] == ts[best] - q
            assert ts[m.index[k]] == ts[best]


# --- intervals -----------------------------------------------------------------


def test_frame_intervals_anchors_and_unknown_durations() -> None:
    ts = [100, 200, 300]
    assert [a.tolist() for a in frame_intervals(ts, [10, 0, 5], anchor="start")] == [
        [100, 200, 300],
        [110, 200, 305],
    ]
    s, e = frame_intervals(ts, [10, 0, 5], anchor="center", default_duration_ns=4)
    assert s.tolist() == [95, 198, 298] and e.tolist() == [105, 202, 303]
    s, e = frame_intervals(ts, [10, 0, 5], anchor="end")
    assert s.tolist() == [90, 200, 295] and e.tolist() == [100, 200, 300]
    with pytest.raises(ValueError, match="anchor"):
        frame_intervals(ts, [1, 1, 1], anchor="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="3 timestamps but 2"):
        frame_intervals(ts, [1, 1], anchor="start")


def test_camera_exposures_against_lidar_scans() -> None:
    scans = frame_intervals(grid(5, 100 * MS), np.full(5, 100 * MS), anchor="start")
    # 10 ms exposures starting at 20 ms, 95 ms (straddles a boundary evenly), 96 ms, 490 ms
    starts = np.array([20, 95, 96, 490], np.int64) * MS + T0
    cams = (starts, starts + 10 * MS)
    m = intersect(cams, scans)
    assert m.index.tolist() == [0, 0, 1, 4]
    assert m.overlap_ns.tolist() == [10 * MS, 5 * MS, 6 * MS, 10 * MS]
    # error: scan centre minus exposure centre
    assert m.error_ns.tolist() == [25 * MS, -50 * MS, 49 * MS, -45 * MS]
    strict = intersect(cams, scans, min_overlap_ns=6 * MS)
    assert strict.is_pad.tolist() == [False, True, False, False]
    assert strict.index[1] == -1 and strict.overlap_ns[1] == 0 and strict.error_ns[1] == 0


def test_instants_touching_and_disjoint_intervals() -> None:
    frames = (np.array([0, 100, 300]), np.array([100, 200, 400]))
    q = (np.array([150, 100, 250, 50, 450]), np.array([150, 100, 260, 50, 460]))
    m = intersect(q, frames)
    # an instant inside a frame; an instant on a shared edge (both touch: closer centre wins,
    # here a tie -> earlier); a gap between frames; inside the first; after all frames
    assert m.index.tolist() == [1, 0, -1, 0, -1]
    assert m.is_pad.tolist() == [False, False, True, False, True]
    assert m.overlap_ns.tolist() == [0, 0, 0, 0, 0]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 120)), min_size=1, max_size=25),
    st.lists(st.tuples(st.integers(-50, 1050), st.integers(0, 60)), min_size=1, max_size=25),
)
def test_intersect_equals_brute_force(
    frames: list[tuple[int, int]], queries: list[tuple[int, int]]
) -> None:
    fs = np.array([a for a, _ in frames], np.int64)
    fe = fs + np.array([d for _, d in frames], np.int64)
    qs = np.array([a for a, _ in queries], np.int64)
    qe = qs + np.array([d for _, d in queries], np.int64)
    m = intersect((qs, qe), (fs, fe))
    for k in range(len(qs)):
        ov = np.minimum(qe[k], fe) - np.maximum(qs[k], fs)
        if ov.max() < 0:
            assert m.is_pad[k]
            continue
        cand = [j for j in range(len(fs)) if ov[j] == ov.max()]
        dist = [abs((fs[j] + (fe[j] - fs[j]) // 2) - (qs[k] + (qe[k] - qs[k]) // 2)) for j in cand]
        want = min(j for j, d in zip(cand, dist, strict=True) if d == min(dist))
        assert m.index[k] == want and m.overlap_ns[k] == ov.max()
