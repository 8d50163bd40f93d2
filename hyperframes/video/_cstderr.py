"""C stdio's ``stderr`` through a line filter, so that x265 can measure without talking.

libx265 computes its per-frame PSNR only when its log level is ``info`` or
more verbose ("don't measure these metrics if they will not be reported", in
its ``Encoder::configure``), and at that level every encoder prints a banner
of about twenty lines when it opens and a summary when it closes, with
``fputs(..., stderr)``: there is no log callback. :func:`quiet_x265` points
glibc's ``stderr`` (the ``FILE *`` that C libraries write to, not file
descriptor 2) at a pipe; a daemon thread reads it line by line and writes
every line to descriptor 2 except x265's ``info`` and ``warning`` lines and
its closing summary, which is what x265 prints at ``log-level=error`` anyway.

What is not touched: Python's own ``sys.stderr``, ``faulthandler`` and
glibc's fatal messages (they write to descriptor 2 directly), and child
processes (a forked child gets its ``stderr`` back; a spawned one never had
the pipe). Writers never wait on Python: they write into the pipe, and only
a full pipe (64 KiB of unread lines) would block them. At exit the original
``stderr`` comes back and the lines still in the pipe are written out.

glibc on Linux only (the exported ``stderr`` variable, ``fdopen``); elsewhere
:func:`quiet_x265` returns False and callers measure another way.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import re
import sys
import threading
from typing import Final

__all__ = ["keep_line", "quiet_x265"]

log = logging.getLogger(__name__)

_IOLBF: Final = 1  # setvbuf: line buffered
_X265_CHATTER: Final = re.compile(rb"^x265 \[(?:info|warning)\]: ")
_X265_SUMMARY: Final = re.compile(rb"^encoded \d+ frames(?: in [0-9.]+s \(|\n)")


def keep_line(line: bytes, previous_blank: bool) -> tuple[bool, bool]:
    """Decide one line (with its newline) of C ``stderr``: ``(write it, hold it back)``.

    x265's ``info``/``warning`` lines are dropped; its closing summary
    (``encoded N frames in ...``, or ``encoded 0 frames``) is dropped with the
    blank line x265 prints before it, so a blank line is held back (``hold``) until the next line
    shows whether it belongs to the summary.
    """
    if _X265_CHATTER.match(line) or _X265_SUMMARY.match(line):
        return False, False
    if line.strip() == b"" and not previous_blank:
        return False, True
    return True, False


class _Filter:
    """The installed pipe, the reader thread, and what to restore."""

    def __init__(self, libc: ctypes.CDLL, variable: ctypes.c_void_p) -> None:
        self.libc = libc
        self.variable = variable
        self.original = variable.value
        read_end, self.write_end = os.pipe()
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        self.stream = libc.fdopen(self.write_end, b"w")
        if not self.stream:
            os.close(read_end)
            os.close(self.write_end)
            raise OSError("fdopen of the stderr pipe failed")
        libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t]
        libc.setvbuf(self.stream, None, _IOLBF, 0)
        libc.fflush.argtypes = [ctypes.c_void_p]
        self.thread = threading.Thread(
            target=self._forward, args=(read_end,), name="hf-c-stderr", daemon=True
        )
        self.thread.start()
        libc.fflush(self.original)
        variable.value = self.stream
        atexit.register(self.restore)
        os.register_at_fork(after_in_child=self._in_child)

    def _forward(self, fd: int) -> None:
        pending = b""
        held = False  # a blank line waits for the line after it
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for text in lines:
                    write, hold = keep_line(text + b"\n", held)
                    if held and (write or hold):
                        _write(b"\n")  # the held blank line was not x265's
                    held = hold
                    if write:
                        _write(text + b"\n")
        if held:
            _write(b"\n")
        if pending:
            _write(pending)

    def restore(self) -> None:
        """Put the original ``stderr`` back and let the reader write what is left."""
        if self.variable.value != self.stream:
            return
        self.variable.value = self.original
        self.libc.fflush(self.stream)
        self._detach()  # the reader sees the end of the pipe
        self.thread.join(timeout=2.0)

    def _in_child(self) -> None:
        self.variable.value = self.original
        self._detach()  # a forked child must not hold the pipe open

    def _detach(self) -> None:
        """Close the pipe's write end under the stream without freeing the stream: a late
        write through it goes to /dev/null, never into a file that reused the number."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.write_end, inheritable=False)
        finally:
            os.close(devnull)


def _write(data: bytes) -> None:
    # descriptor 2 closed or a broken pipe: the line is lost, not the process
    with contextlib.suppress(OSError):
        os.write(2, data)


_lock = threading.Lock()
_filter: _Filter | None = None
_failed = False


def quiet_x265() -> bool:
    """Filter x265's info-level chatter out of C ``stderr`` (once per process); False where
    that cannot be done (not glibc on Linux), and then x265 must not log at ``info``."""
    global _filter, _failed  # noqa: PLW0603 - one filter per process
    with _lock:
        if _filter is not None or _failed:
            return _filter is not None
        try:
            if not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"):
                raise OSError("not glibc on Linux")
            libc = ctypes.CDLL(None, use_errno=True)
            _filter = _Filter(libc, ctypes.c_void_p.in_dll(libc, "stderr"))
        except (OSError, ValueError, AttributeError) as exc:
            _failed = True
            log.debug("C stderr filter not available: %s", exc)
        return _filter is not None
