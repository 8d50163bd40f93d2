"""Checksums of a segment computed here, to compare with what the destination reports.

One pass over the file gives the SHA-256 of the whole file and, per multipart
part, its SHA-256 and MD5 (sent as ``Content-MD5``; a store's ``ETag`` of an
unencrypted part is its MD5). Two ``ETag`` forms prove an object's bytes:
the MD5 of the whole object (a single PUT everywhere; rclone's HEAD of a
multipart object) and ``md5(part MD5s)-N`` of a multipart object; the whole
MD5 and the form for another tool's part size are computed only when a store
answers with them (:func:`part_md5s`). An S3 multipart object's SHA-256
checksum is *composite*: the SHA-256 of the concatenated part digests, base64,
with ``-N`` appended by some stores.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["PartSum", "FileSums", "file_sums", "part_md5s", "md5s_etag", "b64", "etag_form"]

_CHUNK = 1 << 20
_MD5: Final = re.compile(r"[0-9a-f]{32}")
_MULTIPART: Final = re.compile(r"([0-9a-f]{32})-([1-9][0-9]{0,4})")


def b64(digest: bytes) -> str:
    """Base64 text of a digest, as S3 headers carry it."""
    return base64.b64encode(digest).decode("ascii")


def etag_form(etag: str) -> tuple[str, int]:
    """What an (unquoted) ``ETag`` looks like: ``("md5", 1)`` for 32 hex digits (the MD5 of
    the object, on a store that makes it so), ``("md5s", N)`` for ``md5(part MD5s)-N``,
    else ``("other", 0)``."""
    etag = etag.lower()
    if _MD5.fullmatch(etag):
        return "md5", 1
    m = _MULTIPART.fullmatch(etag)
    return ("md5s", int(m[2])) if m else ("other", 0)


def md5s_etag(md5s: Sequence[str]) -> str:
    """The ``ETag`` S3 gives a multipart object with parts of these MD5s (hex): MD5 of the
    part MD5s, ``-N``."""
    joined = b"".join(bytes.fromhex(m) for m in md5s)
    return f"{hashlib.md5(joined).hexdigest()}-{len(md5s)}"


@dataclass(frozen=True, slots=True)
class PartSum:
    """One part: where it is in the file and its digests."""

    number: int  # 1-based, as S3 numbers parts
    offset: int
    size: int
    sha256: bytes  # empty when only MD5s were asked for (part_md5s)
    md5: str  # hex

    @property
    def md5_b64(self) -> str:
        """The part's MD5, base64 (a ``Content-MD5`` header)."""
        return b64(bytes.fromhex(self.md5))


@dataclass(frozen=True, slots=True)
class FileSums:
    """A file's size, SHA-256 and per-part digests for one part size."""

    size: int
    sha256: bytes
    parts: tuple[PartSum, ...]

    @property
    def sha256_b64(self) -> str:
        """SHA-256 of the whole file, base64."""
        return b64(self.sha256)

    @property
    def composite_b64(self) -> str:
        """S3's composite SHA-256 of a multipart object with these parts, base64."""
        return b64(hashlib.sha256(b"".join(p.sha256 for p in self.parts)).digest())

    @property
    def multipart_etag(self) -> str:
        """The ``ETag`` S3 gives such a multipart object: MD5 of the part MD5s, ``-N``."""
        return md5s_etag([p.md5 for p in self.parts])


def _scan(fd: int, size: int, part_size: int, whole: Any = None) -> list[PartSum]:
    """Per part of ``part_size`` bytes: its MD5 and, with ``whole`` (a hash of the whole
    file, updated here), its SHA-256."""
    parts: list[PartSum] = []
    offset = 0
    while offset < size or not parts:
        n = min(part_size, size - offset)
        md5 = hashlib.md5()
        sha = hashlib.sha256() if whole is not None else None
        done = 0
        while done < n:
            chunk = os.pread(fd, min(_CHUNK, n - done), offset + done)
            if not chunk:
                raise OSError(f"file shrank while reading it (at {offset + done} of {size} bytes)")
            md5.update(chunk)
            if sha is not None:
                sha.update(chunk)
                whole.update(chunk)
            done += len(chunk)
        digest = sha.digest() if sha is not None else b""
        parts.append(PartSum(len(parts) + 1, offset, n, digest, md5.hexdigest()))
        offset += n
        if n == 0:
            break
    return parts


def file_sums(fd: int, part_size: int) -> FileSums:
    """Digests of the open file ``fd`` (read from offset 0 to its end) in ``part_size`` parts."""
    whole = hashlib.sha256()
    size = os.fstat(fd).st_size
    parts = _scan(fd, size, part_size, whole)
    return FileSums(size, whole.digest(), tuple(parts))


def part_md5s(fd: int, size: int, part_size: int) -> list[str]:
    """The MD5 (hex) of each ``part_size`` part of the first ``size`` bytes of ``fd``
    (``part_size >= size``: the whole file's MD5 alone)."""
    return [p.md5 for p in _scan(fd, size, max(part_size, 1))]
