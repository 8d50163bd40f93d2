"""The catalog's marker, ``_catalog.json``: what it holds, and the one check of it. Pure.

Both sides read it: a builder before it adds parts (:mod:`~hyperframes.catalog.store`),
a reader before it opens the views (:mod:`~hyperframes.catalog.location`); both refuse
a root without one, a marker of another format and one of a newer version, in the
same words.
"""

from __future__ import annotations

from typing import Any

from hyperframes import __version__
from hyperframes.catalog.errors import CatalogError
from hyperframes.catalog.schema import FORMAT, MARKER, VERSION
from hyperframes.format.jsontext import parse_json

__all__ = ["marker_bytes", "missing_marker", "check_marker"]


def marker_bytes() -> bytes:
    """The marker a new catalog gets: format, layout version, who made it."""
    return (
        f'{{\n "format": "{FORMAT}",\n "version": {VERSION},\n'
        f' "created_by": "hyperframes {__version__}"\n}}\n'
    ).encode()


def missing_marker(root: str) -> CatalogError:
    """The error for a root without a marker: not a catalog (yet)."""
    return CatalogError(
        root,
        f"no catalog here ({MARKER} is missing): build one with "
        f"'hyperframes catalog build SRC... --catalog {root}'",
    )


def check_marker(root: str, data: bytes | str) -> dict[str, Any]:
    """The marker's document; raises :class:`CatalogError` when it is not JSON, describes
    no catalog, or names a layout version newer than this hyperframes reads."""
    try:
        doc = parse_json(data, MARKER)
    except ValueError:
        raise CatalogError(root, f"{MARKER} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CatalogError(root, f"{MARKER} does not describe a {FORMAT}")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise CatalogError(root, f"{MARKER} has no valid version ({version!r})")
    if version > VERSION:
        made = doc.get("created_by")
        by = f" (written by {made})" if isinstance(made, str) else ""
        raise CatalogError(
            root,
            f"the catalog is of version {version}{by}, newer than this hyperframes "
            f"{__version__} reads (version {VERSION}): upgrade hyperframes-sensors",
        )
    return doc
