"""A ZSTD payload is exactly one frame (issue 16, item 3): bytes after it are corruption.

python-zstandard ignores what follows a frame by default. Codec 2 (one frame)
and each block of codec 4 (one frame per block) must end where their frame
ends; the reader, ``verify`` and ``recover`` refuse the rest with a typed
error naming the file and the frame.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import zstandard
from test_hostile import entry_positions_all, set_payload

from hyperframes import CorruptFileError, FileMetadata, SensorKind, StreamInfo
from hyperframes.format import payload_blocks as blocks
from hyperframes.format.codecs import CODEC_ZSTD, CODEC_ZSTD_BLOCKS, MAX_RATIO, codec_of
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

from conftest import T0, WINDOW_NS

_GARBAGE = 0xA5


def _text(n: int) -> bytes:
    """``n`` bytes that ZSTD level 1 compresses well and level 19 better still."""
    text = b"".join(b"%d,%d;" % (i, i * i % 977) for i in range(n // 4))
    return text[:n]


# frame t -> raw bytes, one window each: small good frames in windows 0 and 2, a whole
# ZSTD payload (codec 2) in window 1, a blocked one (codec 4: 1 MiB, four 256 KiB blocks)
# in window 3
_FRAMES = {T0 + w * WINDOW_NS + 1: _text(n) for w, n in enumerate((5000, 100_000, 5000, 1 << 20))}
_BAD = [T0 + WINDOW_NS + 1, T0 + 3 * WINDOW_NS + 1]  # codec 2, codec 4


def _write(path: Path, finalize: bool) -> Path:
    s = StreamInfo(0, "blob", SensorKind.OTHER, "bytes", codec="zstd", level=1)
    w = HyperframeWriter(path, [s], WINDOW_NS, FileMetadata(created_ns=T0), threads=1)
    for t, data in _FRAMES.items():
        w.append(0, t, data)
    if finalize:
        w.finalize()
        return path
    w.abort()
    return Path(f"{path}.tmp")


def _padded(frame: bytes, raw: bytes) -> bytes:
    """``raw`` as a smaller ZSTD frame followed by garbage, to ``frame``'s exact length."""
    tight = zstandard.ZstdCompressor(level=19, write_content_size=True).compress(raw)
    assert len(tight) < len(frame)
    return tight + bytes([_GARBAGE]) * (len(frame) - len(tight))


def _with_trailing_garbage(raw: bytearray, t: int) -> None:
    """Give the frame stamped ``t`` a payload of one frame plus garbage, CRCs resealed.

    A whole payload (codec 2) gets garbage after its frame; a blocked one (codec
    4) after the frame of its block 1, its length and block table unchanged.
    """
    pos = entry_positions_all(raw)[list(_FRAMES).index(t)]  # one stream: write order
    flags, off, size = struct.unpack_from("<H12xQI", raw, pos + 2)
    stored = bytes(raw[off : off + size])
    if codec_of(flags) == CODEC_ZSTD:
        set_payload(raw, off, _padded(stored, _FRAMES[t]))
        return
    assert codec_of(flags) == CODEC_ZSTD_BLOCKS
    table = blocks.parse(stored, MAX_RATIO, 64)
    parts = [stored[table.offsets[i] : table.offsets[i + 1]] for i in range(table.count)]
    lo, hi = table.raw_range(1)
    parts[1] = _padded(parts[1], _FRAMES[t][lo:hi])
    data = blocks.pack(parts, table.raw_size, table.block_size)
    assert len(data) == size
    set_payload(raw, off, data)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("zstd")
    final = _write(d / "z.hf", finalize=True)
    with HyperframeReader(final) as r:
        codecs = [codec_of(int(f)) for f in r.index["flags"]]
    assert codecs == [CODEC_ZSTD] * 3 + [CODEC_ZSTD_BLOCKS]
    return {"final": final.read_bytes(), "tmp": _write(d / "c.hf", finalize=False).read_bytes()}


@pytest.mark.parametrize("t", _BAD, ids=["zstd", "zstd-blocks"])
def test_reader_and_verify_refuse_bytes_after_a_frame(tmp_path: Path, pristine, t: int) -> None:
    raw = bytearray(pristine["final"])
    _with_trailing_garbage(raw, t)
    path = tmp_path / "g.hf"
    path.write_bytes(bytes(raw))
    with HyperframeReader(path) as r:
        assert r.read("blob", T0 + 1).tobytes() == _FRAMES[T0 + 1]
        with pytest.raises(CorruptFileError, match="unused data") as info:
            r.read("blob", t)
    assert str(path) in str(info.value) and "frame" in str(info.value)
    if t == _BAD[1]:
        assert "block 1" in str(info.value)
    result = verify_file(path)
    assert not result.ok
    assert any("unused data" in p and str(path) in p for p in result.problems), result.problems


@pytest.mark.parametrize("t", _BAD, ids=["zstd", "zstd-blocks"])
def test_recover_stops_at_a_payload_with_bytes_after_its_frame(
    tmp_path: Path, pristine, t: int
) -> None:
    raw = bytearray(pristine["tmp"])
    _with_trailing_garbage(raw, t)
    src = tmp_path / "g.hf.tmp"
    src.write_bytes(bytes(raw))
    report = recover(src, tmp_path / "g.hf")
    assert "unused data" in report.stop_reason
    assert report.frames == list(_FRAMES).index(t)  # the windows before the bad one
    assert verify_file(tmp_path / "g.hf").ok


def test_untouched_files_still_read(tmp_path: Path, pristine) -> None:
    path = tmp_path / "ok.hf"
    path.write_bytes(pristine["final"])
    with HyperframeReader(path) as r:
        assert [f.tobytes() for f in r.frames("blob")] == list(_FRAMES.values())
    assert verify_file(path).ok
