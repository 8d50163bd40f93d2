"""The store of the depot's requests: ``URL/VEHICLE/ID.json`` and ``ID.result.json``.

``URL`` is ``s3://BUCKET/PREFIX`` or a directory (``upload.requests``, ``hyperframes
request --requests``). :class:`RequestStore` lists the requests of a vehicle, reads one
(bounded), reads and writes results (a result, once there, is never replaced) and writes
new requests (never over another). Formats: :mod:`~hyperframes.recorder.upload.request_doc`;
answering: :mod:`~hyperframes.recorder.upload.requests`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hyperframes.format.jsontext import parse_json
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.request_doc import MAX_REQUEST_BYTES, valid_id
from hyperframes.storage.local import safe_dir, write_atomic
from hyperframes.storage.objects import classify_error, client_for, list_objects, split_s3_url

__all__ = ["Listed", "RequestStore"]

RESULT_SUFFIX: Final = ".result.json"
_MAX_RESULT: Final = 4 << 20
_OPEN: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class Listed:
    """A request object found under ``URL/VEHICLE/``: its id, size, and whether it has a
    result."""

    vehicle: str
    id: str
    size: int
    answered: bool


def _store_error(exc: BaseException, what: str) -> UploadError:
    f = classify_error(exc)
    reason = {
        "no-bucket": "no-bucket",
        "auth": "auth",
        "server": "server",
        "network": "network",
    }.get(f.kind, "refused")
    return UploadError(reason, f"{what}: {f.message or f.code or f.kind}")


class RequestStore:
    """The requests and results under ``url`` (``s3://BUCKET/PREFIX`` or a directory).

    ``client``: a boto3 client for ``s3://`` (default: :func:`client_for`, the AWS
    settings of the environment). Failures of the store raise :class:`UploadError`
    (``network``, ``server``, ``auth``, ``no-bucket``, ``refused``; ``io`` for a directory).
    """

    def __init__(self, url: str, client: Any = None) -> None:
        self.url = url
        self.is_s3 = url.startswith("s3://")
        if self.is_s3:
            self.bucket, prefix = split_s3_url(url)
            self.prefix = "/".join(p for p in prefix.split("/") if p)
            self._client = client
        else:
            self.root = Path(url.removeprefix("file://"))

    @property
    def client(self) -> Any:
        """The boto3 client (made on first use)."""
        if self._client is None:
            self._client = client_for()
        return self._client

    def _key(self, vehicle: str, name: str = "") -> str:
        return "/".join(p for p in (self.prefix, vehicle, name) if p)

    def where(self, vehicle: str, name: str) -> str:
        """The URL or path of ``name`` under ``vehicle`` (for messages)."""
        if self.is_s3:
            return f"s3://{self.bucket}/{self._key(vehicle, name)}"
        return str(self.root / vehicle / name)

    def _s3(self, call: Callable[[], Any], what: str) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise _store_error(exc, what) from None

    def vehicles(self) -> list[str]:
        """The vehicles that have a folder of requests."""
        if not self.is_s3:
            with contextlib.suppress(FileNotFoundError):
                return sorted(
                    e.name
                    for e in os.scandir(self.root)
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                )
            return []
        prefix = self._key("", "") + "/" if self.prefix else ""
        found = self._s3(
            lambda: list_objects(self.bucket, prefix, delimiter="/", client=self.client), self.url
        )
        return sorted(o["Prefix"].rstrip("/").rsplit("/", 1)[-1] for o in found if "Prefix" in o)

    def _names(self, vehicle: str) -> dict[str, int]:
        """Object names under ``URL/VEHICLE/`` and their sizes."""
        if not self.is_s3:
            d = self.root / vehicle
            found: dict[str, int] = {}
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if e.is_file(follow_symlinks=False) and not e.name.startswith("."):
                            found[e.name] = e.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise UploadError("io", f"{d}: {exc.strerror or exc}") from None
            return found
        prefix = self._key(vehicle) + "/"
        listed: list[dict[str, Any]] = self._s3(
            lambda: list_objects(self.bucket, prefix, client=self.client), self.where(vehicle, "")
        )
        names: dict[str, int] = {}
        for o in listed:
            name = str(o["Key"])[len(prefix) :]
            if "/" not in name:
                names[name] = int(o.get("Size", 0))
        return names

    def list(self, vehicle: str) -> list[Listed]:
        """The requests of ``vehicle`` (oldest id first), each with whether it has a result.
        Objects of other names are ignored."""
        names = self._names(vehicle)
        out = []
        for name, size in names.items():
            if not name.endswith(".json") or name.endswith(RESULT_SUFFIX):
                continue
            rid = name.removesuffix(".json")
            if valid_id(rid):
                out.append(Listed(vehicle, rid, size, f"{rid}{RESULT_SUFFIX}" in names))
        return sorted(out, key=lambda x: x.id)

    def _get(self, vehicle: str, name: str, cap: int) -> bytes | None:
        """At most ``cap + 1`` bytes of ``name`` (``None``: it is not there)."""
        if not self.is_s3:
            try:
                fd = os.open(self.root / vehicle / name, _OPEN)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise UploadError("io", f"{self.where(vehicle, name)}: {exc.strerror}") from None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return b""
                return os.read(fd, cap + 1)
            finally:
                os.close(fd)
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            r = self.client.get_object(
                Bucket=self.bucket, Key=self._key(vehicle, name), Range=f"bytes=0-{cap}"
            )
            return bytes(r["Body"].read(cap + 1))
        except (ClientError, BotoCoreError) as exc:
            if classify_error(exc).kind == "not-found":
                return None
            raise _store_error(exc, self.where(vehicle, name)) from None

    def read(self, vehicle: str, rid: str) -> bytes | None:
        """The request's bytes, at most :data:`MAX_REQUEST_BYTES` + 1 (``None``: gone)."""
        return self._get(vehicle, f"{rid}.json", MAX_REQUEST_BYTES)

    def result(self, vehicle: str, rid: str) -> dict[str, Any] | None:
        """The request's result document (``None``: none, or not a JSON object)."""
        data = self._get(vehicle, f"{rid}{RESULT_SUFFIX}", _MAX_RESULT)
        if data is None:
            return None
        try:
            doc = parse_json(data, "the result", _MAX_RESULT)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def _put(self, vehicle: str, name: str, doc: Mapping[str, Any], *, replace: bool) -> None:
        body = json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"
        if not self.is_s3:
            try:
                d = safe_dir(safe_dir(self.root) / vehicle)
                write_atomic(d / name, body, 0o644, replace=replace)
            except FileExistsError:
                raise
            except OSError as exc:
                raise UploadError("io", f"{self.where(vehicle, name)}: {exc.strerror}") from None
            return
        key = self._key(vehicle, name)
        self._s3(
            lambda: self.client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json"
            ),
            self.where(vehicle, name),
        )

    def write_request(self, doc: Mapping[str, Any]) -> str:
        """Write a new request (never over another); its URL or path."""
        vehicle, rid = str(doc["vehicle"]), str(doc["id"])
        name = f"{rid}.json"
        self._put(vehicle, name, doc, replace=False)
        return self.where(vehicle, name)

    def write_result(self, vehicle: str, rid: str, doc: Mapping[str, Any]) -> bool:
        """Write the result of ``rid`` unless one is there (``False``: it was; left alone)."""
        if self.result(vehicle, rid) is not None:
            return False
        try:
            self._put(vehicle, f"{rid}{RESULT_SUFFIX}", doc, replace=False)
        except FileExistsError:
            return False
        return True
