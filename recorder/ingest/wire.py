"""The ingest wire protocol: one fixed little-endian header per sensor frame.

Pure: no sockets, no asyncio. ``docs/INGEST.md`` is the spec; this module is
its reference implementation. Version 1 header, 40 bytes, every field
naturally aligned (a C driver can ``memcpy`` a plain struct)::

    offset size type  field         meaning
    0      4    char  magic         b"HFWP"
    4      1    u8    version       1
    5      1    u8    header_size   40 (a v1 reader accepts more: fields appended later)
    6      2    u16   flags         bit 0 keyframe, bit 1 hardware timestamp,
                                    bit 2 payload_crc is set; other bits: send 0, ignored
    8      8    u64   timestamp_ns  capture time, ns
    16     8    u64   seq           per-stream sequence number (gaps reveal drops)
    24     4    u32   duration_ns   exposure / scan duration, 0 = unknown
    28     4    u32   payload_size  bytes of payload that follow the header
    32     4    u32   payload_crc   CRC32C of the payload when flag bit 2 is set, else 0
    36     4    u32   header_crc    CRC32C of bytes [0, header_size - 4)

The header CRC is always checked (cheap; catches framing mistakes and
garbage); the payload CRC is optional because a multi-megabyte CRC costs a
small driver real CPU where no hardware CRC32C is available.

Framing: ZMQ sends a multipart message ``[topic, header, payload]``; MQTT sends
one message per frame on the stream's topic whose body is ``header + payload``.
Every rejection raises :class:`WireError` with a ``reason`` from
:data:`REASONS`, so the daemon can count malformed messages per reason.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntFlag
from typing import Final

from hyperframes.format.crc import BytesLike, PayloadLike, byte_view, crc32c
from hyperframes.recorder.errors import WireError

__all__ = [
    "MAGIC",
    "VERSION",
    "HEADER_SIZE",
    "MAX_HEADER_SIZE",
    "DEFAULT_MAX_PAYLOAD",
    "REASONS",
    "WireFlags",
    "WireError",
    "WireHeader",
    "encode_header",
    "decode_header",
    "make_header",
    "check_payload",
    "encode_frame",
    "decode_message",
    "zmq_frames",
    "decode_multipart",
]

MAGIC: Final = b"HFWP"
VERSION: Final = 1
HEADER_SIZE: Final = 40
MAX_HEADER_SIZE: Final = 255  # header_size is a u8
DEFAULT_MAX_PAYLOAD: Final = 64 * 1024 * 1024
_U32_MAX: Final = 0xFFFF_FFFF
_U64_MAX: Final = 0xFFFF_FFFF_FFFF_FFFF

# Every field but the trailing header CRC, then the CRC on its own.
_BODY = struct.Struct("<4sBBHQQIIIxxxx")  # x: the header_crc slot, packed separately
_PREFIX = struct.Struct("<4sBB")  # magic, version, header_size: enough to size the header
_CRC = struct.Struct("<I")
assert _BODY.size == HEADER_SIZE

#: Every ``WireError.reason``, in the order the checks run.
REASONS: Final = (
    "truncated",  # fewer bytes than a header (or than header_size says)
    "bad-magic",  # the first four bytes are not b"HFWP"
    "unsupported-version",  # a major version this reader does not know
    "bad-header-size",  # header_size below 40, or a ZMQ header frame of another length
    "bad-header-crc",  # header bytes do not match header_crc
    "oversized",  # payload_size above the configured maximum
    "size-mismatch",  # payload bytes present differ from payload_size
    "bad-payload-crc",  # payload does not match payload_crc (only when flagged)
    "bad-framing",  # a ZMQ message that is not exactly [topic, header, payload]
)


class WireFlags(IntFlag):
    """Bits of the header's flags (same bit positions as the file index flags)."""

    NONE = 0
    KEYFRAME = 1 << 0
    HW_TIMESTAMP = 1 << 1
    PAYLOAD_CRC = 1 << 2


@dataclass(frozen=True, slots=True)
class WireHeader:
    """One decoded frame header, fields in wire order."""

    timestamp_ns: int
    seq: int
    payload_size: int
    flags: int = 0
    duration_ns: int = 0
    payload_crc: int = 0
    version: int = VERSION
    header_size: int = HEADER_SIZE

    def __post_init__(self) -> None:
        for name, hi in (
            ("timestamp_ns", _U64_MAX),
            ("seq", _U64_MAX),
            ("payload_size", _U32_MAX),
            ("flags", 0xFFFF),
            ("duration_ns", _U32_MAX),
            ("payload_crc", _U32_MAX),
            ("version", 0xFF),
            ("header_size", MAX_HEADER_SIZE),
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= hi):
                raise ValueError(f"wire header {name} must be an integer 0..{hi}, got {value!r}")

    @property
    def keyframe(self) -> bool:
        """True when the sender marked this frame as a keyframe."""
        return bool(self.flags & _KEYFRAME)

    @property
    def hardware_timestamp(self) -> bool:
        """True for a sensor (hardware) capture stamp, False for a host-clock stamp."""
        return bool(self.flags & _HW_TIMESTAMP)

    @property
    def has_payload_crc(self) -> bool:
        """True when ``payload_crc`` holds the payload's CRC32C."""
        return bool(self.flags & _PAYLOAD_CRC)


# plain ints for the tests made on every frame: an IntFlag operand costs ~1 us an operation
_KEYFRAME: Final = int(WireFlags.KEYFRAME)
_HW_TIMESTAMP: Final = int(WireFlags.HW_TIMESTAMP)
_PAYLOAD_CRC: Final = int(WireFlags.PAYLOAD_CRC)
_FIELDS: Final = tuple(WireHeader.__dataclass_fields__)  # in wire order


def _decoded(*values: int) -> WireHeader:
    """A :class:`WireHeader` of fields just unpacked from the wire, in field order: each is
    a fixed-width unsigned integer there, so the range checks of ``__init__`` are skipped
    (they cost ~3 us, a third of a small frame's decode)."""
    header: WireHeader = object.__new__(WireHeader)
    for name, value in zip(_FIELDS, values, strict=True):
        object.__setattr__(header, name, value)
    return header


def encode_header(header: WireHeader) -> bytes:
    """The header's bytes (always a 40-byte version 1 header)."""
    buf = bytearray(HEADER_SIZE)
    _BODY.pack_into(
        buf, 0, MAGIC, VERSION, HEADER_SIZE, header.flags, header.timestamp_ns, header.seq,
        header.duration_ns, header.payload_size, header.payload_crc,
    )  # fmt: skip
    _CRC.pack_into(buf, HEADER_SIZE - 4, crc32c(bytes(buf[: HEADER_SIZE - 4])))
    return bytes(buf)


def decode_header(buf: BytesLike) -> WireHeader:
    """Parse and check the header at the start of ``buf`` (bytes after it are ignored).

    Raises :class:`WireError` (``truncated``, ``bad-magic``,
    ``unsupported-version``, ``bad-header-size``, ``bad-header-crc``).
    """
    view = byte_view(buf)
    if len(view) < _PREFIX.size:
        raise WireError("truncated", f"{len(view)} bytes, a header needs {HEADER_SIZE}")
    magic, version, header_size = _PREFIX.unpack_from(view, 0)
    if magic != MAGIC:
        raise WireError("bad-magic", f"magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise WireError("unsupported-version", f"version {version}, this reader knows {VERSION}")
    if header_size < HEADER_SIZE:
        raise WireError("bad-header-size", f"header_size {header_size} below {HEADER_SIZE}")
    if len(view) < header_size:
        raise WireError("truncated", f"{len(view)} bytes, header_size says {header_size}")
    (stored,) = _CRC.unpack_from(view, header_size - 4)
    computed = crc32c(view[: header_size - 4])
    if stored != computed:
        raise WireError("bad-header-crc", f"header_crc {stored:#010x}, computed {computed:#010x}")
    _, _, _, flags, ts, seq, duration, size, pcrc = _BODY.unpack_from(view, 0)
    return _decoded(ts, seq, size, flags, duration, pcrc, version, header_size)


def make_header(
    payload: PayloadLike,
    timestamp_ns: int,
    *,
    seq: int,
    hardware: bool = True,
    keyframe: bool = False,
    duration_ns: int = 0,
    crc: bool = True,
) -> WireHeader:
    """The header describing ``payload``; ``crc`` adds the payload CRC32C."""
    view = byte_view(payload)
    flags = WireFlags.NONE
    if hardware:
        flags |= WireFlags.HW_TIMESTAMP
    if keyframe:
        flags |= WireFlags.KEYFRAME
    if crc:
        flags |= WireFlags.PAYLOAD_CRC
    return WireHeader(
        timestamp_ns=timestamp_ns,
        seq=seq,
        payload_size=len(view),
        flags=int(flags),
        duration_ns=duration_ns,
        payload_crc=crc32c(view) if crc else 0,
    )


def check_payload(
    header: WireHeader, payload: PayloadLike, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> memoryview:
    """Check ``payload`` against its header; returns it as a byte memoryview.

    Raises :class:`WireError` (``oversized``, ``size-mismatch``,
    ``bad-payload-crc``). The declared size is checked against
    ``max_payload`` first, so an oversized claim is reported as such.
    """
    if header.payload_size > max_payload:
        raise WireError(
            "oversized", f"payload_size {header.payload_size} above the limit {max_payload}"
        )
    view = byte_view(payload)
    if len(view) != header.payload_size:
        raise WireError(
            "size-mismatch", f"{len(view)} payload bytes, payload_size says {header.payload_size}"
        )
    if header.has_payload_crc:
        computed = crc32c(view)
        if computed != header.payload_crc:
            raise WireError(
                "bad-payload-crc",
                f"payload_crc {header.payload_crc:#010x}, computed {computed:#010x}",
            )
    return view


def encode_frame(
    payload: PayloadLike,
    timestamp_ns: int,
    *,
    seq: int,
    hardware: bool = True,
    keyframe: bool = False,
    duration_ns: int = 0,
    crc: bool = True,
) -> bytes:
    """``header + payload`` in one buffer: the body of an MQTT message."""
    header = make_header(
        payload, timestamp_ns, seq=seq, hardware=hardware, keyframe=keyframe,
        duration_ns=duration_ns, crc=crc,
    )  # fmt: skip
    return encode_header(header) + bytes(byte_view(payload))


def decode_message(
    body: BytesLike, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> tuple[WireHeader, memoryview]:
    """Split and check an MQTT body (``header + payload``); zero-copy payload view."""
    view = byte_view(body)
    header = decode_header(view)
    return header, check_payload(header, view[header.header_size :], max_payload)


def zmq_frames(
    topic: str | bytes,
    payload: PayloadLike,
    timestamp_ns: int,
    *,
    seq: int,
    hardware: bool = True,
    keyframe: bool = False,
    duration_ns: int = 0,
    crc: bool = True,
) -> list[bytes | memoryview]:
    """The three parts ``[topic, header, payload]`` of a ZMQ message (payload not copied)."""
    header = make_header(
        payload, timestamp_ns, seq=seq, hardware=hardware, keyframe=keyframe,
        duration_ns=duration_ns, crc=crc,
    )  # fmt: skip
    topic_bytes = topic.encode() if isinstance(topic, str) else topic
    return [topic_bytes, encode_header(header), byte_view(payload)]


def decode_multipart(
    frames: Sequence[BytesLike], max_payload: int = DEFAULT_MAX_PAYLOAD
) -> tuple[bytes, WireHeader, memoryview]:
    """Check a ZMQ multipart message; returns (topic, header, payload view).

    The header frame must be exactly ``header_size`` bytes long.
    """
    if len(frames) != 3:
        raise WireError("bad-framing", f"{len(frames)} parts, expected [topic, header, payload]")
    topic, raw_header, payload = frames
    header = decode_header(raw_header)
    n = len(byte_view(raw_header))
    if n != header.header_size:
        raise WireError(
            "bad-header-size", f"header frame of {n} bytes, header_size says {header.header_size}"
        )
    return bytes(topic), header, check_payload(header, payload, max_payload)
