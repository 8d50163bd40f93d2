"""Pure decisions: which stream gets which treatment, and the keys that name a conversion.

Nothing here reads or writes files. :func:`plan_streams` turns a stream table
and a :class:`~hyperframes.converter.config.ConvertConfig` into one :class:`StreamPlan` per
stream; :func:`config_key` and :func:`marker_name` make the names the batch
uses to recognise an input it has already converted (by content, never by
file name).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from hyperframes._yamlconf import suggest as _suggest
from hyperframes.converter import __version__
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.errors import ConfigError
from hyperframes.format.codecs import CodecSpec
from hyperframes.format.streams import SensorKind, StreamInfo
from hyperframes.writer import default_codec

__all__ = [
    "VIDEO_SOURCES",
    "Treatment",
    "StreamPlan",
    "plan_stream",
    "plan_streams",
    "config_key",
    "marker_name",
]

#: Camera encodings the converter re-encodes to H.265 (raw-nv12: BT.709 limited NV12;
#: raw-bgr swapped to R'G'B'; raw-gray8 as a grey picture, U = V = 128).
VIDEO_SOURCES: Final = frozenset({"jpeg", "raw-rgb", "raw-bgr", "raw-gray8", "raw-nv12"})

#: Camera encodings kept lossless, and why (the reason the plan states).
_NOT_VIDEO: Final = {
    "raw-gray16": "16-bit samples (depth, thermal) do not fit 8-bit H.265; lossless",
    "raw-f32": "float samples (depth in metres) do not fit 8-bit H.265; lossless",
}


class Treatment(StrEnum):
    """What happens to one stream."""

    H265 = "h265"  # camera frames re-encoded to H.265 through hyperframes.video
    ZSTD = "zstd"  # lossless: payloads recompressed with ZSTD (shuffle per policy)
    KEEP = "keep"  # left as it is: same encoding, same container codec


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """One stream's treatment: the input entry, the output entry and its container codec."""

    source: StreamInfo
    treatment: Treatment
    output: StreamInfo
    codec: CodecSpec
    reason: str

    @property
    def lossless(self) -> bool:
        """True when output payloads must decode to exactly the input payloads."""
        return self.treatment is not Treatment.H265

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (provenance, ledger)."""
        return {
            "id": self.source.id,
            "name": self.source.name,
            "kind": str(self.source.kind),
            "treatment": str(self.treatment),
            "encoding": [self.source.encoding, self.output.encoding],
            "codec": str(self.codec),
            "reason": self.reason,
        }


def _source_codec(stream: StreamInfo) -> CodecSpec:
    """The container codec the input stream was written with (as its stream table says)."""
    if stream.codec is None:
        return default_codec(stream)
    return CodecSpec(stream.codec, stream.level, stream.shuffle)


def _policy(stream: StreamInfo, zstd_level: int) -> CodecSpec:
    """ZSTD at ``zstd_level`` where the writer's per-encoding policy compresses at all.

    The policy (:func:`hyperframes.writer.default_codec` on the stream without
    its recorded codec) decides: pre-compressed encodings stay uncompressed;
    byte shuffle wherever the stream has fixed-size records wider than a byte.
    """
    bare = dataclasses.replace(stream, codec=None, level=None, shuffle=False)
    policy = default_codec(bare)
    if policy.name == "none":
        return policy
    return CodecSpec("zstd", zstd_level, policy.shuffle)


def plan_stream(stream: StreamInfo, config: ConvertConfig, *, keep: bool = False) -> StreamPlan:
    """The treatment of one stream under ``config`` (``keep``: listed in ``config.keep``)."""
    if keep:
        return StreamPlan(stream, Treatment.KEEP, stream, _source_codec(stream), "kept (--keep)")
    if stream.kind is SensorKind.CAMERA and stream.encoding in VIDEO_SOURCES:
        v = config.video
        extra = {
            **stream.extra,
            "source_encoding": stream.encoding,
            "gop": {"k": v.k, "max_gop": v.max_gop},
        }
        out = dataclasses.replace(
            stream,
            encoding="h265",
            dtype=None,
            shape=None,
            codec=None,
            level=None,
            shuffle=False,
            extra=extra,
        )
        return StreamPlan(
            stream,
            Treatment.H265,
            out,
            CodecSpec("none"),
            f"camera {stream.encoding} -> H.265, IDR every {v.k} windows (max GOP {v.max_gop})",
        )
    if stream.kind is SensorKind.CAMERA and stream.precompressed:
        return StreamPlan(
            stream,
            Treatment.KEEP,
            stream,
            _source_codec(stream),
            f"camera {stream.encoding}: already compressed by its codec, stored as it is",
        )
    codec = _policy(stream, config.lossless.zstd_level)
    out = dataclasses.replace(stream, codec=codec.name, level=codec.level, shuffle=codec.shuffle)
    why = (
        f"{stream.encoding}: pre-compressed, stored as it is"
        if codec.name == "none"
        else f"{stream.encoding}: lossless {codec}"
    )
    if stream.kind is SensorKind.CAMERA and stream.encoding in _NOT_VIDEO:
        why = f"camera {stream.encoding}: {_NOT_VIDEO[stream.encoding]} {codec}"
    return StreamPlan(stream, Treatment.ZSTD, out, codec, why)


def plan_streams(
    streams: Iterable[StreamInfo], config: ConvertConfig, source: str = ""
) -> tuple[StreamPlan, ...]:
    """One plan per stream, in stream-table order.

    Raises :class:`ConfigError` (key ``keep``) when a name in ``config.keep``
    is neither the name nor the id of a stream, with a did-you-mean.
    """
    table = list(streams)
    by_key = {s.name: s.id for s in table} | {str(s.id): s.id for s in table}
    kept: set[int] = set()
    for i, name in enumerate(config.keep):
        if name not in by_key:
            names = [s.name for s in table]
            hint = _suggest(name, names)
            raise ConfigError(
                f"keep[{i}]",
                f"{name!r} is not a stream of {source or 'this file'}{hint} "
                f"(streams: {', '.join(names)})",
            )
        kept.add(by_key[name])
    return tuple(plan_stream(s, config, keep=s.id in kept) for s in table)


def config_key(config: ConvertConfig) -> str:
    """16 hex digits naming the converter version and the output-deciding settings."""
    doc = {"converter_version": __version__, "config": config.fingerprint()}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def marker_name(input_sha256: str, key: str) -> str:
    """The marker file name for an input (by content checksum) under one config key."""
    if len(input_sha256) != 64 or any(c not in "0123456789abcdef" for c in input_sha256):
        raise ValueError(f"not a lowercase hex SHA-256: {input_sha256!r}")
    return f"{input_sha256}.{key}.json"
