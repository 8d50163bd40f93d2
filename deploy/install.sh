#!/usr/bin/env bash
# Install the hyperframes recorder as a systemd service on a Debian-based box
# (arm64 or amd64). Idempotent: run it again to upgrade; an existing
# /etc/hyperframes/vehicle.yaml is never overwritten.
#
#   sudo deploy/install.sh [--dry-run] [--config FILE] [--start] [SOURCE]
#
# SOURCE is the project directory or a built wheel (default: the checkout this
# script lives in). See docs/OPERATIONS.md.
set -euo pipefail

readonly USER_NAME=hyperframes
readonly PREFIX=/opt/hyperframes
readonly VENV=${PREFIX}/venv
readonly CONF_DIR=/etc/hyperframes
readonly CONF_FILE=${CONF_DIR}/vehicle.yaml
readonly DATA_DIR=/var/lib/hyperframes
readonly UNIT_NAME=hyperframes-recorder.service
readonly UNIT_DIR=/etc/systemd/system
readonly EXTRAS='[recorder,systemd]'
readonly APT_PACKAGES=(python3-venv python3-dev libsystemd-dev pkg-config gcc)

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR

usage() {
    cat <<EOF
usage: $0 [--dry-run] [--config FILE] [--start] [SOURCE]

  SOURCE        project directory or .whl file to install (default: ${SCRIPT_DIR%/deploy})
  --config FILE vehicle config to install as ${CONF_FILE} if none is there yet
                (default: SOURCE/configs/vehicle-example.yaml when SOURCE is a directory)
  --start       (re)start the service after installing (default: only enable it)
  --dry-run     print every action instead of doing it; needs no root
  -h, --help    this text
EOF
}

DRY_RUN=0
START=0
SOURCE=""
CONFIG_SRC=""
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        --start) START=1 ;;
        --config)
            (($# >= 2)) || { echo "error: --config needs a file" >&2; exit 2; }
            CONFIG_SRC=$2
            shift
            ;;
        --config=*) CONFIG_SRC=${1#--config=} ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "error: unknown option $1" >&2; usage >&2; exit 2 ;;
        *)
            [[ -z $SOURCE ]] || { echo "error: more than one SOURCE given" >&2; exit 2; }
            SOURCE=$1
            ;;
    esac
    shift
done

log() { printf '==> %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run a command, or only print it under --dry-run.
run() {
    if ((DRY_RUN)); then
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

# --- checks ------------------------------------------------------------------

if ((!DRY_RUN)) && ((EUID != 0)); then
    die "run as root (sudo $0 ...), or pass --dry-run to see what would happen"
fi

SOURCE=${SOURCE:-${SCRIPT_DIR%/deploy}}
[[ -e $SOURCE ]] || die "no such project directory or wheel: $SOURCE"
SOURCE=$(realpath "$SOURCE")
if [[ -d $SOURCE ]]; then
    [[ -f $SOURCE/pyproject.toml ]] || die "$SOURCE has no pyproject.toml"
    UNIT_SRC=$SOURCE/deploy/$UNIT_NAME
    DOC_SRC=$SOURCE/docs/OPERATIONS.md
    if [[ -z $CONFIG_SRC && -f $SOURCE/configs/vehicle-example.yaml ]]; then
        CONFIG_SRC=$SOURCE/configs/vehicle-example.yaml
    fi
elif [[ $SOURCE == *.whl ]]; then
    UNIT_SRC=$SCRIPT_DIR/$UNIT_NAME
    DOC_SRC=${SCRIPT_DIR%/deploy}/docs/OPERATIONS.md
else
    die "SOURCE must be a project directory or a .whl file: $SOURCE"
fi
[[ -f $UNIT_SRC ]] || die "unit file not found: $UNIT_SRC"
[[ -z $CONFIG_SRC || -f $CONFIG_SRC ]] || die "config not found: $CONFIG_SRC"

if command -v dpkg >/dev/null 2>&1; then
    arch=$(dpkg --print-architecture)
    case $arch in
        arm64 | amd64) ;;
        *) warn "untested architecture $arch (arm64 and amd64 are supported)" ;;
    esac
else
    ((DRY_RUN)) || die "dpkg not found: this script is for Debian-based systems"
    warn "dpkg not found: this script is for Debian-based systems"
fi

log "installing hyperframes from $SOURCE"

# --- packages ----------------------------------------------------------------

# systemd-python builds against libsystemd (pkg-config, gcc, python3-dev).
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$pkg")
done
if ((${#missing[@]})); then
    log "apt packages: ${missing[*]}"
    run apt-get update
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
    log "apt packages: all present"
fi

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    ((DRY_RUN)) || die "python3 >= 3.11 is needed (Debian 12 or newer)"
    warn "python3 >= 3.11 is needed (Debian 12 or newer)"
fi

# --- user and directories ----------------------------------------------------

if getent passwd "$USER_NAME" >/dev/null; then
    log "user $USER_NAME: exists"
else
    log "user $USER_NAME: creating"
    run useradd --system --user-group --home-dir "$DATA_DIR" --no-create-home \
        --shell /usr/sbin/nologin --comment "hyperframes recorder" "$USER_NAME"
fi

log "directories"
run install -d -m 0755 -o root -g root "$PREFIX"
run install -d -m 0750 -o root -g "$USER_NAME" "$CONF_DIR"
run install -d -m 0750 -o "$USER_NAME" -g "$USER_NAME" "$DATA_DIR"

# --- virtual environment -----------------------------------------------------

if [[ -x $VENV/bin/python ]]; then
    log "venv $VENV: exists, upgrading"
else
    log "venv $VENV: creating"
    run python3 -m venv "$VENV"
fi
run "$VENV/bin/python" -m pip install --quiet --upgrade pip
run "$VENV/bin/python" -m pip install --quiet --upgrade "${SOURCE}${EXTRAS}"
# The service runs with a read-only /opt; compile now instead of on every start.
run "$VENV/bin/python" -m compileall -q "$VENV/lib"
# Operators type `hyperframes verify ...`; the service itself uses the venv path.
run ln -sfn "$VENV/bin/hyperframes" /usr/local/bin/hyperframes
if [[ -f $DOC_SRC ]]; then
    run install -m 0644 "$DOC_SRC" "$PREFIX/OPERATIONS.md"
fi

# --- configuration -----------------------------------------------------------

if [[ -e $CONF_FILE ]]; then
    log "config $CONF_FILE: exists, left as it is"
elif [[ -n $CONFIG_SRC ]]; then
    log "config $CONF_FILE: from $CONFIG_SRC (edit it for this vehicle)"
    run install -m 0640 -o root -g "$USER_NAME" "$CONFIG_SRC" "$CONF_FILE"
else
    warn "no config at $CONF_FILE and none given (--config FILE): the service will not start"
fi

if [[ -e $CONF_FILE || -n $CONFIG_SRC ]]; then
    if ((DRY_RUN)); then
        run "$VENV/bin/hyperframes" check-config "$CONF_FILE"
    elif ! "$VENV/bin/hyperframes" check-config "$CONF_FILE"; then
        warn "$CONF_FILE does not validate: fix it, then systemctl restart ${UNIT_NAME%.service}"
    fi
fi

# --- systemd -----------------------------------------------------------------

log "unit $UNIT_DIR/$UNIT_NAME"
run install -m 0644 "$UNIT_SRC" "$UNIT_DIR/$UNIT_NAME"
run systemctl daemon-reload
run systemctl enable "$UNIT_NAME"
if ((START)); then
    run systemctl restart "$UNIT_NAME"
    log "started: systemctl status ${UNIT_NAME%.service}; journalctl -u ${UNIT_NAME%.service} -f"
else
    log "enabled; start with: systemctl start ${UNIT_NAME%.service}"
fi
