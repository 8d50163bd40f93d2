"""What a build is asked to catalog: segments in directories, files, globs, bucket prefixes.

:func:`list_sources` turns ``SRC...`` into :class:`Listed` objects (URI, size,
ETag, modification time) without opening one: a directory is walked
recursively for ``*.hf`` (a ``*.hf.tmp`` still being written is not one), a
glob is expanded, ``s3://bucket/prefix/`` is listed recursively
(``list_objects_v2``; its first-level prefixes, one per vehicle in a fleet's
layout, on threads at once) for keys ending in ``.hf``, and a ``*`` in an
``s3://`` URL matches keys as in a shell glob (``**`` too).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hyperframes.storage.objects import fail, is_url, list_objects, split_s3_url

__all__ = ["Listed", "list_sources", "quoted_etag"]

_SUFFIX: Final = ".hf"
_GLOB: Final = "*?["
_LIST_THREADS: Final = 16  # a bucket's prefixes listed at once
_DESCEND_MAX: Final = 3  # levels of lone prefixes descended before listing in parallel


@dataclass(frozen=True, slots=True)
class Listed:
    """One segment to catalog, as its listing says (nothing read from it yet)."""

    uri: str
    size: int
    modified_ns: int
    etag: str | None = None


def quoted_etag(etag: str | None) -> str | None:
    """An ETag in the form S3 answers it: in double quotes (``None`` stays ``None``)."""
    if not etag:
        return None
    bare = etag.strip().removeprefix("W/").strip('"')
    return f'"{bare}"'


def _local_file(path: Path) -> Listed | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Listed(str(path.absolute()), st.st_size, st.st_mtime_ns)


def _walk(top: Path) -> Iterator[Listed]:
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(_SUFFIX):
                found = _local_file(Path(folder, name))
                if found is not None:
                    yield found


def _local(source: str) -> Iterator[Listed]:
    path = Path(source).expanduser()
    if any(ch in source for ch in _GLOB) and not path.exists():
        anchor = Path(path.anchor or ".")
        pattern = str(path.relative_to(anchor)) if path.anchor else str(path)
        for match in sorted(anchor.glob(pattern)):
            if match.is_dir():
                yield from _walk(match)
            elif match.name.endswith(_SUFFIX):
                found = _local_file(match)
                if found is not None:
                    yield found
        return
    if path.is_dir():
        yield from _walk(path)
        return
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {source}")
    found = _local_file(path)
    if found is not None:
        yield found


def _bucket(source: str) -> Iterator[Listed]:
    bucket, key = split_s3_url(source)
    at = min((key.find(ch) for ch in _GLOB if ch in key), default=-1)
    if at >= 0:
        prefix = key[:at].rpartition("/")[0]
        prefix = f"{prefix}/" if prefix else ""
        wanted = key
    elif key.endswith(_SUFFIX):
        prefix, wanted = key, ""
    else:
        prefix = key if not key or key.endswith("/") else f"{key}/"
        wanted = ""
    try:
        if key.endswith(_SUFFIX) and at < 0:
            objs = list_objects(bucket, prefix)
        else:
            objs = _list_tree(bucket, prefix)
        for obj in objs:
            k: str = obj["Key"]
            if not k.endswith(_SUFFIX):
                continue
            if at >= 0 and not fnmatch.fnmatchcase(k, wanted):
                continue
            if key.endswith(_SUFFIX) and at < 0 and k != key:
                continue
            yield Listed(
                f"s3://{bucket}/{k}",
                int(obj["Size"]),
                int(obj["LastModified"].timestamp() * 1e9),
                quoted_etag(obj.get("ETag")),
            )
    except Exception as exc:  # botocore raises many kinds
        raise fail(source, exc) from None


def _list_tree(bucket: str, prefix: str) -> list[dict[str, Any]]:
    """Every object under ``prefix``, by key: the first-level prefixes (one per vehicle in
    a fleet's layout; a lone one is descended into) listed recursively on threads, at
    once. Every key is listed every time (nothing assumes keys arrive in order)."""
    objs: list[dict[str, Any]] = []
    subs: list[str] = [prefix]
    for _ in range(_DESCEND_MAX):
        if len(subs) != 1:
            break
        at = list_objects(bucket, subs[0], delimiter="/")
        objs += [o for o in at if "Key" in o]
        subs = [o["Prefix"] for o in at if "Prefix" in o]
    if len(subs) == 1:
        objs += list_objects(bucket, subs[0])
    elif subs:
        with ThreadPoolExecutor(min(_LIST_THREADS, len(subs))) as pool:
            for got in pool.map(lambda p: list_objects(bucket, p), subs):
                objs += got
    objs.sort(key=lambda o: str(o["Key"]))
    return objs


def list_sources(sources: Sequence[str]) -> list[Listed]:
    """Every segment named by ``sources`` (each once, in the order found).

    Raises ``FileNotFoundError`` for a local path that does not exist,
    :class:`~hyperframes.storage.objects.RemoteError` when a bucket cannot be
    listed, ``ValueError`` for a malformed ``s3://`` URL.
    """
    seen: dict[str, Listed] = {}
    for source in sources:
        found = _bucket(source) if is_url(source) else _local(os.fspath(source))
        for item in found:
            seen.setdefault(item.uri, item)
    return list(seen.values())
