"""``verify`` does work bounded by the file, not by entries x payload (issue 16, item 1).

The file of the report: one legal codec-3 payload (1,024 LZ4 blocks of 4 KiB,
4 MiB decoded, ~80 KB stored) and 1,000 index entries all naming it. The
reader refuses it before a second read; ``verify`` reports the aliasing and used to decode
the payload once per entry (13.5 s); it now checks each stored byte once.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from test_hostile import cli, header, index_entry, reseal

import hyperframes.format.checks
from hyperframes import CorruptFileError, FileMetadata, SensorKind, StreamInfo
from hyperframes.format.codecs import CODEC_LZ4_BLOCKS, codec_of
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

from conftest import T0, WINDOW_NS

_ENTRIES = 1000


def _aliased_file(path: Path) -> Path:
    s = StreamInfo(0, "blob", SensorKind.OTHER, "bytes", codec="lz4")
    w = HyperframeWriter(
        path, [s], WINDOW_NS, FileMetadata(created_ns=T0), threads=1, block_size=4096
    )
    w.append(0, T0 + 1, bytes(range(64)) * (4 << 14))  # 4 MiB: 1,024 blocks of 4 KiB
    for i in range(1, _ENTRIES):
        w.append(0, T0 + 1 + i, b"")
    w.finalize()
    raw = bytearray(path.read_bytes())
    big = index_entry(raw, 0)
    assert codec_of(big["flags"]) == CODEC_LZ4_BLOCKS
    src = big["pos"]
    for i in range(1, header(raw).frame_count):
        pos = index_entry(raw, i)["pos"]  # flags, then offset, size and CRC of the big one
        raw[pos + 2 : pos + 4] = raw[src + 2 : src + 4]
        raw[pos + 16 : pos + 32] = raw[src + 16 : src + 32]
    reseal(raw)
    path.write_bytes(bytes(raw))
    return path


@pytest.fixture(scope="module")
def aliased(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _aliased_file(tmp_path_factory.mktemp("alias") / "a.hf")


def test_the_file_is_the_reported_one(aliased: Path) -> None:
    assert aliased.stat().st_size < 256_000  # the payload, then 1,000 entries in 4 tables
    with HyperframeReader(aliased) as r, pytest.raises(CorruptFileError, match="overlap"):
        r.read_positions([0, 1])
    raw = aliased.read_bytes()
    offsets = {
        struct.unpack_from("<Q", raw, index_entry(raw, i)["pos"] + 16)[0] for i in range(_ENTRIES)
    }
    assert len(offsets) == 1


def test_verify_decodes_an_aliased_payload_once(aliased: Path, monkeypatch) -> None:
    real = hyperframes.format.checks.decode_aligned
    decodes = 0

    def counting(*args, **kwargs):  # the real decoder, counted
        nonlocal decodes
        decodes += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(hyperframes.format.checks, "decode_aligned", counting)
    cpu = time.process_time()
    result = verify_file(aliased)
    cpu = time.process_time() - cpu
    assert decodes == 1  # was 1,000
    assert cpu < 1.0  # was 13.5 s (wall) in the report; ~30 ms now
    text = " ".join(result.problems)
    assert not result.ok and "overlap" in text
    assert f"{_ENTRIES - 1} entries name bytes of payloads checked already" in text


def test_cli_verify_reports_the_aliasing(aliased: Path, capsys) -> None:
    cpu = time.process_time()
    code, err = cli(capsys, "verify", str(aliased))
    assert time.process_time() - cpu < 1.0
    assert code == 1 and "overlap" in err and "aliasing" in err


def test_partial_overlaps_are_each_checked_at_most_once(tmp_path: Path) -> None:
    """An entry reaching into the next payload: every stored byte is still checked once."""
    s = StreamInfo(0, "blob", SensorKind.OTHER, "bytes", codec="none")
    path = tmp_path / "p.hf"
    with HyperframeWriter(path, [s], WINDOW_NS, FileMetadata(created_ns=T0), threads=1) as w:
        for i in range(4):
            w.append(0, T0 + 1 + i, bytes([i]) * 640)
    raw = bytearray(path.read_bytes())
    one, two = index_entry(raw, 1), index_entry(raw, 2)
    grown = two["offset"] + 640 - one["offset"]
    struct.pack_into("<I", raw, one["pos"] + 24, grown)  # frame 1 now covers frame 2
    reseal(raw)
    path.write_bytes(bytes(raw))
    result = verify_file(path)
    text = " ".join(result.problems)
    assert "overlap" in text and "1 entries name bytes of payloads checked already" in text
    assert "CRC32C mismatch" in text  # frame 1's CRC is of its own 640 bytes
    assert result.payload_bytes == 640 + grown + 640  # frames 0, 1 (grown) and 3


def test_an_entry_out_of_the_payload_region_names_its_size(tmp_path: Path) -> None:
    s = StreamInfo(0, "blob", SensorKind.OTHER, "bytes", codec="none")
    path = tmp_path / "r.hf"
    with HyperframeWriter(path, [s], WINDOW_NS, FileMetadata(created_ns=T0), threads=1) as w:
        w.append(0, T0 + 1, bytes(640))
    raw = bytearray(path.read_bytes())
    struct.pack_into("<I", raw, index_entry(raw, 0)["pos"] + 24, 1 << 20)
    reseal(raw)
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=r"\(\+1048576 bytes\)"):  # not its CRC
        HyperframeReader(path)
