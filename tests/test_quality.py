"""Lint and type checks run as part of the test suite."""

from __future__ import annotations

import os
import re
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
        pytest.skip(f"{name} is not installed (pip install 'hyperframes-sensors[dev]')")
    return found


def test_ruff_check() -> None:
    r = subprocess.run(
        [_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format() -> None:
    r = subprocess.run(
        [_tool("ruff"), "format", "--check", "hyperframes", "recorder", "converter", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy_strict() -> None:
    """scripts/typecheck.sh: mypy --strict over the packages as installed and the benches."""
    _tool("mypy")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "typecheck.sh")], cwd=ROOT,
                       env={**os.environ, "HF_VENV_PYTHON": sys.executable},
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


# Package-index hosts (the dots escaped, so that this file does not name them either):
# pip's configuration and environment say where packages come from, never the repository.
_INDEX_HOSTS = re.compile(
    rb"(?i)(pypi\.org|pypi\.python\.org|files\.pythonhosted\.org|download\.pytorch\.org"
    rb"|pytorch\.org/whl|pypi\.nvidia\.com|pypi\.ngc\.nvidia\.com|anaconda\.(org|com)"
    rb"|registry\.npmjs\.org|proxy\.golang\.org|crates\.io)"
)


def test_no_file_names_a_package_index() -> None:
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       cwd=ROOT, capture_output=True, check=False)  # fmt: skip
    if r.returncode != 0:
        pytest.skip("not a git checkout: " + r.stderr.decode().strip())
    named = []
    for name in r.stdout.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file() and not path.is_symlink():
            for n, line in enumerate(path.read_bytes().splitlines(), 1):
                m = _INDEX_HOSTS.search(line)
                if m:
                    named.append(f"{name}:{n}: {m.group().decode()}")
    assert named == [], named
