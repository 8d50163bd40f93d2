"""A cap on the peer connections one bound ZeroMQ socket holds.

libzmq accepts every connection that arrives and keeps its descriptor until
the peer leaves or fails the ZMTP handshake (``ZMQ_HANDSHAKE_IVL``), so any
local user can make the recorder hold as many descriptors as it likes. A
:class:`PeerCap` follows the socket monitor's ``EVENT_ACCEPTED`` and
``EVENT_DISCONNECTED`` (both carry the connection's descriptor) and, while a
socket holds more than ``max_connections``, shuts down the newest connection
whose peer has sent nothing yet (a ZMTP peer sends its signature at once;
looked for among the newest :data:`_SCAN`), else the newest: ``shutdown(2)``
on libzmq's descriptor, which libzmq then sees fail and closes itself (the
monitor reports ``EVENT_DISCONNECTED``). A driver that has greeted keeps its
place while a stranger's silent connections fill the rest.

A descriptor is shut down only after checking that it still is a connected
stream socket on this socket's own listening address (TCP: the same port,
and address unless bound to a wildcard; IPC: the same path); anything else
is forgotten, never touched. Other transports are not capped. Silence is
known for TCP only (``tcpi_bytes_received``): over IPC the newest goes.
"""

from __future__ import annotations

import socket
import struct
from typing import Final

__all__ = ["PeerCap", "Listener", "parse_listener"]

_TCP_INFO_BYTES_RECEIVED: Final = 128  # offset of tcpi_bytes_received (Linux >= 4.1)
_WILDCARD: Final = frozenset({"0.0.0.0", "::", "*", ""})
_SCAN: Final = 32  # connections looked at for a silent one, newest first

Listener = tuple[str, str, int]
"""``("tcp", host, port)`` or ``("ipc", path, 0)``: where a bound socket listens."""


def parse_listener(endpoint: str | None) -> Listener | None:
    """The listening address of a bound ``LAST_ENDPOINT``; ``None`` for other transports."""
    if not endpoint:
        return None
    scheme, _, rest = endpoint.partition("://")
    if scheme == "ipc" and rest:
        return ("ipc", "\0" + rest[1:] if rest.startswith("@") else rest, 0)
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        if port.isdigit():
            return ("tcp", host.strip("[]"), int(port))
    return None


class PeerCap:
    """Holds one bound socket to ``max_connections`` live peer connections.

    Feed it the monitor's accepted and disconnected descriptors; :meth:`accepted`
    returns how many connections it shut down to stay at the cap. Not
    thread-safe: one event loop.
    """

    def __init__(self, listener: Listener | None, max_connections: int) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.listener = listener
        self.max_connections = max_connections
        self._live: dict[int, None] = {}  # fds, oldest first
        self._cut: set[int] = set()  # shut down, not yet reported disconnected
        self.shut_down = 0
        """Connections shut down for the cap, in all."""

    @property
    def live(self) -> int:
        """Connections accepted and not yet gone (those being cut included)."""
        return len(self._live)

    def accepted(self, fd: int) -> int:
        """A connection was accepted on ``fd``; returns how many were shut down for the cap."""
        self._cut.discard(fd)  # a number reused: the old connection is gone
        self._live.pop(fd, None)
        self._live[fd] = None
        if self.listener is None:
            return 0
        cut = 0
        while self._over():
            victim = self._victim()
            if victim is None:
                break
            if _shut(victim, self.listener):
                self._cut.add(victim)
                cut += 1
            else:
                self._live.pop(victim, None)
        self.shut_down += cut
        return cut

    def disconnected(self, fd: int) -> None:
        """libzmq closed the connection on ``fd``."""
        self._live.pop(fd, None)
        self._cut.discard(fd)

    def _over(self) -> bool:
        return len(self._live) - len(self._cut) > self.max_connections

    def _victim(self) -> int | None:
        """Of the newest :data:`_SCAN`: one whose peer sent nothing yet, else the newest.

        Descriptors found not to be this listener's connections are forgotten
        on the way (a missed disconnect; never expected).
        """
        assert self.listener is not None
        forget: list[int] = []
        victim: int | None = None
        newest: int | None = None
        looked = 0
        for fd in reversed(self._live):
            if fd in self._cut:
                continue
            silent = _look(fd, self.listener)
            if silent is None:
                forget.append(fd)
                if len(self._live) - len(forget) - len(self._cut) <= self.max_connections:
                    break
                continue
            if silent:
                victim = fd
                break
            newest = fd if newest is None else newest
            looked += 1
            if looked >= _SCAN:
                break
        for fd in forget:
            del self._live[fd]
        if not self._over():
            return None
        return victim if victim is not None else newest


def _look(fd: int, listener: Listener) -> bool | None:
    """Whether the peer on ``fd`` has sent nothing yet; ``None`` if ``fd`` is not ours.

    ``fd`` is ours when it is a connected stream socket on ``listener``'s
    address. Silence is known for TCP only (``tcpi_bytes_received``); an IPC
    peer counts as not silent.
    """
    try:
        sock = socket.socket(fileno=fd)  # borrows libzmq's descriptor: detached below
    except OSError:
        return None  # closed, or not a socket
    try:
        if not _ours(sock, listener):
            return None
        if sock.family == socket.AF_UNIX:
            return False
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192)
        if len(info) < _TCP_INFO_BYTES_RECEIVED + 8:
            return False
        return int(struct.unpack_from("<Q", info, _TCP_INFO_BYTES_RECEIVED)[0]) == 0
    except OSError:
        return None
    finally:
        sock.detach()


def _shut(fd: int, listener: Listener) -> bool:
    """``shutdown(2)`` ``fd`` if it is one of ``listener``'s connections; True if done."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        if not _ours(sock, listener):
            return False
        sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        sock.detach()


def _ours(sock: socket.socket, listener: Listener) -> bool:
    """Whether ``sock`` is a connection accepted on ``listener``'s address."""
    if sock.type != socket.SOCK_STREAM:
        return False
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        return False  # a listening socket, not a connection
    kind, address, port = listener
    local = sock.getsockname()
    if kind == "ipc":
        name = local.decode(errors="surrogateescape") if isinstance(local, bytes) else local
        return sock.family == socket.AF_UNIX and name == address
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    return bool(local[1] == port and (address in _WILDCARD or local[0] == address))
