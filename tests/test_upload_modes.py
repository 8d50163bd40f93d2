"""Upload classes and modes (issue 38): clips, then requested files, then segments; with
``upload.mode: events`` the segments stay on the vehicle and only clips, requested files
and the segments' catalog rows go up; the costs of each class in the status line and the
metrics.

The recording is the real recorder's (three 1 s segments, three events), as in
tests/test_clips.py; clips are cut by the real clipper, requests written and answered by
the real request store (recorder/upload/request_store.py), the bucket is moto's server.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import shutil
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from s3_stores import S3Store, store_params

from hyperframes.errors import ConfigError
from hyperframes.recorder.config import VehicleConfig, parse_config
from hyperframes.recorder.daemon import Recorder
from hyperframes.recorder.segments import list_segments
from hyperframes.recorder.upload.clipper import list_clips
from hyperframes.recorder.upload.marks import MarkStore, uploaded_names
from hyperframes.recorder.upload.plan import Candidate, candidate_key, clip_key, order
from hyperframes.recorder.upload.request_doc import new_request_id, request_doc
from hyperframes.recorder.upload.request_store import RequestStore
from hyperframes.recorder.upload.service import UploadService
from hyperframes.recorder.upload.stats import UploadStats, collect
from hyperframes.verify import verify_file

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import MS, T0, config_dict, free_port, run, traffic, wait_for
from test_events_daemon import endpoint, publish

VEHICLE = "testcar"
S = 1_000_000_000
UTC = dt.UTC


# --- pure: order and keys ----------------------------------------------------------------


def _c(name: str, kind: str, minute: int, seq: int = 0, key: str | None = None) -> Candidate:
    t = dt.datetime(2026, 12, 2, 10, minute, tzinfo=UTC)
    return Candidate(name, "v", t, seq, 100, kind=kind, key=key)


def test_order_is_clips_then_requested_then_segments_oldest_first() -> None:
    cands = [
        _c("s_old.hf", "segment", 1),
        _c("s_hot.hf", "segment", 9),  # protected: first among segments, still after the rest
        _c("s_new.hf", "segment", 5),
        _c(".requests/b/x.hf", "requested", 7, key="req/x.hf"),
        _c(".requests/a/y.hf", "requested", 2, key="req/y.hf"),
        _c("clips/late.hf", "clip", 8),
        _c("clips/early.hf", "clip", 3),
        _c("s_glob_incident.hf", "segment", 6),
    ]
    got = [c.name for c in order(list(reversed(cands)), {"s_hot.hf"}, "*incident*")]
    assert got == [
        "clips/early.hf",
        "clips/late.hf",
        ".requests/a/y.hf",
        ".requests/b/x.hf",
        "s_glob_incident.hf",
        "s_hot.hf",
        "s_old.hf",
        "s_new.hf",
    ]
    # a clip or a request that matches the glob or a protected name gains nothing over its class
    assert order([_c("s.hf", "segment", 0), _c("clips/s.hf", "clip", 9)], {"s.hf"})[0].kind == (
        "clip"
    )
    with pytest.raises(ValueError, match="not one of"):
        _c("x", "video", 0)


def test_keys_of_each_class() -> None:
    seg = _c("veh_20261202T101500Z_000001.hf", "segment", 15)
    assert candidate_key("raw/", seg) == "raw/v/2026-12-02/veh_20261202T101500Z_000001.hf"
    assert clip_key("raw", "v", "clips/v_20261202T101500.123Z_brake.hf") == (
        "raw/v/clips/v_20261202T101500.123Z_brake.hf"
    )
    assert clip_key("", "v", "c.hf") == "v/clips/c.hf"
    assert candidate_key("raw", _c(".requests/a/y.hf", "requested", 0, key="req/y.hf")) == (
        "req/y.hf"
    )


# --- config ------------------------------------------------------------------------------


def _vehicle(out: Path, upload: dict[str, Any], **events: Any) -> VehicleConfig:
    ev = {"control_socket": str(out.parent / "control.sock"), **events}
    return parse_config(config_dict(out, free_port(), segment_seconds=1, events=ev,
                                    upload=upload))  # fmt: skip


def test_mode_and_requests_are_validated_by_key(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", str(tmp_path / "dest")
    assert _vehicle(out, {"dest": dest}).upload.mode == "all"  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as err:
        _vehicle(out, {"dest": dest, "mode": "events"})
    assert err.value.key == "upload.mode"
    assert "upload.mode events needs upload.catalog: the depot's only view" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _vehicle(out, {"dest": dest, "mode": "event"})
    assert err.value.key == "upload.mode" and "events" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _vehicle(out, {"dest": dest, "requests_interval_s": 5})
    assert err.value.key == "upload.requests_interval_s" and "upload.requests" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _vehicle(out, {"dest": dest, "requests": "gs://b/r"})
    assert err.value.key == "upload.requests" and "unsupported scheme" in str(err.value)
    conf = {"dest": dest, "mode": "events", "catalog": str(tmp_path / "cat"),
            "requests": str(tmp_path / "req"), "requests_interval_s": 5}  # fmt: skip
    up = _vehicle(out, conf).upload
    assert up is not None and (up.mode, up.requests_interval_s) == ("events", 5.0)


# --- marks by relative path; the upgrade ---------------------------------------------------


def test_marks_by_relative_path_and_marks_of_old_keep_counting(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    marks = MarkStore(out)
    marks.mark_uploaded("veh_20261202T101500Z_000001.hf", {"url": "old"})  # as before classes
    marks.mark_path("clips/veh_20261202T101500.123Z_brake.hf", {"url": "c"})
    marks.mark_path(".requests/r1/r1_seg.hf", {"url": "r"})
    assert marks.uploaded_paths() == {
        "veh_20261202T101500Z_000001.hf",
        "clips/veh_20261202T101500.123Z_brake.hf",
        ".requests/r1/r1_seg.hf",
    }
    assert uploaded_names(out) == {"veh_20261202T101500Z_000001.hf"}  # the disk policy's view
    assert marks.uploaded_path("veh_20261202T101500Z_000001.hf") == {"url": "old"}
    assert (out / ".uploaded/clips/veh_20261202T101500.123Z_brake.hf.json").is_file()
    for bad in ("../x.hf", "clips/../../x", "/abs", "clips//x", "clips/.hidden"):
        with pytest.raises(ValueError, match="relative"):
            marks.mark_path(bad, {})


# --- a real recording ----------------------------------------------------------------------

HB = T0 + 1500 * MS
BM = T0 + 1900 * MS
PH = T0 + 500 * MS


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seconds of cam, lidar and IMU in 1 s segments, with three events."""
    tmp = tmp_path_factory.mktemp("modes")
    cfg = parse_config(config_dict(tmp / "out", free_port(), segment_seconds=1,
                                   events={"control_socket": str(tmp / "c.sock")}))  # fmt: skip
    frames = traffic(3.0, ("imu", "lidar", "cam"))
    events = [
        (PH, "pothole", {"pre_s": 0.1, "post_s": 0.1}),
        (HB, "hard_brake", {"pre_s": 0.2, "post_s": 0.3}),
        (BM, "bookmark", {"pre_s": 0.3, "post_s": 0.4}),
    ]

    async def main() -> None:
        async with Recorder(cfg) as rec:
            ep = await endpoint(rec)
            await asyncio.to_thread(publish, ep, frames, events)
            await wait_for(lambda: rec.stats.frames == len(frames) and rec.stats.events.total == 3)

    run(main())
    assert len(list_segments(tmp / "out", VEHICLE)) >= 3
    return tmp / "out"


@pytest.fixture
def out(recording: Path, tmp_path: Path) -> Path:
    """A copy of the recording this test may change."""
    return Path(shutil.copytree(recording, tmp_path / "out"))


def _segments(out: Path) -> list[Path]:
    return list_segments(out, VEHICLE)


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _catalog_rows(root: Path) -> list[tuple[str, str]]:
    import hyperframes.catalog as catalog

    con = catalog.open(str(root))
    try:
        return sorted(con.execute("SELECT name, uri FROM segments").fetchall())
    finally:
        con.close()


def _uploaded_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """``clip NAME`` / ``request FILE`` / ``segment NAME`` in the order they went up."""
    got = []
    for r in caplog.records:
        msg = r.getMessage()
        if msg.startswith("uploaded "):
            name = msg.split()[1]
            got.append(("clip " if name.startswith("clips/") else "segment ") + name)
        elif msg.startswith("request ") and ": uploaded " in msg:
            got.append("request " + msg.split(": uploaded ")[1].split()[0])
    return got


def test_events_mode_sends_clips_and_catalog_rows_never_a_segment(
    out: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dest, cat = tmp_path / "depot", tmp_path / "catalog"
    dest.mkdir()
    cfg = _vehicle(out, {"dest": str(dest), "mode": "events", "catalog": str(cat)}, clips=True)
    svc = UploadService(cfg, cfg.upload)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "hyperframes.recorder.upload")
    assert svc.run_once() == 0, svc.stats.last_error
    clips = list_clips(cfg)
    assert len(clips) == 3
    sent = _files(dest)
    assert sent == {f"{VEHICLE}/clips/{c.name}": c.stat().st_size for c in clips}
    for c in clips:
        assert verify_file(dest / VEHICLE / "clips" / c.name).ok
    assert [ln.split()[0] for ln in _uploaded_lines(caplog)] == ["clip"] * 3
    segs = _segments(out)
    rows = _catalog_rows(cat)
    # every segment's rows, under the URL it would have: not there until requested
    assert rows == sorted((p.name, str(dest / VEHICLE / "2025-01-01" / p.name)) for p in segs)
    assert not any(Path(uri).exists() for _, uri in rows)
    st = svc.stats
    assert (st.cataloged_segments, st.catalog_waiting, st.catalog_failures) == (len(segs), 0, 0)
    assert (st.kept_segments, st.kept_bytes) == (len(segs), sum(p.stat().st_size for p in segs))
    clip_stats = st.classes["clip"]
    assert (clip_stats.uploaded_files, clip_stats.waiting_files) == (3, 0)
    assert clip_stats.uploaded_bytes == sum(c.stat().st_size for c in clips)
    assert st.classes["segment"].uploaded_files == 0
    line = st.status_line()
    assert "\n" not in line and "clips 0 waiting (0.0 MB), 3 up (" in line
    assert f"kept on the vehicle {len(segs)} (" in line
    # once per segment: a second pass sends nothing, a new service neither (marks)
    assert svc.run_once() == 0 and svc.stats.cataloged_segments == len(segs)
    again = UploadService(cfg, cfg.upload)  # type: ignore[arg-type]
    assert again.run_once() == 0 and again.stats.cataloged_segments == 0
    assert again.stats.uploaded_segments == 0 and _catalog_rows(cat) == rows


def test_events_mode_a_failing_catalog_is_counted_and_retried(out: Path, tmp_path: Path) -> None:
    dest, not_a_dir = tmp_path / "depot", tmp_path / "file"
    dest.mkdir()
    not_a_dir.write_text("x")
    cfg = _vehicle(out, {"dest": str(dest), "mode": "events", "catalog": str(not_a_dir)})
    t = [0.0]
    svc = UploadService(cfg, cfg.upload, clock=lambda: t[0])  # type: ignore[arg-type]
    assert svc.run_once() == 2  # two in a row end the catalog's pass (the root is the same)
    assert svc.stats.catalog_failures == 2 and svc.stats.cataloged_segments == 0
    assert "2 not cataloged" in svc.stats.status_line() and not MarkStore(out).cataloged_names()
    not_a_dir.unlink()  # the catalog comes back; the failed ones wait on their own backoff
    t[0] += cfg.upload.retry_max_s  # type: ignore[union-attr]
    assert svc.run_once() == 0
    assert svc.stats.cataloged_segments == len(_segments(out)) == len(_catalog_rows(not_a_dir))
    assert not _files(dest)  # nothing but catalog rows: no clips configured, no segment


def test_all_mode_sends_clips_first_and_old_marks_still_count(
    out: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dest = tmp_path / "depot"
    dest.mkdir()
    segs = _segments(out)
    MarkStore(out).mark_uploaded(segs[0].name, {"url": "before classes", "size": 1})
    cfg = _vehicle(out, {"dest": str(dest)}, clips=True)
    svc = UploadService(cfg, cfg.upload)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "hyperframes.recorder.upload")
    assert svc.run_once() == 0, svc.stats.last_error
    got = _uploaded_lines(caplog)
    assert [g.split()[0] for g in got] == ["clip"] * 3 + ["segment"] * (len(segs) - 1)
    assert segs[0].name not in " ".join(got)  # the old mark counts: not sent again
    assert not (dest / VEHICLE / "2025-01-01" / segs[0].name).exists()
    assert all((dest / VEHICLE / "2025-01-01" / p.name).exists() for p in segs[1:])
    st = svc.stats
    assert st.classes["clip"].uploaded_files == 3
    assert st.classes["segment"].uploaded_files == len(segs) - 1
    assert st.uploaded_segments == 3 + len(segs) - 1 and st.backlog_segments == 0
    assert MarkStore(out).uploaded_paths() >= {f"clips/{c.name}" for c in list_clips(cfg)}


def test_bytes_uploaded_in_events_mode_against_all(out: Path, tmp_path: Path) -> None:
    """The measurement of the issue on a small recording (bench/bench_upload_modes.py has the
    number for a mark a minute): events sends the clips and the rows, all every segment."""
    other = Path(shutil.copytree(out, tmp_path / "out2"))
    sent = {}
    for mode, where in (("all", out), ("events", other)):
        dest, cat = tmp_path / f"depot-{mode}", tmp_path / f"cat-{mode}"
        dest.mkdir()
        conf: dict[str, Any] = {"dest": str(dest), "mode": mode}
        if mode == "events":
            conf["catalog"] = str(cat)
        cfg = _vehicle(where, conf, clips=True)
        svc = UploadService(cfg, cfg.upload)  # type: ignore[arg-type]
        assert svc.run_once() == 0
        sent[mode] = (sum(_files(dest).values()), sum(_files(cat).values()) if cat.exists() else 0)
        assert svc.stats.sent_bytes == sent[mode][0]
    segs = sum(p.stat().st_size for p in _segments(out))
    clips = sum(c.stat().st_size for c in list_clips(_vehicle(other, {"dest": "/x"}, clips=True)))
    assert sent["all"][0] == segs + clips
    assert sent["events"][0] == clips
    # the events cover 1.4 s of 3 s here; the rows are a few KB per segment
    assert sent["events"][0] < 0.75 * sent["all"][0], sent
    assert 0 < sent["events"][1] < 64_000 * len(_segments(out)), sent


# --- requests and the bucket ---------------------------------------------------------------


def _request(store: RequestStore, dest: str, lo_s: float, hi_s: float) -> str:
    now = dt.datetime.now(UTC)
    rid = new_request_id(now, random.Random())
    lo, hi = T0 + round(lo_s * S), T0 + round(hi_s * S)
    doc = request_doc(id=rid, vehicle=VEHICLE, start_ns=lo, end_ns=hi, dest=dest, created_at=now)
    store.write_request(doc)
    return rid


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_events_mode_on_a_bucket_clips_then_requested_then_nothing_else(
    s3_store: S3Store,
    out: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    cat = tmp_path / "catalog"
    conf = {"dest": s3_store.url("raw"), "endpoint_url": s3_store.endpoint_url,
            "mode": "events", "catalog": str(cat),
            "requests": s3_store.url("requests")}  # fmt: skip
    cfg = _vehicle(out, conf, clips=True)
    svc = UploadService(cfg, cfg.upload)  # type: ignore[arg-type]
    store = RequestStore(s3_store.url("requests"), client=s3_store.client())
    rid = _request(store, s3_store.url("asked"), 0.5, 1.5)
    caplog.set_level(logging.INFO, "hyperframes.recorder.upload")
    assert svc.run_once() == 0, svc.stats.last_error
    got = _uploaded_lines(caplog)
    kinds = [g.split()[0] for g in got]
    assert kinds[:3] == ["clip"] * 3 and set(kinds[3:]) == {"request"} and len(kinds) > 3
    c = s3_store.client()
    keys = {o["Key"]: o["Size"] for o in c.list_objects_v2(Bucket=s3_store.bucket)["Contents"]}
    clips = list_clips(cfg)
    assert {f"raw/{VEHICLE}/clips/{p.name}" for p in clips} <= set(keys)
    asked = {k for k in keys if k.startswith("asked/")}
    segs = {p.name for p in _segments(out)}
    assert not any(k.rsplit("/", 1)[-1] in segs for k in keys)  # no full segment went up
    result = store.result(VEHICLE, rid)
    assert result is not None and result["status"] == "delivered", result
    assert {d["key"] for d in result["delivered"]} == asked
    req = svc.stats.classes["requested"]
    assert req.uploaded_files == len(asked) and req.waiting_files == 0
    assert req.uploaded_bytes == sum(keys[k] for k in asked)
    assert svc.stats.requests_answered == 1
    assert len(_catalog_rows(cat)) == len(segs)
    assert "requested 0 waiting (0.0 MB), " in svc.stats.status_line()
    # the next pass: the request is answered, nothing goes twice
    before = svc.stats.sent_bytes
    svc.requests.poll_now()  # due now (the cadence itself is C's next_poll, tested there)
    assert svc.run_once() == 0 and svc.stats.sent_bytes == before


# --- metrics -------------------------------------------------------------------------------


def test_per_class_costs_in_the_status_line_and_the_metrics() -> None:
    from hyperframes.recorder.metrics import start_prometheus_exporter

    stats = UploadStats()
    stats.classes["clip"].waiting_files, stats.classes["clip"].waiting_bytes = 2, 3_000_000
    stats.classes["clip"].delivered(1_000_000, 2.0)
    stats.classes["requested"].delivered(4_000_000, 1.0)
    stats.classes["requested"].delivered(4_000_000, None)  # adopted: no rate sample
    stats.kept_segments, stats.kept_bytes = 7, 70_000_000
    line = stats.status_line()
    assert "clips 2 waiting (3.0 MB), 1 up (1.0 MB, 0.5 MB/s)" in line
    assert "requested 0 waiting (0.0 MB), 2 up (8.0 MB, 4.0 MB/s)" in line
    assert "segments" not in line and "kept on the vehicle 7 (70.0 MB)" in line
    assert "\n" not in line
    fams = {f.name: f for f in collect(stats)}
    waiting = {s.labels["class"]: s.value for s in fams["hyperframes_upload_waiting_files"].samples}
    assert waiting == {"clip": 2, "requested": 0, "segment": 0}
    with start_prometheus_exporter(stats, 0, collect=collect) as exp:
        text = urllib.request.urlopen(exp.url, timeout=10).read().decode()
    for want in (
        'hyperframes_upload_waiting_bytes{class="clip"} 3e+06',
        'hyperframes_upload_class_files_total{class="requested"} 2.0',
        'hyperframes_upload_class_bytes_total{class="clip"} 1e+06',
        'hyperframes_upload_delivered_bytes_per_second{class="requested"} 4e+06',
        'hyperframes_upload_delivered_bytes_per_second{class="segment"} 0.0',
        "hyperframes_upload_kept_segments 7.0",
    ):
        assert want in text, want


def test_requests_are_polled_on_their_cadence_and_at_once_on_a_new_connection(
    out: Path, tmp_path: Path
) -> None:
    dest, reqs, flag = tmp_path / "depot", tmp_path / "requests", tmp_path / "link-up"
    dest.mkdir()
    conf = {"dest": str(dest), "mode": "events", "catalog": str(tmp_path / "cat"),
            "requests": str(reqs), "requests_interval_s": 3600,
            "when": ["test", "-e", str(flag)]}  # fmt: skip
    cfg = _vehicle(out, conf)
    t = [0.0]
    svc = UploadService(cfg, cfg.upload, clock=lambda: t[0])  # type: ignore[arg-type]
    store = RequestStore(str(reqs))
    flag.touch()
    assert svc.run_once() == 0  # polled (nothing there): the next poll is an hour away
    flag.unlink()
    rid = _request(store, str(dest / "asked"), 0.2, 0.8)
    assert svc.run_once() == 0 and store.result(VEHICLE, rid) is None  # no link: not polled
    flag.touch()
    assert svc.run_once() == 0  # the link came back: polled at once, not in an hour
    result = store.result(VEHICLE, rid)
    assert result is not None and result["status"] == "delivered", result
    assert all((dest / d["key"]).is_file() for d in result["delivered"])
    later = _request(store, str(dest / "asked"), 1.0, 1.2)
    t[0] += 60  # within the hour's cadence: not polled again
    assert svc.run_once() == 0 and store.result(VEHICLE, later) is None
    t[0] += 2 * 3600
    assert svc.run_once() == 0 and store.result(VEHICLE, later) is not None
    assert svc.stats.requests_answered == 2 and svc.stats.request_failures == 0


def test_a_broken_request_store_is_counted_never_raised(out: Path, tmp_path: Path) -> None:
    dest, not_a_dir = tmp_path / "depot", tmp_path / "requests"
    dest.mkdir()
    not_a_dir.write_text("a file where the requests should be")
    cfg = _vehicle(out, {"dest": str(dest), "requests": str(not_a_dir)})
    t = [0.0]
    svc = UploadService(cfg, cfg.upload, clock=lambda: t[0])  # type: ignore[arg-type]
    assert svc.run_once() == 0  # the segments still go
    segs = svc.stats.classes["segment"].uploaded_files
    assert svc.stats.request_failures == 1 and segs == len(_segments(out))
    assert "1 request failures" in svc.stats.status_line()
    assert svc.run_once() == 0 and svc.stats.request_failures == 1  # backed off, not hammered
