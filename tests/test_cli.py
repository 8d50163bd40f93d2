"""The hyperframes command line, run as users run it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hyperframes.cli.main import main
from hyperframes.format.layout import HEADER_SIZE

import golden_files as g


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperframes.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_synth_info_verify(tmp_path: Path) -> None:
    out = tmp_path / "demo.hf"
    r = run("synth", str(out), "--seconds", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "profile demo, 2 s" in r.stdout
    r = run("info", str(out), "--json")
    doc = json.loads(r.stdout)
    assert doc["windows"] == 20 and doc["frames"] == sum(s["frames"] for s in doc["streams"])
    assert {s["name"]: s["frames"] for s in doc["streams"]} == {
        "cam_front": 61,
        "cam_rear": 60,
        "lidar_top": 20,
        "imu": 400,
    }
    r = run("verify", str(out))
    assert r.returncode == 0 and r.stdout.startswith("OK ")
    stored = sum(s["stored_bytes"] for s in doc["streams"]) / 1e6
    mb = float(r.stdout.split(" frames, ")[1].split(" MB")[0])
    assert abs(mb - stored) <= 0.05  # every payload byte checked, and said so


def test_the_console_script_exits_with_the_commands_code_and_a_frozen_heap(tmp_path: Path) -> None:
    """``console`` (the installed script and ``python -m``) exits with main's code after
    freezing the heap, so the interpreter skips its last collections; exit handlers and
    buffered output still run (the handler below prints after main returned)."""
    probe = (
        "import atexit, gc, sys\n"
        "from hyperframes.cli import main as cli\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        "sys.argv = ['hyperframes', *sys.argv[1:]]\n"
        "cli.console()\n"
    )
    out = tmp_path / "c.hf"
    r = subprocess.run(
        [sys.executable, "-c", probe, "synth", str(out), "--seconds", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0 and out.exists() and r.stdout.endswith("frozen True\n"), r.stderr
    r = subprocess.run(
        [sys.executable, "-c", probe, "synth", str(out), "--seconds", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and "frozen True" in r.stdout  # the file exists: main's code


def test_synth_is_deterministic(tmp_path: Path) -> None:
    assert main(["synth", str(tmp_path / "a.hf"), "--seconds", "1", "-q"]) == 0
    assert main(["synth", str(tmp_path / "b.hf"), "--seconds", "1", "-q"]) == 0
    assert (tmp_path / "a.hf").read_bytes() == (tmp_path / "b.hf").read_bytes()
    assert main(["synth", str(tmp_path / "a.hf"), "--seconds", "1", "-q"]) == 2  # exists


def test_info_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(g.GOLDEN / "tiny-v1.hf")]) == 0
    text = capsys.readouterr().out
    assert "6 windows of 50 ms" in text and "golden-car" in text
    assert "zstd:3+shuffle" in text and "lz4hc:9" in text


def test_verify_reports_each_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = g.GOLDEN / "tiny-v1.hf"
    bad = tmp_path / "bad.hf"
    raw = bytearray(good.read_bytes())
    raw[HEADER_SIZE + 900] ^= 1
    bad.write_bytes(bytes(raw))
    missing = tmp_path / "nope.hf"
    assert main(["verify", str(good), str(bad), str(missing)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and str(missing) in err and str(good) not in err


def test_recover_command(tmp_path: Path) -> None:
    src = tmp_path / "rec.hf.tmp"
    shutil.copy(g.GOLDEN / "tiny-v1-crashed.hf.tmp", src)
    r = run("recover", str(src))
    assert r.returncode == 0, r.stderr
    assert "recovered 6 windows, 40 frames" in r.stdout and "nothing lost" in r.stdout
    assert re.search(r"\(\d{4}-\d\d-\d\dT[\d:.]+Z \.\. [\d\-T:.]+Z, [\d.]+ s\)", r.stdout)
    assert "verified" in r.stdout
    assert (tmp_path / "rec.hf").read_bytes() == (g.GOLDEN / "tiny-v1.hf").read_bytes()
    r = run("recover", str(src))  # output exists now
    assert r.returncode == 1 and "already exists" in r.stderr


def test_recover_of_nothing_fails(tmp_path: Path) -> None:
    src = tmp_path / "empty.hf.tmp"
    src.write_bytes((g.GOLDEN / "tiny-v1-crashed.hf.tmp").read_bytes()[:1300])
    r = run("recover", str(src))
    assert r.returncode == 1 and "no complete window" in r.stderr


def test_reading_unfinalized_file_says_what_to_do(tmp_path: Path) -> None:
    r = run("info", str(g.GOLDEN / "tiny-v1-crashed.hf.tmp"))
    assert r.returncode == 2 and "hyperframes recover" in r.stderr
