"""Imports of the optional packages, each failing with a typed error that names the extra.

Nothing here runs at import time: the core package imports without any of them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hyperframes.video.errors import MissingDependencyError

__all__ = ["require", "available"]

# package -> (pip extra that installs it, what it is for)
_EXTRAS = {
    "av": ("video", "PyAV: libx265 encoding and CPU HEVC decoding"),
    "simplejpeg": ("video", "fast JPEG decoding"),
    "PyNvVideoCodec": ("nvidia", "NVENC/NVDEC on NVIDIA GPUs"),
    "torch": ("torch", "GPU frames as torch tensors"),
}


def require(name: str) -> ModuleType:
    """Import ``name`` or raise :class:`MissingDependencyError` naming the extra to install.

    ``PyNvVideoCodec`` is not imported here: it raises RuntimeError without the
    driver's video libraries; use :func:`hyperframes.video._nvprobe.probe`.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        extra, why = _EXTRAS.get(name, ("video", ""))
        raise MissingDependencyError(name, extra, why) from exc


def available(name: str) -> bool:
    """True when ``name`` imports (without raising)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True
