"""Errors of MCAP export and import, rooted at :class:`McapToolError`.

Each names the file it is about (``path``) and what is wrong (``what``); the
``hyperframes`` command prints them as one line and exits 1.
"""

from __future__ import annotations

import os

from hyperframes.errors import HyperframesError
from hyperframes.viz.errors import MissingExtraError

__all__ = [
    "McapToolError",
    "NotMcapError",
    "TopicNotFoundError",
    "EmptyRangeError",
    "UnknownStreamError",
    "StreamMismatchError",
    "MessageDecodeError",
    "BadMappingError",
    "BadMessageError",
    "MissingExtraError",
]


class McapToolError(HyperframesError):
    """Root of the errors of :mod:`hyperframes.mcap`."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = os.fspath(path)
        self.what = what
        super().__init__(f"{self.path}: {what}")


class NotMcapError(McapToolError, ValueError):
    """The input is not a readable MCAP file (bad magic, truncated, damaged records)."""


class TopicNotFoundError(McapToolError, ValueError):
    """A ``--map TOPIC=STREAM`` names a topic the MCAP file does not have."""

    def __init__(self, path: str | os.PathLike[str], topic: str, topics: list[str]) -> None:
        self.topic = topic
        self.topics = topics
        super().__init__(path, f"no topic {topic!r}; topics: {', '.join(topics) or '(none)'}")


class EmptyRangeError(McapToolError, ValueError):
    """The selected streams and time range hold no frame (nothing would be written)."""


class UnknownStreamError(McapToolError, ValueError):
    """``--streams`` names a stream the input files do not have."""


class StreamMismatchError(McapToolError, ValueError):
    """Input files disagree on a stream (same name, different kind or encoding)."""


class BadMappingError(McapToolError, ValueError):
    """A topic-to-stream mapping that cannot be honoured (bad or duplicate stream names),
    or a missing window length."""


class BadMessageError(McapToolError, ValueError):
    """A message of a known schema cannot be decoded or does not fit its stream."""


class MessageDecodeError(ValueError):
    """Bytes that are not a valid message of the expected schema (no file known yet).

    Raised by the pure decoders; the importer re-raises it as
    :class:`BadMessageError` with the file, topic and time.
    """
