"""hyperframes upload on every S3 store (moto, rclone serve s3, Ceph RGW): issue 36.

Each test runs once per store through the ``s3_store`` fixture (tests/s3_stores.py), a
fresh bucket each. What proves an upload differs by store (docs/OPERATIONS.md, Upload):

| object | moto | rclone | ceph |
|---|---|---|---|
| single PUT | ETag = MD5 | ETag = MD5 | ETag = MD5 |
| our multipart | ETag md5(part MD5s)-N | HEAD ETag = whole MD5 | ETag md5(part MD5s)-N |
| another tool's part size | HEAD partNumber=1, md5s-N | whole MD5 | re-read |

A byte flipped in a request body is refused by rclone and Ceph (``Content-MD5``, or Ceph's
signed payload), stored by moto and caught there by the proof; it is never marked verified.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from s3_stores import FlipRelay, S3Store, store_params
from test_upload import VEHICLE, _cfg, _hf, _segment, _write_yaml

from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.s3 import S3Dest
from hyperframes.recorder.upload.service import UploadService

pytestmark = pytest.mark.network

MiB = 1 << 20
DAY = f"{VEHICLE}/2026-12-02"
# the proof of a multipart object we wrote, as each store answers (module docstring)
MULTIPART_PROOF = {"moto": "etag-md5-of-parts", "rclone": "etag-md5", "ceph": "etag-md5-of-parts"}


@pytest.fixture
def store(s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> S3Store:
    """The store, with its keys in the environment (as the service's unit gets them)."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # the config names it
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-creds"))
    return s3_store


def _service(
    store: S3Store, out: Path, endpoint: str | None = None, client: Any = None, **upload: Any
) -> UploadService:
    conf = {"dest": f"s3://{store.bucket}", "endpoint_url": endpoint or store.endpoint_url,
            "part_mb": 5, **upload}  # fmt: skip
    cfg = _cfg(out, conf)
    dest = None
    if client is not None:
        up = cfg.upload
        dest = S3Dest(up.dest, up.s3, MarkStore(out), up.part_bytes, client, verify=up.verify)
    return UploadService(cfg, cfg.upload, dest=dest, rng=random.Random(36))


def _body(store: S3Store, name: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        return bytes(
            store.client().get_object(Bucket=store.bucket, Key=f"{DAY}/{name}")["Body"].read()
        )
    except ClientError:
        return None


def _unsigned(store: S3Store, endpoint: str) -> Any:
    """A client that sends UNSIGNED-PAYLOAD (botocore's way over HTTPS): only Content-MD5
    can show the store that a body changed."""
    return store.client(
        endpoint,
        retries={"max_attempts": 1},
        s3={"addressing_style": "path", "payload_signing_enabled": False},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )


def test_single_and_multipart_segments_upload_proven(store: S3Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    small, big = _segment(out, 0, 200_000), _segment(out, 1, 11 * MiB + 5)
    svc = _service(store, out)
    assert svc.run_once() == 0, svc.stats.last_error
    for p in (small, big):
        assert _body(store, p.name) == p.read_bytes()
    marks = MarkStore(out)
    assert marks.uploaded(small.name)["verified"] == "etag-md5"
    assert marks.uploaded(big.name)["verified"] == MULTIPART_PROOF[store.name]
    assert svc.stats.read_back_bytes == 0  # every store's ETag proves our own uploads
    assert not (out / ".uploading" / f"{big.name}.json").exists()


def test_verify_reread_reads_every_object_back(store: S3Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    big = _segment(out, 0, 11 * MiB + 5)  # two 8 MiB ranges; rclone answers them 200
    svc = _service(store, out, verify="reread")
    assert svc.run_once() == 0, svc.stats.last_error
    assert MarkStore(out).uploaded(big.name)["verified"] == "reread-sha256"
    assert svc.stats.read_back_bytes == big.stat().st_size


@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_a_checksum_is_a_proof_on_aws_only(store: S3Store, tmp_path: Path) -> None:
    """AWS S3 computes and enforces x-amz-checksum-*; any other endpoint's is no proof (rclone
    repeats the client's). moto stands in for AWS here: it computes a multipart object's
    composite SHA-256 from the parts it holds."""
    from hyperframes.recorder.upload.config import S3Settings
    from hyperframes.recorder.upload.s3 import is_aws_endpoint, make_client

    for url, aws in [("https://s3.amazonaws.com", True), ("https://s3.eu-west-1.amazonaws.com",
                     True), ("https://s3.cn-north-1.amazonaws.com.cn", True),
                     ("http://127.0.0.1:9000", False), ("https://minio.depot:9000", False),
                     ("https://s3.amazonaws.com.depot.example", False), (None, False)]:  # fmt: skip
        assert is_aws_endpoint(url) is aws, url
    assert is_aws_endpoint(make_client(S3Settings(region="eu-west-1")).meta.endpoint_url)
    out = tmp_path / "out"
    big = _segment(out, 0, 11 * MiB + 5)
    cfg = _cfg(out, {"dest": f"s3://{store.bucket}", "endpoint_url": store.endpoint_url,
                     "part_mb": 5})  # fmt: skip
    up = cfg.upload
    dest = S3Dest(up.dest, up.s3, MarkStore(out), up.part_bytes, aws=True)
    assert UploadService(cfg, up, dest=dest).run_once() == 0
    assert MarkStore(out).uploaded(big.name)["verified"] == "sha256-composite"


FLIPS = [
    pytest.param("put", "auto", True, id="put-signed"),
    pytest.param("put", "no-reread", False, id="put-unsigned-no-reread"),
    pytest.param("part", "auto", False, id="part-unsigned"),
    pytest.param("part", "auto", True, id="part-signed"),
]


@pytest.mark.parametrize(("what", "verify", "signed"), FLIPS)
def test_a_byte_flipped_in_transit_is_never_verified(
    store: S3Store, tmp_path: Path, what: str, verify: str, signed: bool
) -> None:
    out = tmp_path / "out"
    seg = _segment(out, 0, 300_000 if what == "put" else 11 * MiB + 5)
    # a part in the middle: the parts beside it show the store's part ETags are MD5s
    relay = FlipRelay(
        store.port, offset=1234, path_contains="partNumber=2" if what == "part" else None
    )
    try:
        client = None if signed else _unsigned(store, relay.url)
        svc = _service(store, out, relay.url, client, verify=verify, scan_interval_s=0.2)
        failed_now = svc.run_once()
        assert relay.flipped, relay.seen
        assert not MarkStore(out).uploaded(seg.name), "a corrupted upload was marked verified"
        assert failed_now == 1
        assert _body(store, seg.name) is None  # refused, or disproven and deleted
        failed = {r for r, n in svc.stats.failures.items() if n}
        if store.name == "moto" and what == "put" and verify == "no-reread":
            assert failed == {"unverifiable"}  # its ETag is not our MD5; nothing proves it
        else:
            assert failed == {"checksum-mismatch"}, svc.stats.last_error
        if store.name == "moto" and what == "put" and verify == "auto":
            assert svc.stats.read_back_bytes == seg.stat().st_size  # the re-read caught it
        if store.name != "moto":  # refused: by Content-MD5 (BadDigest), or a signed payload
            assert "refused the body" in (svc.stats.last_error or "")
            assert signed or "(BadDigest)" in (svc.stats.last_error or "")
        time.sleep(0.25)  # the segment's own first backoff is at most scan_interval_s
        assert svc.run_once() == 0, svc.stats.last_error
        assert _body(store, seg.name) == seg.read_bytes()
        proof = "etag-md5" if what == "put" else MULTIPART_PROOF[store.name]
        assert MarkStore(out).uploaded(seg.name)["verified"] == proof
        if what == "part":  # resumed: only the refused (or disproven) part went again; rclone
            # forgets a multipart upload whose part it refused (NoSuchUpload): parts 1-2 again
            again = 10 * MiB if store.name == "rclone" else 5 * MiB
            assert svc.stats.sent_bytes == seg.stat().st_size + again
    finally:
        relay.close()


def test_an_identical_object_of_another_etag_form_is_adopted(
    store: S3Store, tmp_path: Path
) -> None:
    from boto3.s3.transfer import TransferConfig

    out = tmp_path / "out"
    small, big = _segment(out, 0, 100_000), _segment(out, 1, 11 * MiB + 5)
    other = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
    for p in (small, big):  # another tool: 2 parts of 8 MiB where we use 3 of 5
        store.client().upload_file(str(p), store.bucket, f"{DAY}/{p.name}", Config=other)
    svc = _service(store, out, verify="no-reread")
    held = svc.run_once()
    marks = MarkStore(out)
    assert marks.uploaded(small.name)["verified"] == "etag-md5"
    if store.name == "ceph":  # md5s-2 of 8 MiB parts; Ceph ignores partNumber on HEAD
        assert held == 1 and svc.stats.failures["unverifiable"] == 1
        assert not marks.uploaded(big.name) and _body(store, big.name) == big.read_bytes()
        svc = _service(store, out)  # auto: read it back
        assert svc.run_once() == 0, svc.stats.last_error
        assert svc.stats.read_back_bytes == big.stat().st_size
    else:
        assert held == 0, svc.stats.last_error
    mark = marks.uploaded(big.name)
    proof = {"moto": "etag-md5-of-parts", "rclone": "etag-md5", "ceph": "reread-sha256"}
    assert mark["verified"] == proof[store.name] and mark["found"] == "already there"
    assert svc.stats.sent_bytes == 0


def test_a_different_object_is_a_conflict_that_blocks_nothing(
    store: S3Store, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    segs = [_segment(out, i, 150_000) for i in range(3)]
    theirs = random.Random(7).randbytes(150_000)  # same size: only the bytes tell
    store.client().put_object(Bucket=store.bucket, Key=f"{DAY}/{segs[0].name}", Body=theirs)
    svc = _service(store, out, scan_interval_s=0.2)
    assert svc.run_once() == 1
    assert svc.stats.failures["conflict"] == 1 and "differs" in (svc.stats.last_error or "")
    assert [bool(MarkStore(out).uploaded(p.name)) for p in segs] == [False, True, True]
    assert svc.next_delay() == 0.2  # the pass is not backed off; the conflict waits alone
    assert svc.run_once() == 0 and svc.stats.failures["conflict"] == 1  # not tried again yet
    assert "1 held back (1 conflict)" in svc.stats.status_line()
    assert _body(store, segs[0].name) == theirs  # never overwritten


class _AlwaysFlip(FlipRelay):
    """Flips a byte of every matching request body (a link that corrupts one segment)."""

    def _target(self, method: bytes, path: bytes, length: float) -> int | None:
        got = super()._target(method, path, length)
        with self._lock:
            self.armed, self._matched = True, 0
        return got


def test_a_segment_that_always_fails_is_not_resent_in_a_loop(
    store: S3Store, tmp_path: Path
) -> None:
    """Issue 36 saw one 21 MB segment sent 11 times in 25 s. Here the link corrupts every
    request of one segment; the service's loop is played on a fake clock for 25 s with the
    default intervals: it is sent at most 3 times (its own backoff: 5-10 s, then 10-20 s),
    and the segment behind it goes in the first pass."""
    out = tmp_path / "out"
    bad, good = _segment(out, 0, 400_000), _segment(out, 1, 400_000)
    relay = _AlwaysFlip(store.port, offset=99, path_contains=bad.name)
    now = [0.0]
    try:
        cfg = _cfg(out, {"dest": f"s3://{store.bucket}", "endpoint_url": relay.url})
        svc = UploadService(cfg, cfg.upload, rng=random.Random(1), clock=lambda: now[0])
        passes = 0
        while now[0] < 25.0:
            svc.run_once()
            passes += 1
            now[0] += svc.next_delay()
        assert MarkStore(out).uploaded(good.name) and not MarkStore(out).uploaded(bad.name)
        sends = [r for r in relay.seen if r.startswith("PUT ") and bad.name in r]
        assert 1 <= len(sends) <= 3 and len(relay.flipped) == len(sends), (sends, passes)
        assert svc.stats.failures["checksum-mismatch"] == len(sends)
    finally:
        relay.close()


def _parts_in(state: Path) -> int:
    try:
        return len(json.loads(state.read_text())["parts"])
    except (OSError, ValueError, KeyError):
        return 0


def test_kill_9_mid_multipart_then_resume(store: S3Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    big = _segment(out, 0, 20 * MiB + 123)  # 5 parts of 5 MiB
    conf = _write_yaml(tmp_path / "v.yaml", out, {
        "dest": f"s3://{store.bucket}", "endpoint_url": store.endpoint_url, "part_mb": 5,
        "bandwidth_mb_s": 8})  # fmt: skip
    proc = subprocess.Popen(_hf("upload", "--config", str(conf), "--once"), stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    drain = threading.Thread(target=proc.stderr.read, daemon=True)  # type: ignore[union-attr]
    drain.start()
    state = out / ".uploading" / f"{big.name}.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _parts_in(state) < 2 and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    sent_before = _parts_in(state)
    assert 2 <= sent_before < 5, "the upload finished before the kill: slow the link down"
    done = subprocess.run(_hf("upload", "--config", str(conf), "--once"), check=False,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the store may hold one part more than the state file says: it was in flight at the kill
    resumed = re.search(r"resuming the upload at (\d+) of 5 parts", done.stderr)
    assert resumed and sent_before <= int(resumed[1]) <= sent_before + 1, done.stderr
    assert _body(store, big.name) == big.read_bytes()
    assert MarkStore(out).uploaded(big.name)["verified"] == MULTIPART_PROOF[store.name]
    assert not state.exists()


def test_two_refusals_in_a_row_end_the_pass(tmp_path: Path) -> None:
    """Another 4xx is one segment's failure (it waits alone), but two segments in a row
    refused mean the store refuses the requests themselves: the pass ends and backs off
    rather than sending every segment of the backlog once. (No store needed.)"""
    from hyperframes.recorder.upload.errors import UploadError

    class Refusing:
        prefix = ""
        calls = 0

        def url(self, key: str) -> str:
            return key

        def upload(self, job: Any) -> dict[str, Any]:
            Refusing.calls += 1
            raise UploadError("refused", f"{job.key}: 400 InvalidRequest")

    out = tmp_path / "out"
    for i in range(4):
        _segment(out, i, 1000)
    cfg = _cfg(out, {"dest": str(tmp_path)})
    svc = UploadService(cfg, cfg.upload, dest=Refusing(), rng=random.Random(0))
    assert svc.run_once() == 2 and Refusing.calls == 2
    assert svc.stats.failures["refused"] == 2 and svc._failures == 1
    assert svc.next_delay() <= 2.0  # the pass-wide backoff's first step, not scan_interval_s
