"""Issue 24: what a group member, a hostile file or a link planted by one can do.

Real files and a real second uid (``nobody``) planting links through a
directory it may write in, as a sensor driver in the recorder's group could.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from hyperframes import StreamInfo
from hyperframes.recorder.leftovers import DAMAGED_DIR, recover_leftovers
from hyperframes.recorder.metrics import RecorderStats
from hyperframes.recorder.segments import list_segments, segment_name
from hyperframes.recover import recover
from hyperframes.storage.local import UnsafePathError, create_new, rename_noreplace, safe_dir
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

MS = 1_000_000
S = 1_000 * MS
STREAMS = [StreamInfo(2, "imu", "imu", "imu-f64", rate_hz=100)]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs root (setuid)")


def plant_link(directory: Path, name: str, target: Path) -> None:
    """``ln -s TARGET DIRECTORY/NAME`` run as ``nobody`` through an open directory fd.

    The fd spares ``nobody`` the search permission on the test's private
    parents; it still needs write permission on ``directory`` itself.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        subprocess.run(
            ["ln", "-s", os.fspath(target), f"/proc/self/fd/{fd}/{name}"],
            pass_fds=[fd], user="nobody", group="nogroup", check=True, capture_output=True,
        )  # fmt: skip
    finally:
        os.close(fd)
    assert (directory / name).is_symlink()


def group_writable_dir(path: Path) -> Path:
    """A directory as an older recorder made it under ``UMask=0007``: group ``nogroup``, 0770."""
    path.mkdir()
    os.chown(path, 0, 65534)
    path.chmod(0o770)
    return path


def crashed_segment(out: Path, seq: int, t0: int, frames: int = 40) -> Path:
    w = HyperframeWriter(out / segment_name("testcar", t0, seq), STREAMS, 50 * MS)
    for i in range(frames):
        w.append(2, t0 + i * 10 * MS + 1, np.full(6, i, "<f8").tobytes())
    w.abort()
    return w.tmp_path


def finished_segment(out: Path, seq: int, t0: int) -> Path:
    tmp = crashed_segment(out, seq, t0)
    final = tmp.with_name(tmp.name.removesuffix(".tmp"))
    report = recover(tmp, final)
    tmp.unlink()
    return report.output


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- item 1: nothing created or written follows a link ----------------------------------


@needs_root
def test_a_group_members_tail_link_does_not_cut_a_finished_segment(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o750)
    t0 = time.time_ns() - 3600 * S
    victim = finished_segment(out, 0, t0)
    before = sha(victim)
    cut = crashed_segment(out, 1, t0 + 10 * S)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) - 100])  # a torn tail after kill -9
    damaged = group_writable_dir(out / DAMAGED_DIR)
    plant_link(damaged, cut.name + ".tail", victim)

    outcomes = recover_leftovers([cut], RecorderStats())

    assert [o.result for o in outcomes] == ["recovered"]
    assert sha(victim) == before and verify_file(victim).ok
    assert (damaged / (cut.name + ".tail")).is_symlink()  # left as it was, not followed
    assert (damaged / (cut.name + ".tail.1")).stat().st_size > 0  # the tail went beside it
    assert stat.S_IMODE(damaged.stat().st_mode) & 0o022 == 0  # no longer group-writable
    assert [p.name for p in list_segments(out, "testcar")] == [
        victim.name,
        cut.name.removesuffix(".tmp"),
    ]


@needs_root
def test_a_leftover_moved_aside_goes_next_to_a_planted_link_not_through_it(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o750)
    t0 = time.time_ns() - 3600 * S
    victim = finished_segment(out, 0, t0)
    before = sha(victim)
    junk = out / (segment_name("testcar", t0 + 10 * S, 1) + ".tmp")
    junk.write_bytes(b"\0" * 700)
    damaged = group_writable_dir(out / DAMAGED_DIR)
    plant_link(damaged, junk.name, victim)
    plant_link(damaged, junk.name + ".reason.txt", victim)

    assert [o.result for o in recover_leftovers([junk], RecorderStats())] == ["damaged"]
    assert sha(victim) == before
    assert (damaged / (junk.name + ".1")).read_bytes() == b"\0" * 700
    assert "cannot recover" in (damaged / (junk.name + ".1.reason.txt")).read_text()


def test_a_symlinked_damaged_dir_is_refused_and_the_leftover_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / DAMAGED_DIR).symlink_to(elsewhere)
    junk = out / (segment_name("testcar", time.time_ns(), 1) + ".tmp")
    junk.write_bytes(b"\0" * 700)
    assert [o.result for o in recover_leftovers([junk], RecorderStats())] == ["kept"]
    assert junk.exists() and list(elsewhere.iterdir()) == []


def test_a_symlinked_tmp_is_not_finished_through(tmp_path: Path) -> None:
    t0 = time.time_ns() - 3600 * S
    victim = finished_segment(tmp_path, 0, t0)
    before = sha(victim)
    link = tmp_path / (segment_name("testcar", t0 + 10 * S, 1) + ".tmp")
    link.symlink_to(victim)
    outcomes = recover_leftovers([link], RecorderStats())
    assert [o.result for o in outcomes] == ["damaged"]
    assert "symbolic link" in outcomes[0].detail
    assert sha(victim) == before


def test_recover_does_not_write_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    t0 = time.time_ns() - 3600 * S
    victim = finished_segment(tmp_path, 0, t0)
    before = sha(victim)
    src = crashed_segment(tmp_path, 1, t0 + 10 * S)
    out = tmp_path / "rescued.hf"
    (tmp_path / "rescued.hf.recovering.tmp").symlink_to(victim)
    recover(src, out)
    assert sha(victim) == before and verify_file(out).ok


def test_the_writer_never_replaces_a_file_that_appears_at_its_final_name(tmp_path: Path) -> None:
    t0 = time.time_ns()
    w = HyperframeWriter(tmp_path / "seg.hf", STREAMS, 50 * MS)
    w.append(2, t0, np.zeros(6, "<f8").tobytes())
    (tmp_path / "seg.hf").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        w.finalize()
    assert (tmp_path / "seg.hf").read_bytes() == b"someone else's"
    assert verify_file(w.tmp_path).ok  # finished, kept under its .tmp name


def test_the_shared_primitives(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "absent")
    with pytest.raises(FileExistsError):
        create_new(tmp_path / "link")  # not even a dangling link is followed
    assert not (tmp_path / "absent").exists()
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    with pytest.raises(FileExistsError):
        rename_noreplace(tmp_path / "a", tmp_path / "b")
    with pytest.raises(FileExistsError):
        rename_noreplace(tmp_path / "a", tmp_path / "link")
    assert (tmp_path / "b").read_bytes() == b"b" and (tmp_path / "link").is_symlink()
    rename_noreplace(tmp_path / "a", tmp_path / "c")
    assert (tmp_path / "c").read_bytes() == b"a" and not (tmp_path / "a").exists()
    (tmp_path / "dlink").symlink_to(tmp_path)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safe_dir(tmp_path / "dlink")
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    safe_dir(tmp_path / "open", private=True)
    assert stat.S_IMODE((tmp_path / "open").stat().st_mode) == 0o755


# --- item 5: the converter's inbox -------------------------------------------------------

CONVERT_YAML = """\
video: {x265_preset: ultrafast}
batch: {settle_s: 0, stale_tmp_s: 0, poll_s: 0.2, workers: 1}
"""


def batch(tmp_path: Path, inbox: Path, **kw: object) -> tuple[int, list[dict[str, object]]]:
    from hyperframes.converter.batch.ledger import ledger_records
    from hyperframes.converter.config import load_config
    from hyperframes.converter.directory.inbox import BatchOptions, run_batch

    (tmp_path / "convert.yaml").write_text(CONVERT_YAML)
    cfg = load_config(tmp_path / "convert.yaml")
    out = tmp_path / "out"
    opts = BatchOptions(out=out, config=cfg, inbox=inbox, quiet=True, **kw)  # type: ignore[arg-type]
    status = run_batch(opts)
    return status, ledger_records(out / "ledger.jsonl")


def test_inbox_links_are_ignored_and_listed_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    secret = tmp_path / "secret"
    secret.write_bytes(b"root:$6$very-secret-hash:19000:0:99999:7:::\n")
    (inbox / "shadow.hf").symlink_to(secret)
    (inbox / "shadow.hf.tmp").symlink_to(secret)
    status, records = batch(tmp_path, inbox)
    assert status == 0
    assert sorted((Path(str(r["input"])).name, r["status"]) for r in records) == [
        ("shadow.hf", "ignored"),
        ("shadow.hf.tmp", "ignored"),
    ]
    assert all("sha256" not in r and "symbolic link" in str(r["reason"]) for r in records)
    assert not (inbox / "failed").exists() and (inbox / "shadow.hf").is_symlink()
    printed = capsys.readouterr()
    assert "ignored 2" in " ".join((printed.out + printed.err).split())


def test_follow_links_converts_a_linked_archive(tmp_path: Path) -> None:
    pytest.importorskip("av")
    from convert_fixtures import write_archive

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_archive(tmp_path / "elsewhere.hf", 0.3, late=False, quarantined=False)
    (inbox / "linked.hf").symlink_to(tmp_path / "elsewhere.hf")
    status, records = batch(tmp_path, inbox)
    assert [r["status"] for r in records] == ["ignored"]
    status, records = batch(tmp_path, inbox, follow_links=True)
    assert status == 0 and [r["status"] for r in records][-1] == "converted"
    assert verify_file(tmp_path / "out" / "linked.hf").ok


def test_a_symlinked_failed_dir_is_not_followed(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (inbox / "failed").symlink_to(elsewhere)
    (inbox / "corrupt.hf").write_bytes(b"not a hyperframe file" * 40)
    status, records = batch(tmp_path, inbox)
    assert status == 1
    (rec,) = records
    assert rec["status"] == "failed" and "moved_to" not in rec
    assert "symbolic link" in str(rec["move_error"])
    assert (inbox / "corrupt.hf").exists() and list(elsewhere.iterdir()) == []


@needs_root
def test_an_uploaders_links_in_failed_are_neither_followed_nor_replaced(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    inbox.chmod(0o777)  # uploaders may write here
    failed = inbox / "failed"
    failed.mkdir()
    failed.chmod(0o777)
    victim = tmp_path / "victim.hf"
    victim.write_bytes(b"precious")
    plant_link(failed, "corrupt.hf", tmp_path / "planted")  # dangling: exists() says no
    plant_link(failed, f".corrupt.hf.reason.json.{os.getpid()}.tmp", victim)
    (inbox / "corrupt.hf").write_bytes(b"not a hyperframe file" * 40)
    status, records = batch(tmp_path, inbox)
    assert status == 1 and victim.read_bytes() == b"precious"
    assert not (tmp_path / "planted").exists()
    assert records[0]["moved_to"] == os.fspath(failed / "corrupt.hf.1")
    assert (failed / "corrupt.hf.1").read_bytes() == b"not a hyperframe file" * 40
    assert (failed / "corrupt.hf").is_symlink()
    assert "corrupt" in (failed / "corrupt.hf.1.reason.json").read_text()
