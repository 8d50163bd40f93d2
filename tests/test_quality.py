"""Lint and type checks run as part of the test suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install 'hyperframes[dev]')")
    return found


def test_ruff_check() -> None:
    r = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format() -> None:
    r = subprocess.run([_tool("ruff"), "format", "--check", "hyperframes", "recorder", "converter",
                        "bench"],
                       cwd=ROOT,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy_strict() -> None:
    r = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_core_never_imports_the_recorder() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "hyperframes").rglob("*.py")
        if any(line.lstrip().startswith(("import recorder", "from recorder", "import converter",
                                         "from converter"))
               for line in p.read_text().splitlines())
    ]
    assert offenders == []
