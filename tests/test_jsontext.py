"""The one parser of outside JSON is total: a value or ValueError, whatever the bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperframes.format.jsontext import MAX_PARSE_DEPTH, brief, parse_json

JSON_BYTES = st.lists(st.sampled_from(list(b'{}[]",:0123456789-.eE \\ntfalsenul\xff\xc3')),
                      max_size=400).map(bytes)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(JSON_BYTES)
def test_any_bytes_give_a_value_or_a_value_error(data: bytes) -> None:
    try:
        parse_json(data, "doc")
    except ValueError as exc:
        assert str(exc).startswith("doc ")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"[" * 30_000 + b"]" * 30_000, "nested deeper than 64"),
        (b"[" * 65 + b"1" + b"]" * 65, "nested deeper than 64"),
        # a long digit run takes the standard parser: the nesting is scanned first
        (b"[" * 30_000 + b"1" * 25 + b"]" * 30_000, "nested deeper than 64"),
        (b"[" * 65 + b"1" * 25 + b"]" * 65, "nested deeper than 64"),
        (b"1" + b"0" * 400, "wider than 64 bits"),
        (b'{"a":' + b"9" * 30 + b"}", "wider than 64 bits"),
        (b'{"a":-' + b"9" * 21 + b"}", "wider than 64 bits"),
        (b"[1e400]", "not valid JSON"),
        (b'{"a":' + b"1" * 25 + b".5e400}", "out of range"),
        (b"NaN", "not valid JSON"),
        (b'"\xff"', "not valid JSON"),
        (b'"\xff' + b"1" * 25 + b'"', "not UTF-8"),
        (b"[" + b"1," * 10 + b"1]", "over the limit of 16"),
    ],
)
def test_what_is_refused_and_why(data: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_json(data, "doc", 16 if b"1,1," in data else None)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = b'{"s":"' + b"[" * 500 + b'","n":' + b"1" * 25 + b"}"
    with pytest.raises(ValueError, match="wider than 64 bits"):  # parsed, not refused as deep
        parse_json(text, "doc")
    deep_ok = b"[" * MAX_PARSE_DEPTH + b"]" * MAX_PARSE_DEPTH
    assert parse_json(deep_ok, "doc") is not None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ([1, -2], "[1, -2]"),
        ({"a": 1}, "a dict of 1"),
        ([[1]], "a list of 1"),
        pytest.param(10**5000, "an integer of over 40 digits", id="huge-int"),
        ("x" * 100, "'" + "x" * 36 + "..."),
    ],
)
def test_brief_never_recurses_or_spells_out_huge_values(value: Any, shown: str) -> None:
    assert brief(value) == shown
