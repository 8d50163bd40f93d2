"""Timestamp search and the window grid, checked against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperframes.format import search
from hyperframes.format.windows import window_end, window_of, window_start

stamps = st.lists(st.integers(0, 10_000), max_size=60).map(lambda xs: np.array(sorted(xs), "<u8"))
BIG = 1_735_689_600_000_000_000  # real epoch-ns values exceed float64 precision


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40), st.integers(-20, 10_020))
def test_search_is_exact_at_epoch_nanosecond_scale(xs: list[int], dt: int) -> None:
    ts = np.array(sorted(BIG + x for x in xs), "<u8")
    t = BIG + dt
    got = search.find(ts, t, "after")
    want = [v for v in sorted(BIG + x for x in xs) if v >= t]
    assert (int(ts[got]) if got is not None else None) == (want[0] if want else None)
    lo, hi = search.window_between(ts, t, t + 100)
    assert [int(v) for v in ts[lo:hi]] == [int(v) for v in ts if t < int(v) <= t + 100]


@given(stamps, st.integers(-50, 10_050))
def test_before_after_nearest_match_brute_force(ts: np.ndarray, t: int) -> None:
    vals = [int(x) for x in ts]
    before = [i for i, v in enumerate(vals) if v <= t]
    after = [i for i, v in enumerate(vals) if v >= t]
    got_b = search.find(ts, t, "before")
    got_a = search.find(ts, t, "after")
    assert (vals[got_b] if got_b is not None else None) == (vals[before[-1]] if before else None)
    assert (vals[got_a] if got_a is not None else None) == (vals[after[0]] if after else None)
    got_n = search.find(ts, t, "nearest")
    if not vals:
        assert got_n is None
    else:
        assert got_n is not None
        assert abs(vals[got_n] - t) == min(abs(v - t) for v in vals)


@given(stamps, st.integers(-10, 10_010), st.integers(-10, 10_010))
def test_range_between_is_inclusive(ts: np.ndarray, a: int, b: int) -> None:
    lo, hi = search.range_between(ts, a, b)
    assert [int(x) for x in ts[lo:hi]] == [int(x) for x in ts if a <= x <= b]


@given(stamps, st.integers(-10, 10_010), st.integers(1, 3_000))
def test_window_between_is_start_exclusive_end_inclusive(ts: np.ndarray, s: int, n: int) -> None:
    lo, hi = search.window_between(ts, s, s + n)
    assert [int(x) for x in ts[lo:hi]] == [int(x) for x in ts if s < x <= s + n]


def test_nearest_tie_prefers_earlier() -> None:
    ts = np.array([10, 20], "<u8")
    assert search.find(ts, 15, "nearest") == 0
    assert search.find(ts, 16, "nearest") == 1


def test_bad_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="mode"):
        search.find(np.array([1], "<u8"), 1, "closest")  # type: ignore[arg-type]


@given(st.integers(0, 2**63), st.integers(1, 10**12))
def test_window_of_is_end_inclusive(t: int, length: int) -> None:
    k = window_of(t, length)
    assert window_start(k, length) < t <= window_end(k, length)


def test_frame_on_boundary_belongs_to_window_ending_there() -> None:
    assert window_of(100, 100) == 0
    assert window_of(101, 100) == 1
    assert window_of(1, 100) == 0
    with pytest.raises(ValueError):
        window_of(5, 0)


@given(stamps, st.one_of(st.integers(-50, 10_050), st.sampled_from([-(2**70), 2**64, 2**70])))
def test_list_search_agrees_with_the_array_search(ts: np.ndarray, t: int) -> None:
    as_list = ts.tolist()
    for mode in ("nearest", "before", "after"):
        assert search.find_in_list(as_list, t, mode) == search.find(ts, t, mode)
    with pytest.raises(ValueError, match="mode"):
        search.find_in_list([1], 1, "middle")  # type: ignore[arg-type]
