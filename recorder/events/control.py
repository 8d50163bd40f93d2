"""The local control socket: ``hyperframes mark`` talks to the running recorder through it.

A Unix stream socket (``events.control_socket``, default
``/run/hyperframes/control.sock`` in the unit's RuntimeDirectory), mode 0600:
only the recorder's user (and root) may connect. One request per connection,
one JSON object per line each way::

    -> {"op": "mark", "name": "bookmark", "pre_s": 30, "tags": {"driver": "ana"}, "note": "..."}
    <- {"ok": true, "t_ns": 1735689600123456789, "pre_s": 30.0, "post_s": 5.0}
    <- {"ok": false, "error": "name 'a b' must be 1-64 letters, ..."}

``{"op": "ping"}`` answers ``{"ok": true, "vehicle": ...}``. A socket that
cannot be created is logged and the recorder records on without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hyperframes.format.jsontext import parse_json
from hyperframes.recorder.errors import RecorderError

__all__ = ["ControlServer", "NoRecorderError", "request"]

_log = logging.getLogger(__name__)
_MAX_REQUEST = 64 * 1024

Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


class NoRecorderError(RecorderError, ConnectionError):
    """No recorder answers on the control socket (not running, or another socket path)."""


class ControlServer:
    """Serves the control socket on the running event loop; ``handler`` answers requests."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self._handler = handler
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> bool:
        """Bind the socket (owner-only); False, with a log line, when that is impossible."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.is_socket() or self.path.exists():
                if _answers(self.path):
                    _log.error("control socket %s is in use by another recorder; `mark` will "
                               "reach that one, not this one", self.path)  # fmt: skip
                    return False
                self.path.unlink()
            old = os.umask(0o177)
            try:
                self._server = await asyncio.start_unix_server(
                    self._client, path=str(self.path), limit=_MAX_REQUEST
                )
            finally:
                os.umask(old)
            self.path.chmod(stat.S_IRUSR | stat.S_IWUSR)
        except OSError as exc:
            _log.error("control socket %s unavailable (%s): `hyperframes mark` cannot reach "
                       "this recorder; recording goes on", self.path, exc)  # fmt: skip
            return False
        _log.info("control socket %s", self.path)
        return True

    async def close(self) -> None:
        """Stop serving and remove the socket file."""
        if self._server is None:
            return
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        self._server = None
        with contextlib.suppress(OSError):
            self.path.unlink()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                async with asyncio.timeout(5.0):
                    line = await reader.readline()
                req = parse_json(line, "request", 65536)
                if not isinstance(req, dict):
                    raise ValueError("a request is a JSON object")
                reply = self._handler(req)
            except (ValueError, UnicodeDecodeError, TimeoutError, asyncio.LimitOverrunError) as e:
                reply = {"ok": False, "error": f"bad request: {e}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except Exception as exc:  # a client never hurts the recorder
            _log.warning("control socket: request failed: %r", exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def request(path: str | os.PathLike[str], body: Mapping[str, Any],
            timeout_s: float = 5.0) -> dict[str, Any]:  # fmt: skip
    """Send one request to the recorder at ``path``; its reply as a dict.

    Raises :class:`NoRecorderError` when nothing listens there, and
    ``PermissionError`` when the socket belongs to another user.
    """
    p = os.fspath(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            s.connect(p)
        except (FileNotFoundError, ConnectionRefusedError):
            raise NoRecorderError(
                f"no recorder is running on {p} (start it with `hyperframes record --config "
                "VEHICLE.yaml` or `systemctl start hyperframes-recorder`, or check "
                "events.control_socket in the config)"
            ) from None
        except PermissionError:
            raise PermissionError(
                f"permission denied on {p}: the control socket is owner-only; run as the "
                "recorder's user (e.g. sudo -u hyperframes hyperframes mark ...)"
            ) from None
        s.sendall(json.dumps(dict(body)).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    try:
        reply = json.loads(data)
    except ValueError:
        raise NoRecorderError(f"{p}: no valid answer from the recorder") from None
    if not isinstance(reply, dict):
        raise NoRecorderError(f"{p}: no valid answer from the recorder")
    return reply
