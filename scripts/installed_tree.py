"""Lay the source out as the wheel installs it, for the tools that read source by path.

pyproject.toml maps the repository's ``recorder/`` and ``converter/`` folders to the
import packages ``hyperframes.recorder`` and ``hyperframes.converter``. Python follows
that mapping through the install (editable or not); mypy and import-linter find modules
by path and cannot. This copies every package listed in ``[tool.setuptools] packages``,
from the folder ``package-dir`` gives it, to ``DEST/<import path>/`` as the wheel lays it
out: a package missing from the list is missing here too, and the checks that import it
fail. Usage: ``python scripts/installed_tree.py [DEST]`` (default ``build/tree``); prints
DEST. scripts/typecheck.sh and scripts/layers.sh run it first.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("*.py", "*.pyi", "py.typed")


def source_dir(package: str, package_dir: dict[str, str]) -> Path:
    """The folder of ``package``: the longest ``package-dir`` prefix, else its dotted path."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:n]))
        if mapped is not None:
            return ROOT / mapped / Path(*parts[n:])
    return ROOT / Path(*parts)


def lay_out(dest: Path) -> list[str]:
    """Copy every listed package into ``dest``; returns the packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages: list[str] = config["packages"]
    package_dir: dict[str, str] = config.get("package-dir", {})
    if dest.exists():
        shutil.rmtree(dest)
    for package in packages:
        src = source_dir(package, package_dir)
        out = dest / Path(*package.split("."))
        out.mkdir(parents=True)
        for pattern in COPIED:
            for f in src.glob(pattern):
                shutil.copy2(f, out / f.name)
    return packages


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "tree"
    lay_out(target)
    print(target)
