"""CURVE for the ZeroMQ ingest: keys from files, an allow-list of clients, ``hyperframes keygen``.

ZeroMQ sockets have no authentication of their own: anyone who can reach a
``tcp://`` endpoint can send frames. CURVE (libzmq's elliptic-curve
handshake and encryption) with a ZAP handler (pyzmq's
:class:`zmq.auth.thread.ThreadAuthenticator`) closes that: the recorder's
socket holds a server secret key, and only clients whose public key is in
the allow-list directory finish the handshake. A refused handshake is counted
(``auth-failed``, see :mod:`hyperframes.recorder.ingest.zmq`) and nothing from that peer
reaches the recorder.

Key files are pyzmq's certificate format (``zmq.auth.create_certificates``):
``NAME.key`` holds a public key, ``NAME.key_secret`` the public and the
secret key (pyzmq is imported only where a key or a socket is used).
:func:`key_problems` checks them (readable, a key inside, not readable by
others, not writable by the group) so that ``check-config`` and the daemon's
start say what is wrong before any socket exists.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CurveConfig",
    "CurveClientKeys",
    "key_problems",
    "server_public_key_file",
    "apply_curve_server",
    "client_keys",
    "keygen_main",
]


@dataclass(frozen=True, slots=True)
class CurveConfig:
    """``zmq.curve`` of one socket: the server's secret key file and the allowed clients."""

    secret_key: Path
    clients: Path  # a directory of NAME.key public key files, one per allowed client


@dataclass(frozen=True, slots=True)
class CurveClientKeys:
    """What a client (a driver, ``hyperframes sim``) needs to connect to a CURVE socket."""

    public: bytes
    secret: bytes
    server_public: bytes


def server_public_key_file(cfg: CurveConfig) -> Path:
    """``NAME.key`` beside the configured ``NAME.key_secret`` (what clients are given)."""
    return cfg.secret_key.with_name(cfg.secret_key.name.removesuffix("_secret"))


def _load(path: Path, *, secret: bool) -> tuple[bytes, bytes | None]:
    import zmq.auth  # noqa: PLC0415

    public, sec = zmq.auth.load_certificate(path)
    if secret and not sec:
        raise ValueError("holds no secret key (a NAME.key_secret file is needed)")
    return public, sec


def key_problems(key: str, cfg: CurveConfig) -> list[str]:
    """What is wrong with the key files of ``cfg`` (``key`` is the YAML path, for messages)."""
    problems: list[str] = []
    sk = cfg.secret_key
    try:
        st = sk.stat()
        _load(sk, secret=True)
    except (OSError, ValueError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return [f"{key}.secret_key: {sk}: {what}"]
    if st.st_mode & 0o077 & ~0o040:
        problems.append(
            f"{key}.secret_key: {sk} is mode {stat.S_IMODE(st.st_mode):04o}; a secret key must "
            f"not be readable by others nor writable by the group (chmod 0640 or 0600)"
        )
    clients = cfg.clients
    try:
        st = clients.stat()
    except OSError as exc:
        return [*problems, f"{key}.clients: {clients}: {exc.strerror or exc}"]
    if not stat.S_ISDIR(st.st_mode):
        return [*problems, f"{key}.clients: {clients} is not a directory of NAME.key files"]
    if st.st_mode & 0o022:
        problems.append(
            f"{key}.clients: {clients} is writable by group or others (anyone there could allow "
            f"their own key); chmod go-w"
        )
    found = 0
    for p in sorted(clients.glob("*.key")):
        try:
            _load(p, secret=False)
            found += 1
        except (OSError, ValueError) as exc:
            problems.append(f"{key}.clients: {p}: not a public key file ({exc})")
            continue
        if p.stat().st_mode & 0o022:
            problems.append(f"{key}.clients: {p} is writable by group or others; chmod go-w")
    if not found:
        problems.append(f"{key}.clients: {clients} holds no NAME.key file: no client may connect")
    return problems


class _Zap:
    """One ZAP handler per libzmq context (libzmq allows one), shared by its CURVE sockets."""

    def __init__(self, ctx: Any) -> None:
        import zmq  # noqa: PLC0415 - config checks need no pyzmq
        from zmq.auth.thread import ThreadAuthenticator  # noqa: PLC0415

        self.auth = ThreadAuthenticator(zmq.Context.shadow(ctx.underlying))
        self.auth.start()
        self.users = 0


_zaps: dict[int, _Zap] = {}
_zaps_lock = threading.Lock()


def apply_curve_server(sock: Any, name: str, cfg: CurveConfig) -> Any:
    """Make ``sock`` a CURVE server admitting the keys in ``cfg.clients``; returns a release.

    Call the returned function when the socket is closed (the shared ZAP
    handler stops with its last socket).
    """
    public, secret = _load(cfg.secret_key, secret=True)
    key = sock.context.underlying
    with _zaps_lock:
        zap = _zaps.get(key)
        if zap is None:
            zap = _zaps[key] = _Zap(sock.context)
        zap.users += 1
        zap.auth.configure_curve(domain=name, location=os.fspath(cfg.clients))
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_server = True
    sock.zap_domain = name.encode()

    def release() -> None:
        with _zaps_lock:
            zap.users -= 1
            if zap.users == 0:
                _zaps.pop(key, None)
                with contextlib.suppress(Exception):
                    zap.auth.stop()

    return release


def client_keys(client_secret_key: Path, server_public_key: Path) -> CurveClientKeys:
    """The keys a client connects with; ``ValueError`` naming the file when one is unusable."""
    try:
        public, secret = _load(client_secret_key, secret=True)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{client_secret_key}: {exc}") from None
    try:
        server, _ = _load(server_public_key, secret=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{server_public_key}: {exc}") from None
    assert secret is not None
    return CurveClientKeys(public, secret, server)


def keygen_main(args: argparse.Namespace) -> int:
    """``hyperframes keygen DIR NAME``: write ``DIR/NAME.key`` and ``DIR/NAME.key_secret``."""
    import zmq.auth  # noqa: PLC0415

    out = Path(args.dir)
    for suffix in (".key", ".key_secret"):
        if (out / (args.name + suffix)).exists():
            print(f"error: {out / (args.name + suffix)} exists already; not replacing it "
                  "(pick another NAME or DIR)", file=sys.stderr)  # fmt: skip
            return 2
    out.mkdir(mode=0o750, parents=True, exist_ok=True)
    old = os.umask(0o077)  # the secret file is created 0600
    try:
        public, secret = zmq.auth.create_certificates(out, args.name)
    finally:
        os.umask(old)
    Path(public).chmod(0o644)
    print(f"public key (give it to the other side): {public}")
    print(f"secret key (keep it; mode 0600):        {secret}")
    return 0
