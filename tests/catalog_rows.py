"""Synthetic catalog rows written as Parquet parts in the catalog's layout (schema.py), for the
read side's tests: ROOT/_catalog.json and ROOT/TABLE/vehicle=V/date=D/part-*.parquet."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hyperframes.catalog.schema import (
    FORMAT,
    MARKER,
    PARQUET_VERSION_KEY,
    SCHEMAS,
    VERSION,
    date_of,
    event_id,
)

S = 1_000_000_000
T0 = 1_735_689_600 * S  # 2025-01-01T00:00:00Z, a Wednesday


def segment(
    vehicle: str,
    seq: int,
    start_s: float,
    end_s: float,
    *,
    converted: bool = False,
    frames: int = 100,
    cataloged_ns: int = 1,
    name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``segments`` row (times in seconds after T0), with its partition."""
    name = name or f"{vehicle}_{seq:05d}{'.conv' if converted else ''}.hf"
    start, end = T0 + round(start_s * S), T0 + round(end_s * S)
    row = {
        "uri": f"s3://fleet/raw/{vehicle}/{date_of(start)}/{name}",
        "name": name,
        "seq": seq,
        "start_ns": start,
        "end_ns": end,
        "window_ns": S // 10,
        "windows": round((end_s - start_s) * 10),
        "frames": frames,
        "streams": 2,
        "bytes_stored": 1000 * frames,
        "bytes_payload": 900 * frames,
        "fingerprint": f"{1000 * frames}-00000000-00000000",
        "etag": None,
        "sha256": None,
        "format_version": 1,
        "recorder_version": "t",
        "converted": converted,
        "converted_from": f"{vehicle}_{seq:05d}.hf" if converted else None,
        "dropped": 0,
        "late": 0,
        "quarantined": 0,
        "events": 0,
        "modified_ns": end,
        "cataloged_ns": cataloged_ns,
    }
    row.update(extra)
    return {**row, "vehicle": vehicle, "date": date_of(start)}


def stream(
    seg: dict[str, Any],
    stream_id: int,
    name: str,
    *,
    frames: int = 10,
    first_s: float | None = None,
    last_s: float | None = None,
    cataloged_ns: int = 1,
) -> dict[str, Any]:
    """A ``streams`` row of ``seg`` (first/last default to the segment's span)."""
    first = seg["start_ns"] if first_s is None else T0 + round(first_s * S)
    last = seg["end_ns"] - 1 if last_s is None else T0 + round(last_s * S)
    return {
        "uri": seg["uri"],
        "stream_id": stream_id,
        "name": name,
        "kind": "camera",
        "encoding": "jpeg",
        "codec": "none",
        "rate_hz": 10.0,
        "frames": frames,
        "first_ns": first if frames else None,
        "last_ns": last if frames else None,
        "missing_windows": 0,
        "cataloged_ns": cataloged_ns,
        "vehicle": seg["vehicle"],
        "date": seg["date"],
    }


def event(
    vehicle: str,
    t_s: float,
    name: str,
    *,
    pre_s: float = 1.0,
    post_s: float = 1.0,
    cataloged_ns: int = 1,
    note: str | None = None,
) -> dict[str, Any]:
    """An ``events`` row at T0 + t_s."""
    t = T0 + round(t_s * S)
    return {
        "event_id": event_id(vehicle, t, name),
        "t_ns": t,
        "name": name,
        "pre_s": pre_s,
        "post_s": post_s,
        "start_ns": t - round(pre_s * S),
        "end_ns": t + round(post_s * S),
        "source": "mark",
        "clock": "system",
        "tags": [("who", "test")],
        "note": note,
        "payload": None,
        "uri": None,
        "cataloged_ns": cataloged_ns,
        "vehicle": vehicle,
        "date": date_of(t),
    }


def problem(vehicle: str, name: str, problem_text: str, *, cataloged_ns: int = 1) -> dict[str, Any]:
    """A ``problems`` row."""
    return {
        "uri": f"s3://fleet/raw/{vehicle}/{name}",
        "name": name,
        "bytes_stored": 10,
        "etag": None,
        "modified_ns": T0,
        "error": "CorruptFileError",
        "problem": problem_text,
        "cataloged_ns": cataloged_ns,
        "vehicle": vehicle,
        "date": date_of(T0),
    }


def write_marker(root: Path, version: int = VERSION) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text(json.dumps({"format": FORMAT, "version": version}))


def write_parts(root: Path, table: str, rows: list[dict[str, Any]]) -> list[Path]:
    """One part file per (vehicle, date) of ``rows``; returns the files written."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["vehicle"], row["date"]), []).append(row)
    written = []
    for (vehicle, date), group in sorted(groups.items()):
        folder = root / table / f"vehicle={vehicle}" / f"date={date}"
        folder.mkdir(parents=True, exist_ok=True)
        schema = SCHEMAS[table].with_metadata({PARQUET_VERSION_KEY: str(VERSION).encode()})
        cols = {f.name: [r[f.name] for r in group] for f in SCHEMAS[table]}
        path = folder / f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(pa.table(cols, schema=schema), path)
        written.append(path)
    return written


def write_catalog(root: Path, **tables: list[dict[str, Any]]) -> Path:
    """A catalog at ``root`` (marker + parts of each table given); returns ``root``."""
    write_marker(root)
    for table, rows in tables.items():
        write_parts(root, table, rows)
    return root


def upload_tree(root: Path, client: Any, bucket: str, prefix: str) -> int:
    """Put every file under ``root`` at ``s3://bucket/prefix/REL``; returns how many."""
    n = 0
    for p in sorted(root.rglob("*")):
        if p.is_file():
            key = f"{prefix.strip('/')}/{p.relative_to(root).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=p.read_bytes())
            n += 1
    return n
