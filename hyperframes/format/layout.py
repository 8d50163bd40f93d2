"""Byte layout of a hyperframe file, format version 1 (see docs/FORMAT.md).

Pure: struct definitions, numpy dtypes and encode/decode functions side by
side. No file I/O and no policy (compression, windowing) lives here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from enum import IntFlag

import numpy as np

from hyperframes.format.crc import crc32c

__all__ = [
    "MAGIC",
    "VERSION",
    "HEADER_SIZE",
    "ALIGN",
    "INDEX_DTYPE",
    "AUX_DTYPE",
    "WINDOW_DTYPE",
    "QUARANTINE_DTYPE",
    "HeaderFlags",
    "FrameFlags",
    "CODEC_SHIFT",
    "CODEC_MASK",
    "Header",
    "BlockRecord",
    "BLOCK_MAGIC",
    "BLOCK_RECORD_SIZE",
    "align_up",
    "pad_len",
]

MAGIC = b"HFRM"
VERSION = 1
HEADER_SIZE = 512
ALIGN = 64

# --- header -----------------------------------------------------------------

_HEADER_CORE = struct.Struct("<4sHHIQQIIQQ")  # offsets 0..52, the seed's layout
_HEADER_EXT = struct.Struct("<QQQQQQQQIIIII")  # offsets 52..136, in the reserved area
_HEADER_QUAR = struct.Struct("<QQII")  # offsets 136..160: the quarantine table
_HEADER_CRC_OFFSET = 508
assert _HEADER_CORE.size == 52 and _HEADER_EXT.size == 84 and _HEADER_QUAR.size == 24


class HeaderFlags(IntFlag):
    """Bits of the header's Flags field. Readers ignore bits they do not know."""

    LITTLE_ENDIAN = 1 << 0
    USES_LZ4 = 1 << 8
    USES_ZSTD = 1 << 9
    USES_SHUFFLE = 1 << 10
    USES_BLOSC2 = 1 << 11
    FINALIZED = 1 << 31


_FINALIZED = int(HeaderFlags.FINALIZED)  # plain ints: IntFlag operations cost ~1 us each
_LITTLE_ENDIAN = int(HeaderFlags.LITTLE_ENDIAN)


@dataclass(frozen=True, slots=True)
class Header:
    """The 512-byte file header, fields in wire order."""

    flags: int
    start_ns: int
    end_ns: int
    frame_count: int
    stream_count: int
    index_offset: int
    index_size: int
    window_ns: int
    data_offset: int
    meta_offset: int
    meta_size: int
    windows_offset: int
    windows_size: int
    aux_offset: int
    aux_size: int
    window_count: int
    index_crc: int
    meta_crc: int
    windows_crc: int
    aux_crc: int
    quarantine_offset: int = 0
    quarantine_size: int = 0
    quarantine_count: int = 0
    quarantine_crc: int = 0
    version: int = VERSION
    header_size: int = HEADER_SIZE

    @property
    def finalized(self) -> bool:
        """True when the writer finished the file (index and tables are valid)."""
        return bool(self.flags & _FINALIZED)

    def encode(self) -> bytes:
        """The header's 512 bytes, CRC32C of bytes 0..508 in the last four."""
        buf = bytearray(HEADER_SIZE)
        _HEADER_CORE.pack_into(
            buf,
            0,
            MAGIC,
            self.version,
            self.header_size,
            self.flags,
            self.start_ns,
            self.end_ns,
            self.frame_count,
            self.stream_count,
            self.index_offset,
            self.index_size,
        )
        _HEADER_EXT.pack_into(
            buf,
            _HEADER_CORE.size,
            self.window_ns,
            self.data_offset,
            self.meta_offset,
            self.meta_size,
            self.windows_offset,
            self.windows_size,
            self.aux_offset,
            self.aux_size,
            self.window_count,
            self.index_crc,
            self.meta_crc,
            self.windows_crc,
            self.aux_crc,
        )
        _HEADER_QUAR.pack_into(
            buf,
            _HEADER_CORE.size + _HEADER_EXT.size,
            self.quarantine_offset,
            self.quarantine_size,
            self.quarantine_count,
            self.quarantine_crc,
        )
        struct.pack_into("<I", buf, _HEADER_CRC_OFFSET, crc32c(bytes(buf[:_HEADER_CRC_OFFSET])))
        return bytes(buf)

    @staticmethod
    def decode(buf: bytes) -> tuple[Header, bytes, int, int]:
        """Split 512 header bytes into (header, magic, stored crc, computed crc).

        Only unpacks; the caller decides what is acceptable (see ``_validate``).
        """
        if len(buf) < HEADER_SIZE:
            raise ValueError(f"header needs {HEADER_SIZE} bytes, got {len(buf)}")
        v = _HEADER_ALL.unpack_from(buf, 0)
        (stored_crc,) = struct.unpack_from("<I", buf, _HEADER_CRC_OFFSET)
        # the slot setters in field order (flags .. quarantine_crc, then version and
        # header_size), without the frozen dataclass's 26 object.__setattr__ calls
        header: Header = object.__new__(Header)
        for setter, value in zip(_HEADER_SETTERS, (*v[3:], v[1], v[2]), strict=True):
            setter(header, value)
        return header, v[0], stored_crc, crc32c(bytes(buf[:_HEADER_CRC_OFFSET]))


# the three parts back to back (160 bytes): magic, version, header size, then the fields
_HEADER_ALL = struct.Struct(
    "<" + "".join(p.format.lstrip("<") for p in (_HEADER_CORE, _HEADER_EXT, _HEADER_QUAR))
)
_HEADER_SETTERS = tuple(Header.__dict__[f.name].__set__ for f in fields(Header))


# --- index ----------------------------------------------------------------

CODEC_SHIFT = 4
CODEC_MASK = 0xF << CODEC_SHIFT


class FrameFlags(IntFlag):
    """Bits of an index entry's Flags field (u16).

    Bits 4-7 hold the codec id (see :mod:`hyperframes.format.codecs`); use
    :func:`hyperframes.format.codecs.codec_of` to read them.
    """

    NONE = 0
    KEYFRAME = 1 << 0
    HW_TIMESTAMP = 1 << 1
    LATE = 1 << 2
    QUARANTINED = 1 << 3
    SHUFFLED = 1 << 8


INDEX_DTYPE = np.dtype(
    [
        ("stream_id", "<u2"),
        ("flags", "<u2"),
        ("stream_index", "<u4"),
        ("timestamp_ns", "<u8"),
        ("offset", "<u8"),
        ("size", "<u4"),
        ("crc32c", "<u4"),
    ]
)
assert INDEX_DTYPE.itemsize == 32

# One row per index entry, same order: host receive time and exposure/scan duration.
AUX_DTYPE = np.dtype([("receive_ns", "<u8"), ("duration_ns", "<u4"), ("reserved", "<u4")])
assert AUX_DTYPE.itemsize == 16

# One row per window block, sorted by window_id.
WINDOW_DTYPE = np.dtype(
    [
        ("window_id", "<i8"),
        ("payload_offset", "<u8"),
        ("payload_size", "<u8"),
        ("frame_count", "<u4"),
        ("flags", "<u4"),
    ]
)
assert WINDOW_DTYPE.itemsize == 32

# One row per quarantined frame (implausible timestamp), in write order: the
# frame's index entry and its aux row. Kept out of the index so that time
# lookups, windows and the header span never see these timestamps.
QUARANTINE_DTYPE = np.dtype(INDEX_DTYPE.descr + AUX_DTYPE.descr)
assert QUARANTINE_DTYPE.itemsize == 48

WINDOW_FLAG_INCOMPLETE = 1 << 0  # at least one stream delivered nothing
WINDOW_FLAG_HAS_LATE = 1 << 1  # the block holds frames of earlier windows

# --- window block record (crash recovery) -----------------------------------

BLOCK_MAGIC = b"HFWB"
_BLOCK = struct.Struct("<4sHHqIIQQI16x")
BLOCK_RECORD_SIZE = 64
assert _BLOCK.size == 60


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """The 64-byte record that opens every window block in the payload region.

    It is followed by ``frame_count`` index entries, as many aux rows, zero
    padding to 64 bytes, then the block's payloads. ``block_size`` spans all of
    it, so recovery hops from block to block without reading payload bytes.
    """

    window_id: int
    frame_count: int
    flags: int
    block_size: int
    payload_offset: int
    entries_crc: int

    def encode(self) -> bytes:
        """The record's 64 bytes, CRC32C of bytes 0..60 in the last four."""
        body = _BLOCK.pack(
            BLOCK_MAGIC,
            VERSION,
            BLOCK_RECORD_SIZE,
            self.window_id,
            self.frame_count,
            self.flags,
            self.block_size,
            self.payload_offset,
            self.entries_crc,
        )
        return body + struct.pack("<I", crc32c(body))

    @staticmethod
    def decode(buf: bytes) -> BlockRecord | None:
        """The record in ``buf``, or None if the bytes are not an intact record."""
        if len(buf) < BLOCK_RECORD_SIZE:
            return None
        body = bytes(buf[: _BLOCK.size])
        (stored,) = struct.unpack_from("<I", buf, _BLOCK.size)
        if crc32c(body) != stored:
            return None
        magic, version, size, wid, count, flags, bsize, poff, ecrc = _BLOCK.unpack(body)
        if magic != BLOCK_MAGIC or version != VERSION or size != BLOCK_RECORD_SIZE:
            return None
        return BlockRecord(wid, count, flags, bsize, poff, ecrc)


def align_up(n: int, align: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``align``."""
    return (n + align - 1) // align * align


def pad_len(n: int, align: int = ALIGN) -> int:
    """Zero bytes needed after ``n`` bytes to reach the next ``align`` boundary."""
    return -n % align
