"""The S3 servers of tests/s3_stores.py (moto, rclone serve s3, Ceph RGW) do plain S3 work, and
the FlipRelay corrupts exactly one body byte; the stores' differences: test_s3_store_quirks.py."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import pytest
from s3_stores import FlipRelay, S3Store, StoreUnavailable, ceph_rgw, rclone_s3, store_params

pytestmark = pytest.mark.network

MIB = 1 << 20


def _client(store: S3Store, endpoint: str | None = None, **s3: Any) -> Any:
    """No checksums of boto3's own (stores differ there: see the quirks), no retries."""
    return store.client(
        endpoint,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        retries={"total_max_attempts": 1},
        s3={"addressing_style": "path", **s3},
    )


def test_put_get_head_delete(s3_store: S3Store) -> None:
    c, b = _client(s3_store), s3_store.bucket
    data = random.Random(1).randbytes(300_000)
    put = c.put_object(Bucket=b, Key="dir/one.bin", Body=data, Metadata={"seq": "7"})
    head = c.head_object(Bucket=b, Key="dir/one.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    # rclone gives the key back as Go writes header names ("Seq"): see the quirks
    assert {k.lower(): v for k, v in head["Metadata"].items()} == {"seq": "7"}
    assert c.get_object(Bucket=b, Key="dir/one.bin")["Body"].read() == data
    c.delete_object(Bucket=b, Key="dir/one.bin")
    with pytest.raises(c.exceptions.ClientError) as err:
        c.head_object(Bucket=b, Key="dir/one.bin")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_multipart_two_parts_of_5_mib(s3_store: S3Store) -> None:
    c, b = _client(s3_store), s3_store.bucket
    parts = [random.Random(n).randbytes(5 * MIB) for n in (2, 3)]
    up = c.create_multipart_upload(Bucket=b, Key="big.bin")["UploadId"]
    done = []
    for n, p in enumerate(parts, 1):
        r = c.upload_part(Bucket=b, Key="big.bin", UploadId=up, PartNumber=n, Body=p)
        assert r["ETag"].strip('"') == hashlib.md5(p).hexdigest()
        done.append({"PartNumber": n, "ETag": r["ETag"]})
    listed = c.list_parts(Bucket=b, Key="big.bin", UploadId=up)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [(1, 5 * MIB), (2, 5 * MIB)]
    c.complete_multipart_upload(
        Bucket=b, Key="big.bin", UploadId=up, MultipartUpload={"Parts": done}
    )
    assert c.head_object(Bucket=b, Key="big.bin")["ContentLength"] == 10 * MIB
    got = c.get_object(Bucket=b, Key="big.bin")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(b"".join(parts)).digest()


def test_ranged_get(s3_store: S3Store) -> None:
    c, b = _client(s3_store), s3_store.bucket
    data = random.Random(4).randbytes(2 * MIB)
    c.put_object(Bucket=b, Key="r.bin", Body=data)
    for rng, want in (
        ("bytes=0-99", data[:100]),
        ("bytes=1048576-1048675", data[MIB : MIB + 100]),
        ("bytes=-1000", data[-1000:]),  # suffix within the object
        (f"bytes={2 * MIB - 10}-", data[-10:]),
    ):
        r = c.get_object(Bucket=b, Key="r.bin", Range=rng)
        # rclone answers 200 with the range and its Content-Range: see the quirks
        assert r["ResponseMetadata"]["HTTPStatusCode"] in (200, 206), rng
        assert r["Body"].read() == want, rng
        assert r["ContentRange"].endswith(f"/{len(data)}"), rng


def test_list(s3_store: S3Store) -> None:
    c, b = _client(s3_store), s3_store.bucket
    keys = ["a/1.hf", "a/2.hf", "a/sub/3.hf", "b/4.hf", "top.txt"]
    for k in keys:
        c.put_object(Bucket=b, Key=k, Body=k.encode())
    every = [o["Key"] for p in c.get_paginator("list_objects_v2").paginate(Bucket=b,
             PaginationConfig={"PageSize": 2}) for o in p.get("Contents", [])]  # fmt: skip
    assert every == keys
    r = c.list_objects_v2(Bucket=b, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/1.hf", "a/2.hf"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/sub/"]
    top = c.list_objects_v2(Bucket=b, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["a/", "b/"]
    assert [o["Size"] for o in top["Contents"]] == [len("top.txt")]


@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_flip_relay_flips_one_body_byte_once(s3_store: S3Store) -> None:
    """moto checks nothing: what it stores is what came through the relay. 2 MiB: botocore
    sends ``Expect: 100-continue`` and the body spans many reads."""
    data = random.Random(5).randbytes(2 * MIB)
    at = MIB + 12_345
    relay = FlipRelay(s3_store.port, offset=at)
    try:
        via = _client(s3_store, relay.url, payload_signing_enabled=False)
        via.put_object(Bucket=s3_store.bucket, Key="a", Body=data)
        via.put_object(Bucket=s3_store.bucket, Key="b", Body=data)  # not armed any more
        got = via.get_object(Bucket=s3_store.bucket, Key="a")["Body"].read()
    finally:
        relay.close()
    assert len(relay.flipped) == 1 and relay.flipped[0].startswith("PUT /")
    assert len(got) == len(data) and got[at] == data[at] ^ 0xFF
    assert got[:at] == data[:at] and got[at + 1 :] == data[at + 1 :]
    c = _client(s3_store)
    assert c.get_object(Bucket=s3_store.bucket, Key="b")["Body"].read() == data
    assert any(line.startswith("GET /") for line in relay.seen)


@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_flip_relay_targets_the_nth_matching_request(s3_store: S3Store) -> None:
    c = _client(s3_store)
    relay = FlipRelay(s3_store.port, nth=2, path_contains="/want", offset=0)
    try:
        via = _client(s3_store, relay.url, payload_signing_enabled=False)
        for key in ("other", "want-1", "want-2", "want-3"):
            via.put_object(Bucket=s3_store.bucket, Key=key, Body=b"abc")
    finally:
        relay.close()
    bodies = {k: c.get_object(Bucket=s3_store.bucket, Key=k)["Body"].read()
              for k in ("other", "want-1", "want-2", "want-3")}  # fmt: skip
    assert bodies == {"other": b"abc", "want-1": b"abc", "want-2": b"\x9ebc", "want-3": b"abc"}
    assert relay.flipped == [f"PUT /{s3_store.bucket}/want-2"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.mark.ceph
def test_ceph_starts_and_leaves_nothing_behind() -> None:
    try:
        cm = ceph_rgw()
        store = cm.__enter__()
    except StoreUnavailable as exc:
        pytest.skip(str(exc))
    try:
        pids, folder = store.facts["pids"], Path(store.facts["folder"])
        assert len(pids) == 3 and folder.is_dir()
        c = store.client()
        c.create_bucket(Bucket="once")
        c.put_object(Bucket="once", Key="k", Body=b"x")
        assert store.startup_s < 30, store.facts["timings"]
    finally:
        cm.__exit__(None, None, None)
    assert all(_gone(p) for p in pids)
    assert not folder.exists()


def test_rclone_starts_and_leaves_nothing_behind() -> None:
    try:
        cm = rclone_s3()
        store = cm.__enter__()
    except StoreUnavailable as exc:
        pytest.skip(str(exc))
    try:
        folder, pids = Path(store.facts["folder"]), store.facts["pids"]
        c = store.client()
        c.create_bucket(Bucket="once")
        c.put_object(Bucket="once", Key="k", Body=b"x")
        assert (folder / "once" / "k").read_bytes() == b"x"  # buckets are folders
        wrong = S3Store("rclone", store.endpoint_url, store.access_key, "not-the-secret")
        with pytest.raises(c.exceptions.ClientError) as err:
            wrong.client().list_objects_v2(Bucket="once")
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    finally:
        cm.__exit__(None, None, None)
    assert all(_gone(p) for p in pids)
    assert not folder.parent.exists()
