"""The converter's object-store I/O: a thin layer over obstore for one bucket.

Everything the bucket batch (:mod:`hyperframes.converter.bucket.inbox`) and its tasks
(:mod:`hyperframes.converter.bucket.task`) do to a store goes through :class:`Bucket`:
list, HEAD, a ranged GET of an object's first bytes, streamed download with
SHA-256, multipart upload, JSON objects, conditional writes, and the one step
that publishes an output, :meth:`Bucket.copy_if_absent`.

Listing goes through boto3 (:func:`hyperframes.storage.objects.client_for`), not
obstore: obstore's listing fails as a whole when it meets one key its paths
refuse (:func:`~hyperframes.converter.bucket.keys.key_problem`), and anyone who
may put a key under a prefix could stop every reader of it. :meth:`Bucket.listing`
gives every key; :meth:`Bucket.objects` only those the store can address.

Conditional writes (how a final key is never overwritten) follow
``HYPERFRAMES_S3_FINAL_COPY`` (validated here):

- ``multipart`` (default): the copy is a one-part multipart upload completed
  with ``If-None-Match: *``, so the store refuses it atomically when the key
  exists (Amazon S3, MinIO, Ceph RGW since Squid, moto). Puts that must not
  replace anything (leases, reason files) send ``If-None-Match: *`` too, and
  lease renewals ``If-Match: ETAG``.
- ``header:NAME:VALUE`` or ``header-with-status:NAME:VALUE:STATUS``: a plain
  copy with a store-specific header (Cloudflare R2:
  ``header:cf-copy-destination-if-none-match:*``).
- ``head``: for stores without conditional requests: a HEAD check, then a
  plain copy/put. Two converters racing in the same instant could then both
  write; see docs/CONVERTER.md, "Buckets".

Needs the ``s3`` extra (obstore); a missing extra is a
:class:`~hyperframes.converter.errors.MissingExtraError`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hyperframes.converter.bucket.keys import key_problem
from hyperframes.converter.errors import ConfigError, ConverterError, MissingExtraError
from hyperframes.storage.objects import classify_error, client_for, redact_credentials, store_for

__all__ = [
    "FINAL_COPY_ENV",
    "CHANGED",
    "BucketError",
    "KeyExistsError",
    "LeaseLostError",
    "Obj",
    "Bucket",
    "as_url",
    "final_copy_mode",
]

FINAL_COPY_ENV: Final = "HYPERFRAMES_S3_FINAL_COPY"
_CHUNK: Final = 8 << 20
CHANGED: Final = "changed since it was listed"
#: ``progress(bytes_done, bytes_total)`` of one download or upload
Transfer = Callable[[int, int], None]


class BucketError(ConverterError):
    """A store request failed (names the object and what the store said)."""

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        self.problem = problem
        super().__init__(f"{url}: {problem}")


class KeyExistsError(BucketError):
    """A conditional write found the key taken."""


class LeaseLostError(BucketError):
    """A lease this converter held was taken over (it expired) or removed."""


@dataclass(frozen=True, slots=True)
class Obj:
    """What a listing or a HEAD says about one object."""

    key: str
    size: int
    etag: str
    mtime: float  # seconds since the epoch


def as_url(path: object) -> str | None:
    """``s3://...`` for a command-line value that names one, else None.

    argparse's ``type=Path`` folds ``s3://b/k`` into ``s3:/b/k``; both forms
    are accepted.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        return None
    if text.startswith("s3://"):
        return text.rstrip("/")
    if text.startswith("s3:/"):
        return "s3://" + text[len("s3:/") :].rstrip("/")
    return None


def final_copy_mode() -> str:
    """The validated ``HYPERFRAMES_S3_FINAL_COPY`` (``multipart`` when unset)."""
    mode = os.environ.get(FINAL_COPY_ENV, "").strip() or "multipart"
    if mode in ("multipart", "head"):
        return mode
    kind, _, rest = mode.partition(":")
    if kind == "header" and rest.count(":") >= 1:
        return mode
    if kind == "header-with-status" and rest.count(":") >= 2:
        return mode
    raise ConfigError(
        FINAL_COPY_ENV,
        f"{mode!r} is not a way to copy without overwriting: use multipart (Amazon S3, "
        "MinIO, Ceph), header:NAME:VALUE or header-with-status:NAME:VALUE:STATUS "
        "(e.g. Cloudflare R2), or head (a HEAD check; for stores without conditional requests)",
    )


def _obstore() -> Any:
    try:
        import obstore  # noqa: PLC0415 - the s3 extra
    except ImportError:
        raise MissingExtraError("obstore", "s3", "converting in a bucket (s3:// URLs)") from None
    return obstore


def _mtime(meta: dict[str, Any]) -> float:
    lm = meta.get("last_modified") or meta.get("LastModified")
    return float(lm.timestamp()) if lm is not None else 0.0


class Bucket:
    """One bucket of an S3-compatible store, configured from the ``AWS_*`` environment."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._ob = _obstore()
        self.mode = final_copy_mode()
        config = {} if self.mode == "head" else {"copy_if_not_exists": self.mode}
        self._store = store_for(name, **config)

    def url(self, key: str) -> str:
        """``s3://BUCKET/KEY``."""
        return f"s3://{self.name}/{key}"

    def _fail(self, key: str, exc: BaseException) -> BucketError:
        name = type(exc).__name__
        text = redact_credentials(str(exc).split("\n", 1)[0][:300])
        if type(exc).__module__.startswith("botocore"):  # a listing (boto3)
            kind = classify_error(exc).kind
            if kind == "no-bucket":
                return BucketError(self.url(key), "no such bucket")
            if kind == "auth":
                return BucketError(self.url(key), f"access refused: {text}")
        if name == "PreconditionError":
            return BucketError(self.url(key), CHANGED)
        if name == "AlreadyExistsError":
            return KeyExistsError(self.url(key), "exists")
        if isinstance(exc, FileNotFoundError) or name == "NotFoundError":
            return BucketError(self.url(key), "no such object")
        if name in ("PermissionDeniedError", "UnauthenticatedError"):
            return BucketError(self.url(key), f"access refused: {text}")
        if name == "NotSupportedError":
            return BucketError(
                self.url(key),
                f"the store does not support this request ({text}); "
                f"set {FINAL_COPY_ENV} for this store (docs/CONVERTER.md, Buckets)",
            )
        return BucketError(self.url(key), f"the store failed: {name}: {text}")

    # --- reading -----------------------------------------------------------------

    def listing(self, prefix: str) -> list[Obj]:
        """Every object under ``prefix/`` (recursive), sorted by key, whatever its key
        (see the module docstring)."""
        try:
            pages = client_for().get_paginator("list_objects_v2")
            rows = [
                Obj(o["Key"], int(o["Size"]), str(o.get("ETag") or ""), _mtime(o))
                for page in pages.paginate(Bucket=self.name, Prefix=f"{prefix}/" if prefix else "")
                for o in page.get("Contents", [])
            ]
        except Exception as exc:  # botocore raises many kinds
            raise self._fail(prefix + "/", exc) from None
        return sorted(rows, key=lambda o: o.key)

    def objects(self, prefix: str) -> list[Obj]:
        """Every object under ``prefix/`` that the store can address, sorted by key (a
        key with a :func:`~hyperframes.converter.bucket.keys.key_problem` is left out)."""
        return [o for o in self.listing(prefix) if key_problem(o.key) is None]

    def head(self, key: str) -> Obj | None:
        """The object's metadata, or None when it does not exist."""
        try:
            m = self._ob.head(self._store, key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            if type(exc).__name__ == "NotFoundError":
                return None
            raise self._fail(key, exc) from None
        return Obj(key, int(m["size"]), str(m.get("e_tag") or ""), _mtime(m))

    def _stream(self, key: str, etag: str | None = None) -> tuple[Iterator[Any], dict[str, Any]]:
        options = {"if_match": etag} if etag else None
        try:
            got = self._ob.get(self._store, key, options=options)
        except Exception as exc:
            raise self._fail(key, exc) from None
        return iter(got.stream(min_chunk_size=_CHUNK)), got.meta

    def head_bytes(self, key: str, n: int, *, etag: str | None = None) -> tuple[bytes, Obj]:
        """The first ``n`` bytes of ``key`` (fewer when it is shorter; it must not be empty)
        and its metadata, in one ranged GET (``If-Match`` with ``etag``)."""
        options: dict[str, Any] = {"range": (0, n)}
        if etag:
            options["if_match"] = etag
        try:
            got = self._ob.get(self._store, key, options=options)
            data = bytes(got.bytes())
        except Exception as exc:
            raise self._fail(key, exc) from None
        meta = got.meta
        return data, Obj(key, int(meta["size"]), str(meta.get("e_tag") or ""), _mtime(meta))

    def download(
        self, key: str, dest: Path, *, etag: str | None = None, progress: Transfer | None = None
    ) -> tuple[Obj, str]:
        """Stream ``key`` into ``dest`` (fsynced); returns its metadata and SHA-256.

        With ``etag`` the GET is conditional (``If-Match``): the version listed.
        """
        chunks, meta = self._stream(key, etag)
        digest = hashlib.sha256()
        size = 0
        total = int(meta["size"])
        try:
            with dest.open("wb") as f:
                for chunk in chunks:
                    view = memoryview(chunk)
                    digest.update(view)
                    f.write(view)
                    size += len(view)
                    if progress is not None:
                        progress(size, total)
                f.flush()
                os.fsync(f.fileno())
        except BucketError:
            raise
        except OSError:
            raise
        except Exception as exc:
            raise self._fail(key, exc) from None
        if size != int(meta["size"]):
            raise BucketError(self.url(key), f"read {size} bytes, the store says {meta['size']}")
        obj = Obj(key, size, str(meta.get("e_tag") or ""), _mtime(meta))
        return obj, digest.hexdigest()

    def sha256(self, key: str, *, progress: Transfer | None = None) -> tuple[int, str]:
        """Re-read ``key`` whole: its size and SHA-256 (the upload check)."""
        chunks, meta = self._stream(key)
        digest = hashlib.sha256()
        size = 0
        total = int(meta["size"])
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                digest.update(view)
                size += len(view)
                if progress is not None:
                    progress(size, total)
        except Exception as exc:
            raise self._fail(key, exc) from None
        return size, digest.hexdigest()

    def get_json(self, key: str) -> tuple[dict[str, Any], str] | None:
        """A JSON object and its ETag, or None when absent or not a JSON object."""
        try:
            got = self._ob.get(self._store, key)
            data = bytes(got.bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            if type(exc).__name__ == "NotFoundError":
                return None
            raise self._fail(key, exc) from None
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if not isinstance(doc, dict):
            return None
        return doc, str(got.meta.get("e_tag") or "")

    # --- writing -----------------------------------------------------------------

    def upload(self, path: Path, key: str, *, progress: Transfer | None = None) -> None:
        """Upload a local file (multipart above 5 MiB; atomic: whole or nothing).

        ``progress`` hears of the bytes as the store's client reads them (it
        sends up to a few parts at once behind that).
        """
        try:
            if progress is None:
                self._ob.put(self._store, key, path)
            else:
                with _Counted(path, progress) as f:
                    self._ob.put(self._store, key, f)
        except Exception as exc:
            raise self._fail(key, exc) from None

    def put_json(
        self, key: str, doc: dict[str, Any], *, if_absent: bool = False, if_etag: str | None = None
    ) -> str:
        """Write a JSON object; returns its ETag.

        ``if_absent``: only if the key does not exist (:class:`KeyExistsError`);
        ``if_etag``: only if the key still has that ETag (:class:`LeaseLostError`).
        """
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        mode: Any = None
        if self.mode == "head":
            if if_absent and self.head(key) is not None:
                raise KeyExistsError(self.url(key), "exists")
            if if_etag is not None:
                now = self.head(key)
                if now is None or now.etag != if_etag:
                    raise LeaseLostError(self.url(key), "changed by another converter")
        elif if_absent:
            mode = "create"
        elif if_etag is not None:
            mode = {"e_tag": if_etag}
        try:
            result = self._ob.put(self._store, key, data, mode=mode)
        except Exception as exc:
            if type(exc).__name__ in ("PreconditionError", "NotFoundError"):
                raise LeaseLostError(self.url(key), "changed by another converter") from None
            raise self._fail(key, exc) from None
        return str(result.get("e_tag") or "")

    def copy_if_absent(self, src: str, dst: str) -> None:
        """Copy ``src`` to ``dst`` unless ``dst`` exists (:class:`KeyExistsError`).

        A HEAD check first in every mode (a clear error without a request
        that fails); then the store's conditional copy (see the module
        docstring), or in ``head`` mode a plain copy.
        """
        if self.head(dst) is not None:
            raise KeyExistsError(self.url(dst), "exists")
        try:
            self._ob.copy(self._store, src, dst, overwrite=self.mode == "head")
        except Exception as exc:
            err = self._fail(dst, exc)
            if err.problem == "no such object":  # the source: the destination may not exist
                err = BucketError(self.url(src), err.problem)
            raise err from None

    def delete(self, key: str) -> None:
        """Delete ``key`` (no error when it is already gone)."""
        try:
            self._ob.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            if type(exc).__name__ == "NotFoundError":
                return
            raise self._fail(key, exc) from None


class _Counted(io.FileIO):
    """A file read for an upload, reporting the bytes read so far."""

    def __init__(self, path: Path, progress: Transfer) -> None:
        super().__init__(path, "rb")
        self._progress = progress
        self._total = os.fstat(self.fileno()).st_size
        self._done = 0

    def _count(self, n: int) -> None:
        self._done += n
        self._progress(self._done, self._total)

    def read(self, size: int | None = -1) -> bytes:
        """Read and count."""
        data = super().read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` and count."""
        n = super().readinto(buffer)
        self._count(n or 0)
        return n
