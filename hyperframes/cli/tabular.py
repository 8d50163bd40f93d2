"""Rows of an Arrow table as text: an aligned table for people, JSON or CSV for programs. Pure.

Used by ``hyperframes catalog query`` and ``catalog events``. Times
(``TIMESTAMP``) print as ISO 8601 (UTC), dates as ``YYYY-MM-DD``, maps as
``k=v`` pairs (objects in JSON), lists comma-separated (arrays in JSON), a
null as an empty cell (``null`` in JSON).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

__all__ = ["cell_text", "json_value", "to_text", "to_json", "to_csv", "MAX_CELL"]

MAX_CELL = 80
"""The widest cell of the text table (longer ones end with ``…``)."""


def json_value(v: Any) -> Any:
    """A value of ``Table.to_pylist()`` as JSON can hold it."""
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)


def cell_text(v: Any) -> str:
    """One value as a cell of the text table or CSV."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else str(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    j = json_value(v)
    if isinstance(j, dict):
        return ", ".join(f"{k}={cell_text(x)}" for k, x in j.items())
    if isinstance(j, list):
        return ", ".join(cell_text(x) for x in j)
    return str(j)


def _rows(table: pa.Table, columns: Sequence[str] | None) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns to show and the rows (a MAP's pairs as a dict, an empty one too)."""
    names = [c for c in columns if c in table.column_names] if columns else table.column_names
    picked = table.select(names)
    maps = [f.name for f in picked.schema if pa.types.is_map(f.type)]
    rows = picked.to_pylist()
    for row in rows:
        for m in maps:
            if row[m] is not None:
                row[m] = dict(row[m])
    return names, rows


def to_text(table: pa.Table, columns: Sequence[str] | None = None) -> str:
    """An aligned table (numbers right-aligned) and a count line."""
    names, rows = _rows(table, columns)
    cells = [[cell_text(r[c]) for c in names] for r in rows]
    cells = [[c if len(c) <= MAX_CELL else c[: MAX_CELL - 1] + "…" for c in row] for row in cells]
    cells = [[" ".join(c.split()) if "\n" in c else c for c in row] for row in cells]
    widths = [max([len(n), *(len(row[i]) for row in cells)]) for i, n in enumerate(names)]
    numeric = [
        pa.types.is_integer(t) or pa.types.is_floating(t) for t in table.select(names).schema.types
    ]

    def line(values: list[str], header: bool = False) -> str:
        out = [
            v.rjust(w) if num and not header else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(out).rstrip()

    lines = [line(names, header=True), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in cells]
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines)


def to_json(table: pa.Table, columns: Sequence[str] | None = None) -> str:
    """A JSON array of objects, one per row."""
    names, rows = _rows(table, columns)
    return json.dumps([{c: json_value(r[c]) for c in names} for r in rows], indent=1)


def to_csv(table: pa.Table, columns: Sequence[str] | None = None) -> str:
    """CSV with a header row."""
    names, rows = _rows(table, columns)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(names)
    for r in rows:
        w.writerow([cell_text(r[c]) for c in names])
    return buf.getvalue()
