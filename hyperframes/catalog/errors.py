"""The catalog's typed error: a root that is no catalog, or one this version cannot read."""

from __future__ import annotations

from hyperframes.errors import HyperframesError

__all__ = ["CatalogError", "ManifestError"]


class CatalogError(HyperframesError):
    """A catalog root that cannot be used: ``root`` names it, ``problem`` says why."""

    def __init__(self, root: str, problem: str) -> None:
        super().__init__(f"{root}: {problem}")
        self.root = root
        self.problem = problem


class ManifestError(CatalogError):
    """A manifest that cannot be used: of a newer version, or naming an object or file that
    is gone or whose bytes changed since the snapshot (``root`` is then its uri)."""
