#!/usr/bin/env bash
# Installs everything and runs the whole test suite (lint and type checks included).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow" -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
exec .venv/bin/python -m pytest -q "$@"
