"""Hostile and damaged files (issue 11): one reproduction per root cause.

The promise: a damaged or hostile file gives a typed ``HyperframesError``
naming the file and what is wrong; never another exception, a hang or a large
allocation; ``recover`` writes only what it can prove and its output passes
``verify``; ``verify`` is the strictest reader; the CLI prints the typed error
and exits non-zero. Helpers here edit files and reseal every CRC, so that an
edit reaches the code behind the checksums (test_fuzz.py uses them too).
"""

from __future__ import annotations

import json
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard

from hyperframes import (
    CorruptFileError,
    FileMetadata,
    HyperframesError,
    RecoveryError,
    SensorKind,
    StreamInfo,
    UnsupportedVersionError,
)
from hyperframes.cli.main import main
from hyperframes.format.codecs import CODEC_SHIFT, CODEC_ZSTD, unshuffle
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import BLOCK_MAGIC, CODEC_MASK, HEADER_SIZE, FrameFlags, Header
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter, WriteFrame

from conftest import T0, WINDOW_NS, small_frames, small_streams

# --- editing helpers (shared with test_fuzz.py) ------------------------------------


def header(raw: bytes | bytearray) -> Header:
    """The header of ``raw``, decoded without any check."""
    return Header.decode(bytes(raw[:HEADER_SIZE]))[0]


def block_positions(raw: bytes | bytearray) -> list[int]:
    """Offsets of the block records, walked from DataOffset by their BlockSize fields."""
    h = header(raw)
    end = h.index_offset if h.finalized else len(raw)
    out, pos = [], h.data_offset
    while pos + 64 <= end and raw[pos : pos + 4] == BLOCK_MAGIC:
        out.append(pos)
        size = struct.unpack_from("<Q", raw, pos + 24)[0]
        if not size or size % 64:
            break
        pos += size
    return out


def reseal(raw: bytearray) -> None:
    """Recompute every CRC: block entry tables and records, tables, metadata, header."""
    for pos in block_positions(raw):
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        end = pos + 64 + 48 * count
        if end <= len(raw):
            struct.pack_into("<I", raw, pos + 40, crc32c(bytes(raw[pos + 64 : end])))
        struct.pack_into("<I", raw, pos + 60, crc32c(bytes(raw[pos : pos + 60])))
    h = header(raw)
    regions = [(h.meta_offset, h.meta_size, 124)]
    if h.finalized:
        regions += [
            (h.index_offset, h.index_size, 120),
            (h.windows_offset, h.windows_size, 128),
            (h.aux_offset, h.aux_size, 132),
        ]
        if h.quarantine_size:
            regions.append((h.quarantine_offset, h.quarantine_size, 156))
    for off, size, at in regions:
        if off + size <= len(raw):
            struct.pack_into("<I", raw, at, crc32c(bytes(raw[off : off + size])))
    struct.pack_into("<I", raw, 508, crc32c(bytes(raw[:508])))


def meta_text(raw: bytes | bytearray) -> str:
    """The metadata JSON the header points at."""
    h = header(raw)
    return bytes(raw[h.meta_offset : h.meta_offset + h.meta_size]).decode()


def put_meta(raw: bytearray, text: str | dict[str, Any]) -> None:
    """Replace the metadata (at the end of a finalized file, in place in a .tmp); reseal."""
    data = (json.dumps(text, separators=(",", ":")) if isinstance(text, dict) else text).encode()
    h = header(raw)
    if h.finalized:
        del raw[h.meta_offset :]
        raw += data + bytes(-len(data) % 64)
    else:
        room = h.data_offset - h.meta_offset
        assert len(data) <= room, "new metadata does not fit the .tmp"
        raw[h.meta_offset : h.data_offset] = data + bytes(room - len(data))
    struct.pack_into("<Q", raw, 76, len(data))
    reseal(raw)


def entry_positions(raw: bytes | bytearray, offset: int) -> list[int]:
    """Byte positions of every 32-byte entry (index, quarantine, block tables) at ``offset``."""
    h = header(raw)
    out = []
    for pos in block_positions(raw):
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        out += [pos + 64 + 32 * k for k in range(count)]
    if h.finalized:
        out += [h.index_offset + 32 * k for k in range(h.frame_count)]
        out += [h.quarantine_offset + 48 * k for k in range(h.quarantine_count)]
    return [p for p in out if struct.unpack_from("<Q", raw, p + 16)[0] == offset]


def set_payload(raw: bytearray, offset: int, data: bytes, flags: int | None = None) -> None:
    """Overwrite the payload at ``offset``; every entry naming it gets size, CRC (and flags)."""
    positions = entry_positions(raw, offset)
    raw[offset : offset + len(data)] = data
    for p in positions:
        struct.pack_into("<II", raw, p + 24, len(data), crc32c(data))
        if flags is not None:
            struct.pack_into("<H", raw, p + 2, flags)
    reseal(raw)


def index_entry(raw: bytes | bytearray, i: int) -> dict[str, int]:
    h = header(raw)
    sid, flags, sidx, ts, off, size, crc = struct.unpack_from(
        "<HHIQQII", raw, h.index_offset + 32 * i
    )
    return {
        "stream_id": sid,
        "flags": flags,
        "stream_index": sidx,
        "timestamp_ns": ts,
        "offset": off,
        "size": size,
        "crc32c": crc,
        "pos": h.index_offset + 32 * i,
    }


def first_entry(raw: bytes | bytearray, stream_id: int) -> dict[str, int]:
    h = header(raw)
    for i in range(h.frame_count):
        e = index_entry(raw, i)
        if e["stream_id"] == stream_id:
            return e
    raise AssertionError(f"no frame of stream {stream_id}")


def read_everything(path: Path) -> None:
    """Every window, frame, array, aux row and quarantined frame of ``path``."""
    with HyperframeReader(path) as r:
        for w in r:
            assert w.window_id is not None
        for sid, s in r.streams.items():
            for f in r.frames(sid):
                if s.dtype is not None:
                    f.array()
        r.aux()
        for i in range(len(r.quarantine())):
            r.quarantined_frame(i)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run the CLI in-process: it must return (never raise); returns (code, stderr)."""
    code = main(list(argv))
    return code, capsys.readouterr().err


# --- fixtures ------------------------------------------------------------------------


def _write(path: Path, finalize: bool = True, streams: list[StreamInfo] | None = None) -> Path:
    w = HyperframeWriter(
        path, streams or small_streams(), WINDOW_NS, FileMetadata(created_ns=T0), threads=1
    )
    for sid, t, p in small_frames(0.3):
        if streams is None or any(s.id == sid for s in streams):
            w.append(sid, t, p, receive_ns=t + 1000)
    if finalize:
        w.finalize()
        return path
    w.abort()
    return Path(str(path) + ".tmp")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("hostile")
    return {
        "final": _write(d / "s.hf").read_bytes(),
        "tmp": _write(d / "c.hf", finalize=False).read_bytes(),
    }


@pytest.fixture
def edit(tmp_path: Path, pristine: dict[str, bytes]) -> Callable[..., Path]:
    """``edit(fn, kind="final")``: a copy of a pristine file changed by ``fn(raw)``."""
    counter = iter(range(1000))

    def make(fn: Callable[[bytearray], object], kind: str = "final") -> Path:
        raw = bytearray(pristine[kind])
        fn(raw)
        path = tmp_path / f"e{next(counter)}.hf{'.tmp' if kind == 'tmp' else ''}"
        path.write_bytes(bytes(raw))
        return path

    return make


def _deep_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _with_stream(field: str, value: Any, sid: int = 1) -> Callable[[bytearray], None]:
    def fn(raw: bytearray) -> None:
        doc = json.loads(meta_text(raw))
        for s in doc["streams"]:
            if s["id"] == sid:
                s[field] = value
        put_meta(raw, doc)

    return fn


def _with_token(field: str, token: str) -> Callable[[bytearray], None]:
    """Put a JSON token the json module would not write (Infinity, 1e400...) in a field."""

    def fn(raw: bytearray) -> None:
        doc = json.loads(meta_text(raw))
        target = (
            doc
            if field == "window_ns"
            else doc["file"]
            if field in ("created_ns", "segment_seq")
            else doc["streams"][1]
        )
        target[field] = "@TOKEN@"
        put_meta(raw, json.dumps(doc, separators=(",", ":")).replace('"@TOKEN@"', token))

    return fn


def _expect_typed_everywhere(path: Path, capsys: pytest.CaptureFixture[str], match: str) -> None:
    """Reader, verify, CLI and recover all give typed errors naming the file."""
    with pytest.raises(CorruptFileError, match=match) as exc:
        read_everything(path)
    assert str(path) in str(exc.value)
    result = verify_file(path)
    assert not result.ok and str(path) in result.problems[0]
    for argv in (["info", str(path)], ["info", "--json", str(path)], ["verify", str(path)]):
        code, err = cli(capsys, *argv)
        assert code != 0 and str(path) in err, argv


# --- cause 2: metadata numbers, nesting and the stream table ---------------------------


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_metadata_is_refused(edit, capsys, depth: int) -> None:
    def fn(raw: bytearray) -> None:
        doc = json.loads(meta_text(raw))
        for s in doc["streams"]:  # make room in a .tmp's metadata block
            del s["rate_hz"], s["timestamp_source"]
        doc["file"]["extra"] = {"deep": "@DEEP@"}
        text = json.dumps(doc, separators=(",", ":"))
        put_meta(raw, text.replace('"@DEEP@"', "[" * depth + "]" * depth))

    path = edit(fn)
    _expect_typed_everywhere(path, capsys, "nest")
    tmp = edit(fn, "tmp") if depth == 40 else None
    if tmp is not None:
        with pytest.raises(RecoveryError, match="nest"):
            recover(tmp, tmp.with_name("out.hf"))


@pytest.mark.parametrize("field", ["shape", "dtype", "codec", "kind", "encoding"])
def test_a_typed_field_nested_a_thousand_deep_is_refused_not_recursed_into(
    edit, capsys, field: str
) -> None:
    """Within orjson's own bound (1024) but past Python's recursion limit for repr."""
    deep = "[" * 1000 + "1" + "]" * 1000
    _expect_typed_everywhere(edit(_with_token(field, deep)), capsys, "stream 1|metadata")


@pytest.mark.parametrize(
    ("field", "token"),
    [
        ("rate_hz", "Infinity"),
        ("rate_hz", "1e400"),
        ("rate_hz", "NaN"),
        ("rate_hz", "9" * 4000),
        ("window_ns", "1e400"),
        ("window_ns", "9" * 4000),
        ("created_ns", "9" * 4000),
        ("segment_seq", "-Infinity"),
        ("level", "9" * 30),
        ("extra", '{"serial":' + "9" * 25 + "}"),  # read as a float by a fast JSON parser
        ("extra", '{"serial":-' + "1" * 21 + "}"),
    ],
)
def test_non_finite_and_huge_numbers_are_refused(edit, capsys, field: str, token: str) -> None:
    _expect_typed_everywhere(edit(_with_token(field, token)), capsys, "metadata")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dtype", "O"),
        ("dtype", "i4,O"),
        ("dtype", "(0,)f4"),
        ("dtype", "V"),
        ("dtype", ["<f4"]),
        ("dtype", "x" * 300),
        ("shape", [0]),
        ("shape", [-1, -1]),
        ("shape", [2**40, 2**40]),
        ("shape", [1.5, 4]),
        ("shape", ["4"]),
        ("shape", [True, 4]),
        ("shape", {"a": 1}),
        ("codec", ["lz4"]),
        ("level", 1.5),
        ("id", "1"),
        ("id", True),
        ("encoding", 5),
        ("extra", [1, 2]),
        ("rate_hz", "10"),
    ],
)
def test_stream_table_is_validated_on_open(edit, capsys, field: str, value: Any) -> None:
    _expect_typed_everywhere(edit(_with_stream(field, value)), capsys, "stream 1|metadata")


@pytest.mark.parametrize("value", [0, -1, 1.5, "100000000", True, 10**20, None])
def test_window_length_must_be_sane(edit, capsys, value: Any) -> None:
    def fn(raw: bytearray) -> None:
        doc = json.loads(meta_text(raw))
        doc["window_ns"] = value
        put_meta(raw, doc)

    _expect_typed_everywhere(edit(fn), capsys, "window")


@pytest.mark.parametrize(
    "extra", [{"x": float("nan")}, {"x": float("inf")}, {"x": 2**70}, {"d": _deep_list(40)}]
)
def test_writer_refuses_extra_values_that_readers_refuse(extra: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="extra"):
        StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", extra=extra)
    with pytest.raises(ValueError, match="extra"):
        FileMetadata(extra=extra)


def test_unknown_keys_and_kinds_still_read(edit) -> None:
    def fn(raw: bytearray) -> None:
        doc = json.loads(meta_text(raw))
        doc["future"] = {"x": [1, 2, {"y": None}]}
        doc["file"]["future"] = 1
        doc["streams"][0]["future"] = [1]
        doc["streams"][0]["kind"] = "thermal"
        put_meta(raw, doc)

    path = edit(fn)
    read_everything(path)
    assert verify_file(path).ok


# --- header Version: 0 is damage, a higher one a newer format ------------------------------


def _with_version(version: int) -> Callable[[bytearray], None]:
    def fn(raw: bytearray) -> None:
        struct.pack_into("<H", raw, 4, version)
        reseal(raw)

    return fn


def test_version_zero_is_corruption_not_a_newer_format(edit, capsys) -> None:
    path = edit(_with_version(0))
    _expect_typed_everywhere(path, capsys, "Version is 0")
    with pytest.raises(CorruptFileError) as exc:
        HyperframeReader(path)
    assert not isinstance(exc.value, UnsupportedVersionError)
    assert exc.value.offset == 4 and "upgrade" not in str(exc.value)
    tmp = edit(_with_version(0), "tmp")
    with pytest.raises(RecoveryError, match="Version is 0"):
        recover(tmp, tmp.parent / "r.hf")


def test_a_higher_version_still_asks_for_an_upgrade(edit) -> None:
    with pytest.raises(UnsupportedVersionError, match="version 2 is not supported"):
        HyperframeReader(edit(_with_version(2)))


# --- cause 3: offset + size wrapping in uint64 -------------------------------------------


def test_index_offset_plus_size_may_not_wrap(edit, capsys) -> None:
    def fn(raw: bytearray) -> None:
        e = first_entry(raw, 1)  # a lidar frame, ~8 KB
        struct.pack_into("<Q", raw, e["pos"] + 16, 2**64 - 64)  # aligned; + size wraps
        reseal(raw)

    _expect_typed_everywhere(edit(fn), capsys, "index entry")


def test_window_table_offset_plus_size_may_not_wrap(edit, capsys) -> None:
    def fn(raw: bytearray) -> None:
        h = header(raw)
        struct.pack_into("<QQ", raw, h.windows_offset + 8, 2**64 - 64, 128)
        reseal(raw)

    _expect_typed_everywhere(edit(fn), capsys, "window table")


# --- cause 4: item size 0 on a shuffled stream ---------------------------------------------


@pytest.mark.parametrize("dtype", ["S", "V", "(0,)f4", "U0"])
def test_zero_item_size_on_a_shuffled_stream(edit, capsys, dtype: str) -> None:
    _expect_typed_everywhere(edit(_with_stream("dtype", dtype)), capsys, "dtype")


def test_unshuffle_with_item_size_zero_or_one_is_a_copy() -> None:
    for k in (0, 1):
        assert unshuffle(b"abcdef", k).tobytes() == b"abcdef"


# --- cause 5: payload sizes that do not fit dtype and shape ------------------------------------


def _imu_of(shape: tuple[int, ...], tmp_path: Path) -> bytearray:
    s = StreamInfo(2, "imu", SensorKind.IMU, "imu-f64", shape=shape)
    with HyperframeWriter(tmp_path / "imu.hf", [s], WINDOW_NS, threads=1) as w:
        w.append(2, T0 + 1, np.arange(shape[0], dtype="<f8"))
    return bytearray((tmp_path / "imu.hf").read_bytes())


def test_array_of_a_misfit_payload_is_a_typed_error(tmp_path: Path) -> None:
    raw = _imu_of((5,), tmp_path)  # 40-byte frames ...
    _with_stream("shape", [6], sid=2)(raw)  # ... on a stream that says 6 x f8
    path = tmp_path / "misfit.hf"
    path.write_bytes(bytes(raw))
    with HyperframeReader(path) as r:
        f = r.read("imu", T0 + 1)
        assert len(f.tobytes()) == 40  # the bytes are still there
        with pytest.raises(CorruptFileError, match="needs exactly 48") as exc:
            f.array()
        assert str(path) in str(exc.value)
    result = verify_file(path)
    assert not result.ok and "needs exactly 48" in " ".join(result.problems)


def test_array_of_a_partial_record_is_a_typed_error(edit) -> None:
    path = edit(_with_stream("shape", [-1, 3]))  # 500 x 16-byte lidar points, 12-byte records
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match="whole number"):
        r.read("lidar", T0).array()
    assert not verify_file(path).ok


def test_writer_refuses_a_payload_that_does_not_fit(tmp_path: Path) -> None:
    with (
        HyperframeWriter(tmp_path / "w.hf", small_streams(), WINDOW_NS) as w,
        pytest.raises(ValueError, match="needs exactly 48"),
    ):
        w.append(2, T0 + 1, bytes(40))


# --- cause 6: recover proves window ids, alignment and sizes ------------------------------------


def _quarantine_only_tmp(tmp_path: Path) -> bytearray:
    """A .tmp whose second block holds only a quarantined frame (nothing ties its window)."""
    k = (T0 - 1) // WINDOW_NS + 1
    imu = bytes(48)
    w = HyperframeWriter(tmp_path / "q.hf", small_streams(), WINDOW_NS, threads=1)
    w.write_window(k, [WriteFrame(2, k * WINDOW_NS + 5, imu)])
    w.write_window(k + 1, [WriteFrame(2, 7, imu, FrameFlags.QUARANTINED)])
    w.abort()
    return bytearray((tmp_path / "q.hf.tmp").read_bytes())


def _recover_then_verify(tmp_path: Path, raw: bytearray) -> None:
    """Recovery either refuses or writes a file that verify accepts (and that reads)."""
    src = tmp_path / "x.hf.tmp"
    src.write_bytes(bytes(raw))
    out = tmp_path / "x.hf"
    try:
        recover(src, out, overwrite=True)
    except RecoveryError:
        assert not out.exists()
        return
    result = verify_file(out)
    assert result.ok, result.problems
    read_everything(out)


@pytest.mark.parametrize("window_id", [2**62, 2**63 - 1, -(2**63), -1, 184467440737])
def test_recover_refuses_window_ids_off_the_u64_grid(tmp_path: Path, window_id: int) -> None:
    raw = _quarantine_only_tmp(tmp_path)
    pos = block_positions(raw)[1]
    struct.pack_into("<q", raw, pos + 8, window_id)
    reseal(raw)
    _recover_then_verify(tmp_path, raw)
    src = tmp_path / "x.hf.tmp"
    assert "window" in recover(src, tmp_path / "y.hf").stop_reason


def test_recover_refuses_unaligned_block_sizes(tmp_path: Path, pristine) -> None:
    raw = bytearray(pristine["tmp"]) + b"\0"
    last = block_positions(raw)[-1]
    size = struct.unpack_from("<Q", raw, last + 24)[0]
    struct.pack_into("<Q", raw, last + 24, size + 1)
    reseal(raw)
    _recover_then_verify(tmp_path, raw)


def test_recover_refuses_unaligned_payload_offsets(tmp_path: Path, pristine) -> None:
    raw = bytearray(pristine["tmp"])
    pos = block_positions(raw)[0]
    e = pos + 64  # the block's first entry: shift its payload by one byte, CRC resealed
    off, size = struct.unpack_from("<QI", raw, e + 16)
    data = bytes(raw[off + 1 : off + size])
    struct.pack_into("<QII", raw, e + 16, off + 1, len(data), crc32c(data))
    reseal(raw)
    _recover_then_verify(tmp_path, raw)


def test_recover_refuses_overlapping_or_undecodable_payloads(tmp_path: Path, pristine) -> None:
    raw = bytearray(pristine["tmp"])
    pos = block_positions(raw)[0]
    a, b = pos + 64, pos + 96  # the first two entries of the first block
    struct.pack_into("<QII", raw, b + 16, *struct.unpack_from("<QII", raw, a + 16))
    reseal(raw)
    _recover_then_verify(tmp_path, raw)
    raw = bytearray(pristine["tmp"])
    lidar = next(p for p in entry_positions_all(raw) if struct.unpack_from("<H", raw, p)[0] == 1)
    off, size = struct.unpack_from("<QI", raw, lidar + 16)
    set_payload(raw, off, struct.pack("<I", 8000) + bytes(range(256)) * ((size - 4) // 256))
    _recover_then_verify(tmp_path, raw)


def entry_positions_all(raw: bytes | bytearray) -> list[int]:
    """Byte positions of every block-table entry, in write order."""
    out = []
    for pos in block_positions(raw):
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        out += [pos + 64 + 32 * k for k in range(count)]
    return out


# --- cause 7: work proportional to the file ---------------------------------------------------


def test_window_iteration_does_not_scan_every_stream_per_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = [StreamInfo(i, f"s{i}", SensorKind.OTHER, "bytes", codec="none") for i in range(300)]
    path = tmp_path / "wide.hf"
    with HyperframeWriter(path, streams, WINDOW_NS, threads=1) as w:
        for k in range(60):
            w.append(k % 300, T0 + 1 + k * WINDOW_NS, b"x")
    calls = 0
    real = HyperframeReader.timestamps

    def counting(self: HyperframeReader, stream: int | str) -> np.ndarray:
        nonlocal calls
        calls += 1
        return real(self, stream)

    monkeypatch.setattr(HyperframeReader, "timestamps", counting)
    with HyperframeReader(path) as r:
        assert sum(len(hf.frames) for hf in r) == 60
    assert calls <= 300 + 60  # not 300 streams x 60 windows


def test_aliased_payloads_are_refused(edit, capsys) -> None:
    def fn(raw: bytearray) -> None:
        a, b = first_entry(raw, 1), index_entry(raw, header(raw).frame_count - 1)
        raw[b["pos"] + 2 : b["pos"] + 4] = raw[a["pos"] + 2 : a["pos"] + 4]
        raw[b["pos"] + 16 : b["pos"] + 32] = raw[a["pos"] + 16 : a["pos"] + 32]
        reseal(raw)

    _expect_typed_everywhere(edit(fn), capsys, "overlap")


def _zstd_bomb(raw: bytearray, content: int) -> int:
    """Replace the first lidar payload by a ZSTD frame of ``content`` zero bytes; its offset."""
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(content))
    e = first_entry(raw, 1)
    assert len(bomb) <= e["size"]
    set_payload(raw, e["offset"], bomb, CODEC_ZSTD << CODEC_SHIFT)
    return e["offset"]


def test_decoded_size_is_bounded_by_a_multiple_of_the_stored_size(edit) -> None:
    path = edit(lambda raw: _zstd_bomb(raw, 64 << 20))
    tracemalloc.start()
    try:
        with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match="stored"):
            r.read("lidar", T0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # refused before the 64 MiB were allocated
    assert not verify_file(path).ok


def refused_before_a_second_read(path: Path, match: str = "overlap") -> None:
    """Aliasing is refused before a batch read, the window table, or a second frame (a single
    read cannot cost more than its own bytes; issue 19: open reads what one lookup needs)."""
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match=match):
        r.read_positions([0, 1])
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match=match):
        r.window_count()
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match=match):
        for i in range(r.frame_count):
            r.frame_at(i)
        assert i < 2


def test_aliased_bomb_is_refused_before_a_second_read(edit) -> None:
    def fn(raw: bytearray) -> None:
        off = _zstd_bomb(raw, 1 << 20)
        src = entry_positions(raw, off)[-1]
        for i in range(header(raw).frame_count):
            e = index_entry(raw, i)
            if e["stream_id"] == 2:
                raw[e["pos"] + 2 : e["pos"] + 4] = raw[src + 2 : src + 4]
                raw[e["pos"] + 16 : e["pos"] + 32] = raw[src + 16 : src + 32]
        reseal(raw)

    refused_before_a_second_read(edit(fn))


def test_writer_never_writes_what_the_reader_refuses(tmp_path: Path) -> None:
    s = StreamInfo(5, "blob", SensorKind.OTHER, "bytes", codec="zstd", level=19)
    with HyperframeWriter(tmp_path / "z.hf", [s], WINDOW_NS, threads=1) as w:
        w.append(5, T0 + 1, bytes(8 << 20))  # compresses ~30,000:1 with zstd
    with HyperframeReader(tmp_path / "z.hf") as r:
        assert r.read("blob", T0).tobytes() == bytes(8 << 20)
    assert verify_file(tmp_path / "z.hf").ok


# --- cause 8: verify is the strictest reader --------------------------------------------------


def test_verify_checks_each_payload_over_its_own_range(edit) -> None:
    def fn(raw: bytearray) -> None:
        lidar, imu = first_entry(raw, 1), first_entry(raw, 2)
        data = bytes(raw[lidar["offset"] : lidar["offset"] + 48])
        struct.pack_into("<H", raw, imu["pos"] + 2, 0)  # stored raw
        struct.pack_into("<QII", raw, imu["pos"] + 16, lidar["offset"], 48, crc32c(data))
        reseal(raw)

    result = verify_file(edit(fn))
    text = " ".join(result.problems)
    assert not result.ok and "overlap" in text and "CRC32C mismatch" not in text


def test_verify_decodes_every_payload(edit) -> None:
    def fn(raw: bytearray) -> None:
        e = first_entry(raw, 1)  # as lz4 + shuffle
        set_payload(
            raw,
            e["offset"],
            struct.pack("<I", 8000) + bytes(range(200)),
            flags=e["flags"] & ~CODEC_MASK | 1 << CODEC_SHIFT | FrameFlags.SHUFFLED,
        )

    path = edit(fn)
    result = verify_file(path)
    assert not result.ok and "does not decode" in " ".join(result.problems)
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match="lz4"):
        r.read("lidar", T0)


@pytest.mark.parametrize("field", ["stream_index", "timestamp", "aux"])
def test_verify_compares_block_tables_with_the_index(edit, field: str) -> None:
    def fn(raw: bytearray) -> None:
        h = header(raw)
        e = first_entry(raw, 2)
        if field == "stream_index":
            struct.pack_into("<I", raw, e["pos"] + 4, e["stream_index"] + 1000)
        elif field == "timestamp":  # still sorted: one ns earlier
            struct.pack_into("<Q", raw, e["pos"] + 8, e["timestamp_ns"] - 1)
        else:
            i = (e["pos"] - h.index_offset) // 32
            struct.pack_into("<Q", raw, h.aux_offset + 16 * i, 12345)
        reseal(raw)

    path = edit(fn)
    read_everything(path)  # a reader has no reason to refuse it ...
    result = verify_file(path)  # ... verify does
    assert not result.ok and "block" in " ".join(result.problems)


def test_verify_flags_a_quarantine_offset_without_a_table(edit) -> None:
    def fn(raw: bytearray) -> None:
        struct.pack_into("<Q", raw, 136, header(raw).data_offset)
        reseal(raw)

    path = edit(fn)
    read_everything(path)  # readers ignore it (no rows) ...
    assert "quarantine" in " ".join(verify_file(path).problems)  # ... verify does not


# --- cause 9: info formats only validated fields ---------------------------------------------


def test_info_with_a_bad_codec_field_prints_the_typed_error(edit, capsys) -> None:
    path = edit(_with_stream("codec", {"name": "lz4"}, sid=2))
    for argv in (["info", str(path)], ["info", "--json", str(path)]):
        code, err = cli(capsys, *argv)
        assert code == 1 and err.startswith("error: ") and str(path) in err


# --- the CLI never prints a traceback for a bad file ---------------------------------------


@pytest.mark.parametrize("cut", [0, 100, 600, 1300, 5000])
def test_cli_on_cut_files(tmp_path: Path, pristine, capsys, cut: int) -> None:
    path = tmp_path / "cut.hf.tmp"
    path.write_bytes(pristine["tmp"][:cut])
    for argv in (
        ["info", str(path)],
        ["info", "--json", str(path)],
        ["verify", str(path)],
        ["recover", str(path), "-o", str(tmp_path / "o.hf")],
    ):
        code, err = cli(capsys, *argv)
        if argv[0] == "recover" and code == 0:
            assert verify_file(tmp_path / "o.hf").ok
            continue
        # docs/CLI.md: damage exits 1; an intact but unfinalized .tmp given to a reader is a
        # request to fix (recover it first), exit 2
        want = 2 if "not finalized" in err and argv[0] == "info" else 1
        assert code == want and str(path) in err, (argv, err)


def test_every_error_is_a_hyperframes_error(edit) -> None:
    """The root class covers every typed error raised above (CorruptFileError included)."""
    path = edit(_with_stream("dtype", "O"))
    with pytest.raises(HyperframesError), HyperframeReader(path) as r:
        r.stream(1)


@pytest.mark.parametrize(("field", "value"), [("dtype", "O"), ("shape", [0]), ("rate_hz", "10")])
def test_a_damaged_stream_entry_fails_where_that_stream_is_used(
    edit, field: str, value: Any
) -> None:
    """Opening checks the stream table's ids and names; the rest of an entry on the first use
    of its stream (issue 19: open reads what the first lookup needs). Other streams read."""
    path = edit(_with_stream(field, value))
    with HyperframeReader(path) as r:
        others = [sid for sid in r.streams if sid != 1]
        assert others and all(r.timestamps(sid).size for sid in others)
        for sid in others:
            r.read(sid, int(r.timestamps(sid)[0]))
        with pytest.raises(CorruptFileError, match="stream 1") as e:
            r.read(1, r.start_ns)
        assert str(path) in str(e.value)
        with pytest.raises(CorruptFileError, match="stream 1"):
            list(r.streams.values())


@pytest.mark.parametrize(
    ("field", "value"), [("id", "1"), ("id", True), ("id", 70000), ("name", 5)]
)
def test_stream_ids_and_names_are_checked_on_open(edit, field: str, value: Any) -> None:
    with pytest.raises(CorruptFileError, match="stream"):
        HyperframeReader(edit(_with_stream(field, value)))


# --- the pure checks behind the causes above ----------------------------------------------


def test_overlap_agrees_with_a_pairwise_check() -> None:
    from hyperframes.format.checks import overlap

    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(0, 10))
        off = (rng.integers(0, 30, n) * 64).astype(np.uint64)
        size = rng.integers(0, 200, n).astype(np.uint32)
        pairs = [
            (i, j)
            for i in range(n)
            for j in range(i + 1, n)
            if size[i] and size[j] and off[i] < off[j] + size[j] and off[j] < off[i] + size[i]
        ]
        got = overlap(off, size)
        assert (got is None) == (not pairs)
        if got is not None:
            assert got in pairs


@pytest.mark.parametrize("itemsize", [0, 1, 2, 3, 4, 5, 8, 12, 16, 17, 64])
def test_shuffle_round_trips_for_every_item_size(itemsize: int) -> None:
    from hyperframes.format.codecs import shuffle

    for n in (0, 1, itemsize, 3 * itemsize + 1, 1000):
        data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
        stored = shuffle(data, itemsize) if itemsize else data
        out = unshuffle(stored, itemsize)
        assert out.tobytes() == data and out.ctypes.data % 64 == 0
