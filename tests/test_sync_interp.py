"""Interpolation against analytic signals: linear motion, constant-rate rotation."""

from __future__ import annotations

import numpy as np
import pytest

from hyperframes.sync import interpolate_linear, slerp

T0 = 1_735_689_600_000_000_000
MS = 1_000_000


def imu_times(n: int = 200, period: int = 5 * MS) -> np.ndarray:
    return (T0 + np.arange(n, dtype=np.int64) * period).astype(np.uint64)


def linear_signal(ts: np.ndarray) -> np.ndarray:
    """Three channels linear in time (seconds since T0): exact under linear interpolation."""
    s = (ts.astype(np.int64) - T0) / 1e9
    return np.stack([0.5 + 2.0 * s, -3.0 * s, np.full_like(s, 9.81)], axis=1)


def test_linear_signal_is_reproduced_at_arbitrary_times() -> None:
    ts = imu_times()
    rng = np.random.default_rng(1)
    q = np.sort(T0 + rng.integers(0, 199 * 5 * MS, 500)).astype(np.uint64)
    got = interpolate_linear(q, ts, linear_signal(ts), max_gap_ns=5 * MS)
    assert not got.is_pad.any()
    np.testing.assert_allclose(got.values, linear_signal(q), rtol=0, atol=1e-12)


def test_weights_come_from_integer_ns_offsets() -> None:
    ts = np.array([T0, T0 + 1000], np.uint64)
    values = np.array([0.0, 1000.0])  # value == ns since T0
    q = np.array([T0 + 1, T0 + 7, T0 + 999], np.uint64)
    got = interpolate_linear(q, ts, values, max_gap_ns=None)
    # exact: float64 seconds at this epoch would be off by up to 256 ns
    assert got.values.tolist() == [1.0, 7.0, 999.0]


def test_samples_are_returned_exactly_and_gaps_are_not_bridged() -> None:
    ts = imu_times(20)
    keep = np.ones(20, bool)
    keep[8:11] = False  # a 20 ms dropout between samples 7 and 11
    ts_d = ts[keep]
    v = np.random.default_rng(2).normal(size=(len(ts_d), 6))
    got = interpolate_linear(ts_d, ts_d, v, max_gap_ns=10 * MS)
    assert not got.is_pad.any() and (got.values == v).all()  # bit-exact on samples
    q = np.array([int(ts[7]) + 1, int(ts[9]), int(ts[11]) - 1, int(ts[11]) + 1], np.uint64)
    got = interpolate_linear(q, ts_d, v, max_gap_ns=10 * MS)
    assert got.is_pad.tolist() == [True, True, True, False]
    assert np.isnan(got.values[:3]).all()
    loose = interpolate_linear(q, ts_d, v, max_gap_ns=20 * MS)
    assert not loose.is_pad.any()


def test_extrapolation_only_within_its_limit() -> None:
    ts = imu_times(10)
    v = linear_signal(ts)
    q = np.array([T0 - 3 * MS, int(ts[-1]) + 2 * MS, int(ts[-1]) + 2 * MS + 1], np.uint64)
    assert interpolate_linear(q, ts, v, max_gap_ns=None).is_pad.all()
    got = interpolate_linear(q, ts, v, max_gap_ns=None, extrapolate_ns=3 * MS)
    assert got.is_pad.tolist() == [False, False, False]
    np.testing.assert_allclose(got.values, linear_signal(q), atol=1e-12)
    got = interpolate_linear(q, ts, v, max_gap_ns=None, extrapolate_ns=2 * MS)
    assert got.is_pad.tolist() == [True, False, True]


def test_degenerate_inputs() -> None:
    one = interpolate_linear([T0, T0 + 1], [T0], np.array([[4.0]]), max_gap_ns=None)
    assert one.is_pad.tolist() == [False, True] and one.values[0, 0] == 4.0
    none = interpolate_linear([T0], np.empty(0, np.int64), np.empty((0, 3)), max_gap_ns=None)
    assert none.is_pad.tolist() == [True] and none.values.shape == (1, 3)
    with pytest.raises(ValueError, match="2 timestamps but values of shape"):
        interpolate_linear([T0], [T0, T0 + 1], np.zeros(3), max_gap_ns=None)
    with pytest.raises(ValueError, match="max_gap_ns"):
        interpolate_linear([T0], [T0, T0 + 1], np.zeros(2), max_gap_ns=-1)


# --- slerp ---------------------------------------------------------------------------


def yaw_quaternion(ts: np.ndarray, rate_rad_s: float, wxyz: bool = True) -> np.ndarray:
    angle = rate_rad_s * (ts.astype(np.int64) - T0) / 1e9
    w, z = np.cos(angle / 2), np.sin(angle / 2)
    zero = np.zeros_like(w)
    return np.stack([w, zero, zero, z] if wxyz else [zero, zero, z, w], axis=1)


@pytest.mark.parametrize("wxyz", [True, False])
def test_slerp_reproduces_constant_rate_rotation(wxyz: bool) -> None:
    ts = imu_times(100, 10 * MS)  # 100 Hz orientation, 1 s, turning at 2 rad/s (0.02 rad/step)
    q = np.sort(T0 + np.random.default_rng(3).integers(0, 99 * 10 * MS, 300)).astype(np.uint64)
    got = slerp(q, ts, yaw_quaternion(ts, 2.0, wxyz), max_gap_ns=10 * MS)
    assert not got.is_pad.any()
    np.testing.assert_allclose(got.values, yaw_quaternion(q, 2.0, wxyz), atol=1e-12)


def test_slerp_takes_the_short_arc_and_handles_no_rotation() -> None:
    ts = imu_times(50, 10 * MS)
    quats = yaw_quaternion(ts, 1.0)
    flipped = quats * np.where(np.arange(50) % 2, -1.0, 1.0)[:, None]  # same rotations
    q = (np.asarray(ts[:-1], np.int64) + 4 * MS).astype(np.uint64)
    got = slerp(q, ts, flipped, max_gap_ns=None).values
    want = yaw_quaternion(q, 1.0)
    np.testing.assert_allclose(np.abs(np.sum(got * want, axis=1)), 1.0, atol=1e-12)
    still = slerp(q, ts, np.tile([0.0, 0.0, 0.0, 2.0], (50, 1)), max_gap_ns=None)
    np.testing.assert_allclose(still.values, np.tile([0.0, 0.0, 0.0, 1.0], (49, 1)))
    with pytest.raises(ValueError, match="non-zero"):
        slerp(q, ts, np.zeros((50, 4)), max_gap_ns=None)
    with pytest.raises(ValueError, match=r"\(50, 4\) quaternions"):
        slerp(q, ts, np.zeros((50, 3)), max_gap_ns=None)


def test_slerp_gap_and_extrapolation_masks() -> None:
    ts = np.delete(imu_times(30, 10 * MS), [10, 11])  # 30 ms hole
    quats = yaw_quaternion(ts, 2.0)
    q = np.array([int(ts[9]) + 5 * MS, int(ts[-1]) + 5 * MS], np.uint64)
    assert slerp(q, ts, quats, max_gap_ns=10 * MS).is_pad.tolist() == [True, True]
    got = slerp(q, ts, quats, max_gap_ns=30 * MS, extrapolate_ns=5 * MS)
    assert not got.is_pad.any()
    np.testing.assert_allclose(got.values, yaw_quaternion(q, 2.0), atol=1e-12)
