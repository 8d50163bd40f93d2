"""The pure drive logic: which spans to search, gaps, stream-table changes."""

from __future__ import annotations

import random

from hyperframes.drive.plan import SpanIndex, find_gaps, stream_changes


def _brute(spans: list[tuple[int, int]], a: int, b: int) -> list[int]:
    return sorted(i for i, (s, e) in enumerate(spans) if s <= b and e >= a)


def test_overlapping_and_candidates_agree_with_brute_force() -> None:
    rng = random.Random(0)
    for _ in range(200):
        spans = []
        t = 0
        for _ in range(rng.randrange(1, 12)):
            start = t - rng.randrange(0, 3) * 10  # late frames widen a span backwards
            t += rng.randrange(1, 5) * 10 + (rng.randrange(0, 100) if rng.random() < 0.2 else 0)
            spans.append((start, t))
        idx = SpanIndex(spans)
        for _ in range(20):
            a = rng.randrange(-20, t + 20)
            b = a + rng.randrange(0, 40)
            assert sorted(idx.overlapping(a, b)) == _brute(spans, a, b)
            for mode in ("nearest", "before", "after"):
                seen = [p for p, _, _ in idx.candidates(a, mode)]  # never stopped early
                assert len(seen) == len(set(seen))
                frontiers = [f for _, _, f in idx.candidates(a, mode)]
                assert frontiers == sorted(frontiers)
                if mode == "nearest":
                    assert sorted(seen) == list(range(len(spans)))
                if mode == "before":
                    assert set(seen) == {i for i, (s, _) in enumerate(spans) if s <= a}


def test_gaps_count_skipped_segments() -> None:
    spans = [(0, 10), (8, 20), (50, 60), (60, 70), (200, 210)]
    gaps = find_gaps(spans, [0, 1, 2, 3, 7], min_gap_ns=5)
    assert [(g.start_ns, g.end_ns, g.after, g.missing_segments) for g in gaps] == [
        (20, 50, 1, 0),
        (70, 200, 3, 3),
    ]
    assert find_gaps(spans, [None] * 5, min_gap_ns=100) == [find_gaps(spans, [None] * 5)[-1]]


def test_stream_changes() -> None:
    a = {"name": "cam", "id": 0, "codec": "none", "rate_hz": 30.0}
    b = {"name": "imu", "id": 1, "codec": "lz4"}
    changed = {**a, "rate_hz": 20.0}
    out = stream_changes([[a, b], [a, b], [changed], [changed, b]])
    assert [(c.segment, c.stream, c.change, c.fields) for c in out] == [
        (2, "imu", "removed", ()),
        (2, "cam", "changed", ("rate_hz",)),
        (3, "imu", "added", ()),
    ]
