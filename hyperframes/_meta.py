"""The JSON metadata block: stream table, file metadata, sparse per-window notes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hyperframes.streams import FileMetadata, StreamInfo

__all__ = ["Meta", "encode_meta", "decode_meta", "MAX_META_SIZE"]

MAX_META_SIZE = 64 << 20  # a reader refuses larger metadata blocks


@dataclass(frozen=True, slots=True)
class Meta:
    """Decoded metadata block."""

    streams: tuple[StreamInfo, ...]
    file: FileMetadata
    window_ns: int
    # window id -> stream ids that delivered nothing in that window (only incomplete windows)
    missing: dict[int, tuple[int, ...]] = field(default_factory=dict)


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


def decode_meta(data: bytes) -> Meta:
    """Parse a metadata block; raises ValueError/KeyError/TypeError on malformed input."""
    doc = json.loads(data.decode("utf-8"))
    if not isinstance(doc, dict) or doc.get("format") != "hyperframes":
        raise ValueError("metadata is not a hyperframes metadata document")
    streams = tuple(StreamInfo.from_dict(s) for s in doc["streams"])
    missing = {int(k): tuple(int(x) for x in v) for k, v in (doc.get("missing") or {}).items()}
    return Meta(
        streams, FileMetadata.from_dict(doc.get("file") or {}), int(doc["window_ns"]), missing
    )
