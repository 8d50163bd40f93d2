"""Outputs the CLI writes never replace what they were not told to replace (issue 41, item 8).

A dangling link at ``-o`` is something at that name: without ``-f`` it is
refused, like a file. An ``OUT.tmp`` already there (another run, or one that
died) is not deleted silently.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperframes.cli.main import main


def cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.fixture
def one_file(write_file: Callable[..., tuple[Path, object]]) -> Path:
    path, _ = write_file("seg.hf")
    return path


@pytest.mark.parametrize("command", ["slice", "cat"])
def test_slice_and_cat_refuse_a_dangling_link_at_the_output(
    tmp_path: Path, one_file: Path, command: str
) -> None:
    out = tmp_path / "out.hf"
    out.symlink_to(tmp_path / "nowhere" / "target.hf")
    args = ["--start", "0", "--end", "100"] if command == "slice" else []
    code, err = cli(command, *args, "-o", str(out), str(one_file))
    assert code != 0 and "symbolic link" in err and str(out) in err
    assert out.is_symlink() and not (tmp_path / "nowhere").exists()
    code, _ = cli(command, *args, "-o", str(out), "-f", str(one_file))
    assert code == 0 and out.is_file() and not out.is_symlink()


def test_export_does_not_delete_an_existing_tmp_silently(tmp_path: Path, one_file: Path) -> None:
    out = tmp_path / "out.mcap"
    other = tmp_path / "out.mcap.tmp"
    other.write_bytes(b"another export in progress")
    code, err = cli("export", "--mcap", str(out), str(one_file))
    assert code != 0 and str(other) in err and "already exists" in err
    assert other.read_bytes() == b"another export in progress" and not out.exists()
    code, _ = cli("export", "--mcap", str(out), "-f", str(one_file))
    assert code == 0 and out.is_file() and not other.exists()
