"""Output files that appear whole or not at all: write ``OUT.tmp``, fsync, rename."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from hyperframes._io import fsync_dir

__all__ = ["atomic_output", "check_output"]


def check_output(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """``path`` as a Path; FileExistsError if it exists and ``overwrite`` is False."""
    out = Path(path)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (use --force to replace it)")
    if out.is_dir():
        raise IsADirectoryError(f"{out}: is a directory")
    return out


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], overwrite: bool = False) -> Iterator[Path]:
    """Yields ``PATH.tmp`` to write; on success fsyncs it and renames it to ``PATH``.

    On any exception the ``.tmp`` is removed and ``PATH`` is left as it was,
    so a failed run leaves no output.
    """
    out = check_output(path, overwrite)
    tmp = out.with_name(out.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, out)
        fsync_dir(out.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
