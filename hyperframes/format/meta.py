"""The JSON metadata block: stream table, file metadata, sparse per-window notes.

Pure: bytes in, validated :class:`Meta` out (or ``ValueError`` saying what is
wrong). Decoding is bounded: nesting depth, integer range (no number wider
than u64 is ever used), finite floats, the window length, the stream table
(ids and names unique, every field validated by :class:`StreamInfo`).
Unknown keys are ignored (newer writers).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from hyperframes.format.jsontext import MAX_JSON_DEPTH, brief, parse_json
from hyperframes.format.streams import FileMetadata, StreamInfo

__all__ = [
    "Meta",
    "StreamTable",
    "stream_ids",
    "encode_meta",
    "decode_meta",
    "MAX_META_SIZE",
    "MAX_JSON_DEPTH",
    "MAX_WINDOW_NS",
    "window_ns_problem",
]

MAX_META_SIZE = 64 << 20  # a reader refuses larger metadata blocks
MAX_WINDOW_NS = 86_400 * 10**9  # one day; windows are tens of milliseconds in practice


class StreamTable(Sequence[StreamInfo]):
    """A file's stream table whose entries are validated when first used.

    Made by :func:`decode_meta` with ``lazy=True`` (the reader: opening a file
    checks only what every lookup relies on, the rest of an entry waits for
    the first use of its stream). Checked at once: a list of at most 65536
    JSON objects, each with an integer ``id`` 0..65535 and a string ``name``,
    ids and names unique. An entry becomes a :class:`StreamInfo`, every field
    validated (``ValueError`` naming the stream), the first time it is asked
    for; :attr:`ids` and :attr:`names` are available without that.
    """

    __slots__ = ("_docs", "_infos", "ids", "names")

    def __init__(self, docs: list[Any]) -> None:
        ids: list[int] = []
        names: list[str] = []
        for d in docs:
            if type(d) is not dict:
                raise ValueError(f"a stream must be a JSON object, got {type(d).__name__}")
            sid, name = d.get("id", -1), d.get("name")
            if not (type(sid) is int and 0 <= sid <= 0xFFFF):
                raise ValueError(f"stream id must be an integer 0..65535, got {brief(sid, 40)}")
            if type(name) is not str:
                raise ValueError(f"stream {sid}: name must be a string, got {brief(name, 40)}")
            ids.append(sid)
            names.append(name)
        if len(set(ids)) != len(ids) or len(set(names)) != len(names):
            raise ValueError("stream table repeats an id or a name")
        self._docs = docs
        self._infos: list[StreamInfo | None] = [None] * len(docs)
        self.ids = ids
        self.names = names

    def __len__(self) -> int:
        return len(self._docs)

    @overload
    def __getitem__(self, i: int) -> StreamInfo: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[StreamInfo]: ...
    def __getitem__(self, i: int | slice) -> StreamInfo | Sequence[StreamInfo]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        info = self._infos[i]
        if info is None:
            info = self._infos[i] = StreamInfo.from_dict(self._docs[i])
        return info

    def __iter__(self) -> Iterator[StreamInfo]:
        return (self[k] for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable cache: compared by value

    def __repr__(self) -> str:
        return f"StreamTable({self.names!r})"


def stream_ids(streams: Sequence[StreamInfo]) -> list[int]:
    """The stream ids of a table, without validating a lazy table's entries."""
    if isinstance(streams, StreamTable):
        return list(streams.ids)
    return [s.id for s in streams]


@dataclass(frozen=True, slots=True)
class Meta:
    """Decoded metadata block (``streams``: a tuple, or a :class:`StreamTable` when
    decoded with ``lazy=True``)."""

    streams: Sequence[StreamInfo]
    file: FileMetadata
    window_ns: int
    # window id -> stream ids that delivered nothing in that window (only incomplete windows)
    missing: dict[int, tuple[int, ...]] = field(default_factory=dict)


def window_ns_problem(value: object) -> str | None:
    """Why ``value`` cannot be a window length (integer 1 ns .. one day), or None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"window length {brief(value, 40)} is not an integer"
    if not 0 < value <= MAX_WINDOW_NS:
        return f"window length {value} ns outside 1..{MAX_WINDOW_NS}"
    return None


def encode_meta(meta: Meta) -> bytes:
    """UTF-8 JSON, keys in a fixed order so that files are byte-reproducible."""
    doc: dict[str, Any] = {
        "format": "hyperframes",
        "version": 1,
        "window_ns": meta.window_ns,
        "file": meta.file.to_dict(),
        "streams": [s.to_dict() for s in meta.streams],
        "missing": {str(k): list(v) for k, v in sorted(meta.missing.items())},
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=False).encode()


def _parse(data: bytes) -> Any:
    """The JSON document of a metadata block (``ValueError`` if it is not JSON).

    :func:`~hyperframes.format.jsontext.parse_json`: orjson (~2.5x the
    standard parser: 16 -> 6 us for a typical 2 KB block, a third of an open)
    with the project's limits on numbers. ``typed``: :func:`decode_meta` checks
    every container it reads, and free-form values go to ``check_json_value``.
    """
    return parse_json(data, "metadata", typed=True)


def _small_int(text: str, what: str) -> int:
    if not (0 < len(text) <= 20 and text.lstrip("-").isdigit()):
        raise ValueError(f"{what}: {brief(text, 30)} is not an integer")
    return int(text)


def decode_meta(data: bytes, *, lazy: bool = False) -> Meta:
    """Parse and validate a metadata block; raises ``ValueError`` saying what is wrong.

    ``lazy``: the stream table is a :class:`StreamTable` whose entries are
    validated on first use (their ids and names at once).
    """
    doc = _parse(data)
    if not isinstance(doc, dict) or doc.get("format") != "hyperframes":
        raise ValueError("metadata is not a hyperframes metadata document")
    problem = window_ns_problem(doc.get("window_ns"))
    if problem is not None:
        raise ValueError(f"metadata {problem}")
    streams_doc = doc.get("streams")
    if not isinstance(streams_doc, list) or len(streams_doc) > 1 << 16:
        raise ValueError("metadata streams must be a list of at most 65536 streams")
    table = StreamTable(streams_doc)
    streams: Sequence[StreamInfo] = table if lazy else tuple(table)  # tuple: every entry now
    file_doc: Any = doc.get("file")
    if file_doc is None:
        file_doc = {}
    file = FileMetadata.from_dict(file_doc)
    missing_doc = doc.get("missing") if doc.get("missing") is not None else {}
    if not isinstance(missing_doc, dict):
        raise ValueError("metadata missing must map window ids to stream ids")
    missing: dict[int, tuple[int, ...]] = {}
    for k, v in missing_doc.items():
        if not isinstance(v, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 0xFFFF for x in v
        ):
            raise ValueError(f"metadata missing[{brief(k, 30)}] must be a list of stream ids")
        missing[_small_int(k, "metadata missing window id")] = tuple(v)
    return Meta(streams, file, doc["window_ns"], missing)
