"""Every error the converter raises, rooted at :class:`ConverterError`.

:class:`ConverterError` derives from :class:`hyperframes.HyperframesError`, so
``except HyperframesError`` catches everything this project raises. Errors
carry what they are about (the file, the stream, the frame, the rule broken)
as attributes, so the batch can write them into reason files and the ledger
without parsing text.
"""

from __future__ import annotations

import os
from typing import Any

from hyperframes import errors as hf_errors
from hyperframes._install import install_hint
from hyperframes.errors import HyperframesError

__all__ = [
    "ConverterError",
    "ConfigError",
    "InputError",
    "ConversionError",
    "VerificationError",
    "OutputExistsError",
    "BusyError",
    "MissingExtraError",
]


class ConverterError(HyperframesError):
    """Root of every error raised by :mod:`converter`."""

    def details(self) -> dict[str, Any]:
        """Structured facts for reason files and the ledger (JSON-ready)."""
        return {"error": type(self).__name__, "message": str(self)}


class ConfigError(ConverterError, hf_errors.ConfigError):
    """A conversion config that cannot be used; ``key`` is the path of the bad key."""


class _AboutFrame(ConverterError):
    """An error about a file and, where known, one stream, one frame and one rule."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        what: str,
        *,
        stream: str | None = None,
        frame: int | None = None,
        timestamp_ns: int | None = None,
        rule: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.what = what
        self.stream = stream
        self.frame = frame
        self.timestamp_ns = timestamp_ns
        self.rule = rule
        parts = [self.path]
        if stream is not None:
            parts.append(f"stream {stream}")
        if frame is not None:
            at = f" (t={timestamp_ns} ns)" if timestamp_ns is not None else ""
            parts.append(f"frame {frame}{at}")
        if rule is not None:
            parts.append(f"rule {rule!r}")
        super().__init__(f"{': '.join(parts)}: {what}")

    def details(self) -> dict[str, Any]:
        """The message plus path, stream, frame, timestamp and rule."""
        return {
            **super().details(),
            "path": self.path,
            "stream": self.stream,
            "frame": self.frame,
            "timestamp_ns": self.timestamp_ns,
            "rule": self.rule,
            "what": self.what,
        }


class InputError(_AboutFrame, ValueError):
    """The input cannot be converted (not finalized, corrupt, a frame that does not decode).

    ``frame`` is the 0-based position among the stream's indexed frames, or
    ``q<N>`` style positions are given in ``what`` for quarantined frames.
    """


class ConversionError(_AboutFrame):
    """Converting failed for a reason that is not the input's fault (an encoder, the disk)."""


class VerificationError(_AboutFrame):
    """The converted output broke a rule; no output was published.

    ``rule`` is one of :data:`hyperframes.converter.verify.RULES` or a bitstream rule of
    :data:`hyperframes.video.rules.RULES`.
    """


class OutputExistsError(ConverterError, FileExistsError):
    """The output name is taken by a file that is not this input's conversion."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: output exists: {why}")


class BusyError(ConverterError, RuntimeError):
    """Another converter holds the output directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        super().__init__(
            f"{self.path}: another `hyperframes convert` is using this output directory "
            "(its lock file is held); wait for it or choose another --out"
        )


class MissingExtraError(ConverterError, ImportError):
    """An optional package is not installed; names the extra that installs it."""

    def __init__(self, package: str, extra: str, why: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{why} needs {package}, which is not installed; install it with {install_hint(extra)}"
        )
