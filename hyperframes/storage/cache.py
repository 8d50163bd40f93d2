"""A local copy of an ``s3://`` object, downloaded once, trusted only while provably it.

For repeated passes over the same files (training epochs): :func:`cached_path`
downloads an object once into a cache directory (atomically, checked against
the store's size and ETag) and hands back the local path. The directory must
be this user's alone, and a copy is trusted only while it is the very file its
download left (see the function).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any, Final

from hyperframes.storage.local import (
    UnsafePathError,
    create_new,
    open_safe_dir,
    write_all,
    write_atomic,
)
from hyperframes.storage.objects import (
    RemoteError,
    UnexpectedObjectError,
    client_for,
    fail,
    split_s3_url,
)

__all__ = ["cached_path"]

_CACHE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")
_SIDECAR_MAX: Final = 4096
_cache_lock = threading.Lock()  # one sidecar write at a time in this process


def cached_path(url: str, cache_dir: str | os.PathLike[str], *, magic: bytes | None = None) -> Path:
    """A local copy of ``url`` in ``cache_dir``, downloaded once (atomically).

    The copy is named by a hash of the URL and the object's ETag, so a changed
    object is fetched again; one HEAD request checks that on every call.

    - ``cache_dir`` (created ``0700`` if missing) must belong to this user and be
      writable by no one else, else :class:`~hyperframes.storage.local.UnsafePathError`:
      others could plant links or change copies there. A cache shared between users
      is one that a single account fills; the others read copies it hands them.
    - A copy is trusted only while it is the file its download left: the sidecar
      ``NAME.json`` records the object's URL, ETag, size and SHA-256 and the copy's
      inode, size, mtime and ctime, and a copy that differs in any (changed on
      disk, replaced) or without its sidecar is downloaded again. Cost: one
      ``lstat`` and a read of the ~300-byte sidecar per call; the copy is not hashed
      again (a change in the same clock tick as its download would go unseen).
    - Nothing under ``cache_dir`` is followed: a link at the copy's name is removed.
    - ``magic``: the bytes the object must start with (a hyperframe file:
      :data:`hyperframes.format.layout.MAGIC`). One ranged GET checks them before the
      download; an object that does not start with them raises
      :class:`UnexpectedObjectError` and is not downloaded.
    """
    bucket, key = split_s3_url(url)
    client = client_for()
    try:
        meta = client.head_object(Bucket=bucket, Key=key)
    except Exception as exc:  # botocore raises many kinds
        raise fail(url, exc) from None
    size, etag = int(meta["ContentLength"]), str(meta.get("ETag"))
    tag = hashlib.sha256(f"{url}\0{etag}".encode()).hexdigest()[:32]
    name = f"{tag}-{_CACHE_NAME.sub('_', Path(key).name)[:100]}"
    root = Path(cache_dir)
    want = {"url": url, "etag": etag, "size": size}
    dir_fd = _cache_dir(root)
    try:
        if _proven(dir_fd, name, want, root):
            return root / name
        if magic:
            _check_magic(client, url, etag, size, magic)
        _download(client, url, dir_fd, name, want)
    finally:
        os.close(dir_fd)
    return root / name


def _cache_dir(root: Path) -> int:
    """``root`` open (no link followed), after checking that only this user may write it."""
    root.parent.mkdir(parents=True, exist_ok=True)
    fd = open_safe_dir(root, 0o700)
    st = os.fstat(fd)
    uid, mode = os.geteuid(), stat.S_IMODE(st.st_mode)
    problem = None
    if st.st_uid != uid:
        problem = f"belongs to uid {st.st_uid}, not to this user (uid {uid})"
    elif mode & 0o022:
        who = {0o020: "group", 0o002: "others"}.get(mode & 0o022, "group and others")
        problem = f"is writable by {who} (mode {mode:o})"
    if problem is not None:
        os.close(fd)
        raise UnsafePathError(
            root,
            f"{problem}: a cache directory must belong to the user that reads it and be "
            "writable by no one else, or others could plant links or change cached copies "
            "(a cache shared between users is filled by one account)",
        )
    return fd


def _proven(dir_fd: int, name: str, want: dict[str, Any], root: Path) -> bool:
    """Whether ``name`` is the very file a download of ``want`` left (its sidecar says so);
    anything else at ``name`` that is not a regular file (a link) is removed, unfollowed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            raise UnsafePathError(root / name, "is not a regular file") from None
        return False
    try:
        fd = os.open(f"{name}.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        doc = json.loads(os.read(fd, _SIDECAR_MAX))
    except ValueError:
        return False
    finally:
        os.close(fd)
    facts = {**want, "file": [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]}
    return isinstance(doc, dict) and all(doc.get(k) == v for k, v in facts.items())


def _check_magic(client: Any, url: str, etag: str, size: int, magic: bytes) -> None:
    """Refuse an object that does not start with ``magic`` (one ranged GET of its bytes)."""
    bucket, key = split_s3_url(url)
    head = b""
    if size >= len(magic):
        try:
            got = client.get_object(Bucket=bucket, Key=key, IfMatch=etag,
                                    Range=f"bytes=0-{len(magic) - 1}")  # fmt: skip
            head = got["Body"].read()
        except Exception as exc:  # botocore raises many kinds
            raise fail(url, exc) from None
    if head != magic:
        raise UnexpectedObjectError(
            url,
            f"starts with {head!r}, not {magic!r}: not the kind of file asked for; "
            f"not downloaded ({size} bytes)",
        )


def _download(client: Any, url: str, dir_fd: int, name: str, want: dict[str, Any]) -> None:
    """Download into a new temporary file, rename it to ``name``, then write its sidecar."""
    bucket, key = split_s3_url(url)
    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.part"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)  # ours from a run that died
    fd = create_new(tmp, 0o400, dir_fd=dir_fd)
    try:
        digest, size = hashlib.sha256(), 0
        try:
            body = client.get_object(Bucket=bucket, Key=key, IfMatch=want["etag"])["Body"]
            for chunk in body.iter_chunks(1 << 20):
                write_all(fd, [chunk])
                digest.update(chunk)
                size += len(chunk)
        except OSError:
            raise
        except Exception as exc:  # botocore raises many kinds
            raise fail(url, exc) from None
        if size != want["size"]:
            raise RemoteError(url, f"downloaded {size} bytes, the store says {want['size']}")
        os.fsync(fd)
        with _cache_lock:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            st = os.fstat(fd)  # after the rename, which sets its ctime
            ident = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            doc = {**want, "sha256": digest.hexdigest(), "file": ident}
            write_atomic(f"{name}.json", json.dumps(doc).encode(), 0o600, dir_fd=dir_fd)
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
