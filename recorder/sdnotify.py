"""systemd integration that also works without systemd.

:class:`Notifier` speaks the ``sd_notify(3)`` protocol: ``READY=1`` once the
sockets are up, ``WATCHDOG=1`` from the event loop, ``STATUS=`` with live rates
and ``STOPPING=1`` on shutdown. It uses systemd-python's
:func:`systemd.daemon.notify` when that is importable (``pip install
'hyperframes-sensors[systemd]'``) and otherwise a small built-in implementation of the
same protocol: one datagram per message to the ``AF_UNIX`` socket named by
``$NOTIFY_SOCKET`` (a path, or an abstract socket written ``@name``). Without
``$NOTIFY_SOCKET`` (not started by systemd, or ``Type=`` is not ``notify``)
every call is a cheap no-op, so the daemon runs the same in a terminal.

:func:`setup_logging` sends log records to journald (with their priority and
structured fields) when the process runs under systemd and systemd-python is
installed, and to stderr otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Literal

from hyperframes._install import install_hint

__all__ = [
    "Backend",
    "Notifier",
    "watchdog_interval_s",
    "setup_logging",
    "running_under_systemd",
]

_log = logging.getLogger(__name__)

Backend = Literal["auto", "systemd", "builtin"]
"""Which sd_notify implementation a :class:`Notifier` uses; ``auto`` prefers systemd-python."""

# The SYSLOG_IDENTIFIER journald files our records under (`journalctl -t hyperframes`).
_IDENTIFIER = "hyperframes"
# Marks the handler setup_logging installed, so a second call replaces it.
_HANDLER_MARK = "_hyperframes_handler"


def _systemd_notify_function() -> Callable[[str], bool] | None:
    """Return systemd-python's ``notify`` or ``None`` when it is not installed."""
    try:
        from systemd import daemon  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    notify: Callable[[str], bool] = daemon.notify
    return notify


def _builtin_notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send one ``sd_notify`` datagram; ``False`` when ``$NOTIFY_SOCKET`` is unset.

    The plain protocol from ``sd_notify(3)``: newline-separated ``KEY=VALUE``
    assignments in one datagram to an ``AF_UNIX``/``SOCK_DGRAM`` socket. A
    leading ``@`` names a socket in the abstract namespace. Raises
    :class:`OSError` when the socket cannot be reached.
    """
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address[0] == "@":
        target = "\0" + address[1:]
    elif address[0] == "/":
        target = address
    else:
        # vsock: and other transports are for VMs; this daemon runs on the host.
        raise OSError(f"unsupported NOTIFY_SOCKET address {address!r}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        # Never block the event loop: if nobody reads the socket and its queue is
        # full, the send fails (BlockingIOError) and the caller logs it.
        sock.setblocking(False)
        sock.connect(target)
        sock.sendall(message.encode("utf-8"))
    return True


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """The systemd watchdog timeout in seconds, or ``None`` when no watchdog applies.

    Reads ``$WATCHDOG_USEC`` (set from ``WatchdogSec=``) and ``$WATCHDOG_PID``
    the way ``sd_watchdog_enabled(3)`` does: the watchdog applies only when the
    interval is a positive integer and ``$WATCHDOG_PID``, if set, is this
    process. Ping at half this interval (:meth:`Notifier.watchdog_ping_period_s`).
    """
    env = os.environ if environ is None else environ
    usec_text = env.get("WATCHDOG_USEC")
    if not usec_text:
        return None
    try:
        usec = int(usec_text)
    except ValueError:
        return None
    if usec <= 0:
        return None
    pid_text = env.get("WATCHDOG_PID")
    if pid_text:
        try:
            pid = int(pid_text)
        except ValueError:
            return None
        if pid != os.getpid():
            return None
    return usec / 1_000_000


class Notifier:
    """Tell systemd about the daemon's state; a no-op when not started by systemd.

    ``backend="auto"`` (the default) uses systemd-python when importable and
    the built-in datagram implementation otherwise; ``"systemd"`` and
    ``"builtin"`` force one (``"systemd"`` raises :class:`ImportError` when
    systemd-python is missing). A failing send (the socket went away) is
    logged once per message kind and reported as ``False``; it never raises,
    since the recorder must keep recording whatever happens to its supervisor.
    """

    def __init__(self, backend: Backend = "auto") -> None:
        notify = None if backend == "builtin" else _systemd_notify_function()
        if backend == "systemd" and notify is None:
            raise ImportError(f"systemd-python is not installed: {install_hint('systemd')}")
        self._systemd_notify = notify
        self._warned: set[str] = set()

    @property
    def backend(self) -> Literal["systemd", "builtin"]:
        """The implementation in use: ``"systemd"`` (systemd-python) or ``"builtin"``."""
        return "builtin" if self._systemd_notify is None else "systemd"

    @property
    def enabled(self) -> bool:
        """Whether ``$NOTIFY_SOCKET`` is set, that is, whether messages go anywhere."""
        return bool(os.environ.get("NOTIFY_SOCKET"))

    def notify(self, message: str) -> bool:
        """Send raw ``KEY=VALUE`` lines; ``True`` when systemd received them."""
        if not self.enabled:
            return False
        try:
            if self._systemd_notify is not None:
                return bool(self._systemd_notify(message))
            return _builtin_notify(message)
        except OSError as exc:
            kind = message.split("=", 1)[0]
            if kind not in self._warned:
                self._warned.add(kind)
                _log.warning("sd_notify %s failed: %s", kind, exc)
            return False

    def ready(self, status: str | None = None) -> bool:
        """Send ``READY=1`` (with an optional ``STATUS=``): start-up is complete."""
        if status is None:
            return self.notify("READY=1")
        return self.notify(f"READY=1\nSTATUS={_one_line(status)}")

    def watchdog(self) -> bool:
        """Send ``WATCHDOG=1``: the event loop is alive."""
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        """Send ``STATUS=text``, shown by ``systemctl status`` (newlines become spaces)."""
        return self.notify(f"STATUS={_one_line(text)}")

    def stopping(self, status: str | None = None) -> bool:
        """Send ``STOPPING=1`` (with an optional ``STATUS=``): shutdown has begun."""
        if status is None:
            return self.notify("STOPPING=1")
        return self.notify(f"STOPPING=1\nSTATUS={_one_line(status)}")

    def watchdog_interval_s(self) -> float | None:
        """The watchdog timeout in seconds, ``None`` when none applies to this process."""
        return watchdog_interval_s()

    def watchdog_ping_period_s(self) -> float | None:
        """How often to send ``WATCHDOG=1``: half the timeout, as systemd recommends."""
        interval = self.watchdog_interval_s()
        return None if interval is None else interval / 2

    async def keepalive(
        self,
        status: Callable[[], str] | None = None,
        status_period_s: float = 5.0,
    ) -> None:
        """Ping the watchdog and refresh ``STATUS=`` from the event loop until cancelled.

        Run it as a task next to the daemon's other tasks: because it runs on
        the event loop, a stalled loop stops the pings and systemd restarts
        the service. ``status`` (for example ``RecorderStats.status_line``)
        is called every ``status_period_s``. Returns at once when
        ``$NOTIFY_SOCKET`` is unset.
        """
        if not self.enabled:
            return
        ping = self.watchdog_ping_period_s()
        periods = [p for p in (ping, status_period_s if status else None) if p is not None]
        if not periods:
            return
        period = min(periods)
        since_status = status_period_s  # refresh the status on the first pass
        while True:
            if ping is not None:
                self.watchdog()
            if status is not None and since_status >= status_period_s:
                since_status = 0.0
                self.status(status())
            await asyncio.sleep(period)
            since_status += period


def _one_line(text: str) -> str:
    """Flatten text for a single ``KEY=VALUE`` assignment."""
    return " ".join(text.splitlines())


def running_under_systemd(environ: Mapping[str, str] | None = None) -> bool:
    """Whether systemd started this process (``$INVOCATION_ID`` or ``$JOURNAL_STREAM`` set)."""
    env = os.environ if environ is None else environ
    return bool(env.get("INVOCATION_ID") or env.get("JOURNAL_STREAM"))


def setup_logging(
    level: int | str = logging.INFO, *, journal: bool | None = None, force: bool = False
) -> logging.Handler:
    """Configure the root logger for the daemon and return the handler installed.

    ``journal=None`` (default) picks journald when :func:`running_under_systemd`
    and systemd-python's :class:`systemd.journal.JournalHandler` is importable,
    stderr otherwise; ``True`` requires journald, ``False`` forces stderr.
    Under systemd without systemd-python, stderr still reaches the journal
    (the unit's default), so timestamps are left to journald. Calling again
    replaces the handler installed before; ``force=True`` also removes every
    other root handler (say, from an earlier :func:`logging.basicConfig`), so
    records are not logged twice.
    """
    root = logging.getLogger()
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for old in [h for h in root.handlers if force or getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()

    use_journal = running_under_systemd() if journal is None else journal
    handler: logging.Handler | None = None
    if use_journal:
        try:
            from systemd.journal import JournalHandler  # noqa: PLC0415 - optional dependency
        except ImportError:
            if journal:
                raise ImportError(
                    f"systemd-python is not installed: {install_hint('systemd')}"
                ) from None
        else:
            handler = JournalHandler(SYSLOG_IDENTIFIER=_IDENTIFIER)
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            # libsystemd opens its journal socket on the first record: open it now, while
            # one descriptor table serves every thread (the writer later takes a table of
            # its own, hyperframes.recorder.limits), so every thread finds that socket
            handler.emit(logging.LogRecord(__name__, logging.DEBUG, __file__, 0,
                                           "logging to the journal", None, None))  # fmt: skip
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        if running_under_systemd():
            fmt = "%(levelname)s %(name)s: %(message)s"
        else:
            fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
        handler.setFormatter(logging.Formatter(fmt))
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    return handler
