"""Batch conversion: inbox, markers, failed/, ledger, kill -9 and re-run, --watch.

Real spawn processes and real files; the batch runs as `hyperframes convert`
in a subprocess where a signal is part of the test.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperframes.converter.batch.ledger import ledger_records
from hyperframes.converter.config import ConvertConfig, load_config
from hyperframes.converter.directory.inbox import BatchOptions, run_batch, scan_inbox
from hyperframes.converter.errors import BusyError
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file

from convert_fixtures import write_archive

pytest.importorskip("av")

CONFIG = """\
video: {x265_preset: ultrafast}
batch: {settle_s: 0, stale_tmp_s: 0, poll_s: 0.2, workers: 2}
"""


def cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "hyperframes.cli", "convert", *map(str, args)]


def config(tmp_path: Path, text: str = CONFIG) -> Path:
    p = tmp_path / "convert.yaml"
    p.write_text(text)
    return p


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def converted(out: Path) -> list[str]:
    ledger = out / "ledger.jsonl"
    records = ledger_records(ledger) if ledger.exists() else []
    return [Path(r["input"]).name for r in records if r["status"] == "converted"]


def wait_for(cond: object, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.05)


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    d = tmp_path / "inbox"
    d.mkdir()
    for i in range(2):
        write_archive(d / f"good{i}.hf", 0.6, seed=i, late=False, quarantined=False)
    (d / "corrupt.hf").write_bytes(b"not a hyperframe file at all" * 40)
    write_archive(tmp_path / "cut.hf", 0.3, late=False, quarantined=False)
    (tmp_path / "cut.hf").rename(d / "cut.hf.tmp")
    return d


def test_bad_inputs_move_aside_the_rest_converts_and_a_rerun_skips_all(
    tmp_path: Path, inbox: Path
) -> None:
    out = tmp_path / "out"
    cfg = load_config(config(tmp_path))
    status = run_batch(BatchOptions(out=out, config=cfg, inbox=inbox, quiet=True))
    assert status == 1  # some input failed
    assert files(out) == [".convert.lock", ".markers", "good0.hf", "good1.hf", "ledger.jsonl"]
    assert files(inbox) == ["failed", "good0.hf", "good1.hf"]  # inputs stay where they are
    assert files(inbox / "failed") == [
        "corrupt.hf",
        "corrupt.hf.reason.json",
        "cut.hf.tmp",
        "cut.hf.tmp.reason.json",
    ]
    reason = json.loads((inbox / "failed" / "corrupt.hf.reason.json").read_text())
    assert reason["fault"] == "input" and "corrupt.hf" in reason["reason"]
    assert (
        "not finalized"
        in json.loads((inbox / "failed" / "cut.hf.tmp.reason.json").read_text())["reason"]
    )
    for name in ("good0.hf", "good1.hf"):
        assert verify_file(out / name).ok
    first = ledger_records(out / "ledger.jsonl")
    assert sorted(r["status"] for r in first) == ["converted", "converted", "failed", "failed"]

    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.hf")}
    shutil.copy(inbox / "good0.hf", inbox / "same-bytes-new-name.hf")  # known by content
    status = run_batch(BatchOptions(out=out, config=cfg, inbox=inbox, quiet=True))
    assert status == 0
    second = ledger_records(out / "ledger.jsonl")[len(first) :]
    assert [r["status"] for r in second] == ["skipped"] * 3
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.hf")} == mtimes
    assert not (out / "same-bytes-new-name.hf").exists()

    # another config (a different marker key) converts again, into another directory
    other = tmp_path / "out-k1"
    cfg_k1 = cfg.with_overrides(keep=["lidar"])
    assert (
        run_batch(BatchOptions(out=other, config=cfg_k1, inputs=(inbox / "good1.hf",), quiet=True))
        == 0
    )
    assert [r["status"] for r in ledger_records(other / "ledger.jsonl")] == ["converted"]


def test_named_inputs_are_never_moved(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hf"
    bad.write_bytes(b"\0" * 1000)
    status = run_batch(
        BatchOptions(
            out=tmp_path / "out", config=load_config(config(tmp_path)), inputs=(bad,), quiet=True
        )
    )
    assert status == 1 and bad.exists()
    (rec,) = ledger_records(tmp_path / "out" / "ledger.jsonl")
    assert rec["status"] == "failed" and "moved_to" not in rec


def test_recent_files_are_deferred_not_touched(tmp_path: Path) -> None:
    d = tmp_path / "inbox"
    d.mkdir()
    write_archive(d / "fresh.hf", 0.3, late=False, quarantined=False)
    (d / "upload.hf.tmp").write_bytes(b"half an upload")
    entries = scan_inbox(d, settle_s=60, stale_tmp_s=3600, now=time.time())
    assert [(e.path.name, e.action) for e in entries] == [
        ("fresh.hf", "defer"),
        ("upload.hf.tmp", "defer"),
    ]
    cfg = ConvertConfig().with_overrides(encoder="x265")
    assert run_batch(BatchOptions(out=tmp_path / "out", config=cfg, inbox=d, quiet=True)) == 0
    assert files(d) == ["fresh.hf", "upload.hf.tmp"]
    assert [r["status"] for r in ledger_records(tmp_path / "out" / "ledger.jsonl")] == [
        "deferred",
        "deferred",
    ]


def test_one_batch_per_output_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    src = write_archive(tmp_path / "x.hf", 0.2, late=False, quarantined=False)
    fd = os.open(out / ".convert.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running batch holds it
    try:
        with pytest.raises(BusyError, match="another `hyperframes convert` is using"):
            run_batch(BatchOptions(out=out, config=ConvertConfig(), inputs=(src,)))
    finally:
        os.close(fd)
    assert files(out) == [".convert.lock"]


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        kids += [int(k) for k in text]
    return kids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_kill_9_mid_batch_then_rerun_completes_without_duplicates(tmp_path: Path) -> None:
    d = tmp_path / "inbox"
    d.mkdir()
    for i in range(3):
        write_archive(d / f"r{i}.hf", 1.5, cameras=2, width=192, height=128, seed=i)
    out = tmp_path / "out"
    cfg = config(tmp_path, CONFIG.replace("workers: 2", "workers: 1"))
    proc = subprocess.Popen(
        cli("--inbox", d, "--out", out, "--config", cfg, "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # wait until one archive is published and the next one is being written
        wait_for(
            lambda: len(list(out.glob("*.hf"))) >= 1 and any((out / ".staging").rglob("*.tmp"))
        )
        kids = children(proc.pid)
        assert kids
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not any(alive(k) for k in kids), timeout=10)  # PR_SET_PDEATHSIG
    # the cut conversion left its staging behind (a .tmp, or a finalized file not yet verified)
    assert [p for p in (out / ".staging").rglob("*") if p.is_file() and p.name != ".lock"]
    published = {p.name for p in out.glob("*.hf")}

    r = subprocess.run(
        cli("--inbox", d, "--out", out, "--config", cfg, "-q"),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.glob("*.hf")) == ["r0.hf", "r1.hf", "r2.hf"]
    assert not (out / ".staging").exists() and not list(out.rglob("*.tmp"))
    assert len(list((out / ".markers").glob("*.json"))) == 3
    records = ledger_records(out / "ledger.jsonl")
    statuses = {Path(r["input"]).name: r["status"] for r in records}
    assert all(statuses[n] == "skipped" for n in published)
    assert sum(r["status"] == "converted" for r in records) == 3  # each input exactly once
    for name in ("r0.hf", "r1.hf", "r2.hf"):
        assert verify_file(out / name).ok
        with HyperframeReader(out / name) as o, HyperframeReader(d / name) as s:
            assert o.frame_count == s.frame_count


@pytest.mark.slow
def test_watch_converts_arrivals_and_stops_on_sigterm(tmp_path: Path) -> None:
    d = tmp_path / "inbox"
    d.mkdir()
    out = tmp_path / "out"
    cfg = config(
        tmp_path,
        CONFIG.replace("settle_s: 0", "settle_s: 0.5").replace(
            "stale_tmp_s: 0", "stale_tmp_s: 3600"
        ),
    )
    proc = subprocess.Popen(
        cli("--inbox", d, "--out", out, "--config", cfg, "--watch", "-q"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        write_archive(tmp_path / "a.hf", 0.4, late=False, quarantined=False)
        (tmp_path / "a.hf").rename(d / "a.hf")  # an upload that lands whole
        (d / "b.hf.tmp").write_bytes(b"an upload still in progress")
        wait_for(lambda: converted(out) == ["a.hf"])
        write_archive(d / "c.hf.tmp", 0.4, late=False, quarantined=False, seed=3)
        (d / "c.hf.tmp").rename(d / "c.hf")  # the upload is renamed when complete
        wait_for(lambda: converted(out) == ["a.hf", "c.hf"])
        assert (d / "b.hf.tmp").exists()  # never touched: not stale yet
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    records = ledger_records(out / "ledger.jsonl")
    assert [(Path(r["input"]).name, r["status"]) for r in records] == [
        ("a.hf", "converted"),
        ("c.hf", "converted"),
    ]


def test_an_output_whose_marker_was_lost_is_adopted_not_redone(tmp_path: Path) -> None:
    """The window between publishing an output and writing its marker (kill -9 there)."""
    from hyperframes.converter.directory.task import MARKERS_DIR, process_input

    src = write_archive(tmp_path / "m.hf", 0.4, late=False, quarantined=False)
    out = tmp_path / "out"
    cfg = load_config(config(tmp_path))
    assert process_input(src, out, cfg)["status"] == "converted"
    (marker,) = (out / MARKERS_DIR).iterdir()
    marker.unlink()
    before = (out / "m.hf").stat().st_mtime_ns
    again = process_input(src, out, cfg)
    assert again["status"] == "skipped" and "marker written" in again["reason"]
    assert marker.exists() and (out / "m.hf").stat().st_mtime_ns == before
    # an output of another input under that name is not adopted, and not replaced
    (tmp_path / "other").mkdir()
    other = write_archive(tmp_path / "other" / "m.hf", 0.4, seed=5, late=False)
    failed = process_input(other, out, cfg)
    assert failed["status"] == "failed" and failed["fault"] == "converter"
    assert "not a conversion of this input" in failed["reason"]
