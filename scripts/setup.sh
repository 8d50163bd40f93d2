#!/usr/bin/env bash
# Installs what hyperframes needs into ./.venv (and, on Debian, the system packages the
# tests use). Idempotent; safe to run again. Usage: scripts/setup.sh [EXTRAS]  (default: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"

apt_packages=(mosquitto libsystemd-dev pkg-config gcc systemd ffmpeg)
# Ceph RADOS Gateway, a real S3 server for the `ceph` tests (tests/s3_stores.py runs a one-node
# cluster on loopback, no systemd): ~69 MB of packages, ~270 MB installed, ~30 s
apt_packages+=(radosgw ceph-mon ceph-osd)
# node and npm read MCAP exports as Foxglove Studio does (tests/test_mcap_foxglove_js.py installs
# its npm packages on first use); only when missing, so a node that bundles npm is left alone
command -v node >/dev/null 2>&1 || apt_packages+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_packages+=(npm)
if command -v apt-get >/dev/null 2>&1 && [ "$extras" = dev ]; then
    missing=()
    for p in "${apt_packages[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        echo "setup: installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -q >/dev/null
        $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# torch (hyperframes.torch) for dev and the torch extra: the CPU build, installed before the
# extras so that the resolver never pulls the default index's CUDA build (~5 GB). A local CPU
# wheel that pip finds (find-links) is used when there is one, else pip's own configuration
# with HF_TORCH_INDEX_URL (PyTorch's CPU wheel index, README "Training with PyTorch") as an
# extra index. No index is named here: pip's configuration and environment say where packages
# come from. GPU hosts: see README.
torch_version="${HF_TORCH_VERSION:-2.13.0}"
install_torch() {
    case ",$extras," in *,dev,*|*,torch,*) ;; *) return 0 ;; esac
    .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" \
        2>/dev/null && return 0
    if .venv/bin/python -m pip install -q --dry-run --no-index --no-deps --ignore-installed \
            "torch==$torch_version" 2>/dev/null; then
        .venv/bin/python -m pip install -q "torch==$torch_version"
    elif [ -n "${HF_TORCH_INDEX_URL:-}" ]; then
        # the CPU wheel (torch==V+cpu) sorts above the plain version and wins
        .venv/bin/python -m pip install -q "torch==$torch_version" \
            --extra-index-url "$HF_TORCH_INDEX_URL"
    else
        echo "setup: no local CPU wheel of torch $torch_version and HF_TORCH_INDEX_URL unset:" \
            "torch comes from pip's configured index (the CUDA build there is ~5 GB)" >&3
        .venv/bin/python -m pip install -q "torch==$torch_version"
    fi
}
# before 0.2 the distribution was called hyperframes (on the index that name is another
# project): an old editable install would register every command twice
uninstall_old() {
    if .venv/bin/python -m pip show -q hyperframes >/dev/null 2>&1; then
        .venv/bin/python -m pip uninstall -q -y hyperframes
    fi
}
# quiet unless something fails: then show pip's whole output (notes go to fd 3, the terminal)
exec 3>&2
if ! { .venv/bin/python -m pip install -q --upgrade pip && uninstall_old && install_torch &&
       .venv/bin/python -m pip install -q -e ".[$extras]"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: pip install failed (output above)" >&2
    exit 1
fi
