"""Batch conversion on upload: inputs and an inbox, markers, ``failed/``, a ledger, ``--watch``.

One batch owns its output directory (a ``flock`` on ``OUT/.convert.lock``;
a second batch on the same directory stops with :class:`BusyError`). At start
it sweeps the staging directories of conversions that died, so a batch killed
with ``kill -9`` leaves nothing behind that a re-run would trip over:

- idempotent: an input is skipped when a marker names its SHA-256 under the
  same converter version and config (:mod:`hyperframes.converter.task`), whatever its
  file name;
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
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final

from hyperframes.converter import __version__
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.convert import sweep_staging
from hyperframes.converter.engines import Engine, Outcome, make_engine
from hyperframes.converter.errors import BusyError, ConfigError
from hyperframes.converter.progress import BatchDisplay, Tally
from hyperframes.converter.task import make_request, write_json_atomic
from hyperframes.storage.local import lexists_at, open_safe_dir, rename_noreplace
from hyperframes.writer import TMP_SUFFIX

__all__ = [
    "LOCK_FILE",
    "FAILED_DIR",
    "LEDGER_FILE",
    "BatchOptions",
    "InboxEntry",
    "scan_inbox",
    "move_to_failed",
    "run_batch",
    "ledger_records",
]

log = logging.getLogger(__name__)

LOCK_FILE: Final = ".convert.lock"
FAILED_DIR: Final = "failed"
LEDGER_FILE: Final = "ledger.jsonl"
HF_SUFFIX: Final = ".hf"
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_INTERRUPTED: Final = 130


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
        "time": _now_iso(),
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


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Ledger:
    """Append-only JSON Lines, one line per result, flushed and fsynced per line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(path, flags, 0o644)

    def write(self, doc: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(doc, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


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


class _Stop:
    """SIGINT/SIGTERM set a flag the batch loop checks (main thread only)."""

    def __init__(self) -> None:
        self.requested: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.requested = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


@dataclass(slots=True)
class _State:
    """The batch loop's bookkeeping."""

    queue: list[tuple[Path, bool]] = field(default_factory=list)  # (input, from the inbox)
    origin: dict[str, bool] = field(default_factory=dict)  # running key -> from the inbox
    seen: set[tuple[str, int, int, int]] = field(default_factory=set)
    deferred_reported: set[tuple[str, int, int, int]] = field(default_factory=set)
    names: set[str] = field(default_factory=set)  # output names queued or running


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


def run_batch(opts: BatchOptions, *, display: BatchDisplay | None = None) -> int:
    """Run a batch (see the module docstring); returns the exit status.

    0: every input converted or skipped; 1: some input failed; 130: stopped
    by SIGINT/SIGTERM in one-shot mode (in ``--watch`` mode they are the way
    to stop, and the status is 0 or 1).
    """
    _check_options(opts)
    opts.out.mkdir(parents=True, exist_ok=True)
    display = display or BatchDisplay(quiet=opts.quiet)
    tally = Tally()
    with _out_dir_lock(opts.out):
        for d in sweep_staging(opts.out):
            log.info("removed the staging directory of an interrupted conversion: %s", d)
        ledger = _Ledger(opts.ledger or opts.out / LEDGER_FILE)
        engine = make_engine(
            opts.ray, opts.config.batch, opts.config.video.encoder, display.progress
        )
        try:
            with display, _Stop() as stop:
                interrupted = _loop(opts, engine, ledger, display, tally, stop)
        finally:
            engine.close()
            ledger.close()
    if opts.inbox is not None and (earlier := _failed_inputs(opts.inbox)):
        tally.notes.append(
            f"{earlier} input(s) that failed are in {opts.inbox / FAILED_DIR}/ "
            "(each with NAME.reason.json); they are not retried: move one back to retry it"
        )
    display.summary(tally)
    if interrupted and not opts.watch:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK


def _failed_inputs(inbox: Path) -> int:
    """Inputs that earlier failures moved to ``INBOX/failed/``."""
    try:
        return sum(1 for p in (inbox / FAILED_DIR).iterdir() if not p.name.endswith(".json"))
    except OSError:
        return 0


def _loop(
    opts: BatchOptions,
    engine: Engine,
    ledger: _Ledger,
    display: BatchDisplay,
    tally: Tally,
    stop: _Stop,
) -> bool:
    state = _State()
    record = _Recorder(opts, ledger, display, tally)
    for p in opts.inputs:
        _enqueue(state, p, inbox=False, record=record, display=display)
    next_scan = 0.0
    while True:
        if stop.requested is not None:
            for key in engine.cancel_all():
                record.done(
                    {
                        "input": key,
                        "status": "interrupted",
                        "reason": f"stopped by signal {stop.requested}",
                    },
                    inbox=False,
                )
            return True
        now = time.monotonic()
        if opts.inbox is not None and now >= next_scan:
            _scan(opts, state, record, display)
            next_scan = now + opts.config.batch.poll_s
        while state.queue and engine.active() < engine.slots:
            path, inbox = state.queue.pop(0)
            key = os.fspath(path)
            state.origin[key] = inbox
            display.started(key)
            engine.submit(key, make_request(path, opts.out, opts.config))
        for key, outcome in engine.poll(0.2):
            outcome.setdefault("input", key)
            state.names.discard(Path(key).name)
            record.done(outcome, inbox=state.origin.pop(key, False))
        if not opts.watch and not state.queue and engine.active() == 0:
            return False


def _enqueue(
    state: _State, path: Path, *, inbox: bool, record: _Recorder, display: BatchDisplay
) -> None:
    if path.name in state.names:  # two inputs would publish the same output name
        record.done(
            {
                "input": os.fspath(path),
                "status": "failed",
                "fault": "converter",
                "reason": f"another input named {path.name} is in this batch; its output "
                "would take the same name (convert it in a separate batch)",
            },
            inbox=False,
        )
        return
    state.names.add(path.name)
    state.queue.append((path, inbox))
    display.queued()


def _scan(opts: BatchOptions, state: _State, record: _Recorder, display: BatchDisplay) -> None:
    if opts.inbox is None:
        return
    cfg = opts.config.batch
    now = time.time()
    for entry in scan_inbox(
        opts.inbox, cfg.settle_s, cfg.stale_tmp_s, now, follow_links=opts.follow_links
    ):
        try:
            ident = entry.identity
        except FileNotFoundError:
            continue
        if ident in state.seen:
            continue
        if entry.action == "defer":
            if not opts.watch and ident not in state.deferred_reported:
                state.deferred_reported.add(ident)
                record.done(
                    {"input": os.fspath(entry.path), "status": "deferred", "reason": entry.reason},
                    inbox=False,
                )
            continue
        state.seen.add(ident)
        if entry.action == "ignore":
            record.done(
                {"input": os.fspath(entry.path), "status": "ignored", "reason": entry.reason},
                inbox=False,
            )
        elif entry.action == "fail":
            display.queued()
            record.done(
                {
                    "input": os.fspath(entry.path),
                    "status": "failed",
                    "fault": "input",
                    "reason": entry.reason,
                    "error": {
                        "error": "NotFinalized",
                        "message": entry.reason,
                        "rule": "finalized",
                    },
                },
                inbox=True,
            )
        else:
            _enqueue(state, entry.path, inbox=True, record=record, display=display)


class _Recorder:
    """Writes each outcome to the ledger, moves failed inbox inputs, updates the display."""

    def __init__(
        self, opts: BatchOptions, ledger: _Ledger, display: BatchDisplay, tally: Tally
    ) -> None:
        self.opts = opts
        self.ledger = ledger
        self.display = display
        self.tally = tally

    def done(self, outcome: Outcome, *, inbox: bool) -> None:
        if (
            inbox
            and outcome.get("status") == "failed"
            and outcome.get("fault") in ("input", "verify")
        ):
            src = Path(str(outcome["input"]))
            try:
                outcome["moved_to"] = os.fspath(move_to_failed(src, outcome))
            except OSError as exc:
                outcome["move_error"] = f"could not move to {FAILED_DIR}/: {exc}"
        doc = {"time": _now_iso(), "engine": self.opts.ray or "local", **outcome}
        self.ledger.write(doc)
        self.tally.add(outcome)
        self.display.finished(outcome)


def ledger_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a ledger file (for tools and tests)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
