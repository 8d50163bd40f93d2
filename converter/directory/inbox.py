"""A batch over a directory: inputs and an inbox, markers, ``failed/``, a ledger, ``--watch``.

:func:`run_batch` runs the one batch loop (:mod:`hyperframes.converter.batch.loop`)
over a :class:`DirectoryInbox`, the directory's side of the seam
(:mod:`hyperframes.converter.batch.inbox`). One batch owns its output
directory (a ``flock`` on ``OUT/.convert.lock``; a second batch on the same
directory stops with :class:`BusyError`). At start it sweeps the staging
directories of conversions that died, so a batch killed with ``kill -9``
leaves nothing behind that a re-run would trip over:

- idempotent: an input is skipped when a marker names its SHA-256 under the
  same converter version and config (:mod:`hyperframes.converter.directory.task`),
  whatever its file name;
- resumable: an archive is published (linked into ``OUT``) only after it is
  verified, and its marker is written after that; a re-run converts what has
  no marker and adopts an output whose marker was lost;
- one bad input never stops the batch: it is reported, written to the
  ledger, and (inbox inputs only; a named input is never touched) moved to
  ``INBOX/failed/`` with ``NAME.reason.json`` beside it;
- the inbox holds finalized ``*.hf`` files: a file modified in the last
  ``settle_s`` seconds may still be copied and is deferred; a ``*.tmp`` (a
  recording never finalized, an upload never renamed) is deferred until it
  is ``stale_tmp_s`` old, then moved to ``failed/``; hidden files and other
  names are ignored; a symbolic link is not followed (it is listed as ignored
  in the summary) unless ``follow_links`` is set;
- nothing is written through a link: ``failed/`` must be a real directory
  (a link there is refused and the input stays), files in it get free names.

Every result is one JSON line in the ledger (``OUT/ledger.jsonl`` by default).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hyperframes.converter import __version__
from hyperframes.converter.batch.inbox import Entry, Item
from hyperframes.converter.batch.ledger import LEDGER_FILE, JsonLinesLedger, Ledger, now_iso
from hyperframes.converter.batch.loop import run_loop
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.convert import sweep_staging
from hyperframes.converter.directory.task import make_request, write_json_atomic
from hyperframes.converter.errors import BusyError, ConfigError
from hyperframes.converter.outcome import Outcome
from hyperframes.converter.progress import BatchDisplay
from hyperframes.storage.local import lexists_at, open_safe_dir, rename_noreplace
from hyperframes.writer import TMP_SUFFIX

__all__ = [
    "LOCK_FILE",
    "FAILED_DIR",
    "BatchOptions",
    "InboxEntry",
    "scan_inbox",
    "move_to_failed",
    "DirectoryInbox",
    "run_batch",
]

log = logging.getLogger(__name__)

LOCK_FILE: Final = ".convert.lock"
FAILED_DIR: Final = "failed"
HF_SUFFIX: Final = ".hf"


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """What ``hyperframes convert`` was asked to do."""

    out: Path
    config: ConvertConfig
    inputs: tuple[Path, ...] = ()
    inbox: Path | None = None
    watch: bool = False
    ledger: Path | None = None
    ray: str | None = None  # "auto" or a Ray address; None: the local pool
    quiet: bool = False
    follow_links: bool = False  # inbox entries that are symbolic links: converted, not ignored


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A file in the inbox and what to do with it now: convert, defer or fail."""

    path: Path
    action: str  # "convert" | "defer" | "fail" | "ignore"
    reason: str = ""

    @property
    def identity(self) -> tuple[str, int, int, int]:
        """Name, size, mtime and inode: a file seen again unchanged is not reconsidered."""
        st = self.path.lstat() if self.action == "ignore" else self.path.stat()
        return (self.path.name, st.st_size, st.st_mtime_ns, st.st_ino)


LINK_REASON: Final = "a symbolic link, not followed (--follow-links converts what links point to)"


def scan_inbox(
    inbox: Path, settle_s: float, stale_tmp_s: float, now: float, *, follow_links: bool = False
) -> list[InboxEntry]:
    """The inbox's candidate files, oldest name first, each with its action (pure over stat).

    A symbolic link named like an input is ``ignore`` unless ``follow_links``.
    """
    entries: list[InboxEntry] = []
    for p in sorted(inbox.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_symlink() and not follow_links:
            if p.name.endswith((HF_SUFFIX, TMP_SUFFIX)):
                entries.append(InboxEntry(p, "ignore", LINK_REASON))
            continue
        if not p.is_file():
            continue
        try:
            age = now - p.stat().st_mtime
        except FileNotFoundError:  # moved away meanwhile
            continue
        if p.name.endswith(TMP_SUFFIX):
            if age >= stale_tmp_s:
                entries.append(
                    InboxEntry(
                        p,
                        "fail",
                        f"not finalized: a .tmp unchanged for "
                        f"{age:.0f} s (salvage it with `hyperframes recover "
                        f"{p}`)",
                    )
                )
            else:
                entries.append(InboxEntry(p, "defer", "a .tmp (still being written or copied)"))
        elif p.name.endswith(HF_SUFFIX):
            if age >= settle_s:
                entries.append(InboxEntry(p, "convert"))
            else:
                entries.append(
                    InboxEntry(
                        p,
                        "defer",
                        f"modified {age:.1f} s ago, may still be copied: taken once "
                        f"{settle_s:g} s old (batch.settle_s), in {settle_s - age:.0f} s, "
                        "by --watch or the next run",
                    )
                )
    return entries


def move_to_failed(path: Path, outcome: Outcome) -> Path:
    """Move an inbox input to ``failed/`` (same file system: a rename) with a reason file.

    ``failed/`` is opened once (``O_NOFOLLOW``; a link there raises
    :class:`~hyperframes.storage.local.UnsafePathError`) and everything is done through
    that descriptor under names that are free: nothing is replaced or followed.
    """
    failed = path.parent / FAILED_DIR
    dir_fd = open_safe_dir(failed, 0o777)
    try:
        return failed / _move_into(path, outcome, dir_fd)
    finally:
        os.close(dir_fd)


def _move_into(path: Path, outcome: Outcome, dir_fd: int) -> str:
    name = path.name
    n = 1
    while lexists_at(name, dir_fd) or lexists_at(name + ".reason.json", dir_fd):
        name = f"{path.name}.{n}"
        n += 1
    reason = {
        "input": path.name,
        "moved_from": os.fspath(path),
        "time": now_iso(),
        "reason": outcome.get("reason"),
        "fault": outcome.get("fault"),
        "error": outcome.get("error"),
        "sha256": outcome.get("sha256"),
        "converter_version": __version__,
    }
    write_json_atomic(Path(name + ".reason.json"), reason, replace=False, dir_fd=dir_fd)
    rename_noreplace(path, name, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)
    return name


@contextlib.contextmanager
def _out_dir_lock(out: Path) -> Iterator[None]:
    fd = os.open(out / LOCK_FILE, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BusyError(out) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def _check_options(opts: BatchOptions) -> None:
    if not opts.inputs and opts.inbox is None:
        raise ConfigError("", "nothing to convert: give INPUT files or --inbox DIR")
    if opts.watch and opts.inbox is None:
        raise ConfigError("--watch", "needs --inbox DIR (the directory to watch)")
    if opts.inbox is not None:
        if not opts.inbox.is_dir():
            raise ConfigError("--inbox", f"{opts.inbox} is not a directory")
        if opts.inbox.resolve() == opts.out.resolve():
            raise ConfigError("--out", "must not be the inbox (outputs would be converted again)")
    for p in opts.inputs:
        if not p.is_file():
            raise ConfigError(
                "INPUT",
                f"{p} is not a file" + (" (use --inbox for a directory)" if p.is_dir() else ""),
            )


class DirectoryInbox:
    """The directory's side of :class:`~hyperframes.converter.batch.inbox.Inbox`."""

    transient: tuple[type[Exception], ...] = ()  # a directory that fails to list stops the batch
    tasks_set_aside = False  # the batch renames failed inputs into failed/ itself

    def __init__(self, opts: BatchOptions) -> None:
        self.opts = opts

    @contextlib.contextmanager
    def session(self) -> Iterator[Ledger]:
        """The ``flock`` on ``OUT/.convert.lock`` (a second batch: :class:`BusyError`), and
        the ledger file."""
        with _out_dir_lock(self.opts.out):
            ledger = JsonLinesLedger(self.opts.ledger or self.opts.out / LEDGER_FILE)
            try:
                yield ledger
            finally:
                ledger.close()

    def sweep(self) -> None:
        """The staging directories of conversions that died (this batch holds the lock)."""
        for d in sweep_staging(self.opts.out):
            log.info("removed the staging directory of an interrupted conversion: %s", d)

    def named(self) -> Iterator[Item | Outcome]:
        """The INPUT files (checked to be files before the batch starts)."""
        for p in self.opts.inputs:
            yield Item(os.fspath(p), p.name, inbox=False)

    def scan(self) -> list[Entry]:
        """:func:`scan_inbox` with each entry's identity (an entry gone meanwhile is left out)."""
        if self.opts.inbox is None:
            return []
        cfg = self.opts.config.batch
        entries = []
        for entry in scan_inbox(
            self.opts.inbox,
            cfg.settle_s,
            cfg.stale_tmp_s,
            time.time(),
            follow_links=self.opts.follow_links,
        ):
            try:
                ident = entry.identity
            except FileNotFoundError:
                continue
            item = Item(os.fspath(entry.path), entry.path.name, inbox=True, identity=ident)
            entries.append(Entry(item, entry.action, entry.reason))
        return entries

    def settled(self, items: list[Item]) -> list[Outcome | None]:
        """None each: only a task reads an input and its marker."""
        return [None] * len(items)

    def claim(self, item: Item) -> str | None:
        """Always claimed: the batch holds the whole output directory (:meth:`session`)."""
        return None

    def request(self, item: Item) -> str:
        """:func:`~hyperframes.converter.directory.task.make_request`."""
        return make_request(Path(item.key), self.opts.out, self.opts.config)

    def release(self, item: Item) -> None:
        """Nothing is held per input."""

    def set_aside(self, item: Item, outcome: Outcome) -> None:
        """:func:`move_to_failed` (a rename within the inbox's file system)."""
        try:
            outcome["moved_to"] = os.fspath(move_to_failed(Path(item.key), outcome))
        except OSError as exc:
            outcome["move_error"] = f"could not move to {FAILED_DIR}/: {exc}"

    def notes(self) -> list[str]:
        """Inputs that failed, in this batch or earlier, waiting in ``INBOX/failed/``."""
        inbox = self.opts.inbox
        if inbox is None or not (earlier := _failed_inputs(inbox)):
            return []
        return [
            f"{earlier} input(s) that failed are in {inbox / FAILED_DIR}/ "
            "(each with NAME.reason.json); they are not retried: move one back to retry it"
        ]


def _failed_inputs(inbox: Path) -> int:
    """Inputs that earlier failures moved to ``INBOX/failed/``."""
    try:
        return sum(1 for p in (inbox / FAILED_DIR).iterdir() if not p.name.endswith(".json"))
    except OSError:
        return 0


def run_batch(opts: BatchOptions, *, display: BatchDisplay | None = None) -> int:
    """Run a batch over a directory (see the module docstring); returns the exit status
    (:func:`~hyperframes.converter.batch.loop.run_loop`)."""
    _check_options(opts)
    opts.out.mkdir(parents=True, exist_ok=True)
    return run_loop(
        DirectoryInbox(opts),
        opts.config,
        watch=opts.watch,
        ray=opts.ray,
        display=display or BatchDisplay(quiet=opts.quiet),
    )
