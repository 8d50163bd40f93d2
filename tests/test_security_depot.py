"""Issue 41, the depot's side: bucket keys, objects and segments from a peer that can put any.

Against moto's real S3 server on loopback (tests/s3_server.py), real files, and a real
second uid (``nobody``) where the attack needs one:

- odd keys under the inbox prefix (a ``..`` or ``.`` segment, ``//``, NUL) are listed as
  ignored, counted, and never stop the inputs beside them, once or in ``--watch``;
- a large object that is no hyperframe file is refused after its header, not downloaded;
- an entry of the output directory the uploader cannot open waits on its own backoff;
- ``cached_path`` trusts no copy it cannot prove, follows no link, uses no shared directory;
- credentials in an endpoint URL and the session token reach no log line and no error.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_convert_bucket import (  # noqa: F401 - fixtures and helpers
    CONFIG,
    _cli,
    _config_file,
    _env,
    _keys,
    _sub_env,
    endpoint,
    s3,
)
from test_security import group_writable_dir, needs_root, plant_link

from hyperframes.storage.local import UnsafePathError

from convert_fixtures import write_archive

pytestmark = pytest.mark.network

VEHICLE = "veh1"
# Keys obstore's paths refuse; S3 (and moto) store them. moto takes NUL too (boto3 sends it
# percent-encoded and lists it back url-encoded); only a newline it answers 404 to.
ODD_KEYS = ("raw/a/../b.hf", "raw/./c.hf", "raw//d.hf", "raw/e\x00.hf", "raw/x/..")


def _upload_input(client: Any, tmp: Path, name: str) -> None:
    p = write_archive(tmp / Path(name).name, 0.4, seed=1, late=False, quarantined=False)
    client.upload_file(str(p), client.bucket, f"raw/{name}")


def _until(done: Any, proc: subprocess.Popen[str], seconds: float) -> None:
    """Wait until ``done()`` while ``proc`` runs (its stderr in the failure)."""
    deadline = time.monotonic() + seconds
    while not done():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"not done within {seconds} s"
        time.sleep(0.2)


def _options(client: Any) -> Any:
    from hyperframes.converter.bucket.inbox import BucketOptions
    from hyperframes.converter.config import parse_config

    b = client.bucket
    return BucketOptions(
        out=f"s3://{b}/conv", config=parse_config(CONFIG), inbox=f"s3://{b}/raw", quiet=True
    )


# --- 1. one odd key no longer stops the bucket converter's inbox ----------------------------


def test_odd_keys_are_listed_as_ignored_counted_and_the_inputs_beside_them_convert(
    s3: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from hyperframes.converter.bucket.inbox import run_bucket_batch
    from hyperframes.converter.bucket.ledger import read_ledger
    from hyperframes.converter.progress import BatchDisplay

    _upload_input(s3, tmp_path, "veh1/2026-12-02/good.hf")
    for key in ODD_KEYS:
        s3.put_object(Bucket=s3.bucket, Key=key, Body=b"HFRM" + b"\0" * 600)
    s3.put_object(Bucket=s3.bucket, Key="raw/veh2/", Body=b"")  # a console's folder: no input
    assert set(ODD_KEYS) <= set(_keys(s3, "raw/"))  # the store took every one of them
    out = io.StringIO()
    assert run_bucket_batch(_options(s3), display=BatchDisplay(quiet=True, stream=out)) == 0
    records = read_ledger(f"s3://{s3.bucket}/conv")
    done = {r["input"].rpartition("/raw/")[2]: r for r in records}
    assert done["veh1/2026-12-02/good.hf"]["status"] == "converted"
    ignored = [r for r in records if r["status"] == "ignored"]
    assert len(ignored) == len(ODD_KEYS)
    for r in ignored:  # named printably (no NUL in a ledger line or a terminal), with why
        assert "\x00" not in r["input"] and "left in place" in r["reason"]
    assert {r["input"].rpartition("/raw/")[2] for r in ignored} == {
        "a/../b.hf", "./c.hf", "/d.hf", "e\\x00.hf", "x/.."}  # fmt: skip
    why = {r["input"].rpartition("/raw/")[2]: r["reason"] for r in ignored}
    assert "'..' segment" in why["a/../b.hf"] and "'.' segment" in why["./c.hf"]
    assert "empty segment" in why["/d.hf"] and "control character" in why["e\\x00.hf"]
    assert f"{len(ODD_KEYS)} key(s) under s3://{s3.bucket}/raw" in out.getvalue()
    assert set(ODD_KEYS) <= set(_keys(s3, "raw/"))  # left where they are, untouched
    assert "conv/veh1/2026-12-02/good.hf" in _keys(s3, "conv/")


def test_watch_reports_an_odd_key_once_and_goes_on_converting(
    s3: Any,  # noqa: F811
    endpoint: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    from hyperframes.converter.bucket.ledger import read_ledger

    s3.put_object(Bucket=s3.bucket, Key="raw/../escape.hf", Body=b"x" * 10)
    s3.put_object(Bucket=s3.bucket, Key="raw/e\x00.hf", Body=b"x" * 10)
    b = s3.bucket
    proc = subprocess.Popen(_cli(s3, "--config", _config_file(tmp_path), "--watch", "-q"),
                            env=_sub_env(endpoint), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(0.5)
        _upload_input(s3, tmp_path, "late.hf")
        _until(lambda: "conv/late.hf" in _keys(s3, "conv/"), proc, 40.0)
        time.sleep(1.0)  # five more scans
    finally:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "scan failed" not in err, err
    records = read_ledger(f"s3://{b}/conv")
    ignored = sorted(r["input"] for r in records if r["status"] == "ignored")
    assert ignored == [f"s3://{b}/raw/../escape.hf", f"s3://{b}/raw/e\\x00.hf"]  # once each


def test_a_named_odd_key_fails_alone(
    s3: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from hyperframes.converter.bucket.inbox import BucketOptions, run_bucket_batch
    from hyperframes.converter.config import parse_config

    _upload_input(s3, tmp_path, "n.hf")
    s3.put_object(Bucket=s3.bucket, Key="raw/o\x00.hf", Body=b"x")
    b = s3.bucket
    opts = BucketOptions(out=f"s3://{b}/conv", config=parse_config(CONFIG),
                         inputs=(f"s3://{b}/raw/*.hf",), quiet=True)  # fmt: skip
    assert run_bucket_batch(opts) == 1  # the odd one failed; the other converted
    assert "conv/n.hf" in _keys(s3, "conv/")


# --- 2. a large object that is no hyperframe file is refused after its header ---------------


class _CountingRelay:
    """A loopback TCP relay to ``port`` that counts the bytes the server sends back."""

    def __init__(self, port: int) -> None:
        self.port_to = port
        self.down = 0
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._sock.accept()
                up = socket.create_connection(("127.0.0.1", self.port_to))
                threading.Thread(target=self._pipe, args=(conn, up, False), daemon=True).start()
                threading.Thread(target=self._pipe, args=(up, conn, True), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket, count: bool) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(1 << 16):
                if count:
                    with self._lock:
                        self.down += len(data)
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._sock.close()


def test_a_64_mib_object_that_is_no_hyperframe_file_is_set_aside_unread(
    s3: Any,  # noqa: F811
    endpoint: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hyperframes.converter.bucket.inbox import run_bucket_batch
    from hyperframes.converter.bucket.ledger import read_ledger

    junk = random.Random(7).randbytes(64 << 20)
    s3.put_object(Bucket=s3.bucket, Key="raw/junk.hf", Body=junk)
    s3.put_object(Bucket=s3.bucket, Key="raw/tiny.hf", Body=b"HFRM")
    relay = _CountingRelay(int(endpoint.rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", relay.url)  # the batch and its workers
    try:
        assert run_bucket_batch(_options(s3)) == 1
    finally:
        relay.close()
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    print(f"bytes from the store for a 64 MiB junk object and a 4-byte one: {relay.down}")
    assert relay.down < 1 << 20, f"{relay.down} bytes came back for a 64 MiB object"
    b = s3.bucket
    keys = _keys(s3)
    assert "raw/junk.hf" not in keys and "raw/failed/junk.hf" in keys  # set aside
    records = {Path(r["input"]).name: r for r in read_ledger(f"s3://{b}/conv")}
    for name in ("junk.hf", "tiny.hf"):
        r = records[name]
        assert (r["status"], r["fault"]) == ("failed", "input"), r
        assert r["reason"].startswith(f"s3://{b}/raw/{name}: ") and "not downloaded" in r[
            "reason"]  # fmt: skip
        assert r["error"]["error"] == "InputError" and r["error"]["rule"] == "header"
    assert "bad magic" in records["junk.hf"]["reason"]
    assert "shorter than the header" in records["tiny.hf"]["reason"]


# --- 3. an entry the uploader cannot open ------------------------------------------------


def _vehicle(out: Path, upload: dict[str, Any]) -> Any:
    from hyperframes.recorder.config import parse_config

    return parse_config({"vehicle_id": VEHICLE, "output_dir": str(out),
                         "zmq": {"endpoint": "tcp://127.0.0.1:5999"},
                         "streams": [{"id": 0, "name": "imu", "kind": "imu",
                                      "encoding": "imu-f64", "topic": "imu"}],
                         "upload": upload})  # fmt: skip


def _segment_name(seq: int) -> str:
    return f"{VEHICLE}_20261202T0{seq}0000Z_{seq:06d}.hf"


def test_entry_backoff_is_per_entry_jittered_and_capped() -> None:
    from hyperframes.recorder.upload.plan import EntryBackoff

    rng = random.Random(3)
    eb = EntryBackoff(base_s=10.0, cap_s=60.0)
    delays = [eb.failed("a", 0.0, rng) for _ in range(8)]
    assert 5.0 <= delays[0] <= 10.0 and all(30.0 <= d <= 60.0 for d in delays[3:])
    assert len({round(d, 6) for d in delays[3:]}) > 1  # jittered, not in lockstep
    assert eb.waiting("a", delays[-1] - 0.1) and not eb.waiting("a", delays[-1] + 0.1)
    assert not eb.waiting("b", 0.0) and len(eb) == 1
    eb.keep({"b"})  # a gone entry is forgotten
    assert len(eb) == 0
    eb.failed("a", 0.0, rng)
    eb.ok("a")
    assert not eb.waiting("a", 0.0)


@needs_root
def test_a_segment_the_uploader_cannot_open_waits_alone_and_the_rest_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A group member plants a link named like the next segment in a group-writable output
    directory (as an older recorder made it under ``UMask=0007``). The uploader opens with
    ``O_NOFOLLOW`` (even as root: ``ELOOP``), so this entry is one it cannot open whatever
    its uid; a segment of another uid with mode 0600 fails the same ``open`` with ``EACCES``.
    """
    from hyperframes.recorder.upload.service import UploadService

    out = group_writable_dir(tmp_path / "out")
    dest = tmp_path / "nfs"
    dest.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"secret" * 100)
    for seq in (0, 2, 3):
        (out / _segment_name(seq)).write_bytes(random.Random(seq).randbytes(50_000))
    plant_link(out, _segment_name(1), victim)
    cfg = _vehicle(out, {"dest": str(dest), "scan_interval_s": 0.2})
    svc = UploadService(cfg, cfg.upload)
    caplog.set_level(logging.INFO, "hyperframes.recorder.upload")
    assert svc.run_once() == 1
    day = dest / VEHICLE / "2026-12-02"
    assert sorted(p.name for p in day.iterdir()) == [_segment_name(s) for s in (0, 2, 3)]
    assert svc.stats.uploaded_segments == 3 and svc.stats.failures["unreadable"] == 1
    assert svc.stats.unreadable_segments == 1 and "1 unreadable" in svc.stats.status_line()
    assert svc.next_delay() == cfg.upload.scan_interval_s  # no pass-wide backoff for it
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and _segment_name(1) in warned[0] and "link" in warned[0]
    for _ in range(3):  # passes within its backoff: not tried again, not logged again
        assert svc.run_once() == 0
    assert svc.stats.failures["unreadable"] == 1
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    time.sleep(0.25)  # the first backoff is at most scan_interval_s
    assert svc.run_once() == 1 and svc.stats.failures["unreadable"] == 2
    assert victim.read_bytes() == b"secret" * 100
    (out / _segment_name(1)).unlink()  # the link goes: the entry is forgotten
    assert svc.run_once() == 0 and svc.stats.unreadable_segments == 0


# --- 4. cached_path ---------------------------------------------------------------------


@pytest.fixture
def fleet(
    s3: Any,  # noqa: F811
    tmp_path: Path,
) -> tuple[str, bytes]:
    from hyperframes.synth import profile, write_synthetic

    local = tmp_path / "demo.hf"
    write_synthetic(str(local), profile("demo"), 0.5, seed=3)
    s3.upload_file(str(local), s3.bucket, "drive/a.hf")
    return f"s3://{s3.bucket}/drive/a.hf", local.read_bytes()


def _private(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def test_a_cached_copy_changed_on_disk_is_fetched_again(
    fleet: tuple[str, bytes], tmp_path: Path
) -> None:
    from hyperframes.storage.cache import cached_path

    url, data = fleet
    cache = _private(tmp_path / "cache")
    p = cached_path(url, cache)
    assert p.read_bytes() == data
    time.sleep(0.05)  # later than the download, as a change on disk comes
    p.chmod(0o600)
    with p.open("r+b") as f:  # the same size, other bytes
        f.seek(1000)
        f.write(b"\xff" * 64)
    assert p.stat().st_size == len(data)
    assert cached_path(url, cache).read_bytes() == data
    fresh = p.stat()
    assert cached_path(url, cache).stat().st_ino == fresh.st_ino  # proved: not fetched again


def test_a_link_at_the_cached_name_is_never_followed(
    fleet: tuple[str, bytes], tmp_path: Path
) -> None:
    from hyperframes.storage.cache import cached_path

    url, data = fleet
    cache = _private(tmp_path / "cache")
    name = cached_path(url, cache).name  # the predictable name
    victim = tmp_path / "victim"
    victim.write_bytes(b"v" * len(data))  # the same size: the old check took it
    (cache / name).unlink()
    (cache / name).symlink_to(victim)
    p = cached_path(url, cache)
    assert not p.is_symlink() and p.read_bytes() == data
    assert victim.read_bytes() == b"v" * len(data)


@needs_root
def test_a_cache_directory_another_user_made_or_may_write_is_refused(
    fleet: tuple[str, bytes], tmp_path: Path
) -> None:
    from hyperframes.storage.cache import cached_path

    url, data = fleet
    name = cached_path(url, _private(tmp_path / "mine")).name
    shared = tmp_path / "shared"  # /tmp/hf-cache as another user made it first
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, 65534, 65534)
    victim = tmp_path / "victim"
    victim.write_bytes(b"v" * len(data))
    plant_link(shared, name, victim)
    with pytest.raises(UnsafePathError) as err:
        cached_path(url, shared)
    msg = str(err.value)
    assert str(shared) in msg and "uid 65534" in msg and "writable by no one else" in msg
    assert victim.read_bytes() == b"v" * len(data)
    open_dir = _private(tmp_path / "open")
    open_dir.chmod(0o777)  # ours, but anyone may plant in it
    with pytest.raises(UnsafePathError, match=r"writable by group and others \(mode 777\)"):
        cached_path(url, open_dir)


def test_cached_path_refuses_an_object_without_the_magic_before_downloading_it(
    s3: Any,  # noqa: F811
    fleet: tuple[str, bytes],
    tmp_path: Path,
) -> None:
    from hyperframes.format.layout import MAGIC
    from hyperframes.storage.cache import cached_path
    from hyperframes.storage.objects import UnexpectedObjectError

    url, data = fleet
    s3.put_object(Bucket=s3.bucket, Key="drive/junk.hf", Body=b"PK\3\4" + b"\0" * (4 << 20))
    cache = _private(tmp_path / "cache")
    with pytest.raises(UnexpectedObjectError) as err:
        cached_path(f"s3://{s3.bucket}/drive/junk.hf", cache, magic=MAGIC)
    assert err.value.url == f"s3://{s3.bucket}/drive/junk.hf" and "not downloaded" in str(err.value)
    assert not list(cache.iterdir())
    assert cached_path(url, cache, magic=MAGIC).read_bytes() == data


# --- 5. credentials in endpoint URLs and the session token --------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_credentials_in_an_endpoint_url_reach_no_warning_and_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import EndpointConnectionError

    from hyperframes.converter.bucket.store import Bucket
    from hyperframes.recorder.config import ConfigError
    from hyperframes.recorder.upload.s3 import _classify
    from hyperframes.recorder.upload.service import UploadService
    from hyperframes.storage.objects import classify_error, fail, redact_credentials

    assert redact_credentials("to http://me:pw@h:9/b and https://tok@h/") == (
        "to http://***@h:9/b and https://***@h/")  # fmt: skip
    assert redact_credentials("s3://b/k?X-Amz-Security-Token=abc&x=1") == (
        "s3://b/k?X-Amz-Security-Token=***&x=1")  # fmt: skip
    for k, v in _env("").items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    url = f"http://depot:hunter2pw@127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    out.mkdir()
    (out / _segment_name(0)).write_bytes(b"x" * 1000)
    cfg = _vehicle(out, {"dest": "s3://fleet/raw", "endpoint_url": url})
    svc = UploadService(cfg, cfg.upload)
    caplog.set_level(logging.DEBUG)
    assert svc.run_once() == 1  # the store cannot be reached: a warning, with the endpoint
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "upload of" in text and "127.0.0.1" in text and "hunter2pw" not in text
    assert "hunter2pw" not in (svc.stats.last_error or "") and "***@127.0.0.1" in text
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="a", aws_secret_access_key="b",
                          config=Config(retries={"max_attempts": 1}))  # fmt: skip
    with pytest.raises(EndpointConnectionError) as dead:  # the real error of a dead link
        client.head_object(Bucket="fleet", Key="k")
    exc = dead.value
    said_all = [
        classify_error(exc).message,
        str(_classify(exc, "x")),
        str(fail("s3://fleet/k", exc)),
        str(Bucket("fleet")._fail("k", exc)),
    ]
    for said in said_all:
        assert "127.0.0.1" in said and "hunter2pw" not in said, said
    with pytest.raises(ConfigError) as err:
        _vehicle(out, {"dest": "s3://fleet", "endpoint_url": "depot:hunter2pw@minio:9000"})
    assert "hunter2pw" not in str(err.value) and "minio:9000" in str(err.value)


def test_debug_logging_never_shows_the_session_token(
    s3: Any,  # noqa: F811
    endpoint: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``hyperframes upload --log-level debug``: botocore's DEBUG records carry every request's
    headers (``X-Amz-Security-Token``) and the endpoint with its credentials."""
    out = tmp_path / "out"
    out.mkdir()
    (out / _segment_name(0)).write_bytes(b"x" * 1000)
    with_creds = endpoint.replace("http://", "http://depot:hunter2pw@")
    yaml = tmp_path / "vehicle.yaml"
    yaml.write_text(json.dumps({"vehicle_id": VEHICLE, "output_dir": str(out),
                                "zmq": {"endpoint": "tcp://127.0.0.1:5999"},
                                "streams": [{"id": 0, "name": "imu", "kind": "imu",
                                             "encoding": "imu-f64", "topic": "imu"}],
                                "upload": {"dest": f"s3://{s3.bucket}/raw",
                                           "endpoint_url": with_creds}}))  # fmt: skip
    env = {**os.environ, **_env(endpoint), "AWS_SESSION_TOKEN": "TOKEN-s3cr3t-42",
           "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "hyperframes.cli", "upload", "--config", str(yaml), "--once",
         "--log-level", "DEBUG"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "uploaded " in proc.stderr and "DEBUG" in proc.stderr  # debug logging was on
    assert "TOKEN-s3cr3t-42" not in proc.stderr and "hunter2pw" not in proc.stderr
    assert f"raw/{VEHICLE}/2026-12-02/{_segment_name(0)}" in _keys(s3, "raw/")
