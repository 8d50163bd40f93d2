#!/usr/bin/env bash
# Install the hyperframes recorder as a systemd service on a Debian-based box
# (arm64 or amd64), or into a system image, with the uploader beside it
# (hyperframes-upload.service: installed always, enabled and started only when
# the installed config has an upload: section). Idempotent: run it again to
# upgrade; an existing /etc/hyperframes/vehicle.yaml is never overwritten.
#
#   sudo deploy/install.sh [--dry-run] [--root DIR] [--config FILE] [--start] [SOURCE]
#
# SOURCE is the project directory or a built wheel (default: the checkout this
# script lives in). Without a running systemd (a chroot, a container, an image
# build: /run/systemd/system absent) the unit is enabled offline and what needs
# the service manager (daemon-reload, --start) is skipped. See docs/OPERATIONS.md.
set -euo pipefail

readonly USER_NAME=hyperframes
readonly PREFIX=/opt/hyperframes
readonly VENV=${PREFIX}/venv
readonly CONF_DIR=/etc/hyperframes
readonly CONF_FILE=${CONF_DIR}/vehicle.yaml
readonly DATA_DIR=/var/lib/hyperframes
readonly UNIT_NAME=hyperframes-recorder.service
readonly UPLOAD_UNIT=hyperframes-upload.service
readonly UNIT_DIR=/etc/systemd/system
# upload brings boto3 (s3:// destinations), so that adding an upload: section later
# needs no reinstall
readonly EXTRAS='[recorder,systemd,upload]'
readonly APT_PACKAGES=(python3-venv python3-dev libsystemd-dev pkg-config gcc)

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR

usage() {
    cat <<EOF
usage: $0 [--dry-run] [--root DIR] [--config FILE] [--start] [SOURCE]

  SOURCE        project directory or .whl file to install (default: ${SCRIPT_DIR%/deploy})
  --config FILE vehicle config to install as ${CONF_FILE} if none is there yet
                (default: SOURCE/configs/vehicle-example.yaml when SOURCE is a directory)
  --root DIR    install into the system image rooted at DIR (same architecture and
                Python as this machine; else run this script inside the image's chroot)
                instead of this system; the unit is enabled offline, nothing is started
  --start       (re)start the services after installing (default: only enable them)
  --dry-run     print every action instead of doing it; needs no root
  -h, --help    this text
EOF
}

DRY_RUN=0
START=0
SOURCE=""
CONFIG_SRC=""
ROOT_DIR=""
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
        --root)
            (($# >= 2)) || { echo "error: --root needs a directory" >&2; exit 2; }
            ROOT_DIR=$2
            shift
            ;;
        --root=*) ROOT_DIR=${1#--root=} ;;
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
UPLOAD_SRC=$(dirname "$UNIT_SRC")/$UPLOAD_UNIT
[[ -f $UPLOAD_SRC ]] || die "unit file not found: $UPLOAD_SRC"
[[ -z $CONFIG_SRC || -f $CONFIG_SRC ]] || die "config not found: $CONFIG_SRC"

# --root DIR: every path below is DIR/path; files inside the image name the image's paths.
if [[ -n $ROOT_DIR ]]; then
    [[ -d $ROOT_DIR ]] || die "--root: no such directory: $ROOT_DIR"
    ROOT_DIR=$(realpath "$ROOT_DIR")
    [[ $ROOT_DIR != / ]] || ROOT_DIR=""
fi
if [[ -n $ROOT_DIR ]]; then
    [[ -f $ROOT_DIR/etc/passwd && -f $ROOT_DIR/etc/group ]] \
        || die "--root: $ROOT_DIR has no etc/passwd and etc/group: not a system image root"
    [[ -x $ROOT_DIR/usr/bin/python3 ]] \
        || warn "--root: $ROOT_DIR has no usr/bin/python3: the venv needs this machine's python3 there"
fi
readonly R_PREFIX=$ROOT_DIR$PREFIX R_VENV=$ROOT_DIR$VENV R_CONF_DIR=$ROOT_DIR$CONF_DIR
readonly R_CONF_FILE=$ROOT_DIR$CONF_FILE R_DATA_DIR=$ROOT_DIR$DATA_DIR R_UNIT_DIR=$ROOT_DIR$UNIT_DIR
# The service manager is only asked when it runs this system (sd_booted's test).
SYSTEMD_RUNNING=0
[[ -n $ROOT_DIR || ! -d /run/systemd/system ]] || SYSTEMD_RUNNING=1

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

log "installing hyperframes from $SOURCE${ROOT_DIR:+ into the image at $ROOT_DIR}"

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

# The user and group, looked up in the target system's own files under --root.
user_exists() {
    if [[ -n $ROOT_DIR ]]; then
        grep -q "^${USER_NAME}:" "$ROOT_DIR/etc/passwd"
    else
        getent passwd "$USER_NAME" >/dev/null
    fi
}
if user_exists; then
    log "user $USER_NAME: exists"
else
    log "user $USER_NAME: creating"
    run useradd ${ROOT_DIR:+--root "$ROOT_DIR"} --system --user-group --home-dir "$DATA_DIR" \
        --no-create-home --shell /usr/sbin/nologin --comment "hyperframes recorder" "$USER_NAME"
fi
# Owners for install -o/-g: names on this system; the image's numeric ids under --root.
OWNER=$USER_NAME
GROUP=$USER_NAME
if [[ -n $ROOT_DIR ]] && user_exists; then
    OWNER=$(awk -F: -v u="$USER_NAME" '$1 == u { print $3 }' "$ROOT_DIR/etc/passwd")
    GROUP=$(awk -F: -v g="$USER_NAME" '$1 == g { print $3 }' "$ROOT_DIR/etc/group")
fi

log "directories"
run install -d -m 0755 -o root -g root "$R_PREFIX"
run install -d -m 0750 -o root -g "$GROUP" "$R_CONF_DIR"
run install -d -m 0750 -o "$OWNER" -g "$GROUP" "$R_DATA_DIR"

# --- virtual environment -----------------------------------------------------

if [[ -x $R_VENV/bin/python ]]; then
    log "venv $R_VENV: exists, upgrading"
else
    log "venv $R_VENV: creating"
    # under --root, the python3 the image has at the same path (the venv links to it)
    run "${ROOT_DIR:+/usr/bin/}python3" -m venv "$R_VENV"
fi
run "$R_VENV/bin/python" -m pip install --quiet --upgrade pip
run "$R_VENV/bin/python" -m pip install --quiet --upgrade "${SOURCE}${EXTRAS}"
# The service runs with a read-only /opt; compile now instead of on every start (under
# --root, recording the paths the image will see).
run "$R_VENV/bin/python" -m compileall -q ${ROOT_DIR:+-s "$ROOT_DIR" -p /} "$R_VENV/lib"
# Operators type `hyperframes verify ...`; the service itself uses the venv path.
[[ -z $ROOT_DIR ]] || run install -d -m 0755 "$ROOT_DIR/usr/local/bin"
run ln -sfn "$VENV/bin/hyperframes" "$ROOT_DIR/usr/local/bin/hyperframes"
if [[ -f $DOC_SRC ]]; then
    run install -m 0644 "$DOC_SRC" "$R_PREFIX/OPERATIONS.md"
fi

# --- configuration -----------------------------------------------------------

if [[ -e $R_CONF_FILE ]]; then
    log "config $R_CONF_FILE: exists, left as it is"
elif [[ -n $CONFIG_SRC ]]; then
    log "config $R_CONF_FILE: from $CONFIG_SRC (edit it for this vehicle)"
    run install -m 0640 -o root -g "$GROUP" "$CONFIG_SRC" "$R_CONF_FILE"
else
    warn "no config at $R_CONF_FILE and none given (--config FILE): the service will not start"
fi

if [[ -e $R_CONF_FILE || -n $CONFIG_SRC ]]; then
    if ((DRY_RUN)); then
        run "$R_VENV/bin/hyperframes" check-config "$R_CONF_FILE"
    elif ! "$R_VENV/bin/hyperframes" check-config "$R_CONF_FILE"; then
        warn "$R_CONF_FILE does not validate: fix it, then systemctl restart ${UNIT_NAME%.service}"
    fi
fi

# Under --root the venv's scripts name DIR/opt/...: make them name the image's /opt/...
# (pip writes absolute shebangs; the venv's python links to /usr/bin/python3 in both).
relocate_venv() {
    { grep -rlIZ -e "$R_VENV" "$R_VENV/bin" "$R_VENV/pyvenv.cfg" || true; } \
        | xargs -0r sed -i "s|$R_VENV|$VENV|g"
}
if [[ -n $ROOT_DIR ]]; then
    log "venv: paths rewritten from $R_VENV to $VENV"
    if ((DRY_RUN)); then
        run relocate_venv
    else
        relocate_venv
    fi
fi

# Whether the installed config (or, in a dry run, the one that would be) has an
# upload: section: the venv's YAML parser when it is there, else a top-level key.
UPLOAD_CONF=$R_CONF_FILE
[[ -e $UPLOAD_CONF || -z $CONFIG_SRC ]] || UPLOAD_CONF=$CONFIG_SRC
UPLOAD=0
if [[ -f $UPLOAD_CONF ]]; then
    if ((!DRY_RUN)) && [[ -x $R_VENV/bin/python ]]; then
        "$R_VENV/bin/python" -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if isinstance(d, dict) and d.get("upload") else 1)' "$UPLOAD_CONF" 2>/dev/null \
            && UPLOAD=1
    else
        grep -qE '^upload:' "$UPLOAD_CONF" && UPLOAD=1
    fi
fi

# --- systemd -----------------------------------------------------------------

log "units $R_UNIT_DIR/$UNIT_NAME, $UPLOAD_UNIT"
[[ -z $ROOT_DIR ]] || run install -d -m 0755 "$R_UNIT_DIR"
run install -m 0644 "$UNIT_SRC" "$R_UNIT_DIR/$UNIT_NAME"
run install -m 0644 "$UPLOAD_SRC" "$R_UNIT_DIR/$UPLOAD_UNIT"
UNITS=("$UNIT_NAME")
if ((UPLOAD)); then
    UNITS+=("$UPLOAD_UNIT")
    log "uploader: $UPLOAD_CONF has an upload: section, enabling ${UPLOAD_UNIT%.service}"
else
    log "uploader: $UPLOAD_CONF has no upload: section, ${UPLOAD_UNIT%.service} installed but" \
        "not enabled (add one, then run this script again or" \
        "systemctl enable --now ${UPLOAD_UNIT%.service})"
    # enabled before, from a config that had one: it would fail at every start now
    if [[ -L $R_UNIT_DIR/multi-user.target.wants/$UPLOAD_UNIT ]]; then
        if ((SYSTEMD_RUNNING)); then
            run systemctl disable --now "$UPLOAD_UNIT"
        else
            run systemctl ${ROOT_DIR:+--root="$ROOT_DIR"} disable "$UPLOAD_UNIT"
        fi
    fi
fi
if ((!SYSTEMD_RUNNING)); then
    # enable only makes symlinks: it works offline (--root: in the image's /etc)
    run systemctl ${ROOT_DIR:+--root="$ROOT_DIR"} enable "${UNITS[@]}"
    why="/run/systemd/system is absent: a chroot, a container or an image build"
    [[ -z $ROOT_DIR ]] || why="installing into the image at $ROOT_DIR"
    skipped="systemctl daemon-reload"
    ((!START)) || skipped+=" and restart (--start)"
    log "no running systemd ($why): enabled offline, skipped $skipped;" \
        "the service starts at the next boot"
elif ((START)); then
    run systemctl daemon-reload
    run systemctl enable "${UNITS[@]}"
    run systemctl restart "${UNITS[@]}"
    log "started: systemctl status ${UNITS[*]%.service}; journalctl -u ${UNIT_NAME%.service} -f"
else
    run systemctl daemon-reload
    run systemctl enable "${UNITS[@]}"
    log "enabled; start with: systemctl start ${UNITS[*]%.service}"
fi
