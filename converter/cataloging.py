"""Adding a published output to the fleet catalog (the config's ``catalog:``).

Called by the tasks once an output is published; a failure is logged and
noted in the outcome (``catalog_error``), never the conversion's.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["catalog_output"]

log = logging.getLogger(__name__)


def catalog_output(
    root: str | None,
    local: str | os.PathLike[str],
    outcome: dict[str, Any],
    *,
    uri: str | None = None,
    etag: str | None = None,
    sha256: str | None = None,
) -> None:
    """Add the output ``local`` (published as ``uri``, default its path) to the catalog at
    ``root`` (``None``: nothing); sets ``outcome["cataloged"]``, or ``catalog_error``."""
    if root is None:
        return
    try:
        from hyperframes.catalog.append import append_segment  # noqa: PLC0415 - the extra

        append_segment(root, os.fspath(local), uri=uri, etag=etag, sha256=sha256)
    except Exception as exc:  # the conversion stands whatever the catalog does
        outcome["catalog_error"] = f"{type(exc).__name__}: {exc}"
        log.warning("%s: converted, but adding it to the catalog %s failed: %s",
                    uri or os.fspath(local), root, exc)  # fmt: skip
    else:
        outcome["cataloged"] = True
