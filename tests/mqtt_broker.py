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
from pathlib import Path

import pytest

__all__ = ["MOSQUITTO", "BrokerUnavailable", "find_mosquitto", "free_port", "mosquitto"]

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
    workdir: Path | str | None = None, *, port: int | None = None, timeout: float = 10.0
) -> Iterator[int]:
    """Run a Mosquitto broker on ``127.0.0.1:PORT`` (anonymous access); yields the port.

    The config and log go to ``workdir`` (a temporary directory by default).
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
                "allow_anonymous true\n"
                "persistence false\n"
                "max_queued_messages 100000\n"
                "max_inflight_messages 0\n"
                "message_size_limit 0\n"
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
