"""YAML configs validated with precise messages: shared by the recorder and the converter.

A strict safe loader (a key repeated in one mapping is an error, where plain
``yaml.safe_load`` keeps the last one silently) and typed field checks. Every
check raises :class:`hyperframes.errors.ConfigError` naming the key path
(``streams[3].codec``), what was found and what is allowed, with a
did-you-mean suggestion for unknown keys and choices. Nothing here knows a
schema; the recorder and the converter build theirs from these parts and
re-raise the error as their own subclass.

A config is trusted less than the code that reads it: the file is capped at
:data:`MAX_CONFIG_BYTES`, nesting at :data:`MAX_DEPTH`, aliases (``*name``,
the "billion laughs") are refused, values are echoed cut short
(:func:`shown`) and secrets not at all (:func:`secret`). Each error is one line.

PyYAML is imported only when a file is loaded (it is not a core dependency).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hyperframes._install import install_hint
from hyperframes.errors import ConfigError
from hyperframes.storage.objects import split_s3_url

__all__ = [
    "ConfigError",
    "Section",
    "Check",
    "load_yaml",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "shown",
    "secret",
    "kind",
    "suggest",
    "join",
    "string",
    "store_root",
    "catalog_root",
    "boolean",
    "int_in",
    "number",
    "choice",
    "auto_or",
    "path",
    "dtype",
    "shape",
    "mapping",
    "listing",
]

T = TypeVar("T")
Check = Callable[[str, object], T]

MAX_CONFIG_BYTES = 256 << 10  # a vehicle config is a few KB; a bigger file is refused unread
MAX_DEPTH = 64  # nesting of mappings and lists (``extra`` itself allows 32)


def load_yaml(file: str | os.PathLike[str], extra: str) -> object:
    """Read one YAML document with the strict safe loader.

    ``extra`` names the hyperframes extra that brings PyYAML, for the message
    when it is missing. Raises :class:`ConfigError` with ``source`` set.
    """
    source = os.fspath(file)
    try:
        import yaml  # noqa: PLC0415 - optional: only configs need it
    except ImportError:
        raise ConfigError(
            "", f"reading a YAML config needs PyYAML: {install_hint(extra)}", source
        ) from None
    try:
        with Path(file).open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError("", f"cannot read: {exc.strerror or exc}", source) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("", f"larger than {MAX_CONFIG_BYTES >> 10} KiB; not a config", source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"not UTF-8 text: {exc.reason} at byte {exc.start}", source) from None
    try:
        return yaml.load(text, Loader=_strict_loader(yaml))  # a SafeLoader subclass
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.problem, source) from None
    except yaml.MarkedYAMLError as exc:  # the message without the snippet (it may hold a secret)
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context
        raise ConfigError("", f"invalid YAML{where}: {what}", source) from None
    except yaml.YAMLError as exc:
        raise ConfigError("", f"invalid YAML: {type(exc).__name__}", source) from None
    except RecursionError:
        raise ConfigError("", f"nested too deeply (at most {MAX_DEPTH} levels)", source) from None


_LOADERS: dict[int, Any] = {}


def _strict_loader(yaml: Any) -> Any:
    """A SafeLoader subclass that rejects repeated and non-scalar mapping keys (cached)."""
    loader = _LOADERS.get(id(yaml))
    if loader is not None:
        return loader

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
        """SafeLoader that rejects repeated keys, aliases and nesting deeper than MAX_DEPTH."""

        _depth = 0

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            # ``[[[[...``: refused as the scanner meets it (scanning ahead over a
            # long run of brackets is slow before the composer sees any of them)
            if self.flow_level >= MAX_DEPTH:
                line = self.get_mark().line + 1
                raise ConfigError("", f"line {line}: nested deeper than {MAX_DEPTH} levels")
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError(
                    "", f"line {line}: YAML aliases ({shown('*' + str(event.anchor), 40)}) are "
                    "not allowed in a config; write the value out"
                )  # fmt: skip
            if self._depth >= MAX_DEPTH:
                raise ConfigError("", f"line {line}: nested deeper than {MAX_DEPTH} levels")
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    def construct_mapping(loader: Any, node: Any) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str | int | float | bool | None):
                raise ConfigError("", f"line {line}: mapping keys must be plain names")
            if key in seen:
                raise ConfigError("", f"line {line}: key {shown(key)} appears twice in one mapping")
            seen.add(key)
        return dict(loader.construct_mapping(node))

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    _LOADERS[id(yaml)] = StrictLoader
    return StrictLoader


class Section:
    """A mapping being validated: typed getters that name the key path on error."""

    def __init__(self, data: object, path: str, allowed: Sequence[str]) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(path, f"must be a mapping, got {kind(data)}")
        for key in data:
            if not isinstance(key, str) or key not in allowed:
                hint = suggest(str(key), allowed)
                raise ConfigError(
                    join(path, str(key)), f"unknown key{hint} (allowed here: {', '.join(allowed)})"
                )
        self.data: Mapping[str, Any] = data
        self.path = path

    def key(self, name: str) -> str:
        """The full path of key ``name`` of this section."""
        return join(self.path, name)

    def has(self, name: str) -> bool:
        """True when ``name`` is present and not null."""
        return self.data.get(name) is not None

    def get(self, name: str, check: Check[T], default: T) -> T:
        """``name`` checked by ``check``, or ``default`` when absent or null."""
        value = self.data.get(name)
        return default if value is None else check(self.key(name), value)

    def need(self, name: str, check: Check[T]) -> T:
        """``name`` checked by ``check``; a missing or null key is an error."""
        if self.data.get(name) is None:
            raise ConfigError(self.key(name), "required key is missing")
        return check(self.key(name), self.data[name])

    def section(self, name: str) -> object:
        """The sub-mapping ``name`` (an empty one when absent or null)."""
        value = self.data.get(name)
        return {} if value is None else value


def suggest(word: str, allowed: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest allowed word (case, typo, prefix), else ``""``."""
    close = [a for a in allowed if a.lower() == word.lower()]
    close = close or difflib.get_close_matches(word, allowed, n=1, cutoff=0.6)
    if not close and len(word) >= 2:
        close = [a for a in allowed if a.startswith(word) or word.startswith(a)][:1]
    return f"; did you mean {close[0]!r}?" if close else ""


def join(path: str, key: str) -> str:
    """``path.key`` (just ``key`` at the top level)."""
    return f"{path}.{key}" if path else key


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters (long values say so)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, dict | list | tuple | set) and len(value) > 16:
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


_KINDS = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}


def kind(value: object) -> str:
    """How a value reads in a message: ``a mapping``, ``a string``, ``int 7``..."""
    return _KINDS.get(type(value), f"{type(value).__name__} {shown(value)}")


def secret(key: str, value: object) -> str:
    """A non-empty string whose value is never shown, not even in an error."""
    if not isinstance(value, str) or not value:
        what = _KINDS.get(type(value), f"a {type(value).__name__}")
        raise ConfigError(key, f"must be a non-empty string, got {what} (value not shown)")
    return value


def string(key: str, value: object) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"must be a non-empty string, got {kind(value)}")
    return value


def store_root(key: str, value: object, *, absolute: bool = True) -> str:
    """Where bytes go or a catalog lives: ``s3://BUCKET[/PREFIX]``, or a directory
    (``file://`` accepted; made absolute with ``absolute``, as a task may run in
    another folder)."""
    text = string(key, value)
    if not text.strip():
        raise ConfigError(key, "must be s3://BUCKET[/PREFIX] or a directory, got blanks")
    if text.startswith("s3://"):
        try:
            split_s3_url(text)
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        return text
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise ConfigError(
            key,
            f"unsupported scheme {text.split('://', 1)[0]}:// (allowed: s3://BUCKET[/PREFIX] "
            "or a directory)",
        )
    path = Path(text).expanduser()
    return str(path.absolute() if absolute else path)


def catalog_root(key: str, value: object) -> str:
    """A fleet catalog root (:func:`store_root`, made absolute)."""
    return store_root(key, value)


def boolean(key: str, value: object) -> bool:
    """``true`` or ``false`` (not 1, not "yes")."""
    if not isinstance(value, bool):
        raise ConfigError(key, f"must be true or false, got {kind(value)}")
    return value


def int_in(lo: int, hi: int | None = None) -> Check[int]:
    """An integer in ``lo..hi`` (``>= lo`` without ``hi``); booleans are refused."""
    allowed = f"{lo}..{hi}" if hi is not None else f">= {lo}"

    def check(key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"must be an integer {allowed}, got {kind(value)}")
        if value < lo or (hi is not None and value > hi):
            raise ConfigError(key, f"must be {allowed}, got {value}")
        return value

    return check


_FLOAT_MAX = 1 << 1000  # float() of a wider integer raises OverflowError


def number(hi: float | None = None, *, lo: float = 0.0, zero_ok: bool = False) -> Check[float]:
    """A finite number above ``lo`` (or equal with ``zero_ok``) and at most ``hi``."""
    bound = f"{'>=' if zero_ok else '>'} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")

    def check(key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(key, f"must be a number, got {kind(value)}")
        if isinstance(value, int) and not -_FLOAT_MAX < value < _FLOAT_MAX:
            raise ConfigError(key, f"must be {bound}, got an integer of {value.bit_length()} bits")
        v = float(value)
        low_ok = v >= lo if zero_ok else v > lo
        if not (math.isfinite(v) and low_ok and (hi is None or v <= hi)):
            raise ConfigError(key, f"must be {bound}, got {value}")
        return v

    return check


def choice(*allowed: str) -> Check[str]:
    """One of ``allowed`` (with a did-you-mean for a near miss)."""

    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            hint = suggest(str(value), allowed)
            raise ConfigError(
                key, f"{shown(value)} is not allowed{hint} (allowed: {', '.join(allowed)})"
            )
        return value

    return check


def auto_or(inner: Check[T]) -> Check[T | None]:
    """``"auto"`` (``None``) or whatever ``inner`` accepts."""

    def check(key: str, value: object) -> T | None:
        return None if value == "auto" else inner(key, value)

    return check


def path(key: str, value: object) -> Path:
    """A path (``~`` expanded)."""
    return Path(string(key, value)).expanduser()


def dtype(key: str, value: object) -> str:
    """A fixed-size numpy dtype string such as ``<f4``."""
    text = string(key, value)
    try:
        dt = np.dtype(text)
    except TypeError:
        raise ConfigError(key, f"{shown(text)} is not a numpy dtype (e.g. '<f4', 'u1')") from None
    if dt.hasobject or dt.itemsize == 0:
        raise ConfigError(key, f"{shown(text)} is not a fixed-size dtype")
    return text


def shape(key: str, value: object) -> tuple[int, ...]:
    """A list of sizes > 0, with at most one -1 (any number of records)."""
    dims = tuple(int_in(-1)(f"{key}[{j}]", v) for j, v in enumerate(listing(value, key)))
    if not dims or 0 in dims or dims.count(-1) > 1:
        raise ConfigError(key, f"{list(dims)}: sizes must be > 0, with at most one -1 (any)")
    return dims


def mapping(key: str, value: object) -> dict[str, Any]:
    """A mapping with string keys."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(key, f"must be a mapping with string keys, got {kind(value)}")
    return dict(value)


def listing(data: object, key: str) -> list[Any]:
    """A list."""
    if not isinstance(data, list):
        raise ConfigError(key, f"must be a list, got {kind(data)}")
    return data
