"""An S3-compatible destination (AWS S3, MinIO, Ceph RGW, rclone...) through boto3.

- One ``PUT`` for a segment of at most one part, else a multipart upload whose
  id and confirmed parts are saved after each part (:class:`MarkStore`), so a
  restart continues it: the parts the store lists are kept when their size
  matches and their ``ETag`` is the part's MD5 or the one the store gave us for it.
- Every ``PUT`` and ``UploadPart`` carries ``Content-MD5``: AWS, rclone and
  Ceph refuse a body changed in transit (400 ``BadDigest``) before storing it
  (moto does not check it). Only AWS S3 itself also gets ``x-amz-checksum-sha256``:
  AWS computes and enforces it. A custom endpoint gets none, and a checksum it
  reports is never taken as a proof: rclone stores the value the client
  declares and repeats it on HEAD, whatever bytes arrived.
- Then the object is proven (:meth:`S3Dest._judge`, docs/OPERATIONS.md "Upload"):
  its size, and its ``ETag`` when that is the MD5 of the whole file (a single
  PUT everywhere; rclone's HEAD of a multipart object) or ``md5(part MD5s)-N``
  of our parts (or, for an object another tool wrote, of its part size when
  the store tells it); on AWS S3 its SHA-256. Where none of these proves it,
  ``upload.verify: auto`` reads it back (ranged GETs, SHA-256 compared with the
  file's: one download of the object); ``no-reread`` leaves it ``unverifiable``.
  An object we wrote that is disproven or unproven is deleted
  (``checksum-mismatch``/``unverifiable``) and sent again on the segment's next try.
- An object already under the key is adopted when proven to hold the same
  bytes (a kill between completing and marking, another tool's copy), a
  ``conflict`` when proven other; it is never overwritten nor deleted.

boto3 was chosen over obstore for the upload side because resuming needs the
multipart id and the part list across processes, which boto3 exposes and
obstore's streaming multipart writer does not (see docs/OPERATIONS.md).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from hyperframes._install import install_hint
from hyperframes.recorder.upload.config import S3Settings
from hyperframes.recorder.upload.dest import Job, mark_doc
from hyperframes.recorder.upload.errors import UploadError
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.sums import PartSum, b64, etag_form, md5s_etag, part_md5s
from hyperframes.storage.objects import (
    classify_error,
    guard_client_logging,
    redact_credentials,
    split_s3_url,
)

__all__ = ["S3Dest", "make_client", "is_aws_endpoint"]

_log = logging.getLogger(__name__)
_INSTALL = install_hint("upload")
_REREAD_CHUNK: Final = 8 << 20
# the store refused a body whose digest is not the one sent with it (changed in transit)
_DIGEST_CODES: Final = frozenset(
    {"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch"}
)


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
        # no checksum boto3 adds by itself (we send ours where the store enforces it), and no
        # check of a store's whole-object checksum against a ranged read (rclone sends one)
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


def is_aws_endpoint(url: str | None) -> bool:
    """Whether ``url`` is AWS S3 itself: a host under ``amazonaws.com`` (what boto3 resolves
    when no endpoint is configured). Only there is a checksum the store reports computed by
    the store and enforced on every request; any other endpoint's is not trusted."""
    host = (urlsplit(url or "").hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def _classify(exc: Exception, what: str) -> UploadError:
    """A botocore error as an :class:`UploadError` (reasons: :data:`REASONS`)."""
    f = classify_error(exc)
    code = f.code or f.status
    if f.code in _DIGEST_CODES:
        return UploadError(
            "checksum-mismatch",
            f"{what}: the store refused the body ({code}): it is not what was sent, "
            "changed in transit; sent again on the next try",
        )
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
    # another 4xx: a refusal of this segment's request
    return UploadError("refused", f"{what}: {code}: {f.message}".rstrip(": "))


@dataclass(frozen=True, slots=True)
class _Head:
    """What a HEAD says of an object: its size, ETag (unquoted) and, on AWS, its SHA-256."""

    size: int
    etag: str
    sha256: str | None


class S3Dest:
    """Segments uploaded to ``s3://bucket/prefix`` (the prefix is part of every key).

    ``verify``: ``auto``, ``reread`` or ``no-reread`` (``upload.verify``); ``aws``: whether
    the store is AWS S3 itself (default: from the client's endpoint, :func:`is_aws_endpoint`).
    """

    def __init__(
        self,
        url: str,
        settings: S3Settings,
        marks: MarkStore,
        part_size: int,
        client: Any = None,
        *,
        verify: str = "auto",
        aws: bool | None = None,
    ) -> None:
        self.bucket, prefix = split_s3_url(url)
        self.prefix = prefix.strip("/")
        self.settings = settings
        self.marks = marks
        self.part_size = part_size
        self.verify = verify
        self._client = client
        self._aws = aws

    @property
    def client(self) -> Any:
        """The boto3 client (made on first use)."""
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    @property
    def aws(self) -> bool:
        """Whether the store is AWS S3 itself (its checksums are computed and enforced)."""
        if self._aws is None:
            self._aws = is_aws_endpoint(getattr(self.client.meta, "endpoint_url", None))
        return self._aws

    def url(self, key: str) -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{key}"

    def upload(self, job: Job) -> dict[str, Any]:
        """Upload and prove one segment; see the module docstring."""
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            head = self._head(job.key)
            if head is not None:
                return self._adopt(job, head)
            if len(job.sums.parts) == 1:
                self._put(job)
            else:
                self._multipart(job)
            head = self._head(job.key)
            if head is None:
                raise UploadError(
                    "unverifiable", f"{self.url(job.key)}: not there right after its upload"
                )
            return self._proven(job, head)
        except (ClientError, BotoCoreError) as exc:
            raise _classify(exc, self.url(job.key)) from None

    # --- one request ---------------------------------------------------------

    def _checksum(self, digest: bytes) -> dict[str, str]:
        """``ChecksumSHA256`` for AWS S3 itself (it computes and enforces it), else nothing."""
        return {"ChecksumSHA256": b64(digest)} if self.aws else {}

    def _put(self, job: Job) -> None:
        part = job.sums.parts[0]
        job.pace(part.size)
        self.client.put_object(
            Bucket=self.bucket,
            Key=job.key,
            Body=_read(job, part),
            ContentMD5=part.md5_b64,
            ContentType="application/octet-stream",
            **self._checksum(part.sha256),
        )

    # --- multipart -----------------------------------------------------------

    def _multipart(self, job: Job) -> None:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        name = job.segment.name
        state = self._resume(job)
        if state is None:
            up = self.client.create_multipart_upload(
                Bucket=self.bucket,
                Key=job.key,
                ContentType="application/octet-stream",
                **({"ChecksumAlgorithm": "SHA256"} if self.aws else {}),
            )
            state = {
                "key": job.key,
                "upload_id": up["UploadId"],
                "size": job.sums.size,
                "part_size": self.part_size,
                "sha256": job.sums.sha256.hex(),
                "checksum_sha256": self.aws,
                "parts": {},
            }
            self.marks.save_state(name, state)
        parts: dict[str, str] = state["parts"]
        try:
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
                    ContentMD5=part.md5_b64,
                    **self._checksum(part.sha256),
                )
                parts[str(part.number)] = str(r["ETag"]).strip('"')  # as given: Complete takes it
                self.marks.save_state(name, state)
            self._check_parts(job, state)
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=job.key,
                UploadId=state["upload_id"],
                MultipartUpload={
                    "Parts": [
                        {
                            "PartNumber": p.number,
                            "ETag": f'"{parts[str(p.number)]}"',
                            **self._checksum(p.sha256),
                        }
                        for p in job.sums.parts
                    ]
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchUpload":
                self.marks.clear_state(name)  # the store forgot it: the next try starts over
            raise
        self.marks.clear_state(name)

    def _check_parts(self, job: Job, state: dict[str, Any]) -> None:
        """Parts whose ETag is an MD5 but not the MD5 of the part sent, on a store whose
        other part ETags are the parts' MD5s: changed in transit. They are forgotten (sent
        again on the next try); the upload stays. A store whose part ETags are no MD5s
        (all differ) is left to the proof of the whole object."""
        parts: dict[str, str] = state["parts"]
        md5 = {str(p.number): p.md5 for p in job.sums.parts}
        bad = [n for n, e in parts.items() if e.lower() != md5[n] and etag_form(e)[0] == "md5"]
        if not bad or len(bad) == len(parts):
            return
        for n in bad:
            del parts[n]
        self.marks.save_state(job.segment.name, state)
        raise UploadError(
            "checksum-mismatch",
            f"{self.url(job.key)}: part {', '.join(bad)}: the store's ETag is not the MD5 of "
            "what was sent (changed in transit); sent again on the next try",
        )

    def _resume(self, job: Job) -> dict[str, Any] | None:
        """The saved state of this segment's upload, with only the parts the store still has."""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        state = self.marks.state(job.segment.name)
        if state is None:
            return None
        saved = (state.get("key"), state.get("size"), state.get("part_size"), state.get("sha256"))
        # a state without "checksum_sha256" is older: its upload asked for SHA-256 parts
        checksums = bool(state.get("checksum_sha256", True))
        if saved != (job.key, job.sums.size, self.part_size, job.sums.sha256.hex()) or (
            checksums != self.aws
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
        ours = state.get("parts") or {}
        kept: dict[str, str] = {}
        for number, (size, etag) in listed.items():
            part = by_number.get(number)
            if part is None or size != part.size:
                continue
            # the part's MD5, or the ETag the store gave our UploadPart (non-MD5 part ETags)
            if etag.lower() == part.md5 or etag == ours.get(str(number)):
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

    # --- proof ---------------------------------------------------------------

    def _head(self, key: str, **extra: Any) -> _Head | None:
        """The object under ``key`` (``None``: there is none)."""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        if self.aws:
            extra["ChecksumMode"] = "ENABLED"
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=key, **extra)
        except ClientError as exc:
            if classify_error(exc).kind == "not-found":
                return None
            raise
        # a checksum is read only from AWS S3 itself: another store may repeat the client's
        return _Head(
            int(r["ContentLength"]),
            str(r.get("ETag", "")).strip('"').lower(),
            r.get("ChecksumSHA256") if self.aws else None,
        )

    def _adopt(self, job: Job, head: _Head) -> dict[str, Any]:
        """An object already under the key: the segment's bytes (adopted), or a conflict."""
        url, name = self.url(job.key), job.segment.name
        verdict, what = self._judge(job, head, ours=False)
        if verdict == "same":
            state = self.marks.state(name)
            if state is not None:  # a kill between completing and marking: nothing to resume
                self._abort(state)
            return mark_doc(job, url, what, found="already there", **_facts(head, what))
        if verdict == "differs":
            raise UploadError(
                "conflict", f"{url} exists and differs from {name} ({what}); left alone"
            )
        raise UploadError(
            "unverifiable", f"{url} exists; nothing proves it holds {name} ({what}); left alone"
        )

    def _proven(self, job: Job, head: _Head) -> dict[str, Any]:
        """The object just written, proven; else deleted (it may hold other bytes)."""
        url = self.url(job.key)
        verdict, what = self._judge(job, head, ours=True)
        if verdict == "same":
            return mark_doc(job, url, what, **_facts(head, what))
        self.client.delete_object(Bucket=self.bucket, Key=job.key)
        if verdict == "differs":
            raise UploadError(
                "checksum-mismatch", f"{url}: {what}; deleted, sent again on the next try"
            )
        raise UploadError(
            "unverifiable",
            f"{url}: nothing proves it holds the segment ({what}); deleted, sent again on "
            "the next try",
        )

    def _judge(self, job: Job, head: _Head, ours: bool) -> tuple[str, str]:
        """``("same", PROOF)``, ``("differs", why)`` or ``("unproven", why)`` for the object
        ``head`` against the segment. ``ours``: we just wrote it, with our parts."""
        sums = job.sums
        if head.size != sums.size:
            return "differs", f"it holds {head.size} bytes, the segment {sums.size}"
        if self.verify == "reread":
            return self._reread(job)
        if head.sha256:  # AWS S3 itself (see _head): computed from what it holds
            value, _, parts = head.sha256.partition("-")
            if value == sums.sha256_b64 and not parts:
                return "same", "sha256"
            if value == sums.composite_b64 and len(sums.parts) > 1:
                return "same", "sha256-composite"
            if ours:  # built from our parts: another sum means other bytes
                return "differs", f"its SHA-256 {head.sha256} is not the segment's"
        form, n = etag_form(head.etag)
        if form == "md5" and head.etag == self._md5s(job, sums.size)[0]:
            return "same", "etag-md5"
        if form == "md5s":
            if head.etag == sums.multipart_etag:
                return "same", "etag-md5-of-parts"
            first = None if ours else self._first_part_size(job.key, n, sums.size)
            if first is not None and head.etag == md5s_etag(self._md5s(job, first)):
                return "same", "etag-md5-of-parts"
        if self.verify == "auto":
            return self._reread(job)
        return "unproven", (
            f"its ETag {head.etag or '(none)'} is no MD5 form of the segment's bytes, and "
            "upload.verify is no-reread (auto would read it back)"
        )

    def _md5s(self, job: Job, part_size: int) -> list[str]:
        """The file's part MD5s for ``part_size`` (the whole file's MD5 for a part size of at
        least its size): those of the upload's parts when they are these, else read now."""
        sums = job.sums
        whole = part_size >= sums.size
        if (whole and len(sums.parts) == 1) or part_size == self.part_size:
            return [p.md5 for p in sums.parts]
        return part_md5s(job.fd, sums.size, part_size)

    def _first_part_size(self, key: str, parts: int, size: int) -> int | None:
        """The size of part 1 of a multipart object of ``parts`` parts, where the store says
        it (HEAD ``partNumber=1``: AWS and moto do; rclone and Ceph answer the whole object)."""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        try:
            r = self.client.head_object(Bucket=self.bucket, Key=key, PartNumber=1)
        except ClientError:
            return None
        first = int(r.get("ContentLength", 0))
        if r.get("PartsCount") != parts or not 0 < first < size:
            return None
        return first if math.ceil(size / first) == parts else None

    def _reread(self, job: Job) -> tuple[str, str]:
        """Read the object back (ranged GETs) and compare its SHA-256 with the file's."""
        size = job.sums.size
        digest = hashlib.sha256()
        off = 0
        while off < size:
            n = min(_REREAD_CHUNK, size - off)
            if job.pace_in is not None:
                job.pace_in(n)
            r = self.client.get_object(
                Bucket=self.bucket, Key=job.key, Range=f"bytes={off}-{off + n - 1}"
            )
            body = r["Body"].read()
            if len(body) == size and off == 0:  # a store that answers a range with everything
                n = size
            elif len(body) != n:
                return "unproven", f"read back, bytes {off}.. came {len(body)} long, not {n}"
            digest.update(body)
            off += n
        if digest.digest() == job.sums.sha256:
            return "same", "reread-sha256"
        return "differs", f"read back, its SHA-256 is {digest.hexdigest()}, not the segment's"


def _facts(head: _Head, proof: str) -> dict[str, Any]:
    """What the store said, for the mark: its ETag, and the AWS checksum that proved it."""
    out: dict[str, Any] = {"etag": head.etag}
    if proof.startswith("sha256"):
        out["checksum"] = head.sha256
    return out


def _read(job: Job, part: PartSum) -> bytes:
    data = os.pread(job.fd, part.size, part.offset)
    if len(data) != part.size:
        raise UploadError("unreadable", f"{job.segment} shrank while uploading it")
    return data
