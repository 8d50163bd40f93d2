"""Generic validation for the YAML config: a strict safe loader and typed field checks.

Every check raises :class:`recorder.errors.ConfigError` naming the key path,
what was wrong and what is allowed. Nothing here knows the config's schema.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from recorder.errors import ConfigError

T = TypeVar("T")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool | None):
            line = key_node.start_mark.line + 1
            raise ConfigError("", f"line {line}: mapping keys must be plain names")
        if key in seen:
            line = key_node.start_mark.line + 1
            raise ConfigError("", f"line {line}: key {key!r} appears twice in one mapping")
        seen.add(key)
    return dict(loader.construct_mapping(node))


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


# --- validation helpers ----------------------------------------------------------


class _Section:
    """A mapping being validated: typed getters that name the key path on error."""

    def __init__(self, data: object, path: str, allowed: Sequence[str]) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(path, f"must be a mapping, got {_kind(data)}")
        for key in data:
            if not isinstance(key, str) or key not in allowed:
                hint = _suggest(str(key), allowed)
                raise ConfigError(
                    _join(path, str(key)),
                    f"unknown key{hint} (allowed here: {', '.join(allowed)})",
                )
        self.data = data
        self.path = path

    def key(self, name: str) -> str:
        return _join(self.path, name)

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def get(self, name: str, check: Callable[[str, object], T], default: T) -> T:
        value = self.data.get(name)
        return default if value is None else check(self.key(name), value)

    def need(self, name: str, check: Callable[[str, object], T]) -> T:
        if name not in self.data or self.data[name] is None:
            raise ConfigError(self.key(name), "required key is missing")
        return check(self.key(name), self.data[name])


def _suggest(word: str, allowed: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest allowed word (typo or prefix), else ``""``."""
    close = difflib.get_close_matches(word, allowed, n=1, cutoff=0.6)
    if not close and len(word) >= 2:
        close = [a for a in allowed if a.startswith(word) or word.startswith(a)][:1]
    return f"; did you mean {close[0]!r}?" if close else ""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"{type(value).__name__} {value!r}"
    )


def _str(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"must be a non-empty string, got {_kind(value)}")
    return value


def _bool(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"must be true or false, got {_kind(value)}")
    return value


def _int_in(lo: int, hi: int | None = None) -> Callable[[str, object], int]:
    def check(key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"must be an integer, got {_kind(value)}")
        if value < lo or (hi is not None and value > hi):
            allowed = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ConfigError(key, f"must be {allowed}, got {value}")
        return value

    return check


def _positive(hi: float | None = None, zero_ok: bool = False) -> Callable[[str, object], float]:
    def check(key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(key, f"must be a number, got {_kind(value)}")
        v = float(value)
        if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok) or (hi is not None and v > hi):
            low = ">= 0" if zero_ok else "> 0"
            raise ConfigError(
                key, f"must be {low}" + (f" and <= {hi:g}" if hi else "") + f", got {value}"
            )
        return v

    return check


def _choice(*allowed: str) -> Callable[[str, object], str]:
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            hint = _suggest(str(value), allowed)
            raise ConfigError(
                key, f"{value!r} is not allowed{hint} (allowed: {', '.join(allowed)})"
            )
        return value

    return check


def _path(key: str, value: object) -> Path:
    return Path(_str(key, value)).expanduser()


def _dtype(key: str, value: object) -> str:
    text = _str(key, value)
    try:
        dt = np.dtype(text)
    except TypeError:
        raise ConfigError(key, f"{text!r} is not a numpy dtype (e.g. '<f4', 'u1')") from None
    if dt.hasobject or dt.itemsize == 0:
        raise ConfigError(key, f"{text!r} is not a fixed-size dtype")
    return text


def _shape(key: str, value: object) -> tuple[int, ...]:
    dims = tuple(_int_in(-1)(f"{key}[{j}]", v) for j, v in enumerate(_list(value, key)))
    if not dims or 0 in dims or dims.count(-1) > 1:
        raise ConfigError(key, f"{list(dims)}: sizes must be > 0, with at most one -1 (any)")
    return dims


def _mapping(key: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(key, f"must be a mapping with string keys, got {_kind(value)}")
    return dict(value)


def _list(data: object, key: str) -> list[Any]:
    if not isinstance(data, list):
        raise ConfigError(key, f"must be a list, got {_kind(data)}")
    return data


# --- sections --------------------------------------------------------------------
