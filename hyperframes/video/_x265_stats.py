"""Per-frame PSNR of libx265's own reconstruction, read from its CSV log.

With ``psnr=1``, ``csv=PATH`` and ``csv-log-level=1``, x265 writes one CSV
line per encoded frame with the PSNR of each plane of its reconstruction (the
picture a decoder outputs: after deblocking and SAO) against the picture it
was given, as it hands the frame's access unit out. Two things stand in the
way, and this module deals with both:

- x265 measures only when it logs at ``info`` (see
  :mod:`hyperframes.video._cstderr`, which keeps that quiet); where the filter
  cannot be installed, :meth:`FrameStats.create` returns None and the caller
  measures another way.
- The CSV is a C ``FILE`` with a 4 KiB buffer, so lines arrive in bursts;
  ``fflush(NULL)`` (every C output stream of the process) after each
  ``encode`` call writes them out, and :meth:`FrameStats.read` parses the new
  complete lines.

Rows are matched to frames by x265's "Encode Order" column (the POC restarts
at every IDR): with no reordering (``bframes=0``) it is the frame number.
:func:`parse_rows` is the pure part.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

# not `from hyperframes.video import _cstderr`: the package imports this module (a cycle);
# the module object, because tests patch _cstderr.quiet_x265
import hyperframes.video._cstderr as _cstderr  # noqa: PLR0402

__all__ = ["FrameStats", "PlanePsnr", "parse_rows"]

PlanePsnr = tuple[float, float, float]  # Y', Cb, Cr in dB (inf: identical)

_COLUMNS: Final = ("Encode Order", "Y PSNR", "U PSNR", "V PSNR")


def parse_rows(header: str, lines: list[str]) -> dict[int, PlanePsnr]:
    """``{encode order: (Y, U, V PSNR)}`` from x265 CSV lines under ``header``.

    Raises ``ValueError`` when the header lacks a column (x265 leaves the PSNR
    columns out when it does not measure) or a line does not parse; a NaN
    PSNR leaves its frame out.
    """
    names = [c.strip() for c in header.split(",")]
    try:
        at = [names.index(c) for c in _COLUMNS]
    except ValueError:
        missing = [c for c in _COLUMNS if c not in names]
        raise ValueError(f"x265 CSV has no {', '.join(missing)} column") from None
    out: dict[int, PlanePsnr] = {}
    for line in lines:
        fields = line.split(",")
        if len(fields) <= max(at):
            raise ValueError(f"x265 CSV line has {len(fields)} fields: {line[:80]!r}")
        order = int(fields[at[0]])
        y, u, v = (float(fields[i]) for i in at[1:])
        if not any(math.isnan(x) for x in (y, u, v)):
            out[order] = (y, u, v)
    return out


def _flush_all() -> None:
    """``fflush(NULL)``: write out every C output stream's buffer (x265's CSV among them)."""
    _libc().fflush(None)


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.fflush.argtypes = [ctypes.c_void_p]
    return libc


class FrameStats:
    """The CSV log of one x265 encoder (see the module docstring).

    :meth:`create` makes a private directory for x265 to create the log in;
    once the encoder is open, :meth:`attach` opens the log and removes the
    path, so that nothing is left behind, even by a process killed mid-encode.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = str(Path(directory) / "frames.csv")
        self._fd: int | None = None
        self._offset = 0
        self._partial = ""
        self._header: str | None = None
        self.broken: str | None = None  # why the log is not read (then no frame has a PSNR)

    @classmethod
    def create(cls) -> FrameStats | None:
        """A fresh log in a private temporary directory; None where x265 cannot measure
        quietly, no temporary directory is writable, or its path would not survive
        x265-params (``:`` and ``=`` separate)."""
        if not _cstderr.quiet_x265():
            return None
        try:
            directory = tempfile.mkdtemp(prefix="hf-x265-")
        except OSError:  # no writable temporary directory: measure another way
            return None
        if any(c in directory for c in ":=\\"):
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return cls(directory)

    def params(self) -> list[str]:
        """The x265-params that make x265 write the log (``log-level=info`` among them)."""
        return ["log-level=info", "psnr=1", f"csv={self.path}", "csv-log-level=1"]

    def attach(self) -> None:
        """Open the log x265 created and remove its path (call after the encoder opened)."""
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.broken = f"x265 wrote no CSV log: {exc}"
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def read(self) -> dict[int, PlanePsnr]:
        """The rows x265 has written since the last call, by encode order."""
        if self._fd is None or self.broken is not None:
            return {}
        _flush_all()
        try:
            data = _read_from(self._fd, self._offset)
        except OSError as exc:
            self.broken = f"x265 CSV log unreadable: {exc}"
            return {}
        self._offset += len(data)
        *lines, self._partial = (self._partial + data.decode("ascii", "replace")).split("\n")
        if self._header is None and lines:
            self._header = lines.pop(0)
        if not lines or self._header is None:
            return {}
        try:
            return parse_rows(self._header, lines)
        except ValueError as exc:
            self.broken = str(exc)
            return {}

    def close(self) -> None:
        """Close the log (and remove its directory if :meth:`attach` never ran)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        shutil.rmtree(self.directory, ignore_errors=True)


def _read_from(fd: int, offset: int) -> bytes:
    chunks = []
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
