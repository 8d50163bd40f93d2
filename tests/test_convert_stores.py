"""The bucket converter on real S3 servers (moto, rclone serve s3, Ceph RGW): it probes the
store before converting anything, then publishes every input, or stops at once with one line
that names the setting to use (issue 36, items 3, 5, 6 and 7).

Each test runs once per store through the ``s3_store`` fixture (tests/s3_stores.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from s3_stores import S3Store

from hyperframes.converter.bucket.keys import Layout
from hyperframes.converter.bucket.probe import StoreModeError, store_modes
from hyperframes.converter.bucket.store import Bucket, StoreModes
from hyperframes.verify import verify_file

from convert_fixtures import write_archive

pytest.importorskip("av")
pytest.importorskip("obstore")

CONFIG = {
    "video": {"x265_preset": "ultrafast"},
    "batch": {"poll_s": 0.2, "workers": 2, "lease_s": 8},
}
NAMES = ("s0.hf", "s1.hf")
SETTING = "HYPERFRAMES_S3_FINAL_COPY"
#: What the probe picks on each store, as measured (None: it stops the batch unless set).
PICKS = {
    "moto": StoreModes("multipart", "conditional", "quoted", "quoted"),
    "ceph": StoreModes("multipart", "conditional", "bare", "quoted"),  # RGW 16: no quoted If-Match
    "rclone": None,  # ignores every condition: HYPERFRAMES_S3_FINAL_COPY=head, one converter
}
HEAD_PICKS = {  # with HYPERFRAMES_S3_FINAL_COPY=head
    "moto": StoreModes("head", "conditional", "quoted", "quoted"),
    "ceph": StoreModes("head", "conditional", "bare", "quoted"),
    "rclone": StoreModes("head", "head", "quoted", "quoted"),
}


@pytest.fixture
def store_env(s3_store: S3Store, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    """The environment points at the store, for in-process clients."""
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv(SETTING, raising=False)
    return s3_store


def _keys(store: S3Store, prefix: str = "") -> list[str]:
    got = store.client().list_objects_v2(Bucket=store.bucket, Prefix=prefix)
    return sorted(o["Key"] for o in got.get("Contents", []))


def _upload_inputs(store: S3Store, tmp: Path) -> None:
    client = store.client()
    for i, name in enumerate(NAMES):
        p = write_archive(tmp / name, 0.4, seed=i, late=False, quarantined=False)
        client.upload_file(str(p), store.bucket, f"raw/{name}")


def _convert(store: S3Store, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp / "convert.yaml"
    cfg.write_text(json.dumps(CONFIG))
    full = {k: v for k, v in os.environ.items() if k != SETTING}
    full.update(store.env(), PYTHONPATH=os.pathsep.join(sys.path), **env)
    cmd = [sys.executable, "-m", "hyperframes.cli", "convert", "--inbox", store.url("raw"),
           "--out", store.url("conv"), "--config", str(cfg), "-q"]  # fmt: skip
    return subprocess.run(cmd, check=False, env=full, capture_output=True, text=True, timeout=180)


def _ledger(store: S3Store) -> list[dict[str, Any]]:
    client = store.client()
    return [
        json.loads(client.get_object(Bucket=store.bucket, Key=k)["Body"].read())
        for k in _keys(store, "conv/ledger/")
    ]


def _check_published(store: S3Store) -> None:
    """Every input converted once, its output read back and verified, nothing left over."""
    records = _ledger(store)
    assert sorted((Path(r["input"]).name, r["status"]) for r in records) == [
        (n, "converted") for n in NAMES
    ], records
    for name in NAMES:  # read back from the bucket by the reader (ranged GETs)
        assert verify_file(store.url(f"conv/{name}")).ok, name
    left = [k for k in _keys(store, "conv/") if "/.staging/" in k or "/.leases/" in k]
    assert not left


def test_the_probe_picks_each_stores_modes_and_cleans_up(
    store_env: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_env
    layout = Layout("conv", "raw")
    bucket = Bucket(store.bucket)
    want = PICKS[store.name]
    t0 = time.monotonic()
    if want is None:
        with pytest.raises(StoreModeError, match=f"set {SETTING}=head to convert with one "):
            store_modes(bucket, layout, "t1")
    else:
        assert store_modes(bucket, layout, "t1") == want
    seconds = time.monotonic() - t0
    monkeypatch.setenv(SETTING, "head")
    assert store_modes(bucket, layout, "t2") == HEAD_PICKS[store.name]
    if store.name == "rclone":  # an explicit mode the probe shows broken: refused, named
        monkeypatch.setenv(SETTING, "multipart")
        with pytest.raises(StoreModeError, match=f"{SETTING}=head"):
            store_modes(bucket, layout, "t3")
    assert _keys(store) == []  # every scratch key deleted
    print(f"{store.name}: probe {seconds:.2f} s")


def test_convert_publishes_every_input_or_stops_first_naming_the_setting(
    store_env: S3Store, tmp_path: Path
) -> None:
    s3_store = store_env
    _upload_inputs(s3_store, tmp_path)
    proc = _convert(s3_store, tmp_path)
    if PICKS[s3_store.name] is None:  # rclone: one line, nothing converted, nothing left
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"set {SETTING}=head" in lines[0], proc.stderr
        assert "UploadPartCopy" not in lines[0] and "411" not in lines[0]
        assert _keys(s3_store, "conv/") == []  # no output, lease, staging key or record
        assert _keys(s3_store, "raw/") == [f"raw/{n}" for n in NAMES]
        proc = _convert(s3_store, tmp_path, **{SETTING: "head"})
    assert proc.returncode == 0, proc.stderr
    _check_published(s3_store)
    assert "renewal" not in proc.stderr and "lost" not in proc.stderr  # Ceph: its ETag form


def test_a_run_whose_own_leases_are_refused_fails_and_leaves_no_lease(
    s3_store: S3Store, tmp_path: Path
) -> None:
    # Ceph RGW 16 refuses If-Match with the quoted ETag it returned (issue 36, item 6: the
    # converter converted nothing, exited 0 blaming "another converter" and left its leases);
    # elsewhere a stale ETag makes the store refuse every renewal the same way
    fault = "if-match:quoted" if s3_store.name == "ceph" else "if-match:stale"
    env = {"HYPERFRAMES_BUCKET_FAULT": fault}
    if PICKS[s3_store.name] is None:
        env[SETTING] = "head"
    _upload_inputs(s3_store, tmp_path)
    proc = _convert(s3_store, tmp_path, **env)
    assert proc.returncode == 1, proc.stderr
    records = _ledger(s3_store)
    assert sorted((Path(r["input"]).name, r["status"], r["fault"]) for r in records) == [
        (n, "failed", "converter") for n in NAMES
    ], records
    for r in records:
        assert "own renewal" in r["reason"] and "another converter" not in r["reason"], r
    keys = _keys(s3_store)
    assert not [k for k in keys if "/.leases/" in k or "/.staging/" in k]  # released
    assert [k for k in keys if k.startswith("raw/")] == [f"raw/{n}" for n in NAMES]
    assert not [k for k in keys if k.startswith("conv/s")]  # nothing published


def test_choose_modes_for_stores_that_were_not_measured() -> None:
    from dataclasses import replace

    from hyperframes.converter.bucket.probe import Findings, choose_modes

    where = "s3://b/conv"
    good = Findings(create_refused=True, put_form="bare", stale_refused=True, get_form="quoted")
    no_copy = replace(good, copy_problem="made an object of 0 bytes from 7")
    with pytest.raises(StoreModeError) as err:  # the default publish, caught before converting
        choose_modes(no_copy, None, where)
    assert f"{SETTING}=multipart (the default) does not work" in str(err.value)
    assert f"set {SETTING}=head" in str(err.value) and "..." not in str(err.value)
    with pytest.raises(StoreModeError, match=f"{SETTING}=header:x-a:b does not work"):
        choose_modes(no_copy, "header:x-a:b", where)
    modes, warnings = choose_modes(good, "head", where)
    assert (modes.publish, modes.leases, modes.etag_put, warnings) == (
        "head", "conditional", "bare", [])  # fmt: skip
    unguarded = replace(good, copy_refused=False)
    modes, warnings = choose_modes(unguarded, None, where)  # Ceph before Squid
    assert modes.publish == "multipart" and "If-None-Match: * on a multipart copy" in warnings[0]
    deaf = Findings(put_form="quoted", get_form="quoted")  # rclone
    with pytest.raises(StoreModeError) as err:
        choose_modes(deaf, None, where)
    assert "..." not in str(err.value) and str(err.value).count(SETTING) == 1
    no_get = replace(good, get_form=None)
    modes, warnings = choose_modes(no_get, None, where)
    assert modes.etag_get is None and "downloads are not conditional" in warnings[0]
