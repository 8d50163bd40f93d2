"""Requests from the depot (docs: recorder/upload/request_doc.py): validation, staging from
real segments, results on real S3 servers (moto, rclone), the whole flow through
``answer_once`` against moto, a kill -9 in the middle, and ``hyperframes request``."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from drive_files import STREAMS, T0, make_run, write_segments
from s3_stores import S3Store, store_params

from hyperframes.drive import open_drive
from hyperframes.events import SegmentSpan, log_line
from hyperframes.format.times import parse_duration
from hyperframes.recorder.config import parse_config
from hyperframes.recorder.upload.config import S3Settings
from hyperframes.recorder.upload.local import LocalDest
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.request_doc import (
    Gap,
    Refusal,
    Request,
    Span,
    dest_key_prefix,
    missing_parts,
    new_request_id,
    next_poll,
    request_doc,
    validate,
)
from hyperframes.recorder.upload.request_stage import REQUESTS_DIR, stage
from hyperframes.recorder.upload.request_store import RequestStore
from hyperframes.recorder.upload.requests import RequestSettings, answer_once

VEHICLE = "car-7"
S = 1_000_000_000
NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
KNOWN = {"cam", "lidar", "imu", "events"}


def _doc(**over: Any) -> dict[str, Any]:
    doc = request_doc(
        id="20261203T120000Z-abc123",
        vehicle=VEHICLE,
        start_ns=T0,
        end_ns=T0 + 60 * S,
        dest="s3://fleet/req",
        created_at=NOW,
    )
    doc.update(over)
    return doc


def _check(raw: Any, **kw: Any) -> Request | Refusal:
    kw.setdefault("dest_root", "s3://fleet")
    return validate(raw, KNOWN, NOW, id="20261203T120000Z-abc123", vehicle=VEHICLE, **kw)


# --- pure --------------------------------------------------------------------------------


def test_a_valid_request() -> None:
    got = _check(json.dumps(_doc(streams=["imu", "cam"], priority=50)).encode())
    assert isinstance(got, Request)
    assert (got.start_ns, got.end_ns, got.streams, got.priority) == (
        T0,
        T0 + 60 * S,
        ("imu", "cam"),
        50,
    )
    assert dest_key_prefix(got.dest, "s3://fleet") == "req"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"x" * 70_000, "over the limit"),
        (_doc(format="other/1"), "format must be"),
        (_doc(extra=1), "unknown field(s): extra"),
        (_doc(id="other"), "is not the object's name"),
        (_doc(vehicle="car-8"), "is not this vehicle"),
        (_doc(start_ns="soon"), "start_ns must be an integer"),
        (_doc(start_ns=-1), "start_ns must be an integer"),
        (_doc(start_ns=T0 + 60 * S), "is not before end_ns"),
        (_doc(end_ns=T0 + 25 * 3600 * S), "over the limit of 24 h"),
        (_doc(streams=["imu", "radar_rear"]), "unknown stream(s) radar_rear"),
        (_doc(streams=[]), "streams must be null or a list"),
        (_doc(streams=["a/b"]), "stream names"),
        (_doc(whole="yes"), "whole must be"),
        (_doc(priority=1000), "priority must be"),
        (_doc(expires_at="tomorrow"), "expires_at must be"),
        (_doc(dest="s3://other-bucket/x"), "not inside this vehicle's destination"),
        (_doc(dest="s3://fleet/a/../../x"), "not inside"),
    ],
)
def test_every_refusal_names_its_reason(raw: Any, words: str) -> None:
    got = _check(raw)
    assert isinstance(got, Refusal) and got.status == "refused", got
    assert words in got.reason, got.reason


def test_expired_and_the_range_bound_from_config() -> None:
    got = _check(_doc(expires_at="2026-12-01T00:00:00Z"))
    assert isinstance(got, Refusal) and got.status == "expired" and "2026-12-01" in got.reason
    assert isinstance(_check(_doc(end_ns=T0 + 2 * 3600 * S), max_range_s=3600), Refusal)
    assert isinstance(_check(_doc(end_ns=T0 + 2 * 3600 * S), max_range_s=3 * 3600), Request)


def test_directory_dest_must_be_under_the_root() -> None:
    assert dest_key_prefix("/depot/req/x", "/depot") == "req/x"
    assert dest_key_prefix("/depot2/x", "/depot") is None
    assert dest_key_prefix("/depot/../etc", "/depot") is None
    assert dest_key_prefix("s3://b/x", "/depot") is None


def test_missing_parts_say_why() -> None:
    spans = [Span("a", 100, 199, False), Span("b", 200, 299, True), Span("c", 400, 499, True)]
    got = missing_parts(0, 600, spans, seam_ns=10)
    assert got == [
        Gap(0, 99, "before-recording"),
        Gap(100, 199, "evicted"),
        Gap(300, 399, "gap"),
        Gap(500, 600, "after-recording"),
    ]
    assert missing_parts(200, 499, [*spans, Span("d", 305, 395, True)], seam_ns=10) == []
    assert missing_parts(5, 9, []) == [Gap(5, 9, "before-recording")]


def test_ids_durations_and_polling() -> None:
    rng = random.Random(3)
    a, b = new_request_id(NOW, rng), new_request_id(NOW + dt.timedelta(seconds=1), rng)
    assert a.startswith("20261203T120000Z-") and a < b
    assert parse_duration("7d") == 7 * 86400 and parse_duration("90") == 90
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")
    calm = [next_poll(0, 0, rng, interval_s=60) for _ in range(200)]
    assert 48 <= min(calm) < max(calm) <= 72  # jittered around the interval
    failing = [next_poll(0, 10, rng, interval_s=60, retry_max_s=900) for _ in range(200)]
    assert max(failing) <= 900 and max(failing) > 450 and min(failing) >= 1


def test_settings_from_an_upload_config() -> None:
    class Up:
        requests = "s3://fleet/requests"
        requests_max_range_s = 3600.0
        part_bytes = 8 << 20

    got = RequestSettings.from_upload(Up())
    assert got == RequestSettings("s3://fleet/requests", 3600.0, 8 << 20)
    assert RequestSettings.from_upload(object()) is None  # upload.requests absent: off


# --- staging from real segments ------------------------------------------------------------


def _cfg(out: Path) -> Any:
    streams = [
        {
            "id": s.id,
            "name": s.name,
            "kind": str(s.kind.name).lower(),
            "encoding": s.encoding,
            "topic": s.name,
        }
        for s in STREAMS
    ]
    return parse_config(
        {
            "vehicle_id": VEHICLE,
            "output_dir": str(out),
            "zmq": {"endpoint": "tcp://127.0.0.1:5999"},
            "streams": streams,
        }
    )


def _recording(out: Path, seconds: int = 30, per_segment: int = 10) -> list[Path]:
    """Real segments of ``seconds`` cut every ``per_segment`` s, their spans in the event log."""
    blocks = make_run(seconds * 10, np.random.default_rng(7))
    cuts = list(range(per_segment * 10, seconds * 10, per_segment * 10))
    paths = write_segments(out, blocks, cuts, vehicle=VEHICLE)
    with (out / "events.jsonl").open("wb") as log:
        for p in paths:
            d = open_drive([p])
            log.write(log_line(SegmentSpan(p.name, d.start_ns, d.end_ns)))
            d.close()
    return paths


def _request(lo: int, hi: int, **over: Any) -> Request:
    doc = _doc(start_ns=lo, end_ns=hi, **over)
    got = validate(doc, KNOWN, NOW, id=doc["id"], vehicle=VEHICLE)
    assert isinstance(got, Request), got
    return got


def _stamps(paths: list[Path], stream: str, lo: int, hi: int) -> list[int]:
    with open_drive(paths) as d:
        ts = d.timestamps(stream)
    return [int(t) for t in ts if lo <= t <= hi]


def test_stage_slices_hold_exactly_the_range(tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = _recording(out)
    lo, hi = T0 + 8 * S, T0 + 14 * S  # across the cut at 10 s
    staged = stage(_request(lo, hi, streams=["imu", "cam"]), _cfg(out))
    assert [f.source for f in staged.files] == [paths[0].name, paths[1].name]
    assert staged.missing == []
    files = [f.path for f in staged.files]
    for f in files:
        assert f.name.startswith("20261203T120000Z-abc123_")
    for stream in ("imu", "cam"):
        assert _stamps(files, stream, 0, 2**63) == _stamps(paths, stream, lo, hi)
    with open_drive(files) as d:
        assert sorted(s.name for s in d.streams.values()) == ["cam", "imu"]


def test_stage_whole_segments_and_missing_parts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = _recording(out)
    kept = paths[1].read_bytes()
    paths[0].unlink()  # evicted: the event log still has its span
    lo, hi = T0 - 5 * S, T0 + 15 * S
    staged = stage(_request(lo, hi, whole=True), _cfg(out))
    assert [f.path.read_bytes() for f in staged.files] == [kept]
    # named ID_SEGMENT like a slice: the multipart state a destination keeps by file name
    # (OUTPUT_DIR/.uploading/NAME.json) never meets the segment's own
    assert [f.name for f in staged.files] == [f"{staged.request.id}_{paths[1].name}"]
    whys = [g.why for g in staged.missing]
    assert whys == ["before-recording", "evicted"], staged.missing
    assert staged.missing[0].start_ns == lo
    # with no event log the vehicle knows only what is on disk: before its first segment
    (out / "events.jsonl").unlink()
    paths[1].unlink()
    staged = stage(_request(T0 + 12 * S, T0 + 25 * S, id="20261203T120000Z-zzz999"), _cfg(out))
    assert [g.why for g in staged.missing] == ["before-recording"]
    assert [f.source for f in staged.files] == [paths[2].name]


def test_a_gap_between_segments_is_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = _recording(out)
    (out / "events.jsonl").unlink()
    paths[1].unlink()  # no log: the time between segment 0 and 2 was never recorded
    staged = stage(_request(T0 + 5 * S, T0 + 25 * S), _cfg(out))
    assert [g.why for g in staged.missing] == ["gap"]
    assert len(staged.files) == 2


def test_restage_after_a_crash_reuses_finished_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _recording(out)
    req, cfg = _request(T0 + 5 * S, T0 + 25 * S), _cfg(out)
    first = stage(req, cfg)
    assert len(first.files) == 3
    a, b = first.files[0].path, first.files[1].path
    inode_a = a.stat().st_ino
    # the crash: the second file was being cut (its .tmp left, not done in the state)
    state_path = first.directory / "state.json"
    state = json.loads(state_path.read_text())
    state["files"][1]["done"] = False
    state_path.write_text(json.dumps(state))
    body_b = b.read_bytes()
    b.unlink()
    junk = first.directory / f".{b.name}.cut.tmp"
    junk.write_bytes(b"half a file")
    again = stage(req, cfg)
    assert [f.name for f in again.files] == [f.name for f in first.files]
    assert a.stat().st_ino == inode_a  # reused
    assert b.read_bytes() == body_b and not junk.exists()  # redone, the .tmp gone


# --- results on real S3 servers ------------------------------------------------------------


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto", "rclone"), indirect=True)
def test_results_on_s3(s3_store: S3Store) -> None:
    store = RequestStore(s3_store.url("requests"), client=s3_store.client())
    doc = _doc()
    where = store.write_request(doc)
    assert where == s3_store.url(f"requests/{VEHICLE}/{doc['id']}.json")
    [item] = store.list(VEHICLE)
    assert (item.id, item.answered) == (doc["id"], False)
    assert json.loads(store.read(VEHICLE, item.id) or b"") == doc
    assert store.write_result(VEHICLE, item.id, {"status": "missing"})
    assert not store.write_result(VEHICLE, item.id, {"status": "delivered"})  # first one stays
    assert store.result(VEHICLE, item.id) == {"status": "missing"}
    assert store.list(VEHICLE)[0].answered and store.vehicles() == [VEHICLE]


# --- the whole flow, against moto ----------------------------------------------------------


def _moto_setup(s3_store: S3Store, out: Path, **doc: Any) -> tuple[Any, Any, Any, RequestStore]:
    from hyperframes.recorder.upload.s3 import S3Dest

    client = s3_store.client()
    client.put_bucket_versioning(
        Bucket=s3_store.bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    dest = S3Dest(s3_store.url("rec"), S3Settings(), MarkStore(out), 5 << 20, client)
    store = RequestStore(s3_store.url("requests"), client=client)
    settings = RequestSettings(s3_store.url("requests"))
    return client, dest, settings, store


def _versions(client: Any, bucket: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            counts[v["Key"]] = counts.get(v["Key"], 0) + 1
    return counts


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_answer_once_end_to_end(s3_store: S3Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = _recording(out, seconds=90, per_segment=30)
    cfg = _cfg(out)
    client, dest, settings, store = _moto_setup(s3_store, out)
    minute = _doc(
        id="20261203T120000Z-minute",
        start_ns=T0 + 10 * S,
        end_ns=T0 + 70 * S,
        dest=s3_store.url("asked/run1"),
    )
    paths[0].unlink()  # evicted, its span in the log
    gone = _doc(
        id="20261203T120001Z-evictd",
        start_ns=T0 + 2 * S,
        end_ns=T0 + 20 * S,
        dest=s3_store.url("asked/run2"),
    )
    for d in (minute, gone):
        store.write_request(d)
    client.put_object(
        Bucket=s3_store.bucket,
        Key=f"requests/{VEHICLE}/20261203T120002Z-broken.json",
        Body=b'{"format": "hyperframes.request/1", ',
    )
    on_disk: list[int] = []

    def count(key: str, mark: dict[str, Any]) -> None:
        on_disk.append(len(list((out / REQUESTS_DIR).glob("*/*.hf"))))

    results = answer_once(cfg, settings, dest, now=lambda: NOW, on_uploaded=count)
    assert on_disk == [1, 1]  # one staged file at a time: cut, uploaded, dropped
    by_id = {r["id"]: r for r in results}
    assert by_id["20261203T120002Z-broken"]["status"] == "refused"
    assert "not valid JSON" in by_id["20261203T120002Z-broken"]["reason"]
    assert by_id["20261203T120001Z-evictd"]["status"] == "missing"
    assert by_id["20261203T120001Z-evictd"]["missing"][0]["why"] == "evicted"
    r = by_id["20261203T120000Z-minute"]
    # segment 0 (0-30 s) was evicted: 10-30 s missing, 30-70 s delivered from segments 1, 2
    assert r["status"] == "partial" and [m["why"] for m in r["missing"]] == ["evicted"]
    assert [d["source"] for d in r["delivered"]] == [paths[1].name, paths[2].name]
    files = []
    for d in r["delivered"]:
        assert d["key"].startswith("asked/run1/20261203T120000Z-minute_")
        body = client.get_object(Bucket=s3_store.bucket, Key=d["key"])["Body"].read()
        assert len(body) == d["bytes"] and d["verified"]
        f = tmp_path / d["key"].rsplit("/", 1)[-1]
        f.write_bytes(body)
        files.append(f)
    assert _stamps(files, "imu", 0, 2**63) == _stamps(paths[1:], "imu", T0 + 10 * S, T0 + 70 * S)
    assert store.result(VEHICLE, "20261203T120000Z-minute") == r
    assert not (out / REQUESTS_DIR / "20261203T120000Z-minute").exists()
    before = _versions(client, s3_store.bucket)
    assert answer_once(cfg, settings, dest, now=lambda: NOW) == []  # answered: nothing twice
    assert _versions(client, s3_store.bucket) == before
    assert all(n == 1 for n in before.values()), before


def test_a_range_still_being_recorded_waits(tmp_path: Path) -> None:
    out, depot = tmp_path / "out", tmp_path / "depot"
    paths = _recording(out)
    depot.mkdir()
    (out / paths[-1].name.replace(".hf", ".hf.tmp").replace("_000002", "_000003")).write_bytes(b"")
    settings = RequestSettings(str(depot / "requests"))
    store = RequestStore(settings.url)
    store.write_request(_doc(start_ns=T0 + 25 * S, end_ns=T0 + 35 * S, dest=str(depot / "x")))
    assert answer_once(_cfg(out), settings, LocalDest(depot), now=lambda: NOW) == []
    for p in out.glob("*.hf.tmp"):
        p.unlink()
    [r] = answer_once(_cfg(out), settings, LocalDest(depot), now=lambda: NOW)
    assert r["status"] == "partial" and r["missing"][0]["why"] == "after-recording"
    assert (depot / "x" / r["delivered"][0]["key"].rsplit("/", 1)[-1]).is_file()


_CHILD = textwrap.dedent(
    """
    import datetime as dt, sys, time
    sys.path.insert(0, {tests!r})
    from test_requests import _cfg, NOW
    from hyperframes.recorder.upload.config import S3Settings
    from hyperframes.recorder.upload.marks import MarkStore
    from hyperframes.recorder.upload.requests import RequestSettings, answer_once
    from hyperframes.recorder.upload.s3 import S3Dest
    from s3_stores import S3Store
    store = S3Store("moto", {endpoint!r}, {key!r}, {secret!r}, bucket={bucket!r})
    out = {out!r}
    client = store.client()
    dest = S3Dest(store.url("rec"), S3Settings(), MarkStore(out), 5 << 20, client)
    def hang(key, mark):
        print("uploaded", key, flush=True)
        if {hang!r}:
            time.sleep(600)
    answer_once(_cfg(out), RequestSettings(store.url("requests")), dest, now=lambda: NOW,
                on_uploaded=hang)
    print("done", flush=True)
    """
)


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_kill_9_while_answering_then_finish_once(s3_store: S3Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _recording(out, seconds=30, per_segment=10)
    client, _dest, _settings, store = _moto_setup(s3_store, out)
    store.write_request(_doc(start_ns=T0 + 2 * S, end_ns=T0 + 28 * S, dest=s3_store.url("asked")))

    def child(hang: bool) -> subprocess.Popen[str]:
        code = _CHILD.format(
            tests=str(Path(__file__).parent),
            endpoint=s3_store.endpoint_url,
            key=s3_store.access_key,
            secret=s3_store.secret_key,
            bucket=s3_store.bucket,
            out=str(out),
            hang=hang,
        )
        return subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parent.parent,
        )

    proc = child(hang=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("uploaded asked/"), line
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert store.result(VEHICLE, _doc()["id"]) is None  # not answered yet
    uploaded_first = line.split()[1]
    t0 = time.monotonic()
    proc = child(hang=False)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and rest.strip().endswith("done"), rest
    assert uploaded_first not in rest  # not sent again
    assert rest.count("uploaded ") == 2, rest
    result = store.result(VEHICLE, _doc()["id"])
    assert result is not None and result["status"] == "delivered"
    assert len(result["delivered"]) == 3
    versions = _versions(client, s3_store.bucket)
    assert all(n == 1 for n in versions.values()), versions  # every object put once
    assert time.monotonic() - t0 < 60


# --- the command ---------------------------------------------------------------------------


def _hf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperframes.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_cli_writes_a_request_and_status_reads_it_back(tmp_path: Path) -> None:
    depot = tmp_path / "depot"
    depot.mkdir()
    reqs = str(depot / "requests")
    done = _hf(
        "request",
        VEHICLE,
        "--start",
        "2026-12-03T11:00:00Z",
        "--end",
        "1796299260",
        "--streams",
        "imu,cam",
        "--priority",
        "20",
        "--dest",
        str(depot / "x"),
        "--requests",
        reqs,
    )
    assert done.returncode == 0, done.stderr
    rid = done.stdout.split()[0]
    doc = json.loads((depot / "requests" / VEHICLE / f"{rid}.json").read_text())
    assert doc["streams"] == ["imu", "cam"] and doc["priority"] == 20
    assert doc["start_ns"] == 1_796_295_600 * S and doc["end_ns"] == 1_796_299_260 * S
    status = _hf("request", "--status", "--requests", reqs)
    assert status.returncode == 0 and rid in status.stdout and "waiting" in status.stdout
    RequestStore(reqs).write_result(
        VEHICLE,
        rid,
        {
            "status": "partial",
            "delivered": [{"bytes": 1234}],
            "missing": [{"start_ns": 0, "end_ns": 2 * S, "why": "evicted"}],
        },
    )
    status = _hf("request", "--status", VEHICLE, "--requests", reqs, "--json")
    [row] = json.loads(status.stdout)
    assert (row["status"], row["delivered_bytes"], row["missing"][0]["why"]) == (
        "partial",
        1234,
        "evicted",
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--start", "2.5", "--end", "1764763260"], "absolute time"),
        (["--start", "1764763260", "--end", "1764763200"], "is not before"),
        (["--start", "yesterday", "--end", "1764763260"], "--start"),
        (["--start", "1764763200", "--end", "1764763260", "--expires", "soon"], "duration"),
    ],
)
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    done = _hf("request", VEHICLE, *args, "--dest", "s3://fleet/x")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
