"""The ingest wire protocol (hyperframes.recorder.ingest.wire) and the ZMQ publisher helper."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperframes.format.crc import crc32c
from hyperframes.recorder.ingest import wire
from hyperframes.recorder.ingest.wire import (
    HEADER_SIZE,
    WireError,
    WireFlags,
    WireHeader,
    decode_header,
    decode_message,
    decode_multipart,
    encode_frame,
    encode_header,
    make_header,
    zmq_frames,
)

# One header pinned byte for byte (docs/INGEST.md shows the same bytes).
GOLDEN_HEADER = WireHeader(
    timestamp_ns=0x0102030405060708,
    seq=42,
    payload_size=5,
    flags=7,
    duration_ns=1_000_000,
    payload_crc=0x9A71BB4C,
)
GOLDEN_HEX = (
    "48465750"  # magic "HFWP"
    "01"  # version 1
    "28"  # header_size 40
    "0700"  # flags: keyframe | hardware timestamp | payload crc
    "0807060504030201"  # timestamp_ns 0x0102030405060708
    "2a00000000000000"  # seq 42
    "40420f00"  # duration_ns 1_000_000
    "05000000"  # payload_size 5
    "4cbb719a"  # payload_crc = CRC32C(b"hello")
    "8cb97b77"  # header_crc = CRC32C(bytes 0..36)
)


def _msg(payload: bytes = b"hello", **kw: object) -> bytes:
    return encode_frame(payload, 1000, seq=1, **kw)  # type: ignore[arg-type]


def _patch(buf: bytes, offset: int, fmt: str, value: int, fix_crc: bool = True) -> bytes:
    """Overwrite one field, then (optionally) recompute the header CRC."""
    b = bytearray(buf)
    struct.pack_into(fmt, b, offset, value)
    if fix_crc:
        struct.pack_into("<I", b, HEADER_SIZE - 4, crc32c(bytes(b[: HEADER_SIZE - 4])))
    return bytes(b)


def _reason(excinfo: pytest.ExceptionInfo[WireError]) -> str:
    return excinfo.value.reason


# --- layout -------------------------------------------------------------------


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"hello") == 0x9A71BB4C


def test_golden_header_bytes() -> None:
    raw = encode_header(GOLDEN_HEADER)
    assert raw.hex() == GOLDEN_HEX
    assert len(raw) == HEADER_SIZE == 40
    assert decode_header(bytes.fromhex(GOLDEN_HEX)) == GOLDEN_HEADER


def test_make_header_matches_golden() -> None:
    h = make_header(b"hello", 0x0102030405060708, seq=42, keyframe=True, duration_ns=1_000_000)
    assert h == GOLDEN_HEADER
    assert h.keyframe and h.hardware_timestamp and h.has_payload_crc


def test_flags_host_stamp_and_no_crc() -> None:
    h = make_header(b"abc", 5, seq=0, hardware=False, crc=False)
    assert h.flags == 0
    assert h.payload_crc == 0
    assert not h.hardware_timestamp and not h.keyframe and not h.has_payload_crc
    assert (int(WireFlags.HW_TIMESTAMP), int(WireFlags.KEYFRAME)) == (2, 1)


def test_header_field_ranges_rejected() -> None:
    with pytest.raises(ValueError, match="seq"):
        WireHeader(timestamp_ns=0, seq=-1, payload_size=0)
    with pytest.raises(ValueError, match="duration_ns"):
        WireHeader(timestamp_ns=0, seq=0, payload_size=0, duration_ns=2**32)
    with pytest.raises(ValueError, match="timestamp_ns"):
        WireHeader(timestamp_ns=2**64, seq=0, payload_size=0)


# --- round trips ---------------------------------------------------------------


@given(
    ts=st.integers(0, 2**64 - 1),
    seq=st.integers(0, 2**64 - 1),
    duration=st.integers(0, 2**32 - 1),
    payload=st.binary(max_size=300),
    hardware=st.booleans(),
    keyframe=st.booleans(),
    crc=st.booleans(),
)
def test_round_trip_mqtt_and_zmq(
    ts: int, seq: int, duration: int, payload: bytes, hardware: bool, keyframe: bool, crc: bool
) -> None:
    kw = {
        "seq": seq, "hardware": hardware, "keyframe": keyframe, "duration_ns": duration, "crc": crc
    }  # fmt: skip
    header, body = decode_message(encode_frame(payload, ts, **kw))  # type: ignore[arg-type]
    assert bytes(body) == payload
    assert (header.timestamp_ns, header.seq, header.duration_ns) == (ts, seq, duration)
    assert (header.hardware_timestamp, header.keyframe, header.has_payload_crc) == (
        hardware,
        keyframe,
        crc,
    )
    assert header.payload_size == len(payload)
    frames = zmq_frames("cam/front", payload, ts, **kw)  # type: ignore[arg-type]
    topic, header2, body2 = decode_multipart([bytes(f) for f in frames])
    assert topic == b"cam/front"
    assert header2 == header
    assert bytes(body2) == payload


def test_numpy_payload_not_copied_and_round_trips() -> None:
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    frames = zmq_frames(b"lidar", arr, 7, seq=3)
    assert frames[2].nbytes == 48  # type: ignore[union-attr]
    _, header, body = decode_multipart(frames)
    assert header.payload_size == 48
    assert np.array_equal(np.frombuffer(body, np.float32).reshape(3, 4), arr)


def test_empty_payload() -> None:
    header, body = decode_message(_msg(b""))
    assert header.payload_size == 0 and bytes(body) == b""


def test_longer_header_from_a_newer_minor_version_is_read() -> None:
    """A v1 reader accepts header_size > 40 (fields appended later) and skips them."""
    payload = b"xyz"
    base = bytearray(encode_header(make_header(payload, 9, seq=2))[: HEADER_SIZE - 4])
    base[5] = 48
    raw = bytes(base) + b"\xaa" * 8
    raw += struct.pack("<I", crc32c(raw))
    header, body = decode_message(raw + payload)
    assert header.header_size == 48 and header.seq == 2 and bytes(body) == payload


GOLDEN_EXTENDED_HEX = (  # docs/INGEST.md: the golden header grown to 48 bytes by a later minor
    "48465750"
    "01"
    "30"
    "0700"
    "0807060504030201"
    "2a00000000000000"
    "40420f00"
    "05000000"
    "4cbb719a"  # payload_crc, still at offset 32
    "1112131415161718"  # offsets 36..44: fields a later revision appended (skipped by v1)
    "70687f90"  # header_crc at header_size - 4 = 44: CRC32C of bytes 0..44
)


def test_golden_extended_header_puts_the_crc_last() -> None:
    raw = bytes.fromhex(GOLDEN_EXTENDED_HEX)
    assert len(raw) == 48 and raw[5] == 48
    assert struct.unpack_from("<I", raw, 44)[0] == crc32c(raw[:44])
    header, body = decode_message(raw + b"hello")
    assert header.header_size == 48 and header.seq == 42 and bytes(body) == b"hello"
    # reading the CRC at offset 36 instead (the 40-byte position) is the mistake to avoid
    bad = bytearray(raw)
    bad[36:40] = raw[44:48]
    with pytest.raises(WireError) as excinfo:
        decode_message(bytes(bad) + b"hello")
    assert _reason(excinfo) == "bad-header-crc"


# --- malformed messages: each gives its reason ------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "truncated"),
        (b"HFW", "truncated"),
        (_msg()[:39], "truncated"),
        (b"XXXX" + _msg()[4:], "bad-magic"),
        (_patch(_msg(), 4, "<B", 2), "unsupported-version"),
        (_patch(_msg(), 5, "<B", 36), "bad-header-size"),
        (_patch(_msg(), 8, "<Q", 99, fix_crc=False), "bad-header-crc"),
        (_patch(_msg(), 28, "<I", 1000), "size-mismatch"),
        (_msg() + b"!", "size-mismatch"),
        (_msg()[:-1], "size-mismatch"),
        (_msg()[:-1] + b"H", "bad-payload-crc"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_mqtt_body(body: bytes, reason: str) -> None:
    with pytest.raises(WireError) as excinfo:
        decode_message(body)
    assert _reason(excinfo) == reason
    assert str(excinfo.value).startswith(reason + ": ")


def test_payload_crc_not_checked_when_not_flagged() -> None:
    body = _msg(crc=False)[:-1] + b"H"
    _, payload = decode_message(body)
    assert bytes(payload) == b"hellH"


def test_oversized_claim_rejected_before_size_check() -> None:
    body = _patch(_msg(), 28, "<I", 2**32 - 1)
    with pytest.raises(WireError) as excinfo:
        decode_message(body, max_payload=1024)
    assert _reason(excinfo) == "oversized"
    assert "4294967295" in excinfo.value.detail


def test_oversized_real_payload() -> None:
    with pytest.raises(WireError) as excinfo:
        decode_message(_msg(b"x" * 101), max_payload=100)
    assert _reason(excinfo) == "oversized"
    header, _ = decode_message(_msg(b"x" * 100), max_payload=100)
    assert header.payload_size == 100


@pytest.mark.parametrize(
    ("frames", "reason"),
    [
        ([b"t", encode_header(make_header(b"ab", 1, seq=0))], "bad-framing"),
        ([b"t", encode_header(make_header(b"ab", 1, seq=0)), b"ab", b""], "bad-framing"),
        ([b"t", encode_header(make_header(b"ab", 1, seq=0)) + b"ab", b""], "bad-header-size"),
        ([b"t", encode_header(make_header(b"ab", 1, seq=0)), b"abc"], "size-mismatch"),
        ([b"t", b"\x00" * 40, b"ab"], "bad-magic"),
        ([b"t", b"HFWP\x01", b"ab"], "truncated"),
    ],
)
def test_malformed_zmq(frames: list[bytes], reason: str) -> None:
    with pytest.raises(WireError) as excinfo:
        decode_multipart(frames)
    assert _reason(excinfo) == reason


def test_every_reason_is_listed_and_error_is_a_value_error() -> None:
    assert set(wire.REASONS) == {
        "truncated", "bad-magic", "unsupported-version", "bad-header-size", "bad-header-crc",
        "oversized", "size-mismatch", "bad-payload-crc", "bad-framing",
    }  # fmt: skip
    err = WireError("bad-magic", "x")
    assert isinstance(err, ValueError) and err.reason == "bad-magic" and err.detail == "x"


@given(st.binary(max_size=120))
def test_garbage_never_raises_anything_but_wire_error(data: bytes) -> None:
    try:
        decode_message(data)
    except WireError as exc:
        assert exc.reason in wire.REASONS


# --- publisher ---------------------------------------------------------------------


def test_zmq_publisher_push_pull_sequences() -> None:
    zmq = pytest.importorskip("zmq")
    from hyperframes.recorder.ingest.publisher import (
        SequenceCounter,
        ZmqPublisher,
        encode_mqtt_payload,
    )

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("inproc://wire-test")
    try:
        with ZmqPublisher("inproc://wire-test", context=ctx, send_timeout_ms=2000) as pub:
            assert pub.send("a", 10, b"one") == 0
            assert pub.send("a", 20, b"two", keyframe=True) == 1
            assert pub.send("b", 30, b"three", hardware=False) == 0
            assert pub.send("a", 40, b"four", seq=100) == 100
            assert pub.send("a", 50, b"five") == 101
            got = []
            for _ in range(5):
                assert pull.poll(2000)
                topic, header, payload = decode_multipart(pull.recv_multipart())
                got.append((topic, header.seq, header.timestamp_ns, bytes(payload)))
        assert got == [
            (b"a", 0, 10, b"one"),
            (b"a", 1, 20, b"two"),
            (b"b", 0, 30, b"three"),
            (b"a", 100, 40, b"four"),
            (b"a", 101, 50, b"five"),
        ]
    finally:
        pull.close(0)
        ctx.term()
    counter = SequenceCounter()
    assert [counter.take("x"), counter.take("x"), counter.take("y")] == [0, 1, 0]
    header, body = decode_message(encode_mqtt_payload(b"imu", 5, seq=counter.take("x")))
    assert header.seq == 2 and bytes(body) == b"imu"


def test_zmq_publisher_rejects_unknown_socket_type() -> None:
    pytest.importorskip("zmq")
    from hyperframes.recorder.ingest.publisher import ZmqPublisher

    with pytest.raises(ValueError, match="socket_type"):
        ZmqPublisher("inproc://nothing", "dealer")  # type: ignore[arg-type]
