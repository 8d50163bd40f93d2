"""The block structure of a finalized input (:mod:`hyperframes.drive.blockmap`), typed.

The converter must write each frame into the block it was stored in (the
writer checks the LATE/QUARANTINED placement rules), so it needs block
membership; a file whose window table and entries disagree is an input error.
"""

from __future__ import annotations

import os

from hyperframes.converter.errors import InputError
from hyperframes.drive.blockmap import Block
from hyperframes.drive.blockmap import source_blocks as _source_blocks
from hyperframes.errors import CorruptFileError
from hyperframes.reader import HyperframeReader

__all__ = ["Block", "source_blocks"]


def source_blocks(reader: HyperframeReader) -> list[Block]:
    """Every block of the input in file order, each with its frames in write order."""
    try:
        return _source_blocks(reader)
    except CorruptFileError as exc:
        raise InputError(os.fspath(reader.path), exc.what, rule="container") from None
