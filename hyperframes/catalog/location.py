"""Where a catalog lives (a directory or ``s3://B/prefix``), its marker, and its part files.

The read side's only I/O below DuckDB: reading ``_catalog.json`` (refusing a
missing catalog or one of a newer version), a pyarrow S3 filesystem for
catalogs in a bucket (DuckDB's httpfs extension is not assumed: it is often
not installed and cannot be downloaded on vehicles or in CI), and listing a
table's part files.

The bucket's endpoint, region and keys come from the usual AWS settings,
read as :mod:`hyperframes.storage.objects` reads them (``AWS_ENDPOINT_URL_S3``,
``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT``: plain HTTP only when it says ``http://``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from hyperframes.catalog.errors import CatalogError
from hyperframes.catalog.marker import check_marker, missing_marker
from hyperframes.catalog.schema import MARKER
from hyperframes.storage.objects import _endpoint, is_url, split_s3_url

__all__ = ["Location", "locate", "s3_filesystem", "read_marker", "part_paths", "PART_RE"]

PART_RE = re.compile(r"^vehicle=[^/]+/date=\d{4}-\d{2}-\d{2}/part-[^/]*\.parquet$")
"""A part file's path below its table folder (temporary names never match)."""


@dataclass(frozen=True, slots=True)
class Location:
    """A catalog root: ``root`` as given; for a bucket, ``base`` is ``bucket/prefix`` (the
    path pyarrow's S3 filesystem uses), for a directory the absolute path."""

    root: str
    s3: bool
    base: str

    def path(self, *parts: str) -> str:
        """``base/part/...`` (``/`` separated)."""
        return "/".join([self.base.rstrip("/"), *parts])


def locate(root: str | os.PathLike[str]) -> Location:
    """The :class:`Location` of a root given as a path or an ``s3://`` URL."""
    text = os.fspath(root)
    if is_url(text):
        bucket, key = split_s3_url(text.rstrip("/") + "/")
        return Location(text, True, f"{bucket}/{key.strip('/')}".rstrip("/"))
    return Location(text, False, str(Path(text).absolute()))


def s3_filesystem() -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem configured from the environment (endpoint, region; the keys
    and profile through the AWS SDK's own chain)."""
    kwargs: dict[str, Any] = {
        "region": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1",
        "connect_timeout": 10.0,
        "request_timeout": 60.0,
    }
    endpoint = _endpoint()
    if endpoint:
        scheme, sep, rest = endpoint.partition("://")
        if not sep:
            scheme, rest = "https", endpoint
        kwargs["endpoint_override"] = rest.rstrip("/")
        kwargs["scheme"] = scheme.lower()
    # Ranged GETs (Parquet footers and column chunks) from a store that answers them with
    # the whole object's checksum (rclone) fail the AWS SDK's response check; AWS sends no
    # checksum with a range, so only such stores are affected. The SDK reads the setting
    # when the client is made: set for that moment only, unless the user set it.
    name = "AWS_RESPONSE_CHECKSUM_VALIDATION"
    if name in os.environ:
        return pafs.S3FileSystem(**kwargs)
    os.environ[name] = "when_required"
    try:
        return pafs.S3FileSystem(**kwargs)
    finally:
        os.environ.pop(name, None)


def _read_text(loc: Location, fs: pafs.FileSystem | None, name: str) -> str | None:
    try:
        if fs is None:
            return Path(loc.path(name)).read_text(encoding="utf-8")
        with fs.open_input_stream(loc.path(name)) as f:
            return bytes(f.read()).decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        if "NoSuchBucket" in str(exc) or "does not exist" in str(exc).lower():
            return None
        raise CatalogError(loc.root, f"cannot read {name}: {' '.join(str(exc).split())}") from None


def read_marker(loc: Location, fs: pafs.FileSystem | None = None) -> dict[str, Any]:
    """The root's ``_catalog.json``; raises :class:`CatalogError` when it is missing, is no
    catalog marker, or names a version newer than this reader (``VERSION``)."""
    text = _read_text(loc, fs, MARKER)
    if text is None:
        raise missing_marker(loc.root)
    return check_marker(loc.root, text)


def part_paths(loc: Location, table: str, fs: pafs.FileSystem | None = None) -> list[str]:
    """Every part file of ``table`` (sorted; paths as the filesystem names them: absolute
    local paths, or ``bucket/key`` for ``fs``)."""
    base = loc.path(table)
    if fs is None:
        root = Path(base)
        found = (str(p.relative_to(root).as_posix()) for p in root.glob("*/*/part-*.parquet"))
        return sorted(f"{base}/{rel}" for rel in found if PART_RE.match(rel))
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    out = []
    for info in infos:
        if info.type == pafs.FileType.File and info.path.startswith(base + "/"):
            rel = info.path[len(base) + 1 :]
            if PART_RE.match(rel):
                out.append(info.path)
    return sorted(out)
