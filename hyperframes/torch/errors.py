"""Errors of :mod:`hyperframes.torch`, rooted at :class:`DatasetError`."""

from __future__ import annotations

from hyperframes.errors import HyperframesError

__all__ = ["DatasetError", "StreamSelectionError", "SampleError", "SamplerStateError"]


class DatasetError(HyperframesError):
    """Root of the errors raised by :mod:`hyperframes.torch`."""


class StreamSelectionError(DatasetError, KeyError):
    """A requested stream is absent from a file, or differs between files."""

    def __init__(self, path: str, stream: str, what: str) -> None:
        self.path = path
        self.stream = stream
        self.what = what
        super().__init__(f"{path}: stream {stream!r}: {what}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SampleError(DatasetError, ValueError):
    """A frame of a sample could not be read or decoded; names the file, stream and time."""

    def __init__(self, path: str, stream: str, timestamp_ns: int, window_id: int, what: str):
        self.path = path
        self.stream = stream
        self.timestamp_ns = timestamp_ns
        self.window_id = window_id
        super().__init__(
            f"{path}: stream {stream!r}, frame at {timestamp_ns} ns (window {window_id}): {what}"
        )


class SamplerStateError(DatasetError, ValueError):
    """A sampler state does not fit the sampler it is loaded into."""
