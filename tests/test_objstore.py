"""Reading hyperframe files straight from a real S3 endpoint (moto on loopback)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from s3_server import S3Unavailable, s3_client, s3_endpoint

from hyperframes.reader import HyperframeReader
from hyperframes.storage.cache import cached_path
from hyperframes.storage.objects import RemoteError, is_url, list_urls, split_s3_url
from hyperframes.synth import profile, write_synthetic

from torch_files import same_sample

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        endpoint = s3_endpoint()
        url = endpoint.__enter__()
    except S3Unavailable as exc:
        pytest.skip(str(exc))
    saved = dict(os.environ)
    os.environ.update(AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="t", AWS_SECRET_ACCESS_KEY="t",
                      AWS_REGION="us-east-1")  # fmt: skip
    local = tmp_path_factory.mktemp("s3") / "demo.hf"
    write_synthetic(str(local), profile("demo"), 2.0, seed=3)
    client = s3_client(url, "t", "t")
    client.create_bucket(Bucket="fleet")
    for name in ("a.hf", "b.hf"):
        client.upload_file(str(local), "fleet", f"drive/{name}")
    client.put_object(Bucket="fleet", Key="drive/notes.txt", Body=b"x")
    yield url, local
    os.environ.clear()
    os.environ.update(saved)
    endpoint.__exit__(None, None, None)


def test_url_helpers() -> None:
    assert is_url("s3://b/k.hf") and not is_url("/data/k.hf") and not is_url(Path("s3:/b"))
    assert split_s3_url("s3://bkt/x/y.hf") == ("bkt", "x/y.hf")
    with pytest.raises(ValueError, match="no bucket"):
        split_s3_url("s3:///k")
    for bad in ("s3://A_b/k", "s3://ab/k", "s3://a..b/k", "gs://b/k"):
        with pytest.raises(ValueError, match=r"bucket name|not an s3:// URL"):
            split_s3_url(bad)
    assert split_s3_url("s3://fleet.raw-1/") == ("fleet.raw-1", "")


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("NoSuchBucket", 404, "no-bucket"),  # before the 404 of a missing object
        ("NoSuchKey", 404, "not-found"),
        ("404", 404, "not-found"),  # a HEAD's answer has no body
        ("SignatureDoesNotMatch", 403, "auth"),
        ("", 401, "auth"),
        ("SlowDown", 503, "server"),
        ("InternalError", 500, "server"),
        ("RequestTimeout", 400, "server"),
        ("InvalidArgument", 400, "client"),
    ],
)
def test_store_errors_are_classified_once_for_readers_and_the_uploader(
    code: str, status: int, kind: str
) -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError

    from hyperframes.recorder.upload.s3 import _classify
    from hyperframes.storage.objects import classify_error, fail

    exc = ClientError({"Error": {"Code": code, "Message": "m"},
                       "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")  # fmt: skip
    assert classify_error(exc).kind == kind
    # a 4xx that is no auth or bucket problem is the store refusing this request (the
    # uploader holds that segment back), not a server failure (which ends the pass)
    known = {"no-bucket": "no-bucket", "auth": "auth", "server": "server", "network": "network"}
    reason = known.get(kind, "refused")
    assert _classify(exc, "s3://b/k").reason == reason
    problem = fail("s3://b/k", exc).problem
    assert problem.startswith({"no-bucket": "no such bucket", "not-found": "no such object",
                               "auth": "access refused"}.get(kind, "the store failed"))  # fmt: skip
    down = EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    assert classify_error(down).kind == "network" and _classify(down, "x").reason == "network"


def test_reader_over_s3_matches_the_local_file(s3: Any) -> None:
    _, local = s3
    with HyperframeReader(local) as lr, HyperframeReader("s3://fleet/drive/a.hf") as rr:
        assert rr.remote is not None and rr.remote.stats.requests <= 3  # tail, head, trailer
        opened = rr.remote.stats.requests
        assert rr.frame_count == lr.frame_count and rr.window_count() == lr.window_count()
        k = lr.window_count() // 2
        before = rr.remote.stats.requests
        got, want = rr.get_window(k), lr.get_window(k)
        assert rr.remote.stats.requests - before == 1  # one window, one ranged GET
        assert want.frames.keys() == got.frames.keys()
        for sid in want.frames:
            for f, g in zip(want[sid], got[sid], strict=True):
                assert f.timestamp_ns == g.timestamp_ns
                assert f.tobytes() == g.tobytes()
        name = next(iter(lr.streams.values())).name
        t = int(lr.timestamps(name)[3])
        assert rr.read(name, t).tobytes() == lr.read(name, t).tobytes()
        assert opened <= 3 and rr.name == "s3://fleet/drive/a.hf"


def test_missing_object_and_listing(s3: Any) -> None:
    with pytest.raises(RemoteError, match="no such object"):
        HyperframeReader("s3://fleet/drive/nope.hf")
    assert list_urls("s3://fleet/drive/*.hf") == ["s3://fleet/drive/a.hf", "s3://fleet/drive/b.hf"]
    assert list_urls("s3://fleet/drive/a.hf") == ["s3://fleet/drive/a.hf"]


def test_cached_copy_is_downloaded_once(s3: Any, tmp_path: Path) -> None:
    _, local = s3
    p1 = cached_path("s3://fleet/drive/b.hf", tmp_path)
    assert p1.read_bytes() == local.read_bytes()
    mtime = p1.stat().st_mtime_ns
    assert cached_path("s3://fleet/drive/b.hf", tmp_path) == p1 and p1.stat().st_mtime_ns == mtime
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_readahead_makes_a_scan_one_request_per_chunk(s3: Any) -> None:
    from hyperframes.storage.objects import RemoteFile

    _, local = s3
    data = local.read_bytes()
    rf = RemoteFile("s3://fleet/drive/a.hf", tail_bytes=4096, readahead=256 << 10)
    opened = rf.stats.requests
    got = b"".join(rf.pread(1000, off) for off in range(0, rf.size, 1000))
    assert got == data
    inside = rf.size - 4096 - (64 << 10)  # bytes neither in the tail nor in the head span
    assert rf.stats.requests - opened <= inside // (256 << 10) + 2


def test_dataset_over_a_glob_of_urls_matches_the_local_files(s3: Any) -> None:
    torch = pytest.importorskip("torch")
    from hyperframes.torch import HyperframeDataset, collate

    _, local = s3
    remote = HyperframeDataset("s3://fleet/drive/*.hf", streams=["imu", "lidar_top"])
    here = HyperframeDataset([local, local], streams=["imu", "lidar_top"])
    assert len(remote) == len(here) > 0

    for i in (0, len(here) // 2, len(here) - 1):
        a, b = remote[i], here[i]
        assert a["file"].startswith("s3://fleet/drive/") and same_sample(a, b)
    loader = torch.utils.data.DataLoader(remote, batch_size=4, num_workers=2, collate_fn=collate)
    assert sum(1 for _ in loader) == (len(remote) + 3) // 4


def test_a_sample_of_every_stream_costs_one_request(s3: Any) -> None:
    pytest.importorskip("torch")
    from s3_server import FaultyLink

    from hyperframes.torch import HyperframeDataset

    url, local = s3
    link = FaultyLink(int(url.rsplit(":", 1)[1]))  # counts the requests it passes on
    os.environ["AWS_ENDPOINT_URL"] = link.url
    try:
        ds = HyperframeDataset("s3://fleet/drive/a.hf")  # every stream: cameras, lidar, imu
        here = HyperframeDataset(local)
        assert len(ds.streams) >= 3
        ds[0]  # opens the file
        before = len(link.seen)
        for i in range(1, 11):
            got, want = ds[i], here[i]
            assert got["lidar"]["lidar_top"]["data"][0].equal(want["lidar"]["lidar_top"]["data"][0])
        gets = [s for s in link.seen[before:] if s.startswith("GET /fleet/drive/a.hf")]
        assert len(gets) == 10, gets  # one ranged GET a sample, not one per stream
    finally:
        os.environ["AWS_ENDPOINT_URL"] = url
        link.close()
