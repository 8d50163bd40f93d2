"""The reader's fast paths agree with the slow ones they stand in for.

Open proves the index sound with a few whole-array operations
(``format.structure.index_sound``; the reader proves the stream order on open and
the rest before its second read) and runs the full, error-naming checks only
when that proof fails; a raw frame of a local file is read with one
``preadv`` in ``frame_at``; frames and stream tables are built through the
slot setters. Each must accept exactly what it stands in for accepts (or
defer to it) and keep every error naming the file.
"""

from __future__ import annotations

import dataclasses
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from test_hostile import index_entry, reseal

from hyperframes import ChecksumError, CorruptFileError, StreamInfo
from hyperframes.format import structure
from hyperframes.format.layout import HEADER_SIZE, INDEX_DTYPE, Header
from hyperframes.format.meta import Meta, _parse, decode_meta, encode_meta
from hyperframes.format.streams import FileMetadata
from hyperframes.reader import _DECODE_MASK, Frame, HyperframeReader, _frame

from conftest import small_streams


def _parts(path: Path) -> tuple[np.ndarray, Header, list[int], object]:
    raw = path.read_bytes()
    h = Header.decode(raw[:HEADER_SIZE])[0]
    index = np.frombuffer(raw[h.index_offset : h.index_offset + h.index_size], INDEX_DTYPE).copy()
    meta = decode_meta(raw[h.meta_offset : h.meta_offset + h.meta_size])
    return index, h, sorted(s.id for s in meta.streams), meta


def _full_checks_pass(index: np.ndarray, h: Header, meta: object, allow_overlap: bool) -> bool:
    try:
        structure.check_index("f.hf", index, h, meta)  # type: ignore[arg-type]
        if not allow_overlap:
            structure.check_aliasing("f.hf", index, h)
    except CorruptFileError:
        return False
    return True


def test_a_sound_index_is_proven_and_gives_the_stream_slices(write_file) -> None:
    path, _ = write_file()
    index, h, ids, _ = _parts(path)
    slices = structure.index_sound(index, h, ids, allow_overlap=False)
    assert slices == structure.stream_slices(index, ids)
    assert sum(b - a for a, b in slices.values()) == len(index)
    with HyperframeReader(path) as r:
        assert {s: r.stream_slice(s) for s in ids} == slices


def _set(index: np.ndarray, i: int, field: str, value: int) -> np.ndarray:
    out = index.copy()
    out[field][i] = value
    return out


@pytest.mark.parametrize(
    "damage",
    [
        lambda ix, h: _set(ix, 3, "offset", int(ix["offset"][3]) + 8),  # unaligned
        lambda ix, h: _set(ix, 3, "offset", h.data_offset - 64),  # before the payloads
        lambda ix, h: _set(ix, 3, "offset", h.index_offset),  # at the index
        lambda ix, h: _set(ix, 3, "size", h.index_offset),  # ends past the payloads
        lambda ix, h: _set(ix, 4, "offset", int(ix["offset"][3])),  # aliasing
        lambda ix, h: _set(ix, 0, "stream_id", 2),  # streams out of order
        lambda ix, h: _set(ix, len(ix) - 1, "stream_id", 9),  # unknown stream, last row
        lambda ix, h: _set(ix, 5, "timestamp_ns", int(ix["timestamp_ns"][5]) + 10**12),  # time
    ],
)
def test_damage_is_never_proven_sound(write_file, damage) -> None:
    path, _ = write_file()
    index, h, ids, meta = _parts(path)
    bad = damage(index, h)
    assert structure.index_sound(bad, h, ids, allow_overlap=False) is None
    assert not _full_checks_pass(bad, h, meta, allow_overlap=False)


def test_what_the_proof_cannot_show_goes_to_the_full_checks(write_file) -> None:
    path, _ = write_file()
    index, h, ids, meta = _parts(path)
    empty = _set(index, 3, "size", 0)  # an empty payload: sound, but outside the fast proof
    assert structure.index_sound(empty, h, ids, allow_overlap=False) is None
    assert _full_checks_pass(empty, h, meta, allow_overlap=False)
    alias = _set(index, 4, "offset", int(index["offset"][3]))
    assert structure.index_sound(alias, h, ids, allow_overlap=True) is not None  # verify's mode


def test_random_damage_proven_sound_only_when_the_full_checks_pass(write_file) -> None:
    path, _ = write_file()
    index, h, ids, meta = _parts(path)
    rng = random.Random(19)
    fields = ["stream_id", "timestamp_ns", "offset", "size"]
    proven = refused = 0
    for _ in range(400):
        bad = index.copy()
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(bad))
            f = rng.choice(fields)
            j = rng.randrange(len(bad))
            value = {
                "stream_id": rng.choice([0, 1, 2, 3, int(bad["stream_id"][j])]),
                "timestamp_ns": int(bad["timestamp_ns"][j]) + rng.choice([-1, 0, 1]),
                "offset": int(bad["offset"][j]) + rng.choice([-64, 0, 64, 1]),
                "size": rng.choice([0, 1, int(bad["size"][j]), int(bad["size"][i]) + 64]),
            }[f]
            bad[f][i] = max(0, value)
        for allow in (False, True):
            if structure.index_sound(bad, h, ids, allow) is not None:
                proven += 1
                assert _full_checks_pass(bad, h, meta, allow), "the fast proof accepted damage"
            else:
                refused += 1
    assert proven and refused  # both branches ran


def test_a_raw_frame_read_checks_its_crc_and_names_the_file(write_file) -> None:
    path, frames = write_file()
    with HyperframeReader(path) as r:
        i = r.find("cam", frames[0][1])
        row = r.index[i]
        assert not int(row["flags"]) & _DECODE_MASK  # stored raw: the fast path
        good = r.frame_at(i)
        assert good.tobytes() == frames[0][2] and good.data.ctypes.data % 64 == 0
    raw = bytearray(path.read_bytes())
    raw[int(row["offset"]) + 5] ^= 0x40
    path.write_bytes(bytes(raw))
    with HyperframeReader(path) as r, pytest.raises(ChecksumError) as exc:
        r.frame_at(i)
    assert str(path) in str(exc.value)
    with HyperframeReader(path, verify=False) as r:
        assert r.frame_at(i).tobytes()[5] == frames[0][2][5] ^ 0x40


def test_a_file_cut_after_open_gives_a_truncated_frame_error(write_file) -> None:
    path, _ = write_file()
    with HyperframeReader(path) as r:
        last = int(np.argmax(r.index["offset"] * (r.index["stream_id"] == 0)))  # last camera frame
        row = r.index[last]
        os.truncate(path, int(row["offset"]) + int(row["size"]) // 2)
        with pytest.raises(CorruptFileError, match="truncated") as exc:
            r.frame_at(last)
        assert str(path) in str(exc.value)


def test_frames_built_by_the_slot_setters_equal_constructed_ones() -> None:
    s = small_streams()[0]
    data = np.zeros(8, np.uint8)
    fast = _frame(s, 5, 6, 7, data, "f.hf")
    assert fast == Frame(s, 5, 6, 7, data, "f.hf")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.timestamp_ns = 1  # type: ignore[misc]


def test_stream_tables_decode_to_what_was_written_and_still_validate() -> None:
    streams = tuple(small_streams())
    doc = encode_meta(Meta(streams, FileMetadata(), 50_000_000))
    assert decode_meta(doc).streams == streams
    with pytest.raises(ValueError, match="name"):
        StreamInfo.from_dict({"id": 1, "name": "no spaces"})
    with pytest.raises(ValueError, match="stream id"):
        StreamInfo.from_dict({"id": 70000, "name": "x"})
    with pytest.raises(ValueError, match="shape"):
        StreamInfo.from_dict({"id": 1, "name": "x", "dtype": "<f4", "shape": [0, 4]})


# --- what open leaves to the reads (issue 19: open reads what the first lookup needs) ---


def _damaged(path: Path, i: int, field: str, value: int) -> Path:
    """``path`` with index entry ``i``'s ``field`` set to ``value``, every CRC resealed."""
    raw = bytearray(path.read_bytes())
    pos = index_entry(raw, i)["pos"]
    at, fmt = {"timestamp_ns": (8, "<Q"), "offset": (16, "<Q"), "size": (24, "<I")}[field]
    struct.pack_into(fmt, raw, pos + at, value)
    reseal(raw)
    out = path.with_name(f"damaged-{field}-{i}.hf")
    out.write_bytes(bytes(raw))
    return out


def test_an_entry_outside_the_payloads_fails_its_own_first_read_and_any_second(
    write_file,
) -> None:
    path, _ = write_file()
    _, h, _, _ = _parts(path)
    bad = _damaged(path, 3, "offset", h.index_offset + 64)  # past the payloads
    good = 0
    with HyperframeReader(bad) as r:  # open proves only the stream order
        with pytest.raises(CorruptFileError, match="index entry 3") as exc:
            r.frame_at(3)  # the one free read checks its own entry
        assert str(bad) in str(exc.value)
    with HyperframeReader(bad) as r:
        r.frame_at(good)  # a sound entry may be read once...
        with pytest.raises(CorruptFileError, match="index entry 3"):
            r.frame_at(good)  # ...then every entry is checked
    with HyperframeReader(bad) as r, pytest.raises(CorruptFileError, match="index entry 3"):
        r.index  # noqa: B018 - the property checks every entry before handing the index out
    with HyperframeReader(bad) as r, pytest.raises(CorruptFileError, match="index entry 3"):
        r.get_window(0)


def test_an_unaligned_entry_is_refused_by_its_own_first_read(write_file) -> None:
    path, _ = write_file()
    index, _, _, _ = _parts(path)
    bad = _damaged(path, 2, "offset", int(index["offset"][2]) + 8)
    with HyperframeReader(bad) as r, pytest.raises(CorruptFileError, match="unaligned"):
        r.frame_at(2)


def test_a_stream_out_of_time_order_fails_its_first_lookup_not_the_others(write_file) -> None:
    path, _ = write_file()
    index, _, ids, _ = _parts(path)
    sid = int(index["stream_id"][0])
    lo, hi = structure.stream_slices(index, ids)[sid]
    assert hi - lo >= 3
    bad = _damaged(path, lo + 1, "timestamp_ns", int(index["timestamp_ns"][hi - 1]) + 1)
    other = next(s for s in ids if s != sid and structure.stream_slices(index, ids)[s][1] > 0)
    with HyperframeReader(bad) as r:  # the damaged stream's first lookup: refused
        with pytest.raises(CorruptFileError, match="not sorted") as exc:
            r.read(sid, int(index["timestamp_ns"][lo]))
        assert str(bad) in str(exc.value)
    with HyperframeReader(bad) as r:  # another stream's first lookup is answered
        t = int(r.timestamps(other)[0])
        assert r.read(other, t).timestamp_ns == t


def test_every_opened_file_with_damage_is_refused_before_a_second_read(write_file) -> None:
    """Whatever the damage, no reader hands out two frames of a file the full checks refuse."""
    path, _ = write_file()
    index, h, _, meta = _parts(path)
    rng = random.Random(7)
    refused = 0
    for k in range(40):
        i = rng.randrange(len(index))
        field = rng.choice(["timestamp_ns", "offset", "size"])
        value = {
            "timestamp_ns": int(index["timestamp_ns"][rng.randrange(len(index))]),
            "offset": int(index["offset"][i]) + rng.choice([-64, 8, 64, 1 << 20]),
            "size": int(index["size"][i]) + rng.choice([64, 1 << 20]),
        }[field]
        bad = _damaged(path, i, field, max(0, value))
        damaged_index = _parts(bad)[0]
        sound = _full_checks_pass(damaged_index, h, meta, allow_overlap=False)
        try:
            with HyperframeReader(bad) as r:
                r.frame_at(rng.randrange(len(index)))
                r.frame_at(rng.randrange(len(index)))
        except (CorruptFileError, ChecksumError):
            refused += 1
            continue
        finally:
            bad.unlink()
        assert sound, f"case {k}: two reads of a file the full checks refuse"
    assert refused


def test_metadata_json_refuses_integers_wider_than_64_bits() -> None:
    assert _parse(b'{"t":1735689600000000000,"x":1.5}') == {"t": 1735689600000000000, "x": 1.5}
    with pytest.raises(ValueError, match="wider than 64 bits"):  # not read as 1e25
        _parse(b'{"n":' + b"9" * 25 + b"}")
    assert _parse(b'{"n":18446744073709551615}')["n"] == (1 << 64) - 1
    assert _parse(b'{"s":"' + b"7" * 30 + b'"}') == {"s": "7" * 30}  # digits in a string
    for bad in (b'{"n":NaN}', b'{"n":1e400}', b'{"n":' + b"1" * 20 + b",}", b"\xff"):
        with pytest.raises(ValueError):
            _parse(bad)
