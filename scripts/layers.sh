#!/usr/bin/env bash
# The import contracts of pyproject.toml [tool.importlinter] (docs/ARCHITECTURE.md), checked
# with import-linter over the packages as installed (build/tree, see scripts/installed_tree.py).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py="${HF_VENV_PYTHON:-$root/.venv/bin/python}"
tree=$("$py" scripts/installed_tree.py)
cd "$tree"
PYTHONPATH="$root/scripts${PYTHONPATH:+:$PYTHONPATH}" exec "$(dirname "$py")/lint-imports" --config "$root/pyproject.toml" "$@"
