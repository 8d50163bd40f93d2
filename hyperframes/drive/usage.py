"""Where the bytes go: stored and raw bytes per stream, per kind and per codec (``hyperframes du``).

Stored sizes come from the index. Raw (decoded) sizes come from each
compressed payload's codec header (the LZ4 size prefix, the ZSTD frame
header, the block table's RawSize): one small read per compressed frame,
nothing decoded. Quarantined frames count too.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import zstandard

from hyperframes.errors import CorruptFileError
from hyperframes.format.codecs import CODEC_NAMES, CODEC_NONE, CODEC_ZSTD, codec_of
from hyperframes.format.layout import CODEC_MASK, CODEC_SHIFT, FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.storage.source import pread_exact

__all__ = ["Row", "Usage", "disk_usage"]

_HEAD = 32  # enough for an LZ4 size prefix, a ZSTD frame header, a block table's RawSize
_U32 = struct.Struct("<I")


@dataclass(slots=True)
class Row:
    """Totals of one stream, kind or codec."""

    key: str
    frames: int = 0
    stored: int = 0
    raw: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def add(self, frames: int, stored: int, raw: int) -> None:
        """Add totals."""
        self.frames += frames
        self.stored += stored
        self.raw += raw

    def to_dict(self, total_stored: int) -> dict[str, object]:
        """JSON-ready, with the share of all stored bytes."""
        return {
            "name": self.key,
            **self.extra,
            "frames": self.frames,
            "stored_bytes": self.stored,
            "raw_bytes": self.raw,
            "share": self.stored / total_stored if total_stored else 0.0,
        }


@dataclass(slots=True)
class Usage:
    """Totals over every file counted."""

    files: int = 0
    file_bytes: int = 0
    streams: dict[str, Row] = field(default_factory=dict)
    kinds: dict[str, Row] = field(default_factory=dict)
    codecs: dict[str, Row] = field(default_factory=dict)

    @property
    def stored(self) -> int:
        """Stored payload bytes of every frame."""
        return sum(r.stored for r in self.streams.values())

    @property
    def raw(self) -> int:
        """Decoded payload bytes of every frame."""
        return sum(r.raw for r in self.streams.values())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        total = self.stored
        return {
            "files": self.files,
            "file_bytes": self.file_bytes,
            "stored_bytes": total,
            "raw_bytes": self.raw,
            "streams": [r.to_dict(total) for r in self.streams.values()],
            "kinds": [r.to_dict(total) for r in self.kinds.values()],
            "codecs": [r.to_dict(total) for r in self.codecs.values()],
        }


def raw_size(head: bytes, flags: int) -> int:
    """The decoded size a stored payload declares in its first bytes (pure).

    Raises ``ValueError`` when the header does not parse.
    """
    codec = codec_of(flags)
    if codec == CODEC_NONE:
        raise ValueError("uncompressed payloads have no codec header")
    if codec == CODEC_ZSTD:  # one ZSTD frame with its content size
        size = int(zstandard.frame_content_size(head))
        if size < 0:
            raise ValueError("zstd frame does not declare its content size")
        return size
    if len(head) < 4:
        raise ValueError("payload shorter than its size prefix")
    return int(_U32.unpack_from(head, 0)[0])  # LZ4 prefix, or a block table's RawSize


def _codec_name(flags: int) -> str:
    name = CODEC_NAMES.get((flags & CODEC_MASK) >> CODEC_SHIFT, "unknown")
    return name + ("+shuffle" if flags & FrameFlags.SHUFFLED else "")


def disk_usage(
    paths: Iterable[str | os.PathLike[str]], progress: Callable[[int], None] | None = None
) -> Usage:
    """Totals of the finalized files ``paths``; ``progress(files_done)`` after each."""
    usage = Usage()
    for n, path in enumerate(paths, start=1):
        with HyperframeReader(path, verify=False) as r:
            _count(r, usage)
        if progress is not None:
            progress(n)
    return usage


def _count(r: HyperframeReader, usage: Usage) -> None:
    usage.files += 1
    usage.file_bytes += r.path.stat().st_size
    q = r.quarantine()
    sids = np.concatenate([r.index["stream_id"], q["stream_id"]])
    flags = np.concatenate([r.index["flags"], q["flags"]]).astype(np.int64)
    offsets = np.concatenate([r.index["offset"], q["offset"]])
    sizes = np.concatenate([r.index["size"], q["size"]]).astype(np.int64)
    raw = sizes.copy()
    fd = os.open(r.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        for i in np.flatnonzero(flags & CODEC_MASK).tolist():
            off = int(offsets[i])
            head = pread_exact(fd, min(_HEAD, int(sizes[i])), off)
            try:
                raw[i] = raw_size(head, int(flags[i]))
            except (ValueError, zstandard.ZstdError) as exc:
                raise CorruptFileError(r.path, f"payload at offset {off}: {exc}") from None
    finally:
        os.close(fd)
    for sid, s in r.streams.items():
        mine = sids == sid
        if not mine.any():
            frames, stored, rawb = 0, 0, 0
        else:
            frames = int(mine.sum())
            stored = int(sizes[mine].sum())
            rawb = int(raw[mine].sum())
        row = usage.streams.setdefault(
            s.name, Row(s.name, extra={"kind": str(s.kind), "encoding": s.encoding})
        )
        row.add(frames, stored, rawb)
        usage.kinds.setdefault(str(s.kind), Row(str(s.kind))).add(frames, stored, rawb)
    how = flags & (CODEC_MASK | int(FrameFlags.SHUFFLED))
    for value in np.unique(how).tolist():
        mine = how == value
        name = _codec_name(int(value))
        usage.codecs.setdefault(name, Row(name)).add(
            int(mine.sum()), int(sizes[mine].sum()), int(raw[mine].sum())
        )
