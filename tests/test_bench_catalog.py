"""A smoke run of bench/bench_catalog.py at small sizes: every section runs and reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("torch")
pytest.importorskip("moto")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.network
def test_bench_catalog_smoke() -> None:
    argv = ["--segments", "60", "--new", "20", "--events", "5000", "--vehicles", "10",
            "--clips", "40", "--repeats", "1", "--loader-workers", "1", "--batch", "4"]  # fmt: skip
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_catalog.py"), *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    for line in ("full build", "full / incremental", "find_events", "files opened",
                 "query to first batch"):  # fmt: skip
        assert line in out, out
    assert "40 events -> 40 manifest entries" in out, out
