"""A new user's first hour: the README's tour and each doc's first example, in a fresh venv.

The checkout is copied (tracked files only) to a temporary directory and set
up exactly as the README says before the tour (``scripts/setup.sh
recorder,viz,mcap,converter,catalog``, what ``scripts/demo.sh`` runs), with no
system site packages: nothing installed for the test suite leaks in. Then
the tour's shell block runs line by line from the copy's root, its Python
snippet runs as written, and each page in docs/ gets its first example run,
with the placeholder files it names standing in for the tour's own (lines
that need what a new user's machine lacks are skipped, each with the reason).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a fresh venv: minutes

# what README says to install before the tour (the demo's extras)
TOUR_EXTRAS = "recorder,viz,mcap,converter,catalog"

# per doc: placeholder -> the tour's file, and the lines skipped (prefix -> why)
# (the tour's demo.hf lasts 10 s; seg.hf is the snippet's 1 s file; the converter gets seg.hf,
# whose camera passes the default PSNR floor, unlike synth's noise: see the README's tour)
DOC_SUBSTITUTIONS: dict[str, dict[str, str]] = {
    "CONVERTER.md": {
        "seg-0001.hf seg-0002.hf": "seg.hf",
        "/data/upload": "upload",
        "/data/converted": "converted-docs",
    },
    "MCAP.md": {
        "seg-0001.hf seg-0002.hf": "demo.hf",
        "seg.hf": "demo.hf",
        "--from 12.5 --to 20": "--from 2.5 --to 5",
        "drive.mcap back.hf": "drive.mcap back-docs.hf",
        "rosbag.mcap out.hf": "demo.mcap out-docs.hf",
        "/camera/front/compressed=cam_front": "/cam_front=cam_front",
        "/velodyne_points=lidar_top": "/lidar_top=lidar_top",
    },
    "VIEWING.md": {
        "seg-0001.hf seg-0002.hf": "demo.hf",
        "seg.hf": "demo.hf",
        "--from 10 --to 12.5": "--from 4 --to 6.5",
        "timeline.png": "timeline-docs.png",
        "window.png": "window-docs.png",
    },
}
SKIPPED_LINES = {
    "pip install": "the distribution is installed from the checkout (setup.sh) above",
    "sudo ": "needs root and systemd (tests/test_deploy.py runs the installer)",
    "--watch": "runs until stopped",
    "--ray": "needs a Ray cluster (tests/test_convert_ray.py)",
    "s3://": "needs a bucket and the s3 extra (tests/test_convert_bucket.py, test_objstore.py)",
}
# pages whose first block is not something to run: a byte diagram, a hex dump
NOT_EXAMPLES = {"FORMAT.md", "INGEST.md", "CLI.md", "ARCHITECTURE.md", "STORES.md", "ROS2.md",
                "LIVE.md"}  # serve runs until stopped (tests/test_live_serve.py plays it)
# names the first TRAINING example uses, from the tour's demo.hf
TRAINING_PRELUDE = """
from hyperframes import HyperframeReader
with HyperframeReader("demo.hf") as _r:
    lidar_ts, cam_ts, imu_ts = (_r.timestamps(s) for s in ("lidar_top", "cam_front", "imu"))
    imu_values = np.stack([f.array() for f in _r.read_range("imu", _r.start_ns, _r.end_ns)])
"""


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = text.find("\n## ", start + len(heading))
    return text[start : nxt if nxt >= 0 else None]


def _lines(body: str) -> list[str]:
    """Shell commands of a block, continuation lines joined."""
    out: list[str] = []
    for raw in body.replace("\\\n", " ").splitlines():
        if raw.strip() and not raw.strip().startswith("#"):
            out.append(raw.strip())
    return out


def _command(line: str) -> str:
    """A line without its trailing comment."""
    return re.sub(r"\s+#\s.*$", "", line).strip()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy the tracked files")
    work = tmp_path_factory.mktemp("tour") / "hyperframes"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file() and not src.is_symlink():
            dst = work / os.fsdecode(name)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHON"] = sys.executable  # the Python the suite runs on, but a venv of its own
    r = subprocess.run(
        ["bash", "scripts/setup.sh", TOUR_EXTRAS], cwd=work, env=env, capture_output=True,
        text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = (work / ".venv" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    return work


def _run(work: Path, command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    script = f"set -euo pipefail\n. .venv/bin/activate\n{command}\nwait\n"
    return subprocess.run(
        ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def test_readme_tour_then_each_docs_first_example(fresh: Path) -> None:
    readme = (fresh / "README.md").read_text()
    tour = _section(readme, "## A 60-second tour")
    blocks = _blocks(tour)
    shell = next(body for lang, body in blocks if lang == "sh")
    python = next(body for lang, body in blocks if lang == "python")

    # the tour, one line at a time (the recorder runs in the background until `sim` is done)
    background = ""
    for line in _lines(shell):
        cmd = _command(line)
        if cmd.endswith("&"):
            background = cmd
            continue
        if cmd.startswith(". "):
            continue  # activating: every line runs in the venv
        r = _run(fresh, f"{background}\n{'sleep 2' if background else ''}\n{cmd}")
        assert r.returncode == 0, f"tour: {cmd}\n{r.stdout}\n{r.stderr}"
        assert "Traceback" not in r.stderr, f"tour: {cmd}\n{r.stderr}"
        background = ""
    for name in ("demo.hf", "crashed.hf", "timeline.png", "window.png", "demo.mcap", "back.hf"):
        assert (fresh / name).is_file(), name
    assert list((fresh / "converted").glob("*.hf")), "convert wrote nothing"
    recorded = list((fresh / "recordings" / "demo").glob("*.hf"))
    assert recorded, "record + sim wrote no segment"

    # the Python snippet, as written
    r = subprocess.run(
        [str(fresh / ".venv" / "bin" / "python"), "-c", python], cwd=fresh,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (fresh / "seg.hf").is_file() and not (fresh / "seg.hf.tmp").exists()

    # each doc's first example
    (fresh / "upload").mkdir()
    shutil.copy(fresh / "seg.hf", fresh / "upload" / "up-0001.hf")
    ran = []
    for page in sorted((fresh / "docs").glob("*.md")):
        if page.name in NOT_EXAMPLES:
            continue
        lang, body = _blocks(page.read_text())[0]
        for old, new in DOC_SUBSTITUTIONS.get(page.name, {}).items():
            body = body.replace(old, new)
        if lang == "python":
            prelude = "import numpy as np\n" + (
                TRAINING_PRELUDE if page.name == "TRAINING.md" else ""
            )
            r = subprocess.run(
                [str(fresh / ".venv" / "bin" / "python"), "-c", prelude + body], cwd=fresh,
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert r.returncode == 0, f"{page.name}:\n{r.stderr}"
            ran.append(page.name)
            continue
        for line in _lines(body):
            if any(key in line for key in SKIPPED_LINES):
                continue
            cmd = _command(line)
            r = _run(fresh, cmd)
            assert r.returncode == 0, f"{page.name}: {cmd}\n{r.stdout}\n{r.stderr}"
            assert "Traceback" not in r.stderr, f"{page.name}: {cmd}\n{r.stderr}"
            ran.append(page.name)
    assert {"CONVERTER.md", "MCAP.md", "TRAINING.md", "VIEWING.md"} <= set(ran)
