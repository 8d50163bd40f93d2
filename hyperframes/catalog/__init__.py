"""The fleet catalog: Parquet tables beside the data, queried with DuckDB (docs/CATALOG.md).

``hyperframes catalog build`` reads the headers, metadata and event streams of
segments in directories or buckets (never their payloads) and writes rows to
hive-partitioned Parquet tables under a catalog root; :func:`open` returns a
DuckDB connection with those tables as views; a snapshot (a manifest) pins
exactly which bytes a training set uses. Needs the ``catalog`` extra
(DuckDB, pyarrow).
"""

from __future__ import annotations

from typing import Any

from hyperframes._install import install_hint

try:
    import duckdb  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in dev and CI
    raise ImportError(
        f"the fleet catalog needs DuckDB and pyarrow ({exc.name} is missing): "
        f"{install_hint('catalog')}"
    ) from None

__all__ = ["open", "build", "snapshot", "read_manifest"]

_LAZY = {
    "open": ("hyperframes.catalog.views", "open_catalog"),
    "build": ("hyperframes.catalog.build", "build"),
    "snapshot": ("hyperframes.catalog.manifest", "snapshot"),
    "read_manifest": ("hyperframes.catalog.manifest", "read_manifest"),
}


def __getattr__(name: str) -> Any:
    """The public functions, imported on first use (``hyperframes.catalog.open(ROOT)``)."""
    if name in _LAZY:
        import importlib  # noqa: PLC0415

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
