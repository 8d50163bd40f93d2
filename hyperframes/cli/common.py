"""What every ``hyperframes`` command shares: exit codes, one-line errors, progress.

:func:`run_handler` runs a command's handler (the core commands and every
plugin command registered through ``hyperframes.commands`` alike) and turns
what it raises into one line on stderr and an exit code of the table below,
which docs/CLI.md repeats:

====  =====================================================================
code  meaning
====  =====================================================================
0     done (``verify``: every file is good; ``recover``: nothing to do)
1     the data is bad or the work failed: a damaged or truncated file, a
      failed check or conversion, an unexpected internal error
2     the command cannot run as asked: a bad option or time, an unknown
      stream, a missing input, an output that exists (``--force``), a bad
      config, a missing extra, an address in use
130   interrupted (Ctrl-C, SIGINT)
141   the reader of the output went away (``| head``): the rest is dropped
====  =====================================================================

Progress lines that redraw themselves with ``\\r`` go to stderr only when it
is a terminal (:func:`progress`), so logs and pipes get the summary alone.
Long transfers (bucket uploads and downloads) keep a :class:`TransferMeter`:
its line redrawn on a terminal, or logged every ``log_every_s`` elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import time
from collections.abc import Callable

from hyperframes.errors import CorruptFileError, HyperframesError, RecoveryError

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
    "CommandError",
    "error_line",
    "exit_code",
    "run_handler",
    "progress",
    "progress_done",
    "TransferMeter",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell tool killed by the pipe returns

Handler = Callable[[argparse.Namespace], int]


class CommandError(HyperframesError):
    """A command cannot do what it was asked; ``code`` is its exit code (default 2)."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        self.code = code
        super().__init__(message)


# what a user does about an OS error on a named path
_OS_FIX = {
    errno.ENOENT: "check the path",
    errno.EISDIR: "give a file, not a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.ENOSPC: "free some space",
}


def input_path(text: str) -> str | os.PathLike[str]:
    """An argparse ``type`` for inputs that may be files or ``s3://`` URLs (kept as text)."""
    from pathlib import Path  # noqa: PLC0415

    return text if text.startswith("s3://") else Path(text)


def error_line(exc: BaseException) -> str:
    """One line saying what went wrong with what, for ``error: ...``."""
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])  # str(KeyError) would quote the message
    elif isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        name = os.fsdecode(exc.filename)
        text = f"{name}: {exc.strerror.lower()}"
        if exc.filename2 is not None:
            text = f"{name} -> {os.fsdecode(exc.filename2)}: {exc.strerror.lower()}"
        if fix := _OS_FIX.get(exc.errno or 0):
            text += f" ({fix})"
    else:
        text = str(exc) or type(exc).__name__
        if not isinstance(exc, HyperframesError | OSError | ValueError | ImportError | KeyError):
            text = f"internal error: {type(exc).__name__}: {text} (hyperframes -v ... shows where)"
    return " ".join(text.split())  # one line


def exit_code(exc: BaseException) -> int:
    """The exit code of the table in the module doc for an exception a handler raised."""
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, CorruptFileError | RecoveryError):
        return EXIT_FAILED
    if isinstance(exc, HyperframesError | OSError | ValueError | KeyError | ImportError):
        return EXIT_USAGE
    return EXIT_FAILED


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def run_handler(handler: Handler, args: argparse.Namespace, *, verbose: bool = False) -> int:
    """Run one command's handler; errors become one stderr line and an exit code.

    With ``verbose`` an unexpected exception (a bug) is raised with its traceback.
    """
    try:
        code = handler(args)
        sys.stdout.flush()  # a broken pipe shows here when the output was small
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if verbose and exit_code(exc) == EXIT_FAILED and not isinstance(exc, HyperframesError):
            raise
        print(f"error: {error_line(exc)}", file=sys.stderr)
        return exit_code(exc)
    return code


def progress(text: str) -> None:
    """Redraw one progress line on stderr, only when stderr is a terminal."""
    if sys.stderr.isatty():
        print(f"\r  {text}", end="", file=sys.stderr, flush=True)


def progress_done() -> None:
    """End the progress line (when one was drawn)."""
    if sys.stderr.isatty():
        print(file=sys.stderr, flush=True)


class TransferMeter:
    """The bytes of one long transfer: its progress text, and when to show it (pure).

    ``update(done, now)`` returns the line to show now, or None: on a terminal
    (``tty``) at most every ``redraw_s``, elsewhere (a log) every
    ``log_every_s``; the last update of a transfer (``done == total``) is
    shown on a terminal only (a log gets the caller's own summary line).
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        tty: bool,
        now: float | None = None,
        redraw_s: float = 0.2,
        log_every_s: float = 30.0,
    ) -> None:
        self.label = label
        self.total = total
        self.tty = tty
        self.done = 0
        self.started = time.monotonic() if now is None else now
        self._every = redraw_s if tty else log_every_s
        self._last = self.started

    def text(self, now: float) -> str:
        """``LABEL: 12.0 of 30.0 MB (40%), 8.1 MB/s``."""
        rate = self.done / max(now - self.started, 1e-6) / 1e6
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        size = f"{self.done / 1e6:.1f} of {self.total / 1e6:.1f} MB{pct}"
        return f"{self.label}: {size}, {rate:.1f} MB/s"

    def update(self, done: int, now: float) -> str | None:
        """Record ``done`` bytes so far; the line to show now, if one is due."""
        self.done = done
        final = done >= self.total
        if (final and self.tty) or (now - self._last >= self._every and not final):
            self._last = now
            return self.text(now)
        return None
