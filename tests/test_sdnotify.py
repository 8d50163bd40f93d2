"""The sd_notify protocol over a real NOTIFY_SOCKET, for both implementations."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperframes.recorder import sdnotify
from hyperframes.recorder.sdnotify import Notifier, setup_logging, watchdog_interval_s

try:
    import systemd.daemon  # noqa: F401
except ImportError:
    HAVE_SYSTEMD_PYTHON = False
else:
    HAVE_SYSTEMD_PYTHON = True
BACKENDS = [
    "builtin",
    pytest.param(
        "systemd",
        marks=pytest.mark.skipif(not HAVE_SYSTEMD_PYTHON, reason="systemd-python not installed"),
    ),
]


def _recv_all(sock: socket.socket, timeout: float = 2.0) -> list[bytes]:
    """Every datagram waiting on ``sock``; waits up to ``timeout`` for the first."""
    sock.settimeout(timeout)
    out = [sock.recv(65536)]
    sock.setblocking(False)
    while True:
        try:
            out.append(sock.recv(65536))
        except BlockingIOError:
            return out


@pytest.fixture
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A bound AF_UNIX datagram socket named by $NOTIFY_SOCKET (a short path: 108-byte limit)."""
    with tempfile.TemporaryDirectory(prefix="hf-sd-") as tmp:
        path = Path(tmp) / "notify"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(os.fspath(path))
        monkeypatch.setenv("NOTIFY_SOCKET", os.fspath(path))
        try:
            yield sock
        finally:
            sock.close()


@pytest.fixture
def abstract_notify_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A socket in the abstract namespace, named ``@name`` in $NOTIFY_SOCKET."""
    name = f"hf-sd-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    try:
        yield sock
    finally:
        sock.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_selected(backend: str) -> None:
    assert Notifier(backend).backend == backend  # type: ignore[arg-type]


def test_auto_prefers_systemd_python_when_importable() -> None:
    expected = "systemd" if HAVE_SYSTEMD_PYTHON else "builtin"
    assert Notifier().backend == expected


def test_forcing_systemd_without_systemd_python_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sdnotify, "_systemd_notify_function", lambda: None)
    with pytest.raises(ImportError, match=r"hyperframes-sensors\[systemd\]"):
        Notifier("systemd")
    assert Notifier("auto").backend == "builtin"


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_datagrams(backend: str, notify_socket: socket.socket) -> None:
    n = Notifier(backend)  # type: ignore[arg-type]
    assert n.enabled
    assert n.ready() is True
    assert n.watchdog() is True
    assert n.status("12 streams, 1843 frames/s") is True
    assert n.stopping() is True
    assert _recv_all(notify_socket) == [
        b"READY=1",
        b"WATCHDOG=1",
        b"STATUS=12 streams, 1843 frames/s",
        b"STOPPING=1",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_status_is_one_line_and_combines_with_ready_and_stopping(
    backend: str, notify_socket: socket.socket
) -> None:
    n = Notifier(backend)  # type: ignore[arg-type]
    n.status("line one\nline two")
    n.ready(status="recording")
    n.stopping(status="flushing segment 7")
    assert _recv_all(notify_socket) == [
        b"STATUS=line one line two",
        b"READY=1\nSTATUS=recording",
        b"STOPPING=1\nSTATUS=flushing segment 7",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_abstract_socket(backend: str, abstract_notify_socket: socket.socket) -> None:
    n = Notifier(backend)  # type: ignore[arg-type]
    assert n.ready() is True
    assert n.watchdog() is True
    assert _recv_all(abstract_notify_socket) == [b"READY=1", b"WATCHDOG=1"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_noop_without_notify_socket(
    backend: str, notify_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET")
    n = Notifier(backend)  # type: ignore[arg-type]
    assert not n.enabled
    assert n.ready() is False
    assert n.watchdog() is False
    assert n.status("x") is False
    assert n.stopping() is False
    with pytest.raises(TimeoutError):
        _recv_all(notify_socket, timeout=0.2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vanished_socket_is_logged_once_and_never_raises(
    backend: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with tempfile.TemporaryDirectory(prefix="hf-sd-") as tmp:
        monkeypatch.setenv("NOTIFY_SOCKET", os.fspath(Path(tmp) / "gone"))
        n = Notifier(backend)  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="hyperframes.recorder.sdnotify"):
            assert n.watchdog() is False
            assert n.watchdog() is False
            assert n.status("x") is False
    warnings = [r.getMessage() for r in caplog.records if r.name == "hyperframes.recorder.sdnotify"]
    assert len(warnings) == 2, warnings
    assert "WATCHDOG failed" in warnings[0]
    assert "STATUS failed" in warnings[1]


def test_builtin_rejects_unsupported_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "vsock:2:1234")
    with pytest.raises(OSError, match="unsupported"):
        sdnotify._builtin_notify("READY=1")
    assert Notifier("builtin").ready() is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "10000000"}, 10.0),
        ({"WATCHDOG_USEC": "2500000", "WATCHDOG_PID": "{pid}"}, 2.5),
        ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "{other}"}, None),
        ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "nope"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "-5"}, None),
        ({"WATCHDOG_USEC": "ten"}, None),
        ({"WATCHDOG_USEC": ""}, None),
        ({"WATCHDOG_PID": "{pid}"}, None),
    ],
)
def test_watchdog_interval(
    env: dict[str, str], expected: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = os.getpid()
    resolved = {k: v.format(pid=pid, other=pid + 1) for k, v in env.items()}
    assert watchdog_interval_s(resolved) == expected

    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    for key, value in resolved.items():
        monkeypatch.setenv(key, value)
    n = Notifier("builtin")
    assert n.watchdog_interval_s() == expected
    assert n.watchdog_ping_period_s() == (None if expected is None else expected / 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_keepalive_pings_and_refreshes_status(
    backend: str, notify_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # ping every 50 ms
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    n = Notifier(backend)  # type: ignore[arg-type]
    calls = 0

    def status() -> str:
        nonlocal calls
        calls += 1
        return f"status {calls}"

    async def main() -> None:
        task = asyncio.create_task(n.keepalive(status, status_period_s=0.2))
        await asyncio.sleep(0.33)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    got = _recv_all(notify_socket)
    assert got.count(b"WATCHDOG=1") >= 4, got
    statuses = [d for d in got if d.startswith(b"STATUS=")]
    assert statuses[:2] == [b"STATUS=status 1", b"STATUS=status 2"], got
    assert got[0] == b"WATCHDOG=1"


def test_keepalive_returns_at_once_without_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    asyncio.run(asyncio.wait_for(Notifier("builtin").keepalive(lambda: "x"), timeout=1))


@pytest.fixture
def clean_root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for h in list(root.handlers):
        if h not in handlers:
            h.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_setup_logging_plain_stderr(
    clean_root_logger: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    first = setup_logging("debug")
    second = setup_logging(logging.INFO)
    assert type(second) is logging.StreamHandler
    assert first not in clean_root_logger.handlers, "a second call must replace the handler"
    assert clean_root_logger.level == logging.INFO
    logging.getLogger("recorder.test").warning("disk at %d%%", 93)
    err = capsys.readouterr().err
    assert "WARNING recorder.test: disk at 93%" in err


def test_setup_logging_under_systemd_without_journal_keeps_stderr(
    clean_root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef")
    h = setup_logging(journal=False)
    assert type(h) is logging.StreamHandler
    assert h.formatter is not None
    assert "asctime" not in (h.formatter._fmt or ""), "journald adds its own timestamps"


@pytest.mark.skipif(not HAVE_SYSTEMD_PYTHON, reason="systemd-python not installed")
def test_setup_logging_uses_journald_under_systemd(
    clean_root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from systemd.journal import JournalHandler

    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef")
    assert isinstance(setup_logging(), JournalHandler)
    monkeypatch.delenv("INVOCATION_ID")
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")
    assert isinstance(setup_logging(), JournalHandler)


def test_setup_logging_force_replaces_basicconfig(
    clean_root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    other = logging.StreamHandler()
    clean_root_logger.addHandler(other)
    setup_logging()
    assert other in clean_root_logger.handlers, "without force, foreign handlers stay"
    ours = setup_logging(force=True)
    assert clean_root_logger.handlers == [ours]
