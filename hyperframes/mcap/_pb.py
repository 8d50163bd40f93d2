"""The few pieces of the protobuf wire format the Foxglove messages need: pure, no I/O.

Encoding writes fields in field-number order and omits proto3 default values
(zero numbers, empty strings and bytes, absent messages), which is what
foxglove-sdk's own encoders do, so the bytes match theirs exactly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from hyperframes.mcap.errors import MessageDecodeError

__all__ = [
    "VARINT",
    "FIXED64",
    "LEN",
    "FIXED32",
    "varint",
    "tag",
    "len_prefix",
    "field_varint",
    "field_bytes",
    "field_fixed32",
    "field_double",
    "timestamp",
    "iter_fields",
    "read_timestamp",
    "Field",
]

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_F32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_U64 = (1 << 64) - 1

Field = tuple[int, int, "int | memoryview"]  # field number, wire type, value


def varint(n: int) -> bytes:
    """``n`` as a base-128 varint (negative numbers as 64-bit two's complement)."""
    n &= _U64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(field: int, wire: int) -> bytes:
    """The key of a field."""
    return varint(field << 3 | wire)


def len_prefix(field: int, size: int) -> bytes:
    """Key and length of a length-delimited field whose ``size`` bytes follow."""
    return tag(field, LEN) + varint(size)


def field_varint(field: int, value: int) -> bytes:
    """A varint field; empty for 0 (proto3 default)."""
    return tag(field, VARINT) + varint(value) if value else b""


def field_bytes(field: int, value: bytes) -> bytes:
    """A string/bytes/message field; empty when ``value`` is empty (proto3 default)."""
    return len_prefix(field, len(value)) + value if value else b""


def field_fixed32(field: int, value: int) -> bytes:
    """A fixed32 field; empty for 0."""
    return tag(field, FIXED32) + _F32.pack(value) if value else b""


def field_double(field: int, value: float) -> bytes:
    """A double field; empty for 0.0."""
    return tag(field, FIXED64) + _F64.pack(value) if value else b""


def timestamp(ns: int) -> bytes:
    """A ``google.protobuf.Timestamp`` message body for ``ns`` since the epoch."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    return field_varint(1, seconds) + field_varint(2, nanos)


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise MessageDecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _U64, pos
        shift += 7
        if shift >= 70:
            raise MessageDecodeError("varint longer than 10 bytes")


def iter_fields(data: bytes | memoryview) -> Iterator[Field]:
    """The fields of a message in wire order: ``(number, wire type, int or memoryview)``.

    Length-delimited values are views into ``data`` (no copy). Raises
    :class:`MessageDecodeError` on bytes that are not a protobuf message.
    """
    buf = memoryview(data).cast("B")
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise MessageDecodeError(f"field number 0 at byte {pos}")
        if wire == VARINT:
            value, pos = _read_varint(buf, pos)
            yield number, wire, value
        elif wire == LEN:
            size, pos = _read_varint(buf, pos)
            if pos + size > len(buf):
                raise MessageDecodeError(
                    f"field {number}: {size} bytes announced, {len(buf) - pos} left"
                )
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire in (FIXED32, FIXED64):
            n = 4 if wire == FIXED32 else 8
            if pos + n > len(buf):
                raise MessageDecodeError(f"field {number}: truncated fixed{n * 8}")
            yield number, wire, int.from_bytes(buf[pos : pos + n], "little")
            pos += n
        else:
            raise MessageDecodeError(f"field {number}: unsupported wire type {wire}")


def read_timestamp(data: memoryview) -> int:
    """Nanoseconds since the epoch of a ``google.protobuf.Timestamp`` body."""
    seconds = nanos = 0
    for number, wire, value in iter_fields(data):
        if wire != VARINT or not isinstance(value, int):
            continue
        if number == 1:
            seconds = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 2:
            nanos = value - (1 << 64) if value >= 1 << 63 else value
    return seconds * 1_000_000_000 + nanos
