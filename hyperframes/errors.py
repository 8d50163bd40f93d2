"""Every error the container library raises, rooted at :class:`HyperframesError`.

Errors carry what they are about (the file, the byte offset, the stream, the
timestamp) as attributes, so callers can act on them without parsing text.
"""

from __future__ import annotations

import os

__all__ = [
    "HyperframesError",
    "CorruptFileError",
    "ChecksumError",
    "NotFinalizedError",
    "UnsupportedVersionError",
    "FrameNotFoundError",
    "RecoveryError",
    "ConfigError",
    "DriveError",
]


class HyperframesError(Exception):
    """Root of every error raised by :mod:`hyperframes`."""


class CorruptFileError(HyperframesError, ValueError):
    """The file's bytes do not describe a valid hyperframe file.

    ``path`` names the file, ``offset`` the byte offset of the bad structure
    (``None`` when the problem is not at one place) and ``what`` says what is
    wrong.
    """

    def __init__(self, path: str | os.PathLike[str], what: str, offset: int | None = None):
        self.path = os.fspath(path)
        self.what = what
        self.offset = offset
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{self.path}: corrupt hyperframe file{where}: {what}")


class ChecksumError(CorruptFileError):
    """Stored bytes do not match their CRC32C."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        what: str,
        offset: int | None,
        expected: int,
        actual: int,
    ):
        self.expected = expected
        self.actual = actual
        super().__init__(
            path,
            f"{what}: CRC32C mismatch (stored {expected:#010x}, computed {actual:#010x})",
            offset,
        )


class NotFinalizedError(HyperframesError, ValueError):
    """The file was never finalized (a recording cut short, or still being written)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        super().__init__(
            f"{self.path}: file is not finalized (recording interrupted or still in progress); "
            f"run `hyperframes recover {self.path}` to salvage the complete windows"
        )


class UnsupportedVersionError(HyperframesError, ValueError):
    """The file uses a format version this library cannot read."""

    def __init__(self, path: str | os.PathLike[str], version: int, supported: int):
        self.path = os.fspath(path)
        self.version = version
        self.supported = supported
        super().__init__(
            f"{self.path}: format version {version} is not supported "
            f"(this library reads version {supported}); upgrade hyperframes"
        )


class FrameNotFoundError(HyperframesError, LookupError):
    """No frame of a stream matches a timestamp query."""

    def __init__(
        self,
        path: str,
        stream: int,
        query_ns: int,
        what: str,
        found_ns: int | None = None,
    ):
        self.path = path
        self.stream = stream
        self.query_ns = query_ns
        self.found_ns = found_ns
        found = f"; nearest frame at {found_ns} ns" if found_ns is not None else ""
        super().__init__(f"{path}: stream {stream}, query {query_ns} ns: {what}{found}")


class RecoveryError(HyperframesError):
    """Nothing could be salvaged from an unfinalized file."""

    def __init__(self, path: str | os.PathLike[str], what: str):
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: cannot recover: {what}")


_MAX_PROBLEM = 400


class ConfigError(HyperframesError, ValueError):
    """A YAML config that cannot be used; ``key`` is the path of the bad key.

    ``problem`` says what was wrong and what is allowed; ``source`` names the
    file when known. The recorder and the converter raise subclasses.
    """

    def __init__(self, key: str, problem: str, source: str | None = None) -> None:
        self.key = key
        problem = " ".join(problem.split())  # one line
        if len(problem) > _MAX_PROBLEM:  # a value echoed in full: cut it short
            problem = problem[:_MAX_PROBLEM] + f"... ({len(problem)} characters)"
        self.problem = problem
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{key}: {problem}" if key else f"{where}{problem}")


class DriveError(HyperframesError, ValueError):
    """Segments that cannot be read, cut or joined as one drive.

    ``source`` names the directory, glob or file the problem is about;
    ``what`` says what is wrong and what to do instead.
    """

    def __init__(self, source: str | os.PathLike[str], what: str) -> None:
        self.source = os.fspath(source)
        self.what = what
        super().__init__(f"{self.source}: {what}")
