"""Converting from a bucket inbox to a bucket prefix, against a real S3 endpoint.

moto's standalone server on loopback (tests/s3_server.py), reached over real
HTTP by obstore, from the batch, its spawn workers and Ray tasks; a TCP relay
throttles the link so a converter can be killed with SIGKILL mid-upload.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_server import FaultyLink, S3Unavailable, s3_client, s3_endpoint

from hyperframes.converter.bucket.inbox import BucketOptions, run_bucket_batch
from hyperframes.converter.bucket.keys import Layout, lease_state, ledger_name, scan_objects
from hyperframes.converter.bucket.ledger import read_ledger
from hyperframes.converter.bucket.store import ConfigError, as_url, final_copy_mode
from hyperframes.converter.bucket.task import BUCKET_FAULT_ENV
from hyperframes.converter.config import parse_config
from hyperframes.verify import verify_file

from convert_fixtures import write_archive

pytest.importorskip("av")
pytest.importorskip("obstore")

CONFIG = {
    "video": {"x265_preset": "ultrafast"},
    "batch": {"stale_tmp_s": 0, "poll_s": 0.2, "workers": 2, "lease_s": 4, "ray_num_cpus": 1},
}
_n = 0


# --- pure parts -----------------------------------------------------------------


def test_layout_scan_leases_and_ledger_names() -> None:
    lay = Layout("conv", "raw")
    assert lay.final("a.hf") == "conv/a.hf"
    assert lay.parse_staging(lay.staging("h-1-ab-3", "a.hf")) == ("h-1-ab-3", "a.hf")
    assert lay.parse_staging("conv/.staging/x") is None
    assert lay.parse_staging("conv/a.hf") is None
    assert lay.failed("a.hf", 2) == "raw/failed/a.hf.2"
    assert Layout("").final("a.hf") == "a.hf"
    rows = [
        ("raw/b.hf", 5, "e1", 0.0),
        ("raw/.hidden.hf", 1, "e", 0.0),
        ("raw/c.hf.tmp", 1, "e", 95.0),
        ("raw/d.hf.tmp", 1, "e", 10.0),
        ("raw/notes.txt", 1, "e", 0.0),
        ("raw/veh1/2026-12-02/e.hf", 1, "e", 0.0),  # the uploader's layout
        ("raw/failed/f.hf", 1, "e", 0.0),
        ("raw/veh1/.hidden/g.hf", 1, "e", 0.0),
        ("rawx/h.hf", 1, "e", 0.0),
    ]
    got = {e.name: e.action for e in scan_objects(rows, 60.0, 100.0, "raw")}
    assert got == {"b.hf": "convert", "c.hf.tmp": "defer", "d.hf.tmp": "fail",
                   "veh1/2026-12-02/e.hf": "convert"}  # fmt: skip
    assert lay.parse_staging(lay.staging("o-1", "v/d/a.hf")) == ("o-1", "v/d/a.hf")
    assert lay.final("v/d/a.hf") == "conv/v/d/a.hf"
    assert lease_state(None, 10.0) == "free"
    assert lease_state({"owner": "a", "expires": 20.0}, 10.0, "a") == "mine"
    assert lease_state({"owner": "a", "expires": 20.0}, 10.0, "b") == "live"
    assert lease_state({"owner": "a", "expires": 20.0}, 20.0, "a") == "expired"
    assert lease_state({"owner": "a"}, 0.0) == "expired"
    names = [
        ledger_name(t, h, p, s)
        for t, h, p, s in [
            (2_000_000_000_000_000_001, "b", 1, 1),
            (1_999_999_999_999_999_999, "z", 9, 9),
            (2_000_000_000_000_000_001, "b", 1, 2),
        ]
    ]
    assert sorted(names) == [names[1], names[0], names[2]]
    assert as_url(Path("s3://bkt/raw/")) == "s3://bkt/raw"  # argparse's Path folds the //
    assert as_url("s3://bkt/raw/") == "s3://bkt/raw"
    assert as_url(Path("/data/raw")) is None


def test_final_copy_mode_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYPERFRAMES_S3_FINAL_COPY", raising=False)
    assert final_copy_mode() == "multipart"
    monkeypatch.setenv("HYPERFRAMES_S3_FINAL_COPY", "header:cf-copy-destination-if-none-match:*")
    assert final_copy_mode().startswith("header:")
    monkeypatch.setenv("HYPERFRAMES_S3_FINAL_COPY", "sometimes")
    with pytest.raises(ConfigError, match=r"HYPERFRAMES_S3_FINAL_COPY.*'sometimes'.*head"):
        final_copy_mode()


def test_without_obstore_the_message_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['obstore'] = None\n"
        "from hyperframes.converter.bucket.store import Bucket\nBucket('bkt')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 1
    assert "needs obstore" in proc.stderr and "[s3]" in proc.stderr


# --- against an S3 endpoint ------------------------------------------------------

pytestmark_net = pytest.mark.network


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    try:
        ctx = s3_endpoint()
        url = ctx.__enter__()
    except S3Unavailable as exc:
        pytest.skip(str(exc))
    try:
        yield url
    finally:
        ctx.__exit__(None, None, None)


def _env(url: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh bucket; the environment points at the endpoint (spawned workers inherit it)."""
    global _n  # noqa: PLW0603
    _n += 1
    for k, v in _env(endpoint).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("HYPERFRAMES_S3_FINAL_COPY", raising=False)
    client = s3_client(endpoint)
    name = f"conv{_n}-{os.getpid()}"
    client.create_bucket(Bucket=name)
    client.bucket = name
    return client


def _keys(client: Any, prefix: str = "") -> list[str]:
    got = client.list_objects_v2(Bucket=client.bucket, Prefix=prefix)
    return sorted(o["Key"] for o in got.get("Contents", []))


def _upload_inputs(client: Any, tmp: Path, names: list[str], seconds: float = 0.5) -> None:
    for i, name in enumerate(names):
        p = write_archive(tmp / name, seconds, seed=i, late=False, quarantined=False)
        client.upload_file(str(p), client.bucket, f"raw/{name}")


def _verify_output(client: Any, tmp: Path, name: str) -> None:
    local = tmp / "check" / name
    local.parent.mkdir(exist_ok=True)
    client.download_file(client.bucket, f"conv/{name}", str(local))
    assert verify_file(local).ok


def _wait_for_leases(client: Any) -> None:
    """Until every lease left by a dead converter has expired."""
    for key in _keys(client, "conv/.leases/"):
        doc = json.loads(client.get_object(Bucket=client.bucket, Key=key)["Body"].read())
        time.sleep(max(0.0, doc["expires"] - time.time()) + 0.05)


def _cli(client: Any, *args: str) -> list[str]:
    b = client.bucket
    return [
        sys.executable,
        "-m",
        "hyperframes.cli",
        "convert",
        "--inbox",
        f"s3://{b}/raw",
        "--out",
        f"s3://{b}/conv",
        *args,
    ]


def _config_file(tmp: Path) -> str:
    p = tmp / "convert.json.yaml"
    p.write_text(json.dumps(CONFIG))
    return str(p)


def _sub_env(url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, **_env(url), "PYTHONPATH": os.pathsep.join(sys.path), **extra}


@pytest.mark.network
def test_inbox_in_a_bucket_converts_verified_reruns_skip_and_bad_inputs_go_aside(
    s3: Any, endpoint: str, tmp_path: Path
) -> None:
    _upload_inputs(s3, tmp_path, ["good0.hf", "good1.hf"])
    s3.put_object(Bucket=s3.bucket, Key="raw/corrupt.hf", Body=b"not a hyperframe file" * 40)
    b = s3.bucket
    opts = BucketOptions(
        out=f"s3://{b}/conv", config=parse_config(CONFIG), inbox=f"s3://{b}/raw", quiet=True
    )
    assert run_bucket_batch(opts) == 1
    for name in ("good0.hf", "good1.hf"):
        _verify_output(s3, tmp_path, name)
    keys = _keys(s3)
    assert "conv/corrupt.hf" not in keys and "raw/corrupt.hf" not in keys
    assert {"raw/failed/corrupt.hf", "raw/failed/corrupt.hf.reason.json"} <= set(keys)
    reason = json.loads(
        s3.get_object(Bucket=b, Key="raw/failed/corrupt.hf.reason.json")["Body"].read()
    )
    assert reason["fault"] == "input" and "corrupt.hf" in reason["reason"]
    assert not [k for k in keys if "/.staging/" in k or "/.leases/" in k]
    assert len([k for k in keys if k.startswith("conv/.markers/")]) == 4  # content + ETag
    records = read_ledger(f"s3://{b}/conv")
    assert sorted((Path(r["input"]).name, r["status"]) for r in records) == [
        ("corrupt.hf", "failed"),
        ("good0.hf", "converted"),
        ("good1.hf", "converted"),
    ]
    assert records[0]["time"] <= records[-1]["time"]
    # a re-run through the CLI: every input skipped by its ETag marker, nothing downloaded
    proc = subprocess.run(
        _cli(s3, "--config", _config_file(tmp_path), "-q"),
        check=False,
        env=_sub_env(endpoint),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    show = subprocess.run(
        _cli(s3, "--show-ledger"),
        check=False,
        env=_sub_env(endpoint),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert show.returncode == 0, show.stderr
    again = [json.loads(line) for line in show.stdout.splitlines()][3:]
    assert [(Path(r["input"]).name, r["status"], r["reason"]) for r in again] == [
        (n, "skipped", "already converted (ETag marker: not downloaded)")
        for n in ("good0.hf", "good1.hf")
    ]
    # the same bytes uploaded again in one part (another ETag), as another name: by content
    data = s3.get_object(Bucket=b, Key="raw/good0.hf")["Body"].read()
    up = s3.create_multipart_upload(Bucket=b, Key="raw/renamed.hf")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="raw/renamed.hf", UploadId=up, PartNumber=1, Body=data)
    s3.complete_multipart_upload(Bucket=b, Key="raw/renamed.hf", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1,
                                                             "ETag": part["ETag"]}]})  # fmt: skip
    assert run_bucket_batch(opts) == 0
    last = read_ledger(f"s3://{b}/conv")[-1]
    assert (Path(last["input"]).name, last["status"], last["reason"]) == (
        "renamed.hf",
        "skipped",
        "already converted (marker)",
    )


@pytest.mark.slow
@pytest.mark.network
def test_a_converter_killed_mid_upload_leaves_no_final_key_and_the_next_run_finishes(
    s3: Any, endpoint: str, tmp_path: Path
) -> None:
    _upload_inputs(s3, tmp_path, ["slow.hf"], seconds=1.0)
    link = FaultyLink(int(endpoint.rsplit(":", 1)[1]))
    link.rate = 16_000
    cfg = _config_file(tmp_path)
    proc = subprocess.Popen(
        _cli(s3, "--config", cfg, "-q"),
        env=_sub_env(link.url),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        staging = f"PUT /{s3.bucket}/conv/.staging/"
        probe = f"{staging}.probe-"  # the store probe's scratch keys, before any conversion
        while not any(s.startswith(staging) and not s.startswith(probe) for s in link.seen):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, link.seen
            time.sleep(0.05)
        time.sleep(0.3)  # well into the upload of the output
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        link.close()
    keys = _keys(s3)
    assert "conv/slow.hf" not in keys
    assert not [k for k in keys if k.startswith("conv/.markers/")]
    assert [k for k in keys if k.startswith("conv/.leases/")]  # the dead converter's claim
    _wait_for_leases(s3)
    b = s3.bucket
    opts = BucketOptions(
        out=f"s3://{b}/conv", config=parse_config(CONFIG), inbox=f"s3://{b}/raw", quiet=True
    )
    assert run_bucket_batch(opts) == 0
    _verify_output(s3, tmp_path, "slow.hf")
    assert not [k for k in _keys(s3) if "/.staging/" in k or "/.leases/" in k]


@pytest.mark.network
def test_a_worker_dead_after_its_staging_upload_is_swept_then_finished(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _upload_inputs(s3, tmp_path, ["dies.hf"])
    b = s3.bucket
    opts = BucketOptions(
        out=f"s3://{b}/conv", config=parse_config(CONFIG), inbox=f"s3://{b}/raw", quiet=True
    )
    monkeypatch.setenv(BUCKET_FAULT_ENV, "exit-after-staging:dies.hf")
    assert run_bucket_batch(opts) == 1  # the worker died twice: a system failure
    keys = _keys(s3)
    assert [k for k in keys if k.startswith("conv/.staging/")]
    assert "conv/dies.hf" not in keys and "raw/dies.hf" in keys  # not the input's fault
    assert not [k for k in keys if k.startswith("conv/.leases/")]  # released: the task is dead
    monkeypatch.delenv(BUCKET_FAULT_ENV)
    _wait_for_leases(s3)
    assert run_bucket_batch(opts) == 0
    _verify_output(s3, tmp_path, "dies.hf")
    assert not [k for k in _keys(s3) if "/.staging/" in k or "/.leases/" in k]


@pytest.mark.slow
@pytest.mark.network
def test_two_converters_on_one_inbox_convert_each_input_once(
    s3: Any, endpoint: str, tmp_path: Path
) -> None:
    names = [f"in{i}.hf" for i in range(4)]
    _upload_inputs(s3, tmp_path, names, seconds=0.4)
    cfg = _config_file(tmp_path)
    procs = [
        subprocess.Popen(
            _cli(s3, "--config", cfg, "-q"),
            env=_sub_env(endpoint),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    records = read_ledger(f"s3://{s3.bucket}/conv")
    converted = Counter(Path(r["input"]).name for r in records if r["status"] == "converted")
    assert converted == Counter(names)  # each exactly once, between the two
    assert not [r for r in records if "meanwhile" in r.get("reason", "")]  # no work twice
    assert {r["status"] for r in records} <= {"converted", "deferred", "skipped"}
    for name in names:
        _verify_output(s3, tmp_path, name)


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.ray
def test_ray_tasks_read_and_write_the_bucket(s3: Any, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    _upload_inputs(s3, tmp_path, ["r0.hf", "r1.hf"], seconds=0.4)
    b = s3.bucket
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # workers get the env
    try:
        opts = BucketOptions(
            out=f"s3://{b}/conv",
            config=parse_config(CONFIG),
            inbox=f"s3://{b}/raw",
            ray="auto",
            quiet=True,
        )
        assert run_bucket_batch(opts) == 0
    finally:
        ray.shutdown()
    records = read_ledger(f"s3://{b}/conv")
    assert sorted((Path(r["input"]).name, r["status"]) for r in records) == [
        ("r0.hf", "converted"),
        ("r1.hf", "converted"),
    ]
    assert all(r["engine"] == "auto" and r["pid"] != os.getpid() for r in records)
    for name in ("r0.hf", "r1.hf"):
        _verify_output(s3, tmp_path, name)


@pytest.mark.network
def test_watch_converts_objects_as_they_arrive_and_stops_on_sigterm(
    s3: Any, endpoint: str, tmp_path: Path
) -> None:
    cfg = _config_file(tmp_path)
    proc = subprocess.Popen(
        _cli(s3, "--config", cfg, "--watch", "-q"),
        env=_sub_env(endpoint),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # watching an empty inbox
        _upload_inputs(s3, tmp_path, ["late.hf"], seconds=0.4)
        deadline = time.monotonic() + 120
        while not any(k.startswith("conv/.markers/") for k in _keys(s3)):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    _verify_output(s3, tmp_path, "late.hf")


@pytest.mark.network
def test_a_missing_bucket_is_one_line_naming_it(endpoint: str, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "hyperframes.cli", "convert", "--inbox", "s3://no-such-bkt/raw",
           "--out", "s3://no-such-bkt/conv", "--config", _config_file(tmp_path), "-q"]  # fmt: skip
    proc = subprocess.run(
        cmd, check=False, env=_sub_env(endpoint), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: s3://no-such-bkt/"), proc.stderr


@pytest.mark.network
@pytest.mark.parametrize("mode", ["multipart", "head"])
def test_final_keys_and_leases_are_never_overwritten(
    s3: Any, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperframes.converter.bucket.store import Bucket, KeyExistsError, LeaseLostError

    monkeypatch.setenv("HYPERFRAMES_S3_FINAL_COPY", mode)
    bucket = Bucket(s3.bucket)
    s3.put_object(Bucket=s3.bucket, Key="conv/.staging/o/a.hf", Body=b"new")
    s3.put_object(Bucket=s3.bucket, Key="conv/a.hf", Body=b"published")
    with pytest.raises(KeyExistsError):
        bucket.copy_if_absent("conv/.staging/o/a.hf", "conv/a.hf")
    etag = bucket.put_json("conv/.leases/a.hf.json", {"owner": "me"}, if_absent=True)
    with pytest.raises(KeyExistsError):
        bucket.put_json("conv/.leases/a.hf.json", {"owner": "you"}, if_absent=True)
    bucket.put_json("conv/.leases/a.hf.json", {"owner": "me", "n": 2}, if_etag=etag)
    with pytest.raises(LeaseLostError):  # a renewal with a stale ETag: taken over
        bucket.put_json("conv/.leases/a.hf.json", {"owner": "me", "n": 3}, if_etag=etag)
    if mode == "multipart":  # the store itself refuses: a key that appeared after the HEAD
        monkeypatch.setattr(bucket, "head", lambda key: None)
        with pytest.raises(KeyExistsError):
            bucket.copy_if_absent("conv/.staging/o/a.hf", "conv/a.hf")
    assert s3.get_object(Bucket=s3.bucket, Key="conv/a.hf")["Body"].read() == b"published"


@pytest.mark.network
def test_named_urls_and_globs_convert_and_a_bad_named_input_stays_put(
    s3: Any, endpoint: str, tmp_path: Path
) -> None:
    _upload_inputs(s3, tmp_path, ["n0.hf"], seconds=0.4)
    s3.put_object(Bucket=s3.bucket, Key="raw/bad.hf", Body=b"not a hyperframe file" * 40)
    b = s3.bucket
    cmd = [sys.executable, "-m", "hyperframes.cli", "convert", f"s3://{b}/raw/*.hf",
           "--out", f"s3://{b}/conv", "--config", _config_file(tmp_path), "-q"]  # fmt: skip
    proc = subprocess.run(
        cmd, check=False, env=_sub_env(endpoint), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    _verify_output(s3, tmp_path, "n0.hf")
    keys = _keys(s3)
    assert "raw/bad.hf" in keys and not [k for k in keys if "failed/" in k]  # named: not moved
    assert "conv/bad.hf" not in keys


@pytest.mark.network
def test_a_bucket_task_reports_its_download_upload_and_re_read(s3: Any, tmp_path: Path) -> None:
    from hyperframes.converter.bucket.leases import acquire
    from hyperframes.converter.bucket.store import Bucket
    from hyperframes.converter.bucket.task import make_bucket_request, run_bucket_task

    _upload_inputs(s3, tmp_path, ["p.hf"], seconds=0.4)
    b = s3.bucket
    size = s3.head_object(Bucket=b, Key="raw/p.hf")["ContentLength"]
    assert acquire(Bucket(b), "conv/.leases/p.hf.json", "t-1", "p.hf", "raw/p.hf", 30) is None
    req = make_bucket_request(f"s3://{b}/raw/p.hf", f"s3://{b}/conv", parse_config(CONFIG),
                              owner="t-1", lease_s=30)  # fmt: skip
    seen: list[tuple[str, int, int]] = []
    outcome = json.loads(run_bucket_task(req, lambda d, t, n, phase="convert": seen.append(
        (phase, d, t))))  # fmt: skip
    assert outcome["status"] == "converted", outcome
    phases = [p for p, _, _ in seen]
    assert phases[0] == "download" and ("download", size, size) in seen
    out = s3.head_object(Bucket=b, Key="conv/p.hf")["ContentLength"]
    assert ("upload", out, out) in seen and ("re-read", out, out) in seen
    assert phases.index("upload") > phases.index("convert") and phases[-1] == "re-read"


def test_batch_display_logs_a_long_transfer_off_a_terminal() -> None:
    import io

    from hyperframes.converter.progress import BatchDisplay

    buf = io.StringIO()
    display = BatchDisplay(stream=buf)
    display.log_every_s = 0.0
    with display:
        display.started("s3://b/raw/x.hf")
        display.progress("s3://b/raw/x.hf", 4_000_000, 10_000_000, 4_000_000, "download")
        display.progress("s3://b/raw/x.hf", 10_000_000, 10_000_000, 10_000_000, "download")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("download x.hf: 4.0 of 10.0 MB (40%), ")
