"""Every error the recorder raises, rooted at :class:`RecorderError`.

:class:`RecorderError` itself derives from :class:`hyperframes.HyperframesError`,
so ``except HyperframesError`` catches everything this project raises.
"""

from __future__ import annotations

from collections.abc import Iterable

from hyperframes import errors as hf_errors
from hyperframes.errors import HyperframesError

__all__ = [
    "RecorderError",
    "ConfigError",
    "WireError",
    "UnknownStreamError",
    "SimError",
    "SimOptionError",
    "EndpointError",
]


class RecorderError(HyperframesError):
    """Root of every error raised by :mod:`recorder`."""


class ConfigError(RecorderError, hf_errors.ConfigError):
    """A vehicle config that cannot be used; ``key`` is the path of the bad key."""


class WireError(RecorderError, ValueError):
    """A message that does not follow the wire protocol.

    ``reason`` is one of :data:`hyperframes.recorder.ingest.wire.REASONS` (a stable, short label
    for counters); ``detail`` says what exactly was found.
    """

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


class UnknownStreamError(RecorderError, ValueError):
    """A frame names a stream id the engine was not configured with."""

    def __init__(self, stream_id: int, known: Iterable[int]):
        self.stream_id = stream_id
        self.known = tuple(sorted(known))
        super().__init__(f"unknown stream id {stream_id} (configured: {list(self.known)})")


class SimError(RecorderError, RuntimeError):
    """The simulation cannot start or cannot go on (bad option, recorder not reachable)."""


class SimOptionError(SimError, ValueError):
    """The simulation cannot run as asked: a bad option, config or endpoint (exit code 2)."""


class EndpointError(RecorderError, OSError):
    """An ingest socket cannot bind or connect its endpoint (in use, bad address).

    ``socket`` is the socket's name in the config, ``endpoint`` its address.
    """

    def __init__(self, socket: str, endpoint: str, what: str) -> None:
        self.socket = socket
        self.endpoint = endpoint
        super().__init__(f"zmq socket {socket!r}: {endpoint}: {what}")
