"""IDR placement (hyperframes.video.gop.IdrPlanner): pure decisions on timestamps."""

from __future__ import annotations

import pytest

from hyperframes.video.gop import IdrPlanner

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
