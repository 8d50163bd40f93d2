"""The converter's object-store I/O: a thin layer over obstore for one bucket.

Everything the bucket batch (:mod:`hyperframes.converter.bucket.inbox`) and its tasks
(:mod:`hyperframes.converter.bucket.task`) do to a store goes through :class:`Bucket`:
list, HEAD, a ranged GET of an object's first bytes, streamed download with
SHA-256, multipart upload, JSON objects, conditional writes, and the one step
that publishes an output, :meth:`Bucket.copy_if_absent`.

Three requests go through boto3 (:func:`hyperframes.storage.objects.client_for`,
the same ``s3`` extra), not obstore: listings (obstore's fails as a whole when it
meets one key its paths refuse, :func:`~hyperframes.converter.bucket.keys.key_problem`,
and anyone who may put a key under a prefix could stop every reader of it;
:meth:`Bucket.listing` gives every key, :meth:`Bucket.objects` only those the
store can address), the ranged GET of an input's header (obstore refuses rclone's
``200`` answer to a range) and the one-part multipart copy (below).

How a :class:`Bucket` writes conditionally is its :class:`StoreModes`: what the
batch's probe found this store does (:mod:`hyperframes.converter.bucket.probe`),
handed to every task; without a probe, what ``HYPERFRAMES_S3_FINAL_COPY``
(validated here) says:

- publishing (``publish``, the setting's value): ``multipart`` (default): the
  copy is a one-part multipart upload (UploadPartCopy, through boto3: obstore's
  sends no ``Content-Length``, which Ceph RGW and rclone refuse with 411)
  completed with ``If-None-Match: *``, so the store refuses it atomically when
  the key exists (Amazon S3, MinIO, Ceph RGW since Squid, moto).
  ``header:NAME:VALUE`` or ``header-with-status:NAME:VALUE:STATUS``: a plain
  copy with a store-specific header (Cloudflare R2:
  ``header:cf-copy-destination-if-none-match:*``). ``head``: a HEAD check, then
  a plain copy. Every mode does the HEAD check first.
- leases (``leases``): ``conditional``: created with ``If-None-Match: *``,
  renewed and taken over with ``If-Match: ETAG``; ``head``: a HEAD check, then a
  plain put (a store that ignores conditions: one converter at a time).
- ``If-Match`` carries the ETag in the form the store accepts (``etag_put`` for
  PUTs, ``etag_get`` for GETs): ``quoted`` as the store returns it, or
  ``bare`` (Ceph RGW 16 refuses the quoted ETag it returned itself on a PUT).

Needs the ``s3`` extra (obstore); a missing extra is a
:class:`~hyperframes.converter.errors.MissingExtraError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
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
    "PreconditionFailedError",
    "LeaseLostError",
    "Obj",
    "StoreModes",
    "Bucket",
    "as_url",
    "etag_in",
    "final_copy_mode",
    "explicit_final_copy_mode",
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


class PreconditionFailedError(BucketError):
    """A conditional request (``If-Match``) found the object changed (412)."""


class LeaseLostError(PreconditionFailedError):
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


def etag_in(etag: str, form: str) -> str:
    """``etag`` in ``form``: ``bare`` (no quotes) or ``quoted`` (``"..."``, as S3 returns it)."""
    bare = etag.strip().removeprefix("W/").strip('"')
    return bare if form == "bare" else f'"{bare}"'


def final_copy_mode() -> str:
    """The validated ``HYPERFRAMES_S3_FINAL_COPY`` (``multipart`` when unset)."""
    return explicit_final_copy_mode() or "multipart"


def explicit_final_copy_mode() -> str | None:
    """The validated ``HYPERFRAMES_S3_FINAL_COPY``, None when unset."""
    mode = os.environ.get(FINAL_COPY_ENV, "").strip()
    if not mode:
        return None
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


@dataclass(frozen=True, slots=True)
class StoreModes:
    """How a :class:`Bucket` makes its conditional requests (see the module docstring)."""

    publish: str = "multipart"  # HYPERFRAMES_S3_FINAL_COPY's value
    leases: str = "conditional"  # or "head"
    etag_put: str = "quoted"  # If-Match on a PUT: "quoted" or "bare"
    etag_get: str | None = "quoted"  # If-Match on a GET; None: GETs are not conditional

    @classmethod
    def from_env(cls) -> StoreModes:
        """Without a probe: ``HYPERFRAMES_S3_FINAL_COPY`` (``head`` makes leases ``head`` too)."""
        publish = final_copy_mode()
        return cls(publish, "head" if publish == "head" else "conditional")

    @classmethod
    def from_dict(cls, doc: dict[str, Any] | None) -> StoreModes:
        """From :meth:`to_dict` (None: :meth:`from_env`)."""
        return cls.from_env() if doc is None else cls(**doc)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a task's request."""
        return asdict(self)


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

    def __init__(self, name: str, modes: StoreModes | None = None) -> None:
        self.name = name
        self._ob = _obstore()
        self.requests = 0  # requests made (the probe reports its cost)
        self.configure(modes or StoreModes.from_env())

    def configure(self, modes: StoreModes) -> None:
        """Make conditional requests the way ``modes`` says (the probe's findings)."""
        self.modes = modes
        header = modes.publish.startswith("header")
        config = {"copy_if_not_exists": modes.publish} if header else {}
        self._store = store_for(self.name, **config)

    def url(self, key: str) -> str:
        """``s3://BUCKET/KEY``."""
        return f"s3://{self.name}/{key}"

    def _fail(self, key: str, exc: BaseException) -> BucketError:
        name = type(exc).__name__
        text = redact_credentials(str(exc).split("\n", 1)[0][:300])
        if type(exc).__module__.startswith("botocore"):  # a listing, a range, a copy (boto3)
            failure = classify_error(exc)
            if failure.kind == "no-bucket":
                return BucketError(self.url(key), "no such bucket")
            if failure.kind == "auth":
                return BucketError(self.url(key), f"access refused: {text}")
            if failure.kind == "not-found":
                return BucketError(self.url(key), "no such object")
            if failure.status == 412:
                return PreconditionFailedError(self.url(key), CHANGED)
            if failure.status == 501 or failure.code == "NotImplemented":
                name = "NotSupportedError"
        if name == "PreconditionError":
            return PreconditionFailedError(self.url(key), CHANGED)
        if name == "AlreadyExistsError":
            return KeyExistsError(self.url(key), "exists")
        if "<Code>NoSuchBucket</Code>" in str(exc):  # obstore says "not found" for both
            return BucketError(self.url(""), "no such bucket")
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

    def _if_match(self, etag: str | None) -> str | None:
        """``If-Match`` of a GET for ``etag``: in the form the store takes, or None."""
        form = self.modes.etag_get
        return etag_in(etag, form) if etag and form is not None else None

    # --- reading -----------------------------------------------------------------

    def listing(self, prefix: str) -> list[Obj]:
        """Every object under ``prefix/`` (recursive), sorted by key, whatever its key
        (see the module docstring)."""
        try:
            pages = client_for().get_paginator("list_objects_v2")
            rows = []
            for page in pages.paginate(Bucket=self.name, Prefix=f"{prefix}/" if prefix else ""):
                self.requests += 1
                rows += [
                    Obj(o["Key"], int(o["Size"]), str(o.get("ETag") or ""), _mtime(o))
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
        self.requests += 1
        try:
            m = self._ob.head(self._store, key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            if type(exc).__name__ == "NotFoundError":
                return None
            raise self._fail(key, exc) from None
        return Obj(key, int(m["size"]), str(m.get("e_tag") or ""), _mtime(m))

    def _get(self, key: str, if_match: str | None) -> Any:
        """One GET (``If-Match`` exactly as given)."""
        options = {"if_match": if_match} if if_match else None
        self.requests += 1
        try:
            return self._ob.get(self._store, key, options=options)
        except Exception as exc:
            raise self._fail(key, exc) from None

    def read(self, key: str, *, if_match: str | None = None) -> tuple[bytes, str]:
        """A small object whole and its ETag (``If-Match`` exactly as given)."""
        got = self._get(key, if_match)
        try:
            data = bytes(got.bytes())
        except Exception as exc:
            raise self._fail(key, exc) from None
        return data, str(got.meta.get("e_tag") or "")

    def _stream(self, key: str, etag: str | None = None) -> tuple[Iterator[Any], dict[str, Any]]:
        got = self._get(key, self._if_match(etag))
        return iter(got.stream(min_chunk_size=_CHUNK)), got.meta

    def head_bytes(self, key: str, n: int, *, etag: str | None = None) -> tuple[bytes, Obj]:
        """The first ``n`` bytes of ``key`` (fewer when it is shorter; it must not be empty)
        and its metadata, in one ranged GET (``If-Match`` with ``etag``).

        Through boto3: obstore refuses a ``200`` answer to a range (rclone's, with the
        range's bytes and a ``Content-Range``); a store that sends the whole object
        instead is cut to ``n`` bytes here.
        """
        args: dict[str, Any] = {"Bucket": self.name, "Key": key, "Range": f"bytes=0-{n - 1}"}
        if_match = self._if_match(etag)
        if if_match:
            args["IfMatch"] = if_match
        self.requests += 1
        try:
            got = client_for().get_object(**args)
            data = got["Body"].read(n)
            got["Body"].close()
        except Exception as exc:
            raise self._fail(key, exc) from None
        total = str(got.get("ContentRange") or "").rpartition("/")[2]
        size = int(total) if total.isdigit() else int(got.get("ContentLength") or len(data))
        return data, Obj(key, size, str(got.get("ETag") or ""), _mtime(got))

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
            data, etag = self.read(key)
        except BucketError as exc:
            if exc.problem == "no such object":
                return None
            raise
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if not isinstance(doc, dict):
            return None
        return doc, etag

    # --- writing -----------------------------------------------------------------

    def upload(self, path: Path, key: str, *, progress: Transfer | None = None) -> None:
        """Upload a local file (multipart above 5 MiB; atomic: whole or nothing).

        ``progress`` hears of the bytes as the store's client reads them (it
        sends up to a few parts at once behind that).
        """
        self.requests += 1
        try:
            if progress is None:
                self._ob.put(self._store, key, path)
            else:
                with _Counted(path, progress) as f:
                    self._ob.put(self._store, key, f)
        except Exception as exc:
            raise self._fail(key, exc) from None

    def put_bytes(
        self, key: str, data: bytes, *, if_absent: bool = False, if_match: str | None = None
    ) -> str:
        """One PUT; returns the ETag. ``if_absent``: ``If-None-Match: *``
        (:class:`KeyExistsError`); ``if_match``: ``If-Match`` exactly as given
        (:class:`PreconditionFailedError`). Whatever the modes: the probe's requests."""
        mode: Any = "create" if if_absent else None
        if if_match is not None:
            mode = {"e_tag": if_match}
        self.requests += 1
        try:
            result = self._ob.put(self._store, key, data, mode=mode)
        except Exception as exc:
            raise self._fail(key, exc) from None
        return str(result.get("e_tag") or "")

    def put_json(
        self, key: str, doc: dict[str, Any], *, if_absent: bool = False, if_etag: str | None = None
    ) -> str:
        """Write a JSON object; returns its ETag.

        ``if_absent``: only if the key does not exist (:class:`KeyExistsError`);
        ``if_etag``: only if the key still has that ETag (:class:`LeaseLostError`).
        Conditions as the modes' ``leases`` say: the store's (``If-None-Match: *``,
        ``If-Match`` in the form it takes), or a HEAD check first (``head``).
        """
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        if self.modes.leases == "head" and (if_absent or if_etag is not None):
            now = self.head(key)
            if if_absent and now is not None:
                raise KeyExistsError(self.url(key), "exists")
            if if_etag is not None and (
                now is None or etag_in(now.etag, "bare") != etag_in(if_etag, "bare")
            ):
                raise LeaseLostError(self.url(key), "changed since it was read")
            return self.put_bytes(key, data)
        if_match = None if if_etag is None else etag_in(if_etag, self.modes.etag_put)
        try:
            return self.put_bytes(key, data, if_absent=if_absent, if_match=if_match)
        except PreconditionFailedError:
            raise LeaseLostError(self.url(key), f"If-Match {if_match} refused") from None
        except BucketError as exc:
            if if_etag is not None and exc.problem == "no such object":
                raise LeaseLostError(self.url(key), "removed") from None
            raise

    def copy_if_absent(self, src: str, dst: str) -> None:
        """Copy ``src`` to ``dst`` unless ``dst`` exists (:class:`KeyExistsError`).

        A HEAD check first in every mode (a clear error without a request
        that fails); then :meth:`copy`.
        """
        if self.head(dst) is not None:
            raise KeyExistsError(self.url(dst), "exists")
        self.copy(src, dst)

    def copy(self, src: str, dst: str) -> None:
        """One copy of ``src`` to ``dst`` the way the modes' ``publish`` says (no HEAD check):
        the store's conditional copy (:class:`KeyExistsError` when it refuses because
        ``dst`` exists), or in ``head`` mode a plain copy."""
        mode = self.modes.publish
        try:
            if mode == "multipart":
                self._copy_one_part(src, dst)
            else:
                self.requests += 1
                self._ob.copy(self._store, src, dst, overwrite=mode == "head")
        except BucketError:
            raise
        except Exception as exc:
            err = self._fail(dst, exc)
            if isinstance(err, PreconditionFailedError):  # the multipart copy's If-None-Match
                err = KeyExistsError(self.url(dst), "exists")
            elif err.problem == "no such object":  # the source: the destination may not exist
                err = BucketError(self.url(src), err.problem)
            raise err from None

    def _copy_one_part(self, src: str, dst: str) -> None:
        """A multipart upload of ``dst`` whose one part is all of ``src`` (UploadPartCopy),
        completed with ``If-None-Match: *``; aborted when anything fails."""
        client = client_for()
        self.requests += 1
        upload = client.create_multipart_upload(Bucket=self.name, Key=dst)["UploadId"]
        try:
            self.requests += 1
            part = client.upload_part_copy(
                Bucket=self.name,
                Key=dst,
                UploadId=upload,
                PartNumber=1,
                CopySource={"Bucket": self.name, "Key": src},
            )
            etag = (part.get("CopyPartResult") or {}).get("ETag")
            if not etag:  # rclone: 200, no result; completing it would make an empty object
                raise BucketError(
                    self.url(dst),
                    "the store's UploadPartCopy answered without a CopyPartResult (nothing copied)",
                )
            self.requests += 1
            client.complete_multipart_upload(
                Bucket=self.name,
                Key=dst,
                UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
                IfNoneMatch="*",
            )
        except BaseException:
            self.requests += 1
            with contextlib.suppress(Exception):
                client.abort_multipart_upload(Bucket=self.name, Key=dst, UploadId=upload)
            raise

    def delete(self, key: str) -> None:
        """Delete ``key`` (no error when it is already gone)."""
        self.requests += 1
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
