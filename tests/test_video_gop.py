"""IDR placement (hyperframes.video.gop.IdrPlanner): pure decisions on timestamps."""

from __future__ import annotations

import pytest

from hyperframes.format.windows import window_of
from hyperframes.video.gop import IdrPlanner, plan_idrs

W = 100_000_000  # 100 ms windows
T0 = 17_356_896_000 * W  # a window boundary


def idr_positions(planner: IdrPlanner, stamps: list[int]) -> list[int]:
    return [i for i, t in enumerate(stamps) if planner.is_idr(t)]


def cam(n: int, period: int = 33_333_333, phase: int = 1_000_000) -> list[int]:
    return [T0 + phase + i * period for i in range(n)]


def test_first_frame_of_every_kth_window() -> None:
    stamps = cam(30)  # 1 s at 30 Hz: windows of 3-4 frames
    assert idr_positions(IdrPlanner(W, k=1, max_gop=100), stamps) == [
        0, 3, 6, 9, 12, 15, 18, 21, 24, 27
    ]  # fmt: skip
    # groups of 3 windows on the global grid (window ids divisible by 3): every 300 ms
    assert idr_positions(IdrPlanner(W, k=3, max_gop=100), stamps) == [0, 9, 18, 27]
    late_start = stamps[4:]  # starting mid-group: an IDR at once, then back on the grid
    assert idr_positions(IdrPlanner(W, k=3, max_gop=100), late_start) == [0, 5, 14, 23]


def test_dropped_frames_do_not_shift_the_grid() -> None:
    stamps = cam(30)
    full = {stamps[i] for i in idr_positions(IdrPlanner(W, k=3, max_gop=100), stamps)}
    dropped = [t for i, t in enumerate(stamps) if i not in (4, 9, 13)]  # 9 is an IDR
    got = {dropped[i] for i in idr_positions(IdrPlanner(W, k=3, max_gop=100), dropped)}
    assert got - full == {stamps[10]}  # the next frame of that group takes the IDR
    assert full - got == {stamps[9]}  # the dropped IDR; all later IDRs unchanged


def test_max_gop_caps_long_groups() -> None:
    stamps = cam(30)
    assert idr_positions(IdrPlanner(W, k=10, max_gop=8), stamps) == [0, 8, 16, 24]
    assert idr_positions(IdrPlanner(W, k=1, max_gop=1), stamps[:5]) == [0, 1, 2, 3, 4]


def test_a_camera_gap_restarts_at_the_next_group() -> None:
    stamps = [*cam(3), T0 + 10 * W + 5]  # a 1 s gap: next frame in a new group
    assert idr_positions(IdrPlanner(W, k=3, max_gop=100), stamps) == [0, 3]


def test_reset_and_order() -> None:
    p = IdrPlanner(W, k=3)
    assert p.is_idr(T0 + 1) and not p.is_idr(T0 + 2)
    p.reset()
    assert p.is_idr(T0 + 3)
    p.is_idr(T0 + 10 * W)
    with pytest.raises(ValueError, match="timestamp order"):
        p.is_idr(T0 + 1)


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"max_gop": 0}, {"window_ns": 0}])
def test_invalid_settings(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        IdrPlanner(**{"window_ns": W, **kwargs})


def gop_lengths(idrs: list[bool]) -> list[int]:
    starts = [i for i, x in enumerate(idrs) if x]
    return [b - a for a, b in zip(starts, [*starts[1:], len(idrs)], strict=True)]


@pytest.mark.parametrize("rate", [10, 15, 30])
@pytest.mark.parametrize("k", [1, 3])
def test_no_gop_of_one_frame_at_any_start_phase(rate: int, k: int) -> None:
    """Every start phase over a whole group of windows, and every frame stamped exactly on
    a window boundary (phase 0 at 10 Hz puts every frame on one): never a one-frame GOP,
    and after the first GOP every IDR is the first frame of its group."""
    period = round(1e9 / rate)
    phases = sorted({*range(0, k * W, period // 7), *(j * W for j in range(k + 1)), 1})
    for phase in phases:
        for n in (1, 2, 3, 4, 7, 2 * rate):
            stamps = [T0 + phase + i * period for i in range(n)]
            idrs = plan_idrs(stamps, W, k=k, max_gop=30)
            assert idrs[0], (phase, n)
            lengths = gop_lengths(idrs)
            assert n == 1 or min(lengths) >= 2, (rate, k, phase, n, lengths)
            assert max(lengths) <= 30
            groups = [window_of(t, W) // k for t in stamps]
            for i in range(1, n):
                if idrs[i]:
                    assert groups[i] != groups[i - 1], (phase, n, i)
            # the grid holds: a group start is an IDR except right after an IDR or at the end
            for i in range(2, n - 1):
                if groups[i] != groups[i - 1] and not idrs[i - 1]:
                    assert idrs[i], (rate, k, phase, n, i)


def test_lone_first_frame_joins_the_next_group() -> None:
    """The case of issue 18: frame 0 in the last frame interval of a group."""
    stamps = [T0 - 10_000_000 + i * 33_333_333 for i in range(12)]  # frame 0 at -10 ms
    p = IdrPlanner(W, k=3, max_gop=30)
    assert [i for i, t in enumerate(stamps) if p.is_idr(t)] == [0, 10]
    on_boundary = [T0 + i * 33_333_333 for i in range(12)]  # frame 0 closes the window
    assert [i for i, x in enumerate(plan_idrs(on_boundary, W, k=3)) if x] == [0, 10]
    assert plan_idrs([T0], W) == [True]  # a stream of one frame: its one GOP
    assert plan_idrs([T0 + 1, T0 + 3 * W + 1], W) == [True, False]  # lone last frame


def test_max_gop_one_still_means_all_idr() -> None:
    assert plan_idrs(cam(5), W, k=1, max_gop=1) == [True] * 5
