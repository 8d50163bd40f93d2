"""The Ray engine on a real local Ray instance: one task per archive, lost workers retried,
application errors reported (not retried), failures handled like the local pool's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperframes.converter.batch.ledger import ledger_records
from hyperframes.converter.config import parse_config
from hyperframes.converter.directory.inbox import BatchOptions, run_batch
from hyperframes.converter.task import FAULT_ENV
from hyperframes.verify import verify_file

from convert_fixtures import write_archive

ray = pytest.importorskip("ray")
pytest.importorskip("av")

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local Ray instance whose workers crash once on an input named crash.hf."""
    flags = tmp_path_factory.mktemp("ray-faults")
    old = os.environ.get(FAULT_ENV)
    os.environ[FAULT_ENV] = f"exit-once:crash.hf:{flags}"  # workers inherit the environment
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield flags
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop(FAULT_ENV, None)
        else:
            os.environ[FAULT_ENV] = old


def test_ray_batch_retries_a_lost_worker_and_reports_a_bad_input(
    ray_instance: Path, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_archive(inbox / "crash.hf", 0.5, late=False)
    write_archive(inbox / "fine.hf", 0.5, seed=2)
    (inbox / "corrupt.hf").write_bytes(b"HFRM" + b"\x01" * 700)
    cfg = parse_config(
        {
            "video": {"x265_preset": "ultrafast"},
            "batch": {"settle_s": 0, "ray_num_cpus": 1, "ray_max_retries": 2},
        }
    )
    out = tmp_path / "out"
    status = run_batch(BatchOptions(out=out, config=cfg, inbox=inbox, ray="auto", quiet=True))
    assert status == 1
    assert (ray_instance / "crash.hf.crashed").exists()  # the first attempt died...
    for name in ("crash.hf", "fine.hf"):  # ...and the retry converted it
        assert verify_file(out / name).ok
    records = {Path(r["input"]).name: r for r in ledger_records(out / "ledger.jsonl")}
    assert {n: r["status"] for n, r in records.items()} == {
        "crash.hf": "converted",
        "fine.hf": "converted",
        "corrupt.hf": "failed",
    }
    assert records["corrupt.hf"]["fault"] == "input"  # an application error: not retried
    assert records["fine.hf"]["engine"] == "auto"
    assert sorted(p.name for p in (inbox / "failed").iterdir()) == [
        "corrupt.hf",
        "corrupt.hf.reason.json",
    ]
    assert not list(out.rglob("*.tmp")) and not (out / ".staging").exists()
