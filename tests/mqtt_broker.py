"""A real Mosquitto broker on a free loopback port, for tests and benchmarks.

    from mqtt_broker import mosquitto, MOSQUITTO

    with mosquitto(tmp_path) as port:   # raises BrokerUnavailable if not installed
        ...

The pytest fixture form skips the test with a clear reason when Mosquitto is
not installed (``.ci/run`` installs the Debian package ``mosquitto``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "MOSQUITTO",
    "BrokerUnavailable",
    "SecureBroker",
    "find_mosquitto",
    "free_port",
    "mosquitto",
    "secure_mosquitto",
]

MOSQUITTO = "/usr/sbin/mosquitto"


class BrokerUnavailable(RuntimeError):
    """Mosquitto is not installed or did not start."""


def find_mosquitto() -> str | None:
    """Path of the mosquitto binary (``$MOSQUITTO``, /usr/sbin, then ``$PATH``) or None."""
    for candidate in (os.environ.get("MOSQUITTO"), MOSQUITTO, shutil.which("mosquitto")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerUnavailable(f"mosquitto exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise BrokerUnavailable(f"mosquitto did not listen on port {port} within {timeout:g} s")


@contextmanager
def mosquitto(
    workdir: Path | str | None = None,
    *,
    port: int | None = None,
    timeout: float = 10.0,
    conf_extra: str = "",
    anonymous: bool = True,
) -> Iterator[int]:
    """Run a Mosquitto broker on ``127.0.0.1:PORT`` (anonymous access); yields the port.

    The config and log go to ``workdir`` (a temporary directory by default).
    ``conf_extra`` is appended to the config (more listeners, a password
    file); ``anonymous=False`` requires a login.
    Raises :class:`BrokerUnavailable` when Mosquitto is missing or fails to start.
    """
    exe = find_mosquitto()
    if exe is None:
        raise BrokerUnavailable(
            f"mosquitto not installed (looked for $MOSQUITTO, {MOSQUITTO}, PATH); "
            "install the Debian package 'mosquitto'"
        )
    with tempfile.TemporaryDirectory(prefix="hf-mosquitto-") as tmp:
        base = Path(workdir) if workdir is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            chosen = port if port is not None else free_port()
            conf = base / f"mosquitto-{chosen}.conf"
            log = base / f"mosquitto-{chosen}.log"
            conf.write_text(
                f"listener {chosen} 127.0.0.1\n"
                f"allow_anonymous {'true' if anonymous else 'false'}\n"
                "persistence false\n"
                "max_queued_messages 100000\n"
                "max_inflight_messages 0\n"
                "message_size_limit 0\n" + ("user root\n" if os.geteuid() == 0 else "") + conf_extra
                # as root, mosquitto drops to its own user before reading certificates
            )
            with open(log, "wb") as log_file:
                proc = subprocess.Popen(
                    [exe, "-c", str(conf)], stdout=log_file, stderr=subprocess.STDOUT
                )
            try:
                _wait_for_port(chosen, proc, timeout)
            except BrokerUnavailable as exc:
                proc.kill()
                proc.wait()
                if port is not None or attempt == 2:  # a fixed port, or out of retries
                    raise BrokerUnavailable(f"{exc}; log:\n{log.read_text()[-2000:]}") from None
                continue  # the free port was taken in between: try another
            try:
                yield chosen
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return


@pytest.fixture
def mqtt_broker(tmp_path: Path) -> Iterator[int]:
    """pytest fixture: a fresh broker's port; skips the test when Mosquitto is missing."""
    if find_mosquitto() is None:
        pytest.skip("mosquitto not installed (Debian package 'mosquitto'; .ci/run installs it)")
    with mosquitto(tmp_path / "mosquitto") as port:
        yield port


@dataclass(frozen=True)
class SecureBroker:
    """A broker with a password file, a plain and a TLS listener (:func:`secure_mosquitto`)."""

    plain_port: int
    tls_port: int
    ca_file: Path  # the CA that signed the broker's certificate (for localhost only)
    other_ca_file: Path  # a CA that did not
    username: str
    password: str


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
             "-subj", f"/CN={name}", cwd=d)  # fmt: skip


@contextmanager
def secure_mosquitto(workdir: Path) -> Iterator[SecureBroker]:
    """Mosquitto with a CA and certificate made here (``openssl``), TLS and a password file.

    Both listeners require the login (``mosquitto_passwd``); the TLS listener's
    certificate names ``localhost`` only (``127.0.0.1`` is a mismatch). Raises
    :class:`BrokerUnavailable` when Mosquitto, ``mosquitto_passwd`` or
    ``openssl`` is missing.
    """
    passwd = shutil.which("mosquitto_passwd")
    if shutil.which("openssl") is None or passwd is None:
        raise BrokerUnavailable("openssl and mosquitto_passwd are needed for a TLS broker")
    d = Path(workdir)
    d.mkdir(parents=True, exist_ok=True)
    _make_ca(d, "ca")
    _make_ca(d, "other-ca")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
             cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext",
             cwd=d)  # fmt: skip
    user, password = "recorder", "s3cret-Pa55"
    subprocess.run([passwd, "-b", "-c", str(d / "passwd"), user, password], check=True,
                   capture_output=True, timeout=30)  # fmt: skip
    tls_port = free_port()
    extra = (
        f"password_file {d / 'passwd'}\n"
        f"listener {tls_port} 127.0.0.1\n"
        f"cafile {d / 'ca.crt'}\ncertfile {d / 'server.crt'}\nkeyfile {d / 'server.key'}\n"
    )
    with mosquitto(d, conf_extra=extra, anonymous=False) as port:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", tls_port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"the TLS listener {tls_port} did not open") from None
                time.sleep(0.02)
        yield SecureBroker(port, tls_port, d / "ca.crt", d / "other-ca.crt", user, password)
