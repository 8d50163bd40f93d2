"""The npm packages of tests/js (Foxglove's JavaScript packages), installed once per lock file.

Into ``~/.cache/hyperframes-npm/<hash of the lock>`` (``XDG_CACHE_HOME`` respected), by
``npm ci``; tests that need them skip without node and npm (``scripts/setup.sh dev``
installs both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).parent / "js"


def node_modules() -> Path:
    """The ``node_modules`` folder of tests/js's lock file, installed on first use."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for Foxglove's JavaScript packages "
                    "(scripts/setup.sh dev installs them)")  # fmt: skip
    files = ("package.json", "package-lock.json")
    key = hashlib.sha256(b"".join((JS / f).read_bytes() for f in files)).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hyperframes-npm"
    done = base / key
    if not (done / "node_modules" / ".installed").exists():
        work = base / f"{key}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        for f in files:
            shutil.copy(JS / f, work / f)
        r = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=work, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            pytest.fail(f"npm ci in {work} failed (exit {r.returncode}): {r.stderr[-2000:]}")
        (work / "node_modules" / ".installed").touch()
        try:
            work.rename(done)
        except OSError:  # another process installed it meanwhile
            shutil.rmtree(work, ignore_errors=True)
    return done / "node_modules"
