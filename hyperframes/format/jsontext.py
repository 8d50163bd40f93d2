"""JSON from outside, parsed totally: one parser, one set of limits, one error.

Every JSON document the project reads from somewhere it does not control
(a file's metadata block, an event frame, an event message off the wire, an
event-log line, a control-socket request) goes through :func:`parse_json`.
Whatever the bytes, it returns a value or raises ``ValueError`` naming what
was wrong; never ``RecursionError``, ``OverflowError`` or
``UnicodeDecodeError``. The limits, stated once:

- :data:`MAX_PARSE_DEPTH` (64): nesting of the whole document. Deeper is
  refused before a value is built (orjson stops at 1024 while parsing; the
  standard parser, used for documents with very long digit runs, is given
  the document only after a nesting scan), and every value that comes out is
  at most this deep, so code that walks it recursively (``repr``, ``==``,
  ``json.dumps``) cannot run out of stack.
- :data:`MAX_JSON_DEPTH` (32): nesting of a free-form value inside a
  document (a stream's ``extra``, an event's ``payload``), checked by
  :func:`check_json_value`.
- Integers: never wider than 64 bits; a number that only fits a float as
  infinity is refused. Floats are finite (JSON has no NaN or Infinity).
- Size: each caller states its own (``max_bytes``): 64 KiB for an event,
  64 MiB for a metadata block.

Pure: bytes in, values out.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import orjson

__all__ = [
    "MAX_PARSE_DEPTH",
    "MAX_JSON_DEPTH",
    "parse_json",
    "check_json_value",
    "brief",
]

MAX_PARSE_DEPTH: Final = 64
"""Deepest nesting of a whole JSON document read from outside."""
MAX_JSON_DEPTH: Final = 32
"""Deepest nesting of a free-form value (``extra``, ``payload``) inside a document."""
_U64: Final = 1 << 64

# every digit as b"0", every other byte as b"\x01": a run of 20 digits (an integer this long
# may be wider than 64 bits) is then one substring search (~1.5 us for 2 KB; a regex: ~15)
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 1 for b in range(256))
_LONG_RUN = b"0" * 20
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _no_constant(name: str) -> float:
    raise ValueError(f"holds {name}, not a finite number")


_STDLIB = json.JSONDecoder(parse_constant=_no_constant)


def _depth(data: bytes) -> int:
    """The deepest nesting of ``data`` (brackets inside strings do not count)."""
    if data.count(b"[") + data.count(b"{") <= MAX_PARSE_DEPTH:
        return 0  # cannot be deeper than the number of containers
    depth = deepest = 0
    for c in _STRING.sub(b'""', data).translate(None, delete=_NOT_BRACKETS):
        if c in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def parse_json(data: bytes | bytearray | memoryview | str, what: str,
               max_bytes: int | None = None, *, typed: bool = False) -> Any:  # fmt: skip
    """The JSON value of ``data``; ``ValueError`` starting with ``what`` if it cannot be one.

    UTF-8 only; at most ``max_bytes`` long (when given); nesting at most
    :data:`MAX_PARSE_DEPTH`; integers within 64 bits; finite numbers.

    ``typed``: the caller checks the type of every container it reads and
    passes every free-form value to :func:`check_json_value`, so the walk that
    proves the nesting bound after orjson (~2x orjson's own time on a 2 KB
    metadata block with a hundred containers) is left to it; orjson's own
    bound (1024) still holds while parsing.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if max_bytes is not None and len(raw) > max_bytes:
        raise ValueError(f"{what} of {len(raw)} bytes is over the limit of {max_bytes}")
    if _LONG_RUN not in raw.translate(_DIGITS):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if "depth limit" in str(exc):
                raise ValueError(f"{what} is nested deeper than {MAX_PARSE_DEPTH} levels") from None
            raise ValueError(f"{what} is not valid JSON: {exc}") from None
        if not typed and raw.count(b"[") + raw.count(b"{") > MAX_PARSE_DEPTH:
            _check_depth(value, what)
        return value
    # A very long digit run: orjson would read an integer wider than 64 bits as a float, the
    # standard parser keeps it an int for the checks below to refuse. It recurses: scan first.
    if _depth(raw) > MAX_PARSE_DEPTH:
        raise ValueError(f"{what} is nested deeper than {MAX_PARSE_DEPTH} levels")
    try:
        value = _STDLIB.decode(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
    _check_numbers(value, what)
    return value


def _check_depth(value: Any, what: str) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > MAX_PARSE_DEPTH:
            raise ValueError(f"{what} is nested deeper than {MAX_PARSE_DEPTH} levels")
        for v in container.values() if type(container) is dict else container:
            if type(v) is dict or type(v) is list:
                stack.append((v, depth + 1))


def _check_numbers(value: Any, what: str) -> None:
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
        elif t is int and not -_U64 < v < _U64:
            raise ValueError(f"{what} holds an integer wider than 64 bits")
        elif t is float and not math.isfinite(v):
            raise ValueError(f"{what} holds a number out of range")


def check_json_value(value: dict[str, Any] | list[Any], what: str) -> None:
    """Refuse (``ValueError``) what a reader refuses in a free-form value such as ``extra``.

    Nesting deeper than :data:`MAX_JSON_DEPTH`, non-finite floats (JSON has no
    NaN or Infinity) and integers wider than 64 bits: writer and reader agree.
    """
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        values: Any = container.values() if type(container) is dict else container
        for v in values:
            t = type(v)
            if t is dict or t is list:
                if depth >= MAX_JSON_DEPTH:
                    raise ValueError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
                stack.append((v, depth + 1))
            elif t is float:
                if not math.isfinite(v):
                    raise ValueError(f"{what} holds a number out of range")
            elif t is int and not -_U64 < v < _U64:
                raise ValueError(f"{what} holds an integer wider than 64 bits")


def brief(value: object, width: int = 40) -> str:
    """A short, safe description of an untrusted value for an error message.

    Never recurses past one level: a flat list of a few scalars is shown as
    it is, any other list or object by its type and length; the text is cut
    to ``width`` characters (and a huge integer is never turned into digits).
    """
    if (
        isinstance(value, list | tuple)
        and len(value) <= 16
        and all(_scalar(v, width) for v in value)
    ):
        text = repr(list(value))
    elif isinstance(value, dict | list | tuple | set | frozenset):
        return f"a {type(value).__name__} of {len(value)}"
    elif not _scalar(value, width) and isinstance(value, int):
        return f"an integer of over {width} digits"
    else:
        text = repr(value)
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _scalar(v: object, width: int) -> bool:
    if isinstance(v, int) and not isinstance(v, bool):
        return bool(abs(v) < 10**width)
    return v is None or isinstance(v, bool | float | str)
