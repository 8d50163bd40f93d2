"""An S3-compatible destination (AWS S3, MinIO, Ceph RGW...) through boto3.

- One ``PUT`` for a segment of at most one part, else a multipart upload whose
  id and confirmed parts are saved after each part (:class:`MarkStore`), so a
  restart continues it: the parts the store lists are kept when their size and
  ``ETag`` (the MD5 of an unencrypted part) match the file, the rest re-sent.
- Every request carries the SHA-256 of its body (``x-amz-checksum-sha256``);
  afterwards the object's checksum (whole-object for a single PUT, composite
  for multipart) and size are read back and compared with the ones computed
  here. A mismatch deletes the object and raises ``checksum-mismatch``: the
  next attempt uploads it again.
- An object already under the key with the same size and checksum is taken as
  uploaded (a kill between completing and marking).

boto3 was chosen over obstore for the upload side because resuming needs the
multipart id and the part list across processes, which boto3 exposes and
obstore's streaming multipart writer does not (see docs/OPERATIONS.md).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from hyperframes._install import install_hint
from hyperframes.recorder.upload.config import S3Settings
from hyperframes.recorder.upload.dest import Job, mark_doc
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.sums import FileSums, PartSum, b64
from hyperframes.storage.objects import (
    classify_error,
    guard_client_logging,
    redact_credentials,
    split_s3_url,
)

__all__ = ["S3Dest", "make_client"]

_log = logging.getLogger(__name__)
_INSTALL = install_hint("upload")


def make_client(settings: S3Settings) -> Any:
    """A boto3 S3 client: endpoint, region, profile and keys from ``settings``, else AWS's chain.

    The chain is boto3's own: ``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_S3``,
    ``AWS_ACCESS_KEY_ID``..., ``AWS_PROFILE``, ``~/.aws``, instance roles. botocore
    does not log at DEBUG (:func:`~hyperframes.storage.objects.guard_client_logging`).
    """
    try:
        import boto3  # noqa: PLC0415 - optional extra
        from botocore.config import Config  # noqa: PLC0415
    except ImportError:
        raise UploadError("io", f"uploading to s3:// needs boto3: {_INSTALL}") from None
    guard_client_logging()
    session = boto3.session.Session(profile_name=settings.profile)
    secret = settings.secret()
    config = Config(
        # our own loop retries with backoff; boto3 retries a blip twice
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    try:
        return session.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=secret,
            config=config,
        )
    except ValueError as exc:  # botocore refuses the endpoint URL
        raise UploadError("io", redact_credentials(f"upload.endpoint_url: {exc}")) from None


def _classify(exc: Exception, what: str) -> UploadError:
    """A botocore error as an :class:`UploadError` (reasons: :data:`REASONS`)."""
    f = classify_error(exc)
    code = f.code or f.status
    if f.kind == "auth":
        return UploadError(
            "auth",
            f"{what}: credentials refused ({code}); check "
            "the access key, secret and the bucket's policy",
        )
    if f.kind == "no-bucket":
        return UploadError("no-bucket", f"{what}: the bucket does not exist")
    if f.kind == "server":
        return UploadError("server", f"{what}: the store answered {code}")
    if f.kind == "network":
        return UploadError("network", f"{what}: {f.message}")
    return UploadError("server", f"{what}: {code}: {f.message}".rstrip(": "))


class S3Dest:
    """Segments uploaded to ``s3://bucket/prefix`` (the prefix is part of every key)."""

    def __init__(
        self, url: str, settings: S3Settings, marks: MarkStore, part_size: int, client: Any = None
    ) -> None:
        self.bucket, prefix = split_s3_url(url)
        self.prefix = prefix.strip("/")
        self.settings = settings
        self.marks = marks
        self.part_size = part_size
        self._client = client

    @property
    def client(self) -> Any:
        """The boto3 client (made on first use)."""
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    def url(self, key: str) -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{key}"

    def upload(self, job: Job) -> dict[str, Any]:
        """Upload and verify one segment; see the module docstring."""
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            found = self._existing(job)
            if found is not None:
                return found
            if len(job.sums.parts) == 1:
                return self._put(job)
            return self._multipart(job)
        except (ClientError, BotoCoreError) as exc:
            raise _classify(exc, self.url(job.key)) from None

    # --- one request ---------------------------------------------------------

    def _put(self, job: Job) -> dict[str, Any]:
        part = job.sums.parts[0]
        job.pace(part.size)
        body = _read(job, part)
        self.client.put_object(
            Bucket=self.bucket,
            Key=job.key,
            Body=body,
            ChecksumSHA256=b64(part.sha256),
            ContentType="application/octet-stream",
        )
        return self._verify(job, job.sums.sha256_b64)

    # --- multipart -----------------------------------------------------------

    def _multipart(self, job: Job) -> dict[str, Any]:
        name = job.segment.name
        done = self._resume(job)
        if done is None:
            up = self.client.create_multipart_upload(
                Bucket=self.bucket,
                Key=job.key,
                ChecksumAlgorithm="SHA256",
                ContentType="application/octet-stream",
            )
            state = {
                "key": job.key,
                "upload_id": up["UploadId"],
                "size": job.sums.size,
                "part_size": self.part_size,
                "sha256": job.sums.sha256.hex(),
                "parts": {},
            }
            self.marks.save_state(name, state)
        else:
            state = done
        parts: dict[str, str] = state["parts"]
        for part in job.sums.parts:
            if str(part.number) in parts:
                continue
            job.pace(part.size)
            r = self.client.upload_part(
                Bucket=self.bucket,
                Key=job.key,
                UploadId=state["upload_id"],
                PartNumber=part.number,
                Body=_read(job, part),
                ChecksumSHA256=b64(part.sha256),
            )
            etag = str(r["ETag"]).strip('"')
            if etag != part.md5 and "-" not in etag and len(etag) == 32:
                # an ETag that is an MD5 and not ours: the store got other bytes
                self._abort(state)
                raise UploadError(
                    "checksum-mismatch",
                    f"{self.url(job.key)} part {part.number}: ETag {etag} != MD5 {part.md5}",
                )
            parts[str(part.number)] = etag
            self.marks.save_state(name, state)
        self.client.complete_multipart_upload(
            Bucket=self.bucket,
            Key=job.key,
            UploadId=state["upload_id"],
            MultipartUpload={
                "Parts": [
                    {
                        "PartNumber": p.number,
                        "ETag": f'"{parts[str(p.number)]}"',
                        "ChecksumSHA256": b64(p.sha256),
                    }
                    for p in job.sums.parts
                ]
            },
        )
        self.marks.clear_state(name)
        return self._verify(job, job.sums.composite_b64, multipart=True)

    def _resume(self, job: Job) -> dict[str, Any] | None:
        """The saved state of this segment's upload, with only the parts the store still has."""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        state = self.marks.state(job.segment.name)
        if state is None:
            return None
        if (state.get("key"), state.get("size"), state.get("part_size"), state.get("sha256")) != (
            job.key,
            job.sums.size,
            self.part_size,
            job.sums.sha256.hex(),
        ):
            _log.info(
                "%s: saved upload state is for other bytes or settings; starting over",
                job.segment.name,
            )
            self._abort(state)
            return None
        try:
            listed = self._list_parts(state["upload_id"], job.key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchUpload":
                _log.info(
                    "%s: the store forgot the multipart upload; starting over", job.segment.name
                )
                self.marks.clear_state(job.segment.name)
                return None
            raise
        by_number = {p.number: p for p in job.sums.parts}
        kept: dict[str, str] = {}
        for number, (size, etag) in listed.items():
            part = by_number.get(number)
            if part is not None and size == part.size and etag == part.md5:
                kept[str(number)] = etag
        state["parts"] = kept
        _log.info(
            "%s: resuming the upload at %d of %d parts",
            job.segment.name,
            len(kept),
            len(job.sums.parts),
        )
        return state

    def _list_parts(self, upload_id: str, key: str) -> dict[int, tuple[int, str]]:
        out: dict[int, tuple[int, str]] = {}
        marker = 0
        while True:
            r = self.client.list_parts(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumberMarker=marker
            )
            for p in r.get("Parts", []):
                out[int(p["PartNumber"])] = (int(p["Size"]), str(p["ETag"]).strip('"'))
            if not r.get("IsTruncated"):
                return out
            marker = int(r["NextPartNumberMarker"])

    def _abort(self, state: dict[str, Any]) -> None:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        try:
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=state["key"], UploadId=state["upload_id"]
            )
        except ClientError as exc:
            _log.debug("abort of %s: %s", state.get("upload_id"), exc)
        self.marks.clear_state(self.marks_name(state))

    @staticmethod
    def marks_name(state: dict[str, Any]) -> str:
        """The segment name a state belongs to (the last component of its key)."""
        return str(state["key"]).rsplit("/", 1)[-1]

    # --- verification --------------------------------------------------------

    def _existing(self, job: Job) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        try:
            attrs = self._attributes(job.key)
        except ClientError as exc:
            if classify_error(exc).kind == "not-found":
                return None
            raise
        want = job.sums.sha256_b64 if len(job.sums.parts) == 1 else job.sums.composite_b64
        if _same(attrs, job.sums, want):
            return mark_doc(
                job, self.url(job.key), checksum=attrs.get("sha256"), found="already there"
            )
        raise UploadError(
            "conflict", f"{self.url(job.key)} exists and differs from {job.segment.name}"
        )

    def _attributes(self, key: str) -> dict[str, Any]:
        r = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        return {
            "size": int(r["ContentLength"]),
            "sha256": r.get("ChecksumSHA256"),
            "etag": str(r.get("ETag", "")).strip('"'),
        }

    def _verify(self, job: Job, want: str, multipart: bool = False) -> dict[str, Any]:
        attrs = self._attributes(job.key)
        if not _same(attrs, job.sums, want):
            self.client.delete_object(Bucket=self.bucket, Key=job.key)
            raise UploadError(
                "checksum-mismatch",
                f"{self.url(job.key)}: the store reports size {attrs['size']}, SHA-256 "
                f"{attrs['sha256']}, ETag {attrs['etag']}; expected {job.sums.size}, {want}",
            )
        how = "sha256-composite" if multipart else "sha256"
        if attrs["sha256"] is None:
            how = "etag-md5"
        return mark_doc(
            job, self.url(job.key), checksum=attrs["sha256"] or attrs["etag"], verified=how
        )


def _same(attrs: dict[str, Any], sums: FileSums, want: str) -> bool:
    """Size equal, and the store's SHA-256 equal to ours (or, without one, its ETag)."""
    if attrs["size"] != sums.size:
        return False
    if attrs["sha256"]:
        return str(attrs["sha256"]).split("-")[0] == want
    etag = attrs["etag"]
    if len(sums.parts) == 1:
        return bool(etag == sums.parts[0].md5)
    return bool(etag == sums.multipart_etag)


def _read(job: Job, part: PartSum) -> bytes:
    data = os.pread(job.fd, part.size, part.offset)
    if len(data) != part.size:
        raise UploadError("unreadable", f"{job.segment} shrank while uploading it")
    return data
