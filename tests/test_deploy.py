"""The systemd unit and the install script in deploy/.

Runs install.sh for real only into a temporary image root (``--root``, as
root, slow: it builds the venv); else ``bash -n`` and ``--dry-run``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from hyperframes.recorder.config import ZmqSocketConfig
from hyperframes.recorder.limits import NOFILE_TARGET, OWN_DESCRIPTORS

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "hyperframes-recorder.service"
UPLOAD = ROOT / "deploy" / "hyperframes-upload.service"
SYSTEMD_RUNNING = Path("/run/systemd/system").is_dir()  # what install.sh checks
INSTALL = ROOT / "deploy" / "install.sh"
EXEC_START = (
    "ExecStart=/opt/hyperframes/venv/bin/hyperframes record --config /etc/hyperframes/vehicle.yaml"
)

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None,
    reason="systemd-analyze not found (Debian package systemd): cannot verify the unit",
)


def _unit_settings(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def _verify(unit_text: str, tmp_path: Path) -> tuple[int, str]:
    """``systemd-analyze verify`` a copy of the unit whose ExecStart binary exists here.

    verify refuses a unit whose ExecStart is not executable, and the venv
    lives only on an installed box, so the copy points at /bin/true with the
    same arguments. verify only warns (exit 0) about unknown keys and bad
    values, so every line it prints about the unit counts as a failure.
    """
    assert SYSTEMD_ANALYZE is not None
    true_bin = shutil.which("true")
    assert true_bin is not None
    copy = tmp_path / UNIT.name
    copy.write_text(
        unit_text.replace(
            "ExecStart=/opt/hyperframes/venv/bin/hyperframes ", f"ExecStart={true_bin} "
        )
    )
    proc = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", os.fspath(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = proc.stdout + proc.stderr
    about_unit = [ln for ln in output.splitlines() if UNIT.name in ln or str(copy) in ln]
    return (proc.returncode if proc.returncode else len(about_unit)), output


@pytest.mark.systemd
@needs_systemd_analyze
def test_unit_verifies(tmp_path: Path) -> None:
    status, output = _verify(UNIT.read_text(), tmp_path)
    assert status == 0, f"systemd-analyze verify:\n{output}"


@pytest.mark.systemd
@needs_systemd_analyze
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("WatchdogSec=10s", "WatchdogSec=ten"),
        ("Type=notify", "Type=notifyy"),
        ("NotifyAccess=main", "NotifyAcess=main"),
        ("ProtectSystem=strict", "ProtectSystem=very"),
    ],
)
def test_verify_catches_unit_errors(bad: str, why: str, tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert bad in text
    status, output = _verify(text.replace(bad, why), tmp_path)
    assert status != 0, f"a broken unit ({why}) passed verification:\n{output}"


@pytest.mark.systemd
@needs_systemd_analyze
def test_unit_hardening_exposure(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text())
    proc = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", os.fspath(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if "--offline" in proc.stderr and "unrecognized" in proc.stderr:
        pytest.skip("systemd-analyze security --offline needs systemd >= 250")
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout + proc.stderr)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) <= 2.0, proc.stdout


def test_unit_contents() -> None:
    text = UNIT.read_text()
    s = _unit_settings(text)
    assert EXEC_START in text.splitlines()
    expected = {
        "Type": "notify",
        "NotifyAccess": "main",
        "Restart": "on-failure",
        "WatchdogSec": "10s",
        "TimeoutStopSec": "30s",
        "KillSignal": "SIGTERM",
        "User": "hyperframes",
        "Group": "hyperframes",
        "ProtectSystem": "strict",
        "ReadWritePaths": "/var/lib/hyperframes",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "SystemCallArchitectures": "native",
        "WantedBy": "multi-user.target",
    }
    for key, value in expected.items():
        assert s.get(key) == [value], f"{key}: {s.get(key)}"


def test_unit_holds_enough_descriptors() -> None:
    """Issue 41: the soft limit is 1024 unless the unit says otherwise."""
    s = _unit_settings(UNIT.read_text())
    assert s.get("LimitNOFILE") == [str(NOFILE_TARGET)]  # soft = hard = what the daemon asks
    # room for many sockets at the default max_connections, beside the recorder's own
    default = ZmqSocketConfig("z", "tcp://127.0.0.1:1").max_connections
    assert 16 * default + OWN_DESCRIPTORS <= NOFILE_TARGET


def test_install_script_syntax() -> None:
    proc = subprocess.run(
        ["bash", "-n", os.fspath(INSTALL)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert INSTALL.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in INSTALL.read_text()
    assert os.access(INSTALL, os.X_OK), "install.sh must be executable"


_MUTATING = ("apt-get", "useradd", "install", "systemctl", "chown", "ln")


def _dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``install.sh --dry-run`` with every mutating command stubbed to record a call.

    The stubs make the test safe even if --dry-run broke (CI may run as root),
    and make it fail when a dry run executes anything.
    """
    with tempfile.TemporaryDirectory(prefix="hf-stubs-") as tmp:
        stubs = Path(tmp)
        marker = stubs / "called"
        for name in _MUTATING:
            stub = stubs / name
            stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {marker}\nexit 97\n')
            stub.chmod(0o755)
        # python3 checks its version (allowed) but must not build a venv.
        real_python = shutil.which("python3")
        assert real_python is not None
        (stubs / "python3").write_text(
            f'#!/bin/sh\nif [ "$1" = "-m" ]; then echo "python3 $*" >> {marker}; exit 97; fi\n'
            f'exec {real_python} "$@"\n'
        )
        (stubs / "python3").chmod(0o755)
        env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run(
            ["bash", os.fspath(INSTALL), "--dry-run", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        assert not marker.exists(), f"--dry-run executed: {marker.read_text()}"
    return proc


def test_install_dry_run(tmp_path: Path) -> None:
    config = tmp_path / "car.yaml"
    config.write_text("vehicle: test\n")
    proc = _dry_run("--config", os.fspath(config), os.fspath(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Each "+ " line is one command, quoted with printf %q: split it back into words.
    actions = [
        " ".join(shlex.split(ln[2:])) for ln in proc.stdout.splitlines() if ln.startswith("+ ")
    ]
    assert actions, proc.stdout
    assert (
        f"/opt/hyperframes/venv/bin/python -m pip install --quiet --upgrade "
        f"{ROOT}[recorder,systemd,upload]" in actions
    ), actions
    assert "ln -sfn /opt/hyperframes/venv/bin/hyperframes /usr/local/bin/hyperframes" in actions
    unit_install = f"install -m 0644 {UNIT} /etc/systemd/system/{UNIT.name}"
    assert unit_install in actions
    assert f"install -m 0644 {UPLOAD} /etc/systemd/system/{UPLOAD.name}" in actions
    if not Path("/etc/hyperframes/vehicle.yaml").exists():  # else that one decides
        assert f"systemctl enable {UNIT.name}" in actions  # the config has no upload:
        assert f"{UPLOAD.name.removesuffix('.service')} installed but not enabled" in proc.stdout
    assert not any(a.startswith("systemctl restart") for a in actions), "no --start given"
    assert "install -d -m 0750 -o hyperframes -g hyperframes /var/lib/hyperframes" in actions
    if not Path("/etc/hyperframes/vehicle.yaml").exists():
        assert (
            f"install -m 0640 -o root -g hyperframes {config} /etc/hyperframes/vehicle.yaml"
            in actions
        )
    # The venv the script builds is the one the unit's ExecStart runs.
    assert "/opt/hyperframes/venv/bin/hyperframes check-config /etc/hyperframes/vehicle.yaml" in (
        actions
    )
    if not SYSTEMD_RUNNING:  # a container, a chroot, CI: enable works offline
        assert "systemctl daemon-reload" not in actions
        assert "no running systemd (/run/systemd/system is absent" in proc.stdout
        return
    order = [
        actions.index(unit_install),
        actions.index("systemctl daemon-reload"),
        actions.index(f"systemctl enable {UNIT.name}"),
    ]
    assert order == sorted(order), "unit installed, then daemon-reload, then enable"


@pytest.mark.skipif(Path("/etc/hyperframes/vehicle.yaml").exists(),
                    reason="this machine's installed config decides")  # fmt: skip
def test_install_dry_run_enables_the_uploader_when_the_config_uploads(tmp_path: Path) -> None:
    config = tmp_path / "car.yaml"
    config.write_text("vehicle_id: test\nupload:\n  dest: s3://fleet/raw\n")
    proc = _dry_run("--start", "--config", os.fspath(config), os.fspath(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"+ install -m 0644 {UPLOAD} /etc/systemd/system/{UPLOAD.name}" in lines
    both = f"{UNIT.name} {UPLOAD.name}"
    if SYSTEMD_RUNNING:
        assert f"+ systemctl enable {both}" in lines and f"+ systemctl restart {both}" in lines
    else:
        assert f"+ systemctl enable {both}" in lines
    assert f"{config} has an upload: section, enabling hyperframes-upload" in proc.stdout


def test_install_dry_run_start() -> None:
    proc = _dry_run("--start", os.fspath(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    restart = f"+ systemctl restart {UNIT.name}"
    if SYSTEMD_RUNNING:
        assert restart in proc.stdout.splitlines()
    else:
        assert restart not in proc.stdout.splitlines()
        assert "skipped systemctl daemon-reload and restart (--start)" in proc.stdout


def _image_root(tmp_path: Path) -> Path:
    """The bare bones of a Debian image root: the account files useradd edits, python3."""
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    for name in ("shadow", "gshadow"):
        (root / "etc" / name).write_text(
            "root:*:19000:0:99999:7:::\n" if name == "shadow" else "root:*::\n"
        )
        (root / "etc" / name).chmod(0o600)
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").symlink_to("/usr/bin/python3")
    return root


def test_install_dry_run_into_an_image_root(tmp_path: Path) -> None:
    root = _image_root(tmp_path)
    proc = _dry_run("--root", os.fspath(root), os.fspath(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    actions = [
        " ".join(shlex.split(ln[2:])) for ln in proc.stdout.splitlines() if ln.startswith("+ ")
    ]
    r = os.fspath(root)
    assert any(a.startswith(f"useradd --root {r} --system") for a in actions), actions
    assert f"/usr/bin/python3 -m venv {r}/opt/hyperframes/venv" in actions
    assert f"ln -sfn /opt/hyperframes/venv/bin/hyperframes {r}/usr/local/bin/hyperframes" in (
        actions
    )
    assert f"install -m 0644 {UNIT} {r}/etc/systemd/system/{UNIT.name}" in actions
    assert f"systemctl --root={r} enable {UNIT.name}" in actions  # no config: no uploader
    assert f"install -m 0644 {UPLOAD} {r}/etc/systemd/system/{UPLOAD.name}" in actions
    assert not any(a.startswith("systemctl daemon-reload") for a in actions)
    assert f"no running systemd (installing into the image at {r})" in proc.stdout


def test_install_refuses_a_root_that_is_no_image(tmp_path: Path) -> None:
    proc = _dry_run("--root", os.fspath(tmp_path), os.fspath(ROOT))
    assert proc.returncode != 0 and "not a system image root" in proc.stderr
    assert "+ " not in proc.stdout


@pytest.mark.slow
@pytest.mark.systemd
@pytest.mark.skipif(os.geteuid() != 0, reason="install.sh needs root (file owners, useradd)")
@pytest.mark.skipif(
    shutil.which("systemctl") is None or not Path("/usr/bin/python3").exists(),
    reason="needs systemctl and /usr/bin/python3 (Debian: systemd, python3)",
)
def test_install_into_an_image_root_without_systemd(tmp_path: Path) -> None:
    """The whole install into an image root: no running systemd there, nothing started.

    Builds the venv with pip (the machine's pip configuration says where from).
    """
    root = _image_root(tmp_path)
    # the demo config: vehicle-example.yaml names key and CA files that only a vehicle has,
    # which check-config reports (and install.sh then warns about)
    config = ROOT / "configs" / "demo.yaml"
    cmd = [
        "bash",
        os.fspath(INSTALL),
        "--root",
        os.fspath(root),
        "--config",
        os.fspath(config),
        "--start",
        os.fspath(ROOT),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "skipped systemctl daemon-reload and restart (--start)" in out
    assert f"OK {root}/etc/hyperframes/vehicle.yaml" in out  # check-config in the image's venv
    unit = root / "etc/systemd/system" / UNIT.name
    assert unit.read_text() == UNIT.read_text()
    wants = root / "etc/systemd/system/multi-user.target.wants" / UNIT.name
    assert str(wants.readlink()) == f"/etc/systemd/system/{UNIT.name}"  # the image's path
    link = root / "usr/local/bin/hyperframes"
    assert str(link.readlink()) == "/opt/hyperframes/venv/bin/hyperframes"
    venv = root / "opt/hyperframes/venv"
    assert (venv / "bin/hyperframes").read_text().startswith("#!/opt/hyperframes/venv/bin/python")
    assert not [
        p
        for p in (venv / "bin").iterdir()
        if p.is_file() and not p.is_symlink() and os.fspath(root) in p.read_text("latin-1")
    ]
    (user,) = [
        ln.split(":")
        for ln in (root / "etc/passwd").read_text().splitlines()
        if ln.startswith("hyperframes:")
    ]
    uid, gid = int(user[2]), int(user[3])
    data = (root / "var/lib/hyperframes").stat()
    assert (data.st_uid, data.st_gid, data.st_mode & 0o777) == (uid, gid, 0o750)
    conf = (root / "etc/hyperframes/vehicle.yaml").stat()
    assert (conf.st_uid, conf.st_gid, conf.st_mode & 0o777) == (0, gid, 0o640)
    check = subprocess.run([os.fspath(venv / "bin/python"), "-c",
                            "import recorder, systemd, boto3"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stderr
    # the demo config has an upload: section: the uploader is enabled beside the recorder
    assert (root / "etc/systemd/system" / UPLOAD.name).read_text() == UPLOAD.read_text()
    up_wants = root / "etc/systemd/system/multi-user.target.wants" / UPLOAD.name
    assert str(up_wants.readlink()) == f"/etc/systemd/system/{UPLOAD.name}"
    assert "has an upload: section, enabling hyperframes-upload" in out
    # the same install again after the section is removed: the uploader is disabled
    conf_file = root / "etc/hyperframes/vehicle.yaml"
    doc = yaml.safe_load(conf_file.read_text())
    del doc["upload"]
    conf_file.write_text(yaml.safe_dump(doc))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "has no upload: section, hyperframes-upload installed but not enabled" in out
    assert not up_wants.exists() and not up_wants.is_symlink()
    assert wants.is_symlink()  # the recorder stays enabled


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/hyperframes"], "no such project directory or wheel"),
        (["--config", "/nonexistent.yaml"], "config not found"),
        (["--bogus"], "unknown option --bogus"),
        (["--config"], "--config needs a file"),
    ],
)
def test_install_rejects_bad_arguments(args: list[str], message: str) -> None:
    proc = _dry_run(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "+ " not in proc.stdout, "nothing may be attempted after a bad argument"


def test_install_help() -> None:
    proc = subprocess.run(
        ["bash", os.fspath(INSTALL), "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert "--dry-run" in proc.stdout
