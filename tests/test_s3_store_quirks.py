"""What each S3 server does where servers differ (issue 36): observed, then asserted per store.

Every ``observe_*`` function runs one probe against a store and returns a short description;
:data:`OBSERVED` holds what each store answered when this was written, and each test asserts
that the store still does exactly that (a store upgrade that changes a quirk fails here).
The same probes print the whole table::

    .venv/bin/python tests/test_s3_store_quirks.py            # every store installed
    .venv/bin/python tests/test_s3_store_quirks.py rclone     # one

Probes use a client that retries nothing and adds no checksum of its own
(``request_checksum_calculation``/``response_checksum_validation`` = ``when_required``),
except where boto3's defaults are the point. "signed" means the body's SHA-256 is in the
signature (``x-amz-content-sha256``: botocore's default over plain HTTP); "unsigned" is
``UNSIGNED-PAYLOAD`` (botocore's default over HTTPS when a checksum header is sent), where
only a checksum header or Content-MD5 can catch a corrupted body.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # as a script: tests/ holds the helpers

from s3_stores import STORES, FlipRelay, S3Store, StoreServers, StoreUnavailable, store_params

pytestmark = pytest.mark.network

MIB = 1 << 20


def _data(n: int, seed: int = 36) -> bytes:
    return random.Random(seed).randbytes(n)


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def _sha(b: bytes) -> str:
    return _b64(hashlib.sha256(b).digest())


def _client(store: S3Store, endpoint: str | None = None, signed: bool = True, **cfg: Any) -> Any:
    cfg.setdefault("request_checksum_calculation", "when_required")
    cfg.setdefault("response_checksum_validation", "when_required")
    return store.client(
        endpoint,
        retries={"total_max_attempts": 1},
        s3={"addressing_style": "path", "payload_signing_enabled": signed},
        **cfg,
    )


def _error(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        meta = exc.response.get("ResponseMetadata", {})
        code = exc.response.get("Error", {}).get("Code", "")
        status = meta.get("HTTPStatusCode", "?")
        return f"{status} {code}".strip() if str(code) != str(status) else str(status)
    return type(exc).__name__


def _status(call: Callable[[], Any]) -> str:
    """The HTTP status of a call, or its error as ``STATUS Code``."""
    try:
        r = call()
    except Exception as exc:  # the error is the observation
        return _error(exc)
    return str(r["ResponseMetadata"]["HTTPStatusCode"])


def _etag_form(etag: str, whole: bytes, parts: list[bytes] | None = None) -> str:
    e = etag.strip('"')
    if not e:
        return "empty"
    q = '"' if etag.startswith('"') else ""
    if e == _md5(whole):
        return f"{q}md5{q}"  # the object's MD5, quoted as HTTP wants it or bare
    if parts and e == _md5(b"".join(hashlib.md5(p).digest() for p in parts)) + f"-{len(parts)}":
        return f"{q}md5s-N{q}"  # MD5 of the parts' MD5s, -N: AWS's multipart form
    return f"{q}other {e}{q}"


def _sha_form(value: str | None, whole: bytes, parts: list[bytes] | None = None) -> str:
    if not value:
        return "none"
    if value == _sha(whole):
        return "sha256(object)"
    if value.split("-")[0] == _sha(whole):
        return f"sha256(object)-{value.split('-')[1]}"
    if parts:
        composite = _b64(
            hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest()
        )
        if value == f"{composite}-{len(parts)}":
            return "sha256(part sha256s)-N"
        if value == composite:
            return "sha256(part sha256s)"
    return f"other ({value})"


# --- probes -------------------------------------------------------------------------------


def observe_etag_put(s: S3Store) -> str:
    """The ETag of a single PUT (as PutObject and HEAD return it)."""
    c, data = _client(s), _data(100_000)
    put = c.put_object(Bucket=s.bucket, Key="etag-put", Body=data)["ETag"]
    head = c.head_object(Bucket=s.bucket, Key="etag-put")["ETag"]
    return _etag_form(put, data) + ("" if put == head else f"; HEAD {_etag_form(head, data)}")


def _multipart(s: S3Store, key: str, parts: list[bytes], sha256: bool) -> dict[str, Any]:
    c = _client(s)
    extra = {"ChecksumAlgorithm": "SHA256"} if sha256 else {}
    up = c.create_multipart_upload(Bucket=s.bucket, Key=key, **extra)["UploadId"]
    done = []
    for n, p in enumerate(parts, 1):
        kw = {"ChecksumSHA256": _sha(p)} if sha256 else {}
        r = c.upload_part(Bucket=s.bucket, Key=key, UploadId=up, PartNumber=n, Body=p, **kw)
        done.append({"PartNumber": n, "ETag": r["ETag"], **kw})
    r = c.complete_multipart_upload(
        Bucket=s.bucket, Key=key, UploadId=up, MultipartUpload={"Parts": done}
    )
    return {"complete": r, "parts": done}


def observe_etag_multipart(s: S3Store) -> str:
    """The ETag of a 2 x 5 MiB multipart upload; the form of the parts' ETags."""
    parts = [_data(5 * MIB, 1), _data(5 * MIB, 2)]
    r = _multipart(s, "etag-mpu", parts, sha256=False)
    head = _client(s).head_object(Bucket=s.bucket, Key="etag-mpu")["ETag"]
    whole = b"".join(parts)
    part = _etag_form(r["parts"][0]["ETag"], parts[0])
    out = f"Complete {_etag_form(r['complete']['ETag'], whole, parts)}; parts {part}"
    return out if head == r["complete"]["ETag"] else f"{out}; HEAD {_etag_form(head, whole, parts)}"


def observe_head_sha256_put(s: S3Store) -> str:
    """HEAD (ChecksumMode=ENABLED) after a PUT that declared its SHA-256; after one that did not."""
    c, data = _client(s), _data(100_000)
    c.put_object(Bucket=s.bucket, Key="sha-put", Body=data, ChecksumSHA256=_sha(data))
    c.put_object(Bucket=s.bucket, Key="sha-none", Body=data)
    got = c.head_object(Bucket=s.bucket, Key="sha-put", ChecksumMode="ENABLED")
    bare = c.head_object(Bucket=s.bucket, Key="sha-none", ChecksumMode="ENABLED")
    return (
        f"declared: {_sha_form(got.get('ChecksumSHA256'), data)}; "
        f"undeclared: {_sha_form(bare.get('ChecksumSHA256'), data)}"
    )


def observe_head_sha256_multipart(s: S3Store) -> str:
    """HEAD (ChecksumMode=ENABLED) of a 2 x 5 MiB upload made with ChecksumAlgorithm=SHA256."""
    parts = [_data(5 * MIB, 3), _data(5 * MIB, 4)]
    r = _multipart(s, "sha-mpu", parts, sha256=True)
    got = _client(s).head_object(Bucket=s.bucket, Key="sha-mpu", ChecksumMode="ENABLED")
    whole = b"".join(parts)
    done = _sha_form(r["complete"].get("ChecksumSHA256"), whole, parts)
    return f"HEAD {_sha_form(got.get('ChecksumSHA256'), whole, parts)}; Complete {done}"


def observe_flip(s: S3Store, declare: str | None, signed: bool, op: str = "put") -> str:
    """One byte of the body flipped in transit (FlipRelay): refused, or what is stored and
    what HEAD (ChecksumMode=ENABLED) and the ETag then say."""
    data = _data(64 * 1024, 5)
    key = f"flip-{op}-{declare}-{signed}"
    kw: dict[str, Any] = {}
    if declare == "sha256":
        kw["ChecksumSHA256"] = _sha(data)
    elif declare == "md5":
        kw["ContentMD5"] = _b64(hashlib.md5(data).digest())
    relay = FlipRelay(s.port, offset=1000)
    direct = _client(s)
    via = _client(s, relay.url, signed=signed)
    try:
        if op == "put":
            via.put_object(Bucket=s.bucket, Key=key, Body=data, **kw)
        else:
            algo = {"ChecksumAlgorithm": "SHA256"} if declare == "sha256" else {}
            up = direct.create_multipart_upload(Bucket=s.bucket, Key=key, **algo)["UploadId"]
            r = via.upload_part(
                Bucket=s.bucket, Key=key, UploadId=up, PartNumber=1, Body=data, **kw
            )
            part = {"PartNumber": 1, "ETag": r["ETag"]}
            if declare == "sha256":
                part["ChecksumSHA256"] = kw["ChecksumSHA256"]
            direct.complete_multipart_upload(
                Bucket=s.bucket, Key=key, UploadId=up, MultipartUpload={"Parts": [part]}
            )
    except Exception as exc:  # refused: the observation
        assert relay.flipped, "the relay flipped nothing"
        return f"refused {_error(exc)}"
    finally:
        relay.close()
    assert relay.flipped, "the relay flipped nothing"
    stored = direct.get_object(Bucket=s.bucket, Key=key)["Body"].read()
    if stored == data:
        return "stored the original bytes (?)"
    head = direct.head_object(Bucket=s.bucket, Key=key, ChecksumMode="ENABLED")
    sha = head.get("ChecksumSHA256")
    if not sha:
        said = "sha256 none"
    elif sha.split("-")[0] == _sha(data) or (op == "part" and sha.startswith(_part_sha(data))):
        said = "sha256 echoes declared"
    elif sha.split("-")[0] == _sha(stored) or (op == "part" and sha.startswith(_part_sha(stored))):
        said = "sha256 of stored"
    else:
        said = f"sha256 other ({sha})"
    etag = head["ETag"].strip('"')
    if etag.split("-")[0] == _md5(stored) or etag == _md5(hashlib.md5(stored).digest()) + "-1":
        tag = "etag of stored"
    elif etag.split("-")[0] == _md5(data) or etag == _md5(hashlib.md5(data).digest()) + "-1":
        tag = "etag of original"
    else:
        tag = "etag other"
    return f"stored flipped bytes; {said}; {tag}"


def _part_sha(part: bytes) -> str:
    return _b64(hashlib.sha256(hashlib.sha256(part).digest()).digest())


def observe_range_checksum(s: S3Store) -> str:
    """A ranged GET (bytes=0-99) of an object PUT with a declared SHA-256: status and checksum
    headers of the answer (no ChecksumMode sent), and boto3's default response validation."""
    c, data = _client(s), _data(200_000, 6)
    c.put_object(Bucket=s.bucket, Key="range-sha", Body=data, ChecksumSHA256=_sha(data))
    r = c.get_object(Bucket=s.bucket, Key="range-sha", Range="bytes=0-99")
    r["Body"].read()
    headers = r["ResponseMetadata"]["HTTPHeaders"]
    sums = sorted(
        k for k in headers if k.startswith("x-amz-checksum-") and k != "x-amz-checksum-type"
    )
    if not sums:
        header = "no checksum"
    elif headers.get("x-amz-checksum-sha256") == _sha(data):
        header = "object's sha256"
    else:
        header = ", ".join(sums)
    default = s.client()  # boto3's defaults: when_supported (sends ChecksumMode=ENABLED)
    try:
        body = default.get_object(Bucket=s.bucket, Key="range-sha", Range="bytes=0-99")
        ok = "ok" if body["Body"].read() == data[:100] else "wrong bytes"
    except Exception as exc:
        ok = _error(exc)
    return f"{r['ResponseMetadata']['HTTPStatusCode']} has {header}; boto3 default: {ok}"


def observe_range_status(s: S3Store) -> str:
    """``Range: bytes=0-99`` of a 2000-byte object: status, bytes and Content-Range."""
    c, data = _client(s), _data(2000, 8)
    c.put_object(Bucket=s.bucket, Key="range", Body=data)
    r = c.get_object(Bucket=s.bucket, Key="range", Range="bytes=0-99")
    body = r["Body"].read()
    what = "the range" if body == data[:100] else f"{len(body)} bytes"
    return (
        f"{r['ResponseMetadata']['HTTPStatusCode']} {what}, Content-Range {r.get('ContentRange')}"
    )


def observe_metadata_case(s: S3Store) -> str:
    """User metadata ``x-amz-meta-seq-no: 7`` as HEAD gives it back."""
    c = _client(s)
    c.put_object(Bucket=s.bucket, Key="meta", Body=b"m", Metadata={"seq-no": "7"})
    return str(c.head_object(Bucket=s.bucket, Key="meta")["Metadata"])


def observe_suffix_range(s: S3Store) -> str:
    """``Range: bytes=-1048576`` on a 1000-byte object."""
    c, data = _client(s), _data(1000, 7)
    c.put_object(Bucket=s.bucket, Key="small", Body=data)
    try:
        r = c.get_object(Bucket=s.bucket, Key="small", Range=f"bytes=-{MIB}")
    except Exception as exc:
        return _error(exc)
    body = r["Body"].read()
    what = "whole object" if body == data else f"{len(body)} bytes"
    return f"{r['ResponseMetadata']['HTTPStatusCode']} {what}"


def observe_put_if_none_match(s: S3Store) -> str:
    """PUT with ``If-None-Match: *``: on a new key, then on that existing key."""
    c = _client(s)
    new = _status(lambda: c.put_object(Bucket=s.bucket, Key="inm", Body=b"1", IfNoneMatch="*"))
    again = _status(lambda: c.put_object(Bucket=s.bucket, Key="inm", Body=b"2", IfNoneMatch="*"))
    body = c.get_object(Bucket=s.bucket, Key="inm")["Body"].read()
    kept = "" if body == b"1" else " (overwritten)"
    return f"new {new}; existing {again}{kept}"


def observe_put_if_match(s: S3Store) -> str:
    """PUT with ``If-Match``: the current ETag quoted (as returned), bare, and a wrong one."""
    c = _client(s)
    c.put_object(Bucket=s.bucket, Key="im", Body=b"v")
    out = []
    for label in ("quoted", "bare", "wrong"):
        cur = c.head_object(Bucket=s.bucket, Key="im")["ETag"]
        value = {"quoted": cur, "bare": cur.strip('"'), "wrong": '"00"'}[label]

        def put(v: str = value) -> Any:
            return c.put_object(Bucket=s.bucket, Key="im", Body=b"v", IfMatch=v)

        out.append(f"{label} {_status(put)}")
    return "; ".join(out)


def observe_read_if_match(s: S3Store, op: str) -> str:
    """HEAD or GET with ``If-Match``: the ETag quoted (as returned), bare, and a wrong one."""
    c = _client(s)
    etag = c.put_object(Bucket=s.bucket, Key="rm", Body=b"v1")["ETag"]
    call = c.head_object if op == "head" else c.get_object
    out = []
    for label, value in (("quoted", etag), ("bare", etag.strip('"')), ("wrong", '"00"')):

        def read(v: str = value) -> Any:
            return call(Bucket=s.bucket, Key="rm", IfMatch=v)

        out.append(f"{label} {_status(read)}")
    return "; ".join(out)


def observe_list_uploads(s: S3Store) -> str:
    """With one part of an open upload: ListParts (resume) and ListMultipartUploads; and
    ListMultipartUploads on the fresh bucket before it."""
    c = _client(s)
    before = _status(lambda: c.list_multipart_uploads(Bucket=s.bucket))
    up = c.create_multipart_upload(Bucket=s.bucket, Key="open")["UploadId"]
    e = c.upload_part(Bucket=s.bucket, Key="open", UploadId=up, PartNumber=1, Body=b"p" * 1000)
    try:
        parts = c.list_parts(Bucket=s.bucket, Key="open", UploadId=up).get("Parts", [])
        lp = (
            "parts ok"
            if [(p["PartNumber"], p["Size"], p["ETag"]) for p in parts] == [(1, 1000, e["ETag"])]
            else f"parts {parts}"
        )
    except Exception as exc:
        lp = f"parts {_error(exc)}"
    try:
        ups = c.list_multipart_uploads(Bucket=s.bucket).get("Uploads", [])
        lu = "uploads ok" if [u["UploadId"] for u in ups] == [up] else f"uploads {ups}"
    except Exception as exc:
        lu = f"uploads {_error(exc)}"
    return f"{lp}; {lu}; uploads of a fresh bucket {before}"


def observe_copy_object(s: S3Store) -> str:
    """CopyObject of a tiny object."""
    c = _client(s)
    c.put_object(Bucket=s.bucket, Key="tiny", Body=b"tiny object")
    try:
        c.copy_object(Bucket=s.bucket, Key="copied", CopySource={"Bucket": s.bucket, "Key": "tiny"})
    except Exception as exc:
        return f"unsupported: {_error(exc)}"
    body = c.get_object(Bucket=s.bucket, Key="copied")["Body"].read()
    return "ok" if body == b"tiny object" else f"wrong bytes ({body[:20]!r})"


def observe_upload_part_copy(s: S3Store) -> str:
    """A one-part multipart copy of a tiny object (UploadPartCopy), completed with the ETag the
    store gave (CopyPartResult's, else the response's ETag header)."""
    c = _client(s)
    c.put_object(Bucket=s.bucket, Key="tiny", Body=b"tiny object")
    up = c.create_multipart_upload(Bucket=s.bucket, Key="copy")["UploadId"]
    try:
        r = c.upload_part_copy(
            Bucket=s.bucket,
            Key="copy",
            UploadId=up,
            PartNumber=1,
            CopySource={"Bucket": s.bucket, "Key": "tiny"},
        )
    except Exception as exc:
        with contextlib.suppress(Exception):
            c.abort_multipart_upload(Bucket=s.bucket, Key="copy", UploadId=up)
        return f"refused: {_error(exc)}"
    etag = r.get("CopyPartResult", {}).get("ETag")
    note = ""
    if etag is None:
        etag = r["ResponseMetadata"]["HTTPHeaders"].get("etag", "")
        empty = etag.strip('"') == _md5(b"")
        note = f"no CopyPartResult, ETag {'md5(empty)' if empty else etag}: "
    try:
        c.complete_multipart_upload(
            Bucket=s.bucket,
            Key="copy",
            UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
        )
    except Exception as exc:
        return f"{note}complete {_error(exc)}"
    body = c.get_object(Bucket=s.bucket, Key="copy")["Body"].read()
    return note + ("ok" if body == b"tiny object" else f"completes to {len(body)} bytes")


def observe_complete_if_none_match(s: S3Store) -> str:
    """CompleteMultipartUpload with ``If-None-Match: *`` where the key exists."""
    c = _client(s)
    c.put_object(Bucket=s.bucket, Key="cinm", Body=b"first")
    up = c.create_multipart_upload(Bucket=s.bucket, Key="cinm")["UploadId"]
    e = c.upload_part(Bucket=s.bucket, Key="cinm", UploadId=up, PartNumber=1, Body=b"second")
    status = _status(
        lambda: c.complete_multipart_upload(
            Bucket=s.bucket,
            Key="cinm",
            UploadId=up,
            IfNoneMatch="*",
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e["ETag"]}]},
        )
    )
    body = c.get_object(Bucket=s.bucket, Key="cinm")["Body"].read()
    return f"{status} ({'kept' if body == b'first' else 'overwritten'})"


PROBES: dict[str, Callable[[S3Store], str]] = {
    "etag_put": observe_etag_put,
    "etag_multipart": observe_etag_multipart,
    "head_sha256_put": observe_head_sha256_put,
    "head_sha256_multipart": observe_head_sha256_multipart,
    "flip_put_sha256_unsigned": lambda s: observe_flip(s, "sha256", signed=False),
    "flip_put_sha256_signed": lambda s: observe_flip(s, "sha256", signed=True),
    "flip_put_md5_unsigned": lambda s: observe_flip(s, "md5", signed=False),
    "flip_put_none_unsigned": lambda s: observe_flip(s, None, signed=False),
    "flip_part_sha256_unsigned": lambda s: observe_flip(s, "sha256", signed=False, op="part"),
    "flip_part_md5_unsigned": lambda s: observe_flip(s, "md5", signed=False, op="part"),
    "range_status": observe_range_status,
    "range_checksum": observe_range_checksum,
    "suffix_range_small": observe_suffix_range,
    "put_if_none_match": observe_put_if_none_match,
    "put_if_match": observe_put_if_match,
    "head_if_match": lambda s: observe_read_if_match(s, "head"),
    "get_if_match": lambda s: observe_read_if_match(s, "get"),
    "list_uploads": observe_list_uploads,
    "copy_object": observe_copy_object,
    "upload_part_copy": observe_upload_part_copy,
    "complete_if_none_match": observe_complete_if_none_match,
    "metadata_case": observe_metadata_case,
}

# What each store answered (moto 5.2.5, rclone 1.75.2, Ceph 16.2.15 RGW), in the probes' words:
# '"md5"': the ETag is the object's (or the part's) MD5, quoted; 'md5' bare; '"md5s-N"': the MD5
# of the parts' MD5s then -N (AWS's multipart form); "empty": <ETag></ETag>.
# flip_{put,part}_{sha256,md5,none}_{unsigned,signed}: one body byte flipped in transit
# (FlipRelay) of a PutObject / UploadPart that declared the body's SHA-256 (x-amz-checksum-sha256),
# its Content-MD5, or nothing; "signed": x-amz-content-sha256 is the body's hash (botocore's
# default over HTTP), "unsigned": UNSIGNED-PAYLOAD (its default over HTTPS with a checksum).
# "stored flipped bytes; sha256 X; etag of Y": accepted (200); HEAD's ChecksumSHA256 with
# ChecksumMode=ENABLED is X ("echoes declared": the sum the client sent, not the stored bytes');
# the ETag is the MD5 (form) of the stored bytes (a real proof) or of the original.
OBSERVED_ON = {"moto": "5.2.5", "rclone": "v1.75.2", "ceph": "16.2.15"}
OBSERVED: dict[str, dict[str, str]] = {
    "moto": {
        "etag_put": '"md5"',
        "etag_multipart": 'Complete "md5s-N"; parts "md5"',
        "head_sha256_put": "declared: none; undeclared: none",
        "head_sha256_multipart": "HEAD sha256(part sha256s); Complete none",
        "flip_put_sha256_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_put_sha256_signed": "stored flipped bytes; sha256 none; etag of stored",
        "flip_put_md5_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_put_none_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_part_sha256_unsigned": "stored flipped bytes; sha256 of stored; etag of stored",
        "flip_part_md5_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "range_status": "206 the range, Content-Range bytes 0-99/2000",
        "range_checksum": "206 has no checksum; boto3 default: ok",
        "suffix_range_small": "206 whole object",
        "put_if_none_match": "new 200; existing 412 PreconditionFailed",
        "put_if_match": "quoted 200; bare 200; wrong 412 PreconditionFailed",
        "head_if_match": "quoted 200; bare 412; wrong 412",
        "get_if_match": "quoted 200; bare 200; wrong 412 PreconditionFailed",
        "list_uploads": "parts ok; uploads ok; uploads of a fresh bucket 200",
        "copy_object": "ok",
        "upload_part_copy": "ok",
        "complete_if_none_match": "412 PreconditionFailed (kept)",
        "metadata_case": "{'seq-no': '7'}",
    },
    "rclone": {
        "etag_put": '"md5"',
        "etag_multipart": 'Complete "md5s-N"; parts "md5"; HEAD "md5"',
        "head_sha256_put": "declared: sha256(object); undeclared: none",
        "head_sha256_multipart": "HEAD none; Complete none",
        "flip_put_sha256_unsigned": "stored flipped bytes; sha256 echoes declared; etag of stored",
        "flip_put_sha256_signed": "stored flipped bytes; sha256 echoes declared; etag of stored",
        "flip_put_md5_unsigned": "refused 400 BadDigest",
        "flip_put_none_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_part_sha256_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_part_md5_unsigned": "refused 400 BadDigest",
        "range_status": "200 the range, Content-Range bytes 0-99/2000",
        "range_checksum": "200 has object's sha256; boto3 default: FlexibleChecksumError",
        "suffix_range_small": "416 InvalidRange",
        "put_if_none_match": "new 200; existing 200 (overwritten)",
        "put_if_match": "quoted 200; bare 200; wrong 200",
        "head_if_match": "quoted 200; bare 200; wrong 200",
        "get_if_match": "quoted 200; bare 200; wrong 200",
        "list_uploads": "parts ok; uploads ok; uploads of a fresh bucket 404 NoSuchUpload",
        "copy_object": "ok",
        "upload_part_copy": "no CopyPartResult, ETag md5(empty): completes to 0 bytes",
        "complete_if_none_match": "200 (overwritten)",
        "metadata_case": "{'Seq-No': '7'}",
    },
    "ceph": {
        "etag_put": '"md5"',
        "etag_multipart": 'Complete empty; parts "md5"; HEAD "md5s-N"',
        "head_sha256_put": "declared: none; undeclared: none",
        "head_sha256_multipart": "HEAD none; Complete none",
        "flip_put_sha256_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_put_sha256_signed": "refused 400 XAmzContentSHA256Mismatch",
        "flip_put_md5_unsigned": "refused 400 BadDigest",
        "flip_put_none_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_part_sha256_unsigned": "stored flipped bytes; sha256 none; etag of stored",
        "flip_part_md5_unsigned": "refused 400 BadDigest",
        "range_status": "206 the range, Content-Range bytes 0-99/2000",
        "range_checksum": "206 has no checksum; boto3 default: ok",
        "suffix_range_small": "206 whole object",
        "put_if_none_match": "new 200; existing 412 PreconditionFailed",
        "put_if_match": "quoted 412 PreconditionFailed; bare 200; wrong 412 PreconditionFailed",
        "head_if_match": "quoted 200; bare 200; wrong 412",
        "get_if_match": "quoted 200; bare 200; wrong 412 PreconditionFailed",
        "list_uploads": "parts ok; uploads ok; uploads of a fresh bucket 200",
        "copy_object": "ok",
        "upload_part_copy": "ok",
        "complete_if_none_match": "200 (overwritten)",
        "metadata_case": "{'seq-no': '7'}",
    },
}


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("s3_store", store_params(), indirect=True)
def test_store_quirk(s3_store: S3Store, probe: str) -> None:
    expected = OBSERVED.get(s3_store.name, {}).get(probe)
    got = PROBES[probe](s3_store)
    version, recorded = s3_store.facts.get("version"), OBSERVED_ON.get(s3_store.name)
    assert got == expected, (
        f"{s3_store.name} {version} {probe}: {got!r} (recorded on {recorded}: {expected!r}); "
        f"after checking what the project relies on, record the table again: "
        f".venv/bin/python tests/test_s3_store_quirks.py {s3_store.name}"
    )


# --- as a script: the table ---------------------------------------------------------------


@contextlib.contextmanager
def _bucket(servers: StoreServers, name: str) -> Iterator[S3Store]:
    import uuid

    from s3_stores import empty_bucket

    s = servers.get(name)
    b = f"quirks-{uuid.uuid4().hex[:8]}"
    s.client().create_bucket(Bucket=b)
    try:
        yield s.with_bucket(b)
    finally:
        empty_bucket(s, b)


def main(names: list[str]) -> int:
    servers = StoreServers()
    table: dict[str, dict[str, str]] = {}
    try:
        for name in names:
            try:
                s = servers.get(name)
            except StoreUnavailable as exc:
                print(f"{name}: unavailable: {exc}", file=sys.stderr)
                continue
            print(f"{name} {s.facts.get('version')}: up in {s.startup_s:.2f} s", file=sys.stderr)
            table[name] = {}
            for probe, fn in PROBES.items():
                with _bucket(servers, name) as sb:
                    try:
                        table[name][probe] = fn(sb)
                    except Exception as exc:
                        table[name][probe] = f"PROBE FAILED: {type(exc).__name__}: {exc}"
    finally:
        servers.close()
    import json

    print(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(STORES)))
