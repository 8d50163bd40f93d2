"""MCAP both ways, so that recordings open in Foxglove and MCAP tools feed hyperframes.

- :func:`export_mcap` (``hyperframes export``): hyperframe files to one MCAP file
  with Foxglove schemas (:mod:`~hyperframes.mcap.schemas`) and an annotation topic;
- :func:`import_mcap` (``hyperframes import``): an MCAP file to a hyperframe file,
  windowed with the recorder's rule (:mod:`~hyperframes.mcap.windowing`);
- :func:`check_mcap`: the structural checks of ``mcap doctor`` the ``mcap`` library offers.

Needs the ``mcap`` extra (``pip install 'hyperframes-sensors[mcap]'``); the pure parts
(schemas, messages, windowing) import without it, and the functions above
raise :class:`~hyperframes.mcap.errors.MissingExtraError` when it is missing.
"""

from __future__ import annotations

from typing import Any

from hyperframes.mcap.errors import (
    BadMappingError,
    BadMessageError,
    EmptyRangeError,
    McapToolError,
    MissingExtraError,
    NotMcapError,
    StreamMismatchError,
    TopicNotFoundError,
    UnknownStreamError,
)

__all__ = [
    "export_mcap",
    "import_mcap",
    "check_mcap",
    "McapToolError",
    "NotMcapError",
    "TopicNotFoundError",
    "EmptyRangeError",
    "UnknownStreamError",
    "StreamMismatchError",
    "BadMappingError",
    "BadMessageError",
    "MissingExtraError",
]

_LAZY = {
    "export_mcap": "hyperframes.mcap.export",
    "import_mcap": "hyperframes.mcap.ingest",
    "check_mcap": "hyperframes.mcap.doctor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "mcap":
            raise MissingExtraError("mcap", "mcap") from None
        raise
