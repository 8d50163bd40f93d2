"""A real S3 HTTP endpoint on loopback (moto's standalone server), and a faulty link to it.

    with s3_endpoint() as url:          # raises S3Unavailable when moto is missing
        ...                             # http://127.0.0.1:PORT, any credentials accepted

:class:`FaultyLink` is a TCP relay in front of it that can cut the link
(connections reset), answer ``503 Slow Down`` to every request, or throttle.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mqtt_broker import free_port

__all__ = ["S3Unavailable", "s3_endpoint", "FaultyLink", "s3_client"]


class S3Unavailable(RuntimeError):
    """moto[server] is not installed or did not start."""


@contextmanager
def s3_endpoint(env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``moto_server`` on a free loopback port; yields its URL."""
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        raise S3Unavailable("moto[server] is not installed (the dev extra brings it)") from exc
    port = free_port()
    exe = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(
        [*cmd, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise S3Unavailable(f"moto_server exited with status {proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline:
                raise S3Unavailable("moto_server did not listen within 30 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def s3_client(url: str, key: str = "test", secret: str = "test"):  # type: ignore[no-untyped-def]
    """A boto3 client for the endpoint (tests create buckets and read objects with it)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
    )


class FaultyLink:
    """A loopback TCP relay to ``target_port``: ``mode`` is ``"up"``, ``"cut"`` or ``"503"``;
    ``rate`` throttles what goes to the server, ``seen`` lists the requests passed on."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.mode = "up"
        self.requests = 0
        self.rate: float | None = None  # bytes/s towards the server while "up"; None: no cap
        self.seen: list[str] = []  # request lines (METHOD PATH) the relay passed on
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The relay's endpoint URL."""
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        self.requests += 1
        if self.mode == "cut":
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            conn.close()  # RST
            return
        if self.mode == "503":
            with contextlib.suppress(OSError):
                conn.settimeout(2)
                conn.recv(65536)
                body = b"<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
                conn.sendall(
                    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                    b"Connection: close\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
            conn.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            conn.close()
            return

        def pipe(a: socket.socket, b: socket.socket, to_server: bool = False) -> None:
            with contextlib.suppress(OSError):
                while self.mode == "up":
                    data = a.recv(65536)
                    if not data:
                        break
                    if to_server:
                        head = data[:300].split(b"\r\n", 1)[0].rsplit(b" ", 1)[0]
                        if head.split(b" ", 1)[0] in (b"GET", b"PUT", b"POST", b"HEAD", b"DELETE"):
                            self.seen.append(head.decode("latin-1"))
                        for i in range(0, len(data), 4096):
                            b.sendall(data[i : i + 4096])
                            if self.rate:
                                time.sleep(4096 / self.rate)
                    else:
                        b.sendall(data)
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

        t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        t.start()
        pipe(conn, upstream, to_server=True)
        t.join(5)
        conn.close()
        upstream.close()

    def close(self) -> None:
        """Stop accepting."""
        self._closed = True
        self._sock.close()


def iam_user(url: str) -> tuple[str, str]:
    """On an endpoint started with ``INITIAL_NO_AUTH_ACTION_COUNT=4``: a user allowed ``s3:*``.

    Those four unauthenticated calls create the user, its key and its policy;
    after them moto checks every request's signature against IAM.
    """
    import json

    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=url,
        aws_access_key_id="x",
        aws_secret_access_key="y",
        region_name="us-east-1",
    )
    iam.create_user(UserName="uploader")
    key = iam.create_access_key(UserName="uploader")["AccessKey"]
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}  # fmt: skip
    iam.put_user_policy(UserName="uploader", PolicyName="s3", PolicyDocument=json.dumps(policy))
    return key["AccessKeyId"], key["SecretAccessKey"]
