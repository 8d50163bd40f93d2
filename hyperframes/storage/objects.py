"""Hyperframe files in object storage: ``s3://bucket/key`` read with ranged GETs.

The format is made for range reads: the header and the tables written at
finalize sit at the two ends of the file, and a window's frames are
contiguous. :class:`RemoteFile` gives the reader what it needs from a file
descriptor (its size and ``pread``) over an S3-compatible store:

- open: one GET of the last ``tail_bytes`` (1 MiB by default; it also tells
  the object's size), and one of the first 64 KiB (the header); a trailer
  larger than the tail costs one more. These spans stay in memory.
- every other ``pread`` is one ranged GET (the reader reads a window's frames
  with one ``pread``, so a window costs one request); :meth:`RemoteFile.hold`
  fetches a span that several reads then share (the datasets hold a
  sample's span, so a sample of many streams costs one request too).

:func:`hyperframes.storage.cache.cached_path` instead downloads the whole
object once into a local cache directory, for repeated passes over the same
files (training epochs).

The store comes from the usual AWS settings: ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` (plain HTTP only when it says ``http://``),
``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID`` and friends,
``AWS_PROFILE`` and ``~/.aws``. Needs the ``s3`` extra.

Reads go through boto3 (botocore), with one client per process: PyTorch's
DataLoader forks its workers, and obstore's Rust runtime does not survive a
fork (a forked worker hangs on its first request, even with a new store).
:func:`store_for` gives obstore stores to code that never forks after using
them (the converter's bucket batch, Ray tasks).

Credentials never reach a message: :func:`redact_credentials` scrubs every
error text made here (an endpoint URL may carry ``user:password@``), and
:func:`guard_client_logging` keeps botocore from logging request headers (the
session token) and endpoints at DEBUG when a command turns DEBUG on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from hyperframes._install import install_hint
from hyperframes.errors import HyperframesError

__all__ = [
    "list_objects",
    "is_url",
    "split_s3_url",
    "RemoteFile",
    "RemoteError",
    "UnexpectedObjectError",
    "StoreFailure",
    "redact_credentials",
    "guard_client_logging",
    "classify_error",
    "fail",
    "client_for",
    "list_urls",
]

TAIL_BYTES: Final = 1 << 20
HEAD_BYTES: Final = 64 << 10
_SCHEMES: Final = ("s3://",)
_BUCKET_RE: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: error codes of wrong, expired or refused credentials (AWS and S3-compatible stores)
AUTH_CODES: Final = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "ExpiredToken",
        "InvalidToken",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "AuthorizationHeaderMalformed",
    }
)
# userinfo in a URL (``scheme://user:password@``, or a bare ``user:password@host`` at the
# start), and the secrets of a presigned URL's query
_USERINFO: Final = re.compile(r"(^|[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@\"'<>]+@")
_SIGNED: Final = re.compile(
    r"((?:X-Amz-Security-Token|X-Amz-Signature|X-Amz-Credential)=)[^&\s\"']+"
)
#: the store clients' loggers; at DEBUG botocore logs each request's headers (the session
#: token) and the endpoint with any credentials in it
_CLIENT_LOGGERS: Final = ("botocore", "boto3", "s3transfer")
_NOT_FOUND: Final = frozenset({"NoSuchKey", "404", "NotFound"})
_BUSY: Final = frozenset({"SlowDown", "Throttling", "RequestTimeout"})
_stores: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()
_clients: dict[str | None, Any] = {}
# Connection pools do not survive fork (DataLoader workers): a child makes its own clients.
os.register_at_fork(after_in_child=_clients.clear)


def redact_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: the userinfo
    (``http://user:password@host`` -> ``http://***@host``) and a presigned URL's token,
    signature and credential. Every endpoint or store error put in a message goes
    through it."""
    return _SIGNED.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def guard_client_logging() -> None:
    """Keep botocore, boto3 and s3transfer to warnings unless a level was set for them on
    purpose.

    Their DEBUG records carry each request's headers (``X-Amz-Security-Token``, the
    session token) and the endpoint URL with any credentials in it; a command's
    ``--log-level DEBUG`` or ``-v`` sets the root logger, which they would inherit.
    (At INFO they say where credentials were found: noise in a one-line error.)
    Called wherever this project makes a boto3 client.
    """
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


def client_for(endpoint: str | None = None) -> Any:
    """This process's boto3 S3 client (for ``endpoint``, else the AWS settings' one)."""
    endpoint = endpoint or _endpoint()
    guard_client_logging()
    with _lock:
        client = _clients.get(endpoint)
        if client is not None:
            return client
        try:
            import boto3  # noqa: PLC0415 - optional extra
            from botocore.config import Config  # noqa: PLC0415
        except ImportError:
            raise RemoteError("s3://", f"reading s3:// needs boto3: {install_hint('s3')}") from None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=region or "us-east-1",
            config=Config(
                retries={"max_attempts": 5, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
                max_pool_connections=16,
                # the reader's integrity check is the format's own (CRC32C per frame and
                # table); boto3's validation of a response would compare a ranged GET with
                # the whole object's checksum, which some stores send (rclone) and fail it
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )
        _clients[endpoint] = client
        return client


class RemoteError(HyperframesError):
    """An object could not be read: missing, refused, or the store failed."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"{url}: {problem}")
        self.url = url
        self.problem = problem


class UnexpectedObjectError(RemoteError):
    """An object does not start as the caller said it must: refused before its download."""


def is_url(path: object) -> bool:
    """Whether ``path`` names an object in a store (``s3://...``) rather than a file."""
    return isinstance(path, str) and path.startswith(_SCHEMES)


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b.hf`` -> ``("bucket", "a/b.hf")`` (the key as given).

    Raises ValueError for anything else, and for a bucket name S3 would refuse.
    """
    if not is_url(url):
        raise ValueError(f"{url!r} is not an s3:// URL")
    bucket, _, key = url[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"{url!r} names no bucket")
    if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        raise ValueError(f"{bucket!r} is not a valid bucket name (3-63 of a-z, 0-9, '.', '-')")
    return bucket, key


@dataclass(frozen=True, slots=True)
class StoreFailure:
    """What a failed boto3 request means, for callers that say it their own way.

    ``kind``: ``no-bucket``, ``not-found`` (the object, or a HEAD's 404),
    ``auth`` (credentials wrong, expired or refused), ``server`` (5xx,
    throttling), ``client`` (another refusal) or ``network`` (no answer).
    """

    kind: str
    code: str
    status: int
    message: str


def classify_error(exc: BaseException) -> StoreFailure:
    """The :class:`StoreFailure` of a botocore exception (any other: ``network``); its
    message never holds credentials (:func:`redact_credentials`)."""
    text = redact_credentials(str(exc).split("\n", 1)[0][:300])
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):  # BotoCoreError: connection, timeout, DNS, ...
        return StoreFailure("network", "", 0, text)
    err = response.get("Error", {})
    code = str(err.get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    message = redact_credentials(str(err.get("Message", "") or text))
    if code == "NoSuchBucket":
        kind = "no-bucket"
    elif code in _NOT_FOUND or status == 404:
        kind = "not-found"
    elif code in AUTH_CODES or status in (401, 403):
        kind = "auth"
    elif status >= 500 or code in _BUSY:
        kind = "server"
    else:
        kind = "client"
    return StoreFailure(kind, code, status, message)


def _endpoint() -> str | None:
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def store_for(bucket: str, **config: str) -> Any:
    """The (shared) obstore ``S3Store`` of ``bucket``, configured from the environment.

    ``config``: further ``S3Store`` settings (e.g. ``copy_if_not_exists``); each
    distinct set gets its own store.
    """
    endpoint = _endpoint()
    guard_client_logging()  # a profile's credentials come through boto3
    cache_key = (bucket, endpoint, *sorted(config.items()))
    with _lock:
        store = _stores.get(cache_key)
        if store is not None:
            return store
        try:
            from obstore.store import S3Store  # noqa: PLC0415 - optional extra
        except ImportError:
            raise RemoteError(
                f"s3://{bucket}",
                f"reading s3:// needs obstore: {install_hint('s3')}",
            ) from None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        backoff = {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=5),
                   "base": 2.0}  # fmt: skip
        kwargs: dict[str, Any] = {
            "region": region or "us-east-1",
            "retry_config": {"max_retries": 4, "backoff": backoff,
                             "retry_timeout": timedelta(seconds=60)},
            "client_options": {"timeout": timedelta(seconds=60),
                               "connect_timeout": timedelta(seconds=10),
                               "allow_http": bool(endpoint and endpoint.startswith("http://"))},
        }  # fmt: skip
        if endpoint:
            kwargs["endpoint"] = endpoint
        if os.environ.get("AWS_PROFILE") and not os.environ.get("AWS_ACCESS_KEY_ID"):
            with contextlib.suppress(ImportError):
                from obstore.auth.boto3 import Boto3CredentialProvider  # noqa: PLC0415

                kwargs["credential_provider"] = Boto3CredentialProvider()
        kwargs.update(config)
        store = S3Store(bucket, **kwargs)
        _stores[cache_key] = store
        return store


def fail(url: str, exc: BaseException) -> RemoteError:
    """A botocore error (every read here goes through boto3) as a :class:`RemoteError`."""
    f = classify_error(exc)
    if f.kind == "not-found":
        return RemoteError(url, "no such object")
    if f.kind == "no-bucket":
        return RemoteError(url, "no such bucket")
    if f.kind == "auth":
        return RemoteError(url, f"access refused ({f.code or f.status}): check the credentials")
    text = redact_credentials(str(exc).split("\n", 1)[0][:300])
    return RemoteError(url, f"the store failed: {text}")


@dataclass(slots=True)
class RequestStats:
    """What a :class:`RemoteFile` asked the store for."""

    requests: int = 0
    bytes: int = 0


class RemoteFile:
    """A read-only object addressed like a file: ``size`` and ``pread``, by ranged GETs."""

    def __init__(
        self, url: str, *, tail_bytes: int = TAIL_BYTES, readahead: int = 0, client: Any = None
    ) -> None:
        self.url = url
        self.readahead = readahead
        """With ``readahead`` > 0, a read that misses fetches at least that many bytes and
        keeps them (sequential scans such as ``verify``: one request per ``readahead``)."""
        self._ra: tuple[int, bytes] = (0, b"")
        self.bucket, self.key = split_s3_url(url)
        self._client = client or client_for()
        self.stats = RequestStats()
        self._spans: list[tuple[int, bytes]] = []
        got, tail = self._tail(tail_bytes)
        total = str(got.get("ContentRange", "")).rpartition("/")[2]
        self.size: int = int(total) if total.isdigit() else len(tail)
        self.etag: str | None = got.get("ETag")
        self._spans.append((self.size - len(tail), tail))
        if self.size > len(tail):
            self.prefetch(0, min(HEAD_BYTES, self.size - len(tail)))

    def _tail(self, tail_bytes: int) -> tuple[dict[str, Any], bytes]:
        """The last ``tail_bytes`` (a suffix range; its Content-Range tells the size).

        RFC 9110 answers a suffix range longer than the object with the whole
        object; some stores answer 416 instead (rclone): then the whole object,
        which is shorter than ``tail_bytes``, in one plain GET.
        """
        try:
            try:
                got = self._client.get_object(Bucket=self.bucket, Key=self.key,
                                              Range=f"bytes=-{tail_bytes}")  # fmt: skip
            except Exception as exc:  # botocore raises many kinds
                if classify_error(exc).status != 416:
                    raise
                got = self._client.get_object(Bucket=self.bucket, Key=self.key)
            tail: bytes = got["Body"].read()
        except Exception as exc:  # all become RemoteError
            raise fail(self.url, exc) from None
        self.stats.requests += 1
        self.stats.bytes += len(tail)
        return got, tail

    def _cached(self, size: int, offset: int) -> bytes | None:
        for start, data in (*self._spans, self._ra):
            if start <= offset and offset + size <= start + len(data):
                return data[offset - start : offset - start + size]
        return None

    def _get(self, start: int, end: int) -> bytes:
        try:
            got = self._client.get_object(Bucket=self.bucket, Key=self.key,
                                          Range=f"bytes={start}-{end - 1}")  # fmt: skip
            data: bytes = got["Body"].read()
        except Exception as exc:  # botocore raises many kinds; all become RemoteError
            raise fail(self.url, exc) from None
        self.stats.requests += 1
        self.stats.bytes += len(data)
        if len(data) != end - start and not got.get("ContentRange") and len(data) == self.size:
            data = data[start:end]  # a store that ignored the range and sent the whole object
        if len(data) != end - start:
            raise RemoteError(
                self.url,
                f"asked for bytes {start}-{end - 1}, got {len(data)} bytes "
                "(the object changed, or the store cut the answer)",
            )
        return data

    def prefetch(self, offset: int, size: int) -> None:
        """Fetch ``[offset, offset + size)`` in one request and keep it (tables, the header)."""
        end = min(self.size, offset + size)
        if end > offset and self._cached(end - offset, offset) is None:
            self._spans.append((offset, self._get(offset, end)))

    def hold(self, offset: int, size: int) -> None:
        """Fetch ``[offset, offset + size)`` in one request and keep it until
        :meth:`release`, the next :meth:`hold` or a read-ahead (a sample's frames of every
        stream: one window, one request, however many streams read from it). A span
        already held costs nothing."""
        end = min(self.size, offset + size)
        if end > offset and self._cached(end - offset, offset) is None:
            self._ra = (offset, self._get(offset, end))

    def release(self) -> None:
        """Drop the span :meth:`hold` (or a read-ahead) kept."""
        self._ra = (0, b"")

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer only at the end), like ``os.pread``."""
        size = max(0, min(size, self.size - offset))
        if size == 0:
            return b""
        hit = self._cached(size, offset)
        if hit is not None:
            return hit
        if self.readahead > size:
            end = min(self.size, offset + self.readahead)
            self._ra = (offset, self._get(offset, end))
            return self._ra[1][:size]
        return self._get(offset, offset + size)

    def close(self) -> None:
        """Drop the cached spans."""
        self._spans.clear()


def list_objects(
    bucket: str, prefix: str, *, delimiter: str = "", client: Any = None
) -> list[dict[str, Any]]:
    """Every object under ``prefix``, as ``list_objects_v2`` describes it (``Key``,
    ``Size``, ``ETag``, ``LastModified``), all pages; with a ``delimiter``, those directly
    under it and its first-level prefixes as ``{"Prefix": ...}`` entries. Raises what
    botocore raises (callers name the URL: :func:`fail`)."""
    pages = (client or client_for()).get_paginator("list_objects_v2")
    extra = {"Delimiter": delimiter} if delimiter else {}
    out: list[dict[str, Any]] = []
    for page in pages.paginate(Bucket=bucket, Prefix=prefix, **extra):
        out += page.get("Contents", [])
        out += page.get("CommonPrefixes", [])
    return out


def list_urls(pattern: str) -> list[str]:
    """The objects matching ``s3://bucket/prefix/*.hf`` (a glob in the last component), sorted."""
    import fnmatch  # noqa: PLC0415

    bucket, key = split_s3_url(pattern)
    prefix, _, glob = key.rpartition("/")
    if not any(ch in glob for ch in "*?["):
        return [pattern]
    base = f"{prefix}/" if prefix else ""
    try:
        names = [o["Key"] for o in list_objects(bucket, base, delimiter="/") if "Key" in o]
    except Exception as exc:  # botocore raises many kinds
        raise fail(pattern, exc) from None
    return sorted(
        f"s3://{bucket}/{n}"
        for n in names
        if "/" not in n[len(base) :] and fnmatch.fnmatch(n[len(base) :], glob)
    )
