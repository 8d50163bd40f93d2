"""Errors of the viewing tools, rooted at :class:`VizError`.

Each names the file(s) it is about (``path``) and what is wrong (``what``);
the ``hyperframes`` command prints them as one line and exits 1.
"""

from __future__ import annotations

import os

from hyperframes._install import install_hint
from hyperframes.errors import HyperframesError

__all__ = ["VizError", "EmptyRangeError", "IncompatibleFilesError", "MissingExtraError"]


class VizError(HyperframesError):
    """Root of the errors of :mod:`hyperframes.viz`."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = os.fspath(path)
        self.what = what
        super().__init__(f"{self.path}: {what}")


class EmptyRangeError(VizError, ValueError):
    """The selected streams and time range (or window) hold no frame."""


class IncompatibleFilesError(VizError, ValueError):
    """Files that cannot be shown as one recording (different window lengths)."""


class MissingExtraError(HyperframesError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f"{package} is not installed; install it with {install_hint(extra)}")
