"""Segment naming, sequence numbers and rotation decisions (pure)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from hyperframes.recorder.segments import (
    RotationPolicy,
    list_segments,
    next_sequence,
    parse_segment_name,
    segment_name,
)

T0 = 1_735_689_600_000_000_000  # 2025-01-01T00:00:00Z
S = 1_000_000_000


def test_name_round_trip_and_sorting() -> None:
    name = segment_name("car_1.a", T0 + 61 * S + 5, 42)
    assert name == "car_1.a_20250101T000101Z_000042.hf"
    parsed = parse_segment_name(name)
    assert parsed is not None
    assert parsed.vehicle == "car_1.a"
    assert parsed.seq == 42
    assert parsed.start == dt.datetime(2025, 1, 1, 0, 1, 1, tzinfo=dt.UTC)
    assert not parsed.tmp
    tmp = parse_segment_name(name + ".tmp")
    assert tmp is not None and tmp.tmp
    names = [segment_name("v", T0 + i * 60 * S, i) for i in (3, 1, 2, 10)]
    assert sorted(names) == [segment_name("v", T0 + i * 60 * S, i) for i in (1, 2, 3, 10)]


@pytest.mark.parametrize("bad", ["x.hf", "v_20250101T000101_000001.hf", "v_20250101T000101Z_1.hf",
                                 "v_20250101T000101Z_000001.hfx", "notes.txt"])  # fmt: skip
def test_parse_rejects_other_names(bad: str) -> None:
    assert parse_segment_name(bad) is None


def test_next_sequence_continues_after_highest_including_tmp() -> None:
    names = [
        segment_name("v", T0, 0),
        segment_name("v", T0, 7) + ".tmp",
        segment_name("v", T0, 3),
        segment_name("other", T0, 99),
        "README",
    ]
    assert next_sequence(names, "v") == 8
    assert next_sequence(names, "other") == 100
    assert next_sequence([], "v") == 0


def test_list_segments_finalized_only_in_seq_order(tmp_path: Path) -> None:
    for seq in (2, 0, 1):
        (tmp_path / segment_name("v", T0 + seq * S, seq)).write_bytes(b"x")
    (tmp_path / (segment_name("v", T0, 3) + ".tmp")).write_bytes(b"x")
    (tmp_path / segment_name("w", T0, 9)).write_bytes(b"x")
    got = [parse_segment_name(p.name) for p in list_segments(tmp_path, "v")]
    assert [p.seq for p in got if p] == [0, 1, 2]


def test_rotation_by_duration_on_the_grid() -> None:
    pol = RotationPolicy(segment_ns=10 * S)
    first = T0 + 3 * S  # a segment started mid-slot ends at the next grid line
    assert not pol.should_rotate(first, T0 + 9 * S, 0)
    assert pol.should_rotate(first, T0 + 10 * S, 0)
    assert pol.should_rotate(first, T0 + 95 * S, 0)


def test_rotation_by_size_and_both() -> None:
    size_only = RotationPolicy(segment_ns=None, max_bytes=1000)
    assert not size_only.should_rotate(T0, T0 + 3600 * S, 999)
    assert size_only.should_rotate(T0, T0, 1000)
    both = RotationPolicy(segment_ns=10 * S, max_bytes=1000)
    assert both.should_rotate(T0, T0 + S, 5000)
    assert both.should_rotate(T0, T0 + 10 * S, 0)


def test_rotation_policy_validation() -> None:
    with pytest.raises(ValueError, match="needs"):
        RotationPolicy(None, None)
    with pytest.raises(ValueError, match="segment_ns"):
        RotationPolicy(0)
    with pytest.raises(ValueError, match="max_bytes"):
        RotationPolicy(None, -1)
