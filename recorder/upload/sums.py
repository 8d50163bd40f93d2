"""Checksums of a segment computed here, to compare with what the destination reports.

One pass over the file gives the SHA-256 of the whole file and, per multipart
part, its SHA-256 and MD5 (S3's ``ETag`` of an unencrypted part is its MD5).
An S3 multipart object's SHA-256 checksum is *composite*: the SHA-256 of the
concatenated part digests, base64, with ``-N`` appended by some stores.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass

__all__ = ["PartSum", "FileSums", "file_sums", "b64"]

_CHUNK = 1 << 20


def b64(digest: bytes) -> str:
    """Base64 text of a digest, as S3 headers carry it."""
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True, slots=True)
class PartSum:
    """One part: where it is in the file and its digests."""

    number: int  # 1-based, as S3 numbers parts
    offset: int
    size: int
    sha256: bytes
    md5: str  # hex


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
        joined = b"".join(bytes.fromhex(p.md5) for p in self.parts)
        return f"{hashlib.md5(joined).hexdigest()}-{len(self.parts)}"


def file_sums(fd: int, part_size: int) -> FileSums:
    """Digests of the open file ``fd`` (read from offset 0 to its end) in ``part_size`` parts."""
    whole = hashlib.sha256()
    parts: list[PartSum] = []
    offset = 0
    size = os.fstat(fd).st_size
    while offset < size or not parts:
        n = min(part_size, size - offset)
        sha, md5 = hashlib.sha256(), hashlib.md5()
        done = 0
        while done < n:
            chunk = os.pread(fd, min(_CHUNK, n - done), offset + done)
            if not chunk:
                raise OSError(f"file shrank while reading it (at {offset + done} of {size} bytes)")
            sha.update(chunk)
            md5.update(chunk)
            whole.update(chunk)
            done += len(chunk)
        parts.append(PartSum(len(parts) + 1, offset, n, sha.digest(), md5.hexdigest()))
        offset += n
        if n == 0:
            break
    return FileSums(size, whole.digest(), tuple(parts))
