"""The house's shape (docs/ARCHITECTURE.md): floors, no circles, one import package.

The contracts live in pyproject.toml ([tool.importlinter]) and run through
scripts/layers.sh over the packages as installed (scripts/installed_tree.py). Each
kind of contract is also shown to fail on a tree that breaks it, so that a contract
that can no longer fail is noticed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

import hyperframes

ROOT = Path(__file__).resolve().parents[1]
WINGS = {
    "hyperframes": "hyperframes",
    "recorder": "hyperframes/recorder",
    "converter": "hyperframes/converter",
}


def _installed_tree() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "installed_tree", ROOT / "scripts" / "installed_tree.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install 'hyperframes-sensors[dev]')")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
    return subprocess.run(
        [str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _repo_modules() -> set[str]:
    """Every module file of the three folders, as its path inside the installed package."""
    found = set()
    for folder, installed in WINGS.items():
        for f in (ROOT / folder).rglob("*.py"):
            rel = f.relative_to(ROOT / folder)
            if folder == "hyperframes" and rel.parts[0] in ("recorder", "converter"):
                continue
            found.add(f"{installed}/{rel.as_posix()}")
    return found


def test_the_contracts_hold() -> None:
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "layers.sh"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "HF_VENV_PYTHON": sys.executable},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # the format reading through storage: a floor crossed sideways
        ("format/windows.py", "import hyperframes.storage.local", "floors"),
        # the library importing a wing above it
        ("reader.py", "import hyperframes.recorder.config", "floors"),
        # storage reaching up to a face
        ("storage/objects.py", "import hyperframes.reader", "floors"),
        # a circle inside one floor: naming -> times -> naming
        ("format/times.py", "import hyperframes.format.naming", "no circles"),
    ],
)
def test_a_tree_that_breaks_a_contract_is_refused(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    _installed_tree().lay_out(tmp_path)
    target = tmp_path / "hyperframes" / module
    if broken == "no circles":
        (tmp_path / "hyperframes/format/naming.py").write_text(
            (tmp_path / "hyperframes/format/naming.py").read_text()
            + "\nimport hyperframes.format.times  # noqa\n"
        )
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    r = _lint_imports(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    broken_lines = [ln for ln in r.stdout.splitlines() if ln.endswith("BROKEN")]
    assert any(ln.startswith(broken) for ln in broken_lines), r.stdout


def test_a_room_on_no_floor_is_refused(tmp_path: Path) -> None:
    """The floors contract is exhaustive: a new subpackage must be given its floor."""
    _installed_tree().lay_out(tmp_path)
    (tmp_path / "hyperframes" / "newroom").mkdir()
    (tmp_path / "hyperframes" / "newroom" / "__init__.py").write_text('"""A room."""\n')
    r = _lint_imports(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "floors: each imports only the floors below it BROKEN" in r.stdout
    assert "hyperframes.newroom" in r.stdout


def test_the_installed_tree_holds_every_module(tmp_path: Path) -> None:
    """pyproject.toml lists every package (a package left out would be left out of the wheel)."""
    _installed_tree().lay_out(tmp_path)
    laid = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")}
    assert laid == _repo_modules()


@pytest.mark.slow
def test_the_wheel_installs_one_import_package(tmp_path: Path) -> None:
    """No top-level ``recorder`` or ``converter`` (names that other projects on the index own):
    the wheel holds ``hyperframes/`` and its metadata, every module in it, one version."""
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(f"hyperframes_sensors-{hyperframes.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "hyperframes",
        f"hyperframes_sensors-{hyperframes.__version__}.dist-info",
    }
    assert {n for n in names if n.endswith(".py")} == _repo_modules()
    assert "hyperframes/py.typed" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "hyperframes = hyperframes.cli.main:console" in text
    assert "hyperframes.recorder.cli:register" in text
