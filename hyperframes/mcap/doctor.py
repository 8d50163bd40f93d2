"""Structural checks of an MCAP file in the spirit of ``mcap doctor``, with the ``mcap`` library.

One streaming pass (memory: one chunk) checks the magic at both ends, every
chunk's CRC and time range, the data section CRC and the summary section
CRC; the seeking reader's summary must be present and agree with what the
pass counted (statistics, channels, schemas, chunk indexes).
"""

from __future__ import annotations

import os
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import zstandard
from mcap.exceptions import McapError
from mcap.reader import make_reader
from mcap.records import Channel, Chunk, Footer, Message, MessageIndex, Schema
from mcap.stream_reader import CRCValidationError, StreamReader, breakup_chunk

__all__ = ["McapCheck", "check_mcap"]

_MAGIC = b"\x89MCAP0\r\n"
_FOOTER_TAIL = 4 + len(_MAGIC)  # summary CRC, closing magic


@dataclass(slots=True)
class McapCheck:
    """What :func:`check_mcap` found: counts and problems (none: the file is sound)."""

    path: str
    messages: int = 0
    chunks: int = 0
    message_indexes: int = 0
    per_channel: Counter[int] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def _summary_crc_problem(path: Path, footer: Footer) -> str | None:
    if footer.summary_crc == 0 or footer.summary_start == 0:
        return None
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(footer.summary_start)
        data = f.read(size - _FOOTER_TAIL - footer.summary_start)
    actual = zlib.crc32(data)
    if actual != footer.summary_crc:
        return f"summary section CRC {actual:#010x} != footer {footer.summary_crc:#010x}"
    return None


def check_mcap(path: str | os.PathLike[str]) -> McapCheck:
    """Check ``path`` (see the module docstring); problems are listed, never raised."""
    p = Path(path)
    result = McapCheck(str(p))
    channels: dict[int, Channel] = {}
    schemas: set[int] = set()
    footer: Footer | None = None
    try:
        with open(p, "rb") as f:
            if f.read(len(_MAGIC)) != _MAGIC:
                result.problems.append("no MCAP magic at the start")
                return result
            f.seek(0)
            for record in StreamReader(f, emit_chunks=True, validate_crcs=True).records:
                if isinstance(record, Chunk):
                    result.chunks += 1
                    for inner in breakup_chunk(record, validate_crc=True):
                        if isinstance(inner, Message):
                            result.messages += 1
                            result.per_channel[inner.channel_id] += 1
                            t = inner.log_time
                            if not record.message_start_time <= t <= record.message_end_time:
                                result.problems.append(
                                    f"chunk {result.chunks}: message at {t} outside the "
                                    f"chunk's range [{record.message_start_time}, "
                                    f"{record.message_end_time}]"
                                )
                        elif isinstance(inner, Channel):
                            channels[inner.id] = inner
                        elif isinstance(inner, Schema):
                            schemas.add(inner.id)
                elif isinstance(record, Message):
                    result.messages += 1
                    result.per_channel[record.channel_id] += 1
                elif isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Schema):
                    schemas.add(record.id)
                elif isinstance(record, MessageIndex):
                    result.message_indexes += 1
                elif isinstance(record, Footer):
                    footer = record
            f.seek(0)
            summary = make_reader(f).get_summary()
    except CRCValidationError as exc:
        result.problems.append(f"CRC mismatch: {exc}")
        return result
    except (McapError, ValueError, EOFError, zlib.error) as exc:
        result.problems.append(f"unreadable: {type(exc).__name__}: {exc}")
        return result
    except (RuntimeError, zstandard.ZstdError) as exc:  # what lz4.frame / zstandard raise
        result.problems.append(f"a chunk does not decompress: {exc}")
        return result
    if footer is not None:
        problem = _summary_crc_problem(p, footer)
        if problem:
            result.problems.append(problem)
    for cid, ch in channels.items():
        if ch.schema_id != 0 and ch.schema_id not in schemas:
            result.problems.append(
                f"channel {cid} ({ch.topic}) names missing schema {ch.schema_id}"
            )
    unknown = set(result.per_channel) - set(channels)
    if unknown:
        result.problems.append(f"messages on unknown channels {sorted(unknown)}")
    if summary is None:
        result.problems.append("no summary section")
        return result
    stats = summary.statistics
    if stats is None:
        result.problems.append("no statistics record in the summary")
    else:
        if stats.message_count != result.messages:
            result.problems.append(
                f"statistics count {stats.message_count} messages, the file holds {result.messages}"
            )
        if dict(stats.channel_message_counts) != {k: v for k, v in result.per_channel.items() if v}:
            result.problems.append("statistics per-channel counts disagree with the messages")
        if stats.chunk_count != result.chunks:
            result.problems.append(
                f"statistics count {stats.chunk_count} chunks, the file holds {result.chunks}"
            )
    if len(summary.chunk_indexes) != result.chunks:
        result.problems.append(
            f"{len(summary.chunk_indexes)} chunk indexes for {result.chunks} chunks"
        )
    if set(summary.channels) != set(channels):
        result.problems.append("summary channels differ from the data section's")
    return result
