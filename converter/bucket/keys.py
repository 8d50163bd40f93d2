"""Pure decisions of the bucket batch: the object layout, inbox actions, leases.

Nothing here talks to a store. With an inbox prefix ``INBOX`` and an output
prefix ``OUT`` (docs/CONVERTER.md, "Buckets"):

=====================================================  ==========================================
``OUT/NAME``                                           a verified output (written last, never
                                                       overwritten)
``OUT/.staging/OWNER/NAME``                            an upload before its check and copy
``OUT/.leases/NAME.json``                              who converts NAME now, until when
``OUT/.markers/SHA256.CONFIGKEY.json``                 converted: the input by content
``OUT/.markers/by-etag/H.CONFIGKEY.json``              the same, by the inbox object's ETag and
                                                       size (a re-run skips without a download)
``OUT/ledger/YYYYMMDDTHHMMSS.ffffffZ-HOST-PID-N.json``  one result; key order is time order
``INBOX/failed/NAME`` + ``NAME.reason.json``           an input set aside, and why
=====================================================  ==========================================

``NAME`` is an inbox object's key below ``INBOX/`` (the uploader's
``VEHICLE/YYYY-MM-DD/SEGMENT.hf``: outputs mirror the inbox's layout), or a
named input's last component.

A store takes keys the batch cannot use (:func:`key_problem`: a ``.`` or ``..``
segment, ``//``, a control character); they are listed and ignored by name,
never read, moved or mirrored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from hyperframes.converter.plan import marker_name

__all__ = [
    "Layout",
    "ScanEntry",
    "key_problem",
    "printable",
    "scan_objects",
    "inbox_name",
    "lease_doc",
    "lease_state",
    "ledger_name",
]

HF_SUFFIX: Final = ".hf"
TMP_SUFFIX: Final = ".tmp"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def key_problem(key: str) -> str | None:
    """Why object key ``key`` cannot be an input or an output name, or None.

    A ``.`` or ``..`` segment, an empty one (``//``, a leading or trailing ``/``),
    or a control character (NUL included): S3 stores such keys, but obstore's
    paths refuse them (a request for one cannot be made, and a listing that
    meets one fails as a whole), and as an output name or a local file name a
    ``..`` would climb out of its prefix.
    """
    if _CONTROL.search(key):
        return "a control character"
    for segment in key.split("/"):
        if segment in (".", ".."):
            return f"a {segment!r} segment"
        if not segment:
            return "an empty segment ('//', or a leading or trailing '/')"
    return None


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\x00``), for the
    ledger, the terminal and logs: a key can hold anything."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _join(prefix: str, rest: str) -> str:
    return f"{prefix}/{rest}" if prefix else rest


@dataclass(frozen=True, slots=True)
class Layout:
    """Keys of one inbox/output pair in one bucket (prefixes without a trailing ``/``)."""

    out: str
    inbox: str | None = None

    def final(self, name: str) -> str:
        """Where a verified output lives."""
        return _join(self.out, name)

    def staging(self, owner: str, name: str) -> str:
        """Where an output is uploaded before it is checked and copied."""
        return _join(self.out, f".staging/{owner}/{name}")

    @property
    def staging_prefix(self) -> str:
        """The prefix every staging key is under."""
        return _join(self.out, ".staging")

    def parse_staging(self, key: str) -> tuple[str, str] | None:
        """``(owner, name)`` of a staging key, or None for anything else."""
        rest = key.removeprefix(self.staging_prefix + "/")
        owner, _, name = rest.partition("/")
        if rest == key or not owner or not name:
            return None
        return owner, name

    def lease(self, name: str) -> str:
        """The lease object of one output name."""
        return _join(self.out, f".leases/{name}.json")

    def marker(self, sha256: str, config_key: str) -> str:
        """The marker of an input converted under ``config_key``, by content."""
        return _join(self.out, f".markers/{marker_name(sha256, config_key)}")

    def etag_marker(self, etag: str, size: int, config_key: str) -> str:
        """The marker of an inbox object by its ETag and size (same content for the store)."""
        ident = hashlib.sha256(f"{etag}\0{size}".encode()).hexdigest()
        return _join(self.out, f".markers/by-etag/{marker_name(ident, config_key)}")

    @property
    def etag_marker_prefix(self) -> str:
        """The prefix of every ETag marker."""
        return _join(self.out, ".markers/by-etag")

    @property
    def ledger_prefix(self) -> str:
        """The prefix of the ledger's objects."""
        return _join(self.out, "ledger")

    def failed(self, name: str, n: int = 0) -> str:
        """``INBOX/failed/NAME`` (``NAME.N`` when that is taken)."""
        if self.inbox is None:
            raise ValueError("no inbox")
        return _join(self.inbox, f"failed/{name}" + (f".{n}" if n else ""))


def ledger_name(time_ns: int, host: str, pid: int, seq: int) -> str:
    """A ledger object's name: sorts by time, then host, process and sequence number."""
    seconds, ns = divmod(time_ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y%m%dT%H%M%S")
    stamp += f".{ns // 1000:06d}Z"
    return f"{stamp}-{_SAFE.sub('_', host)}-{pid}-{seq:06d}.json"


@dataclass(frozen=True, slots=True)
class ScanEntry:
    """An inbox object and what to do with it now: convert, defer, fail or ignore."""

    key: str
    name: str
    size: int
    etag: str
    action: str  # "convert" | "defer" | "fail" | "ignore"
    reason: str = ""

    @property
    def identity(self) -> tuple[str, str, int]:
        """Key, ETag and size: an object seen again unchanged is not reconsidered."""
        return (self.key, self.etag, self.size)


def inbox_name(prefix: str, key: str) -> str | None:
    """The name of inbox object ``key`` (its key below ``prefix/``), or None when the
    scan ignores it: outside the prefix, under ``failed/``, or a hidden component."""
    rest = key[len(prefix) + 1 :] if prefix else key
    if prefix and not key.startswith(prefix + "/"):
        return None
    parts = rest.split("/")
    if parts[0] == "failed" and len(parts) > 1:
        return None
    if any(not p or p.startswith(".") for p in parts):
        return None
    return rest


def scan_objects(
    objects: list[tuple[str, int, str, float]], stale_tmp_s: float, now: float, prefix: str = ""
) -> list[ScanEntry]:
    """Inbox actions for ``(key, size, etag, mtime)`` rows listed under ``prefix``.

    Every object under the prefix is an input (at any depth: the uploader's
    ``VEHICLE/YYYY-MM-DD/`` folders), except ``failed/`` and hidden names.
    An object is whole once it is listed (a PUT or a multipart upload appears
    at once), so ``*.hf`` objects are converted without a settling time. A
    ``*.tmp`` is a recording never finalized: deferred until it is
    ``stale_tmp_s`` old, then failed. Other suffixes are ignored. A key with a
    :func:`key_problem` (whatever its suffix; a console's empty ``folder/``
    marker aside) is ``ignore``: left in place, named :func:`printable`, with why.
    """
    out: list[ScanEntry] = []
    for key, size, etag, mtime in sorted(objects):
        problem = key_problem(key)
        if problem is not None:
            odd = _odd_entry(prefix, key, size, etag, problem)
            if odd is not None:
                out.append(odd)
            continue
        name = inbox_name(prefix, key)
        if name is None:
            continue
        if name.endswith(TMP_SUFFIX):
            age = now - mtime
            if age >= stale_tmp_s:
                why = (
                    f"not finalized: a .tmp unchanged for {age:.0f} s "
                    "(download it and salvage it with `hyperframes recover`)"
                )
                out.append(ScanEntry(key, name, size, etag, "fail", why))
            else:
                out.append(ScanEntry(key, name, size, etag, "defer", "a .tmp (not finalized)"))
        elif name.endswith(HF_SUFFIX):
            out.append(ScanEntry(key, name, size, etag, "convert"))
    return out


def _odd_entry(prefix: str, key: str, size: int, etag: str, problem: str) -> ScanEntry | None:
    """The ``ignore`` entry of a key with a :func:`key_problem`; None for a folder marker (an
    empty ``KEY/``), a key outside the prefix and ``failed/``."""
    rest = key[len(prefix) + 1 :] if prefix else key
    if (prefix and not key.startswith(prefix + "/")) or rest.startswith("failed/"):
        return None
    if key.endswith("/") and size == 0 and key_problem(key[:-1]) is None:
        return None
    why = (
        f"the key has {problem}: the store takes it, but this converter cannot read it "
        "through its store nor name an output after it; left in place (rename or delete it)"
    )
    return ScanEntry(key, printable(rest), size, etag, "ignore", why)


def lease_doc(owner: str, name: str, source: str, lease_s: float, now: float) -> dict[str, Any]:
    """The body of a lease: who, on what, until when (seconds since the epoch)."""
    return {
        "owner": owner,
        "output": name,
        "input": source,
        "renewed": round(now, 3),
        "expires": round(now + lease_s, 3),
    }


def lease_state(doc: dict[str, Any] | None, now: float, owner: str | None = None) -> str:
    """``free`` (none), ``mine`` (held by ``owner``, not expired), ``live`` (another's) or
    ``expired`` (a converter that stopped renewing: taken over)."""
    if doc is None:
        return "free"
    try:
        expires = float(doc["expires"])
    except (KeyError, TypeError, ValueError):
        return "expired"  # unreadable: nobody can be renewing it
    if now >= expires:
        return "expired"
    return "mine" if owner is not None and doc.get("owner") == owner else "live"
