#!/usr/bin/env bash
# mypy --strict (pyproject.toml [tool.mypy]) over the packages as installed (build/tree, see
# scripts/installed_tree.py) and the benchmark scripts. Paths in its messages are given back
# as they are in the repository (hyperframes/recorder/x.py -> recorder/x.py).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py="${HF_VENV_PYTHON:-$root/.venv/bin/python}"
tree=$("$py" scripts/installed_tree.py)
cd "$tree"
set +e
"$py" -m mypy --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" \
    hyperframes "$root"/bench/*.py > "$root/build/mypy.out" 2>&1
rc=$?
set -e
sed -e 's#^hyperframes/recorder/#recorder/#' -e 's#^hyperframes/converter/#converter/#' \
    -e "s#^$root/##" "$root/build/mypy.out"
exit $rc
