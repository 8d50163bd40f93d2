#!/usr/bin/env python3
"""Long fuzz campaign against the container library; run by hand, never by pytest.

Builds a corpus of small files (finalized files, crashed, cut and killed
``.tmp`` files, the golden files, files with late and quarantined frames, a
3,000-stream file), mutates them (raw damage, and targeted edits of every
header field, index/aux/window/quarantine row, block record, block entry,
payload codec header and metadata JSON with every CRC resealed afterwards),
and runs each mutated file through the reader (every window, frame, array and
quarantined frame), ``verify_file``, the CLI (``info``, ``info --json``,
``verify``) and ``recover`` followed by ``verify`` of its output. Each case
runs in a forked child with an address-space limit and a time limit.

Outcome classes (one per case, the worst that happened):

- ``hang``: killed after ``--case-timeout`` seconds of wall time
- ``slow``: finished, but used more than ``--slow-cpu`` CPU seconds
- ``big-alloc``: MemoryError under the address-space limit, or peak RSS grew
  by more than ``--big-rss-mb``
- ``untyped``: an exception that is not a HyperframesError (reader, verify,
  recover) or a traceback out of the CLI
- ``recover-verify-rejects``: recover wrote a file that verify rejects
- ``verify-ok-read-fails``: verify accepted a file the reader refuses
- ``silent-corruption``: raw damage (no CRC resealed) read back or recovered
  as different frames or a different stream table, without an error
- ``typed``: a HyperframesError named the problem, or verify reported it
- ``ok``: the file read back without an error and verify accepted it

Usage::

    python bench/fuzz_campaign.py --cases 25000 --workers 2 --time-limit 3000 \
        --out /tmp/fuzz.json
    python bench/fuzz_campaign.py --replay 1234 --seed 0   # one case, with tracebacks

Cases are a pure function of (seed, case number), so a case can be replayed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zstandard

from hyperframes import CodecSpec, FileMetadata, FrameFlags, SensorKind, StreamInfo
from hyperframes.errors import HyperframesError
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import (
    BLOCK_RECORD_SIZE,
    HEADER_SIZE,
    INDEX_DTYPE,
    BlockRecord,
    Header,
)
from hyperframes.writer import HyperframeWriter, WriteFrame

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
WINDOW_NS = 100_000_000
T0 = 1_735_689_600_000_000_000
CLASSES = (
    "hang",
    "slow",
    "big-alloc",
    "untyped",
    "recover-verify-rejects",
    "verify-ok-read-fails",
    "silent-corruption",
    "typed",
    "ok",
)

# --- corpus -------------------------------------------------------------------


def _streams() -> list[StreamInfo]:
    return [
        StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=30.0),
        StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", rate_hz=10.0),
        StreamInfo(
            2, "imu", SensorKind.IMU, "imu-f64", rate_hz=200.0, codec="zstd", level=1, shuffle=True
        ),
        StreamInfo(3, "can", SensorKind.CAN, "bytes", codec="lz4hc", level=9),
    ]


def _frames(seconds: float, lidar_points: int = 200) -> list[tuple[int, int, bytes]]:
    out = []
    end = T0 + int(seconds * 1e9)
    for sid, period in ((0, 33_333_333), (1, 100_000_000), (2, 5_000_000), (3, 20_000_000)):
        t, i = T0 + 1 + sid * 1_000_000, 0
        while t <= end:
            rng = np.random.default_rng(sid * 1000 + i)
            if sid == 0:
                payload = b"\xff\xd8" + bytes([i % 256]) * (300 + i) + b"\xff\xd9"
            elif sid == 1:
                payload = np.round(rng.normal(0, 10, (lidar_points, 4)), 2).astype("<f4").tobytes()
            elif sid == 2:
                payload = np.full(6, i, "<f8").tobytes()
            else:
                payload = b"CAN" * 10 + bytes([i % 7]) * (i % 40)
            out.append((sid, t, payload))
            t += period
            i += 1
    out.sort(key=lambda f: (f[1], f[0]))
    return out


def _write_small(
    path: Path,
    seconds: float,
    finalize: bool,
    codecs: dict[int, CodecSpec],
    block_size: int = 0,
    lidar_points: int = 200,
) -> None:
    w = HyperframeWriter(
        path,
        _streams(),
        WINDOW_NS,
        FileMetadata("fz", "fz", 1, T0),
        threads=1,
        codecs=codecs,
        block_size=block_size,
    )
    for sid, t, p in _frames(seconds, lidar_points):
        w.append(sid, t, p, receive_ns=t + 1000)
    if finalize:
        w.finalize()
    else:
        w.abort()


def _write_placement(path: Path, finalize: bool) -> None:
    k = (T0 - 1) // WINDOW_NS + 1
    hw = int(FrameFlags.HW_TIMESTAMP)
    imu = np.arange(6, dtype="<f8").tobytes()

    def ts(win: int) -> int:
        return win * WINDOW_NS + 5_000_000

    w = HyperframeWriter(path, _streams(), WINDOW_NS, FileMetadata(created_ns=T0), threads=1)
    w.write_window(k + 10, [WriteFrame(2, ts(k + 10), imu, hw, 0)])
    w.write_window(
        k + 11,
        [
            WriteFrame(2, ts(k + 11), imu, hw, 2),
            WriteFrame(2, ts(k + 4), imu, hw | FrameFlags.LATE, 1),
            WriteFrame(2, 1_000, imu, hw | FrameFlags.QUARANTINED, 3),
            WriteFrame(2, T0 + 36_000 * 10**9, imu, hw | FrameFlags.QUARANTINED, 4),
            WriteFrame(1, ts(k + 11), np.ones((64, 4), "<f4").tobytes(), hw, 0),
        ],
    )
    w.write_window(k + 12, [WriteFrame(2, ts(k + 12), imu, hw, 5)])
    if finalize:
        w.finalize()
    else:
        w.abort()


def _write_wide(path: Path) -> None:
    """3,000 streams, 1,000 windows of one frame each, then a minimal stream table."""
    streams = [StreamInfo(i, f"s{i}", SensorKind.OTHER, "bytes", codec="none") for i in range(3000)]
    with HyperframeWriter(path, streams, WINDOW_NS, FileMetadata(created_ns=T0), threads=1) as w:
        for k in range(1000):
            w.append(k % 3000, T0 + 1 + k * WINDOW_NS, b"x")
    raw = bytearray(path.read_bytes())
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
    doc = json.loads(bytes(raw[h.meta_offset : h.meta_offset + h.meta_size]))
    doc["streams"] = [{"id": i, "name": f"s{i}"} for i in range(3000)]
    _replace_final_meta(raw, json.dumps(doc, separators=(",", ":")).encode())
    path.write_bytes(bytes(raw))


def _killed_tmp(path: Path) -> None:
    """A .tmp left by a writer killed with SIGKILL in the middle of a window."""
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from fuzz_campaign import _streams, _frames, T0, WINDOW_NS\n"
        "from hyperframes.writer import HyperframeWriter\n"
        f"w = HyperframeWriter({str(path)!r}, _streams(), WINDOW_NS, fsync_interval_s=0,"
        " threads=1)\n"
        "for sid, t, p in _frames(30.0):\n"
        "    w.append(sid, t, p)\n"
        "    if t > T0 + 400_000_000: w.flush(); print('go', flush=True); break\n"
        "import time; time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def build_corpus(d: Path) -> dict[str, float]:
    """Write the base files into ``d``; returns name -> weight."""
    lz = {1: CodecSpec("lz4", None, True)}
    zs = {1: CodecSpec("zstd", 1, True), 0: CodecSpec("none")}
    _write_small(d / "small.hf", 0.3, True, lz)
    _write_small(d / "small-crashed.hf", 0.3, False, lz)
    (d / "small-crashed.hf.tmp").rename(d / "small.hf.tmp")
    raw = (d / "small.hf.tmp").read_bytes()
    (d / "small-cut.hf.tmp").write_bytes(raw[: len(raw) * 3 // 4])
    _write_small(d / "zstd.hf", 0.25, True, zs)
    # lidar frames of 16 KB in 4 KiB blocks (codecs 3 and 4), finalized and crashed
    _write_small(d / "blocks.hf", 0.25, True, lz, 4096, 1024)
    _write_small(d / "blocks-zstd.hf", 0.25, True, zs, 4096, 1024)
    # the same in Blosc2 chunks (codec 5, the default for arrays since 0.3)
    b2 = {1: CodecSpec("blosc2-lz4", 9, True)}
    _write_small(d / "blocks-blosc2.hf", 0.25, True, b2, 4096, 1024)
    _write_small(d / "blocks-crashed.hf", 0.25, False, lz, 4096, 1024)
    (d / "blocks-crashed.hf.tmp").rename(d / "blocks.hf.tmp")
    _write_placement(d / "placement.hf", True)
    _write_placement(d / "placement-crashed.hf", False)
    (d / "placement-crashed.hf.tmp").rename(d / "placement.hf.tmp")
    shutil.copy(GOLDEN / "tiny-v1.hf", d / "golden.hf")
    shutil.copy(GOLDEN / "tiny-v1-crashed.hf.tmp", d / "golden.hf.tmp")
    _killed_tmp(d / "killed.hf")
    _write_wide(d / "wide.hf")
    return {
        "small.hf": 24,
        "small.hf.tmp": 14,
        "small-cut.hf.tmp": 5,
        "zstd.hf": 16,
        "placement.hf": 9,
        "placement.hf.tmp": 6,
        "golden.hf": 9,
        "golden.hf.tmp": 6,
        "killed.hf.tmp": 6,
        "wide.hf": 0.25,
        "blocks.hf": 12,
        "blocks-zstd.hf": 8,
        "blocks-blosc2.hf": 10,
        "blocks.hf.tmp": 6,
    }


# --- parsing a pristine base --------------------------------------------------

_HEADER_FIELDS = [  # (offset, struct format)
    (4, "<H"),
    (6, "<H"),
    (8, "<I"),
    (12, "<Q"),
    (20, "<Q"),
    (28, "<I"),
    (32, "<I"),
    (36, "<Q"),
    (44, "<Q"),
    (52, "<Q"),
    (60, "<Q"),
    (68, "<Q"),
    (76, "<Q"),
    (84, "<Q"),
    (92, "<Q"),
    (100, "<Q"),
    (108, "<Q"),
    (116, "<I"),
    (136, "<Q"),
    (144, "<Q"),
    (152, "<I"),
]
_ENTRY_FIELDS = [(0, "<H"), (2, "<H"), (4, "<I"), (8, "<Q"), (16, "<Q"), (24, "<I"), (28, "<I")]
_AUX_FIELDS = [(0, "<Q"), (8, "<I"), (12, "<I")]
_WINDOW_FIELDS = [(0, "<q"), (8, "<Q"), (16, "<Q"), (24, "<I"), (28, "<I")]
_BLOCK_FIELDS = [(8, "<q"), (16, "<I"), (20, "<I"), (24, "<Q"), (32, "<Q")]


@dataclass
class Base:
    name: str
    raw: bytes
    header: Header
    finalized: bool
    blocks: list[int]  # positions of the block records
    entry_locs: dict[int, list[int]]  # payload offset -> byte positions of its 32-byte entries
    payloads: list[tuple[int, int, int]]  # (offset, size, flags) of every stored payload
    content: dict[tuple[int, int, int], int] = field(default_factory=dict)
    streams_sig: list[Any] = field(default_factory=list)


def parse_base(name: str, raw: bytes) -> Base:
    h = Header.decode(raw[:HEADER_SIZE])[0]
    blocks: list[int] = []
    locs: dict[int, list[int]] = {}
    payloads: list[tuple[int, int, int]] = []
    pos = h.data_offset
    while pos + BLOCK_RECORD_SIZE <= len(raw):
        rec = BlockRecord.decode(raw[pos : pos + BLOCK_RECORD_SIZE])
        if rec is None or pos + rec.block_size > len(raw):
            break
        blocks.append(pos)
        ent = np.frombuffer(raw, INDEX_DTYPE, rec.frame_count, pos + BLOCK_RECORD_SIZE)
        for k, e in enumerate(ent):
            locs.setdefault(int(e["offset"]), []).append(pos + BLOCK_RECORD_SIZE + 32 * k)
            payloads.append((int(e["offset"]), int(e["size"]), int(e["flags"])))
        pos += rec.block_size
    if h.finalized:
        idx = np.frombuffer(raw, INDEX_DTYPE, h.frame_count, h.index_offset)
        for k, e in enumerate(idx):
            locs.setdefault(int(e["offset"]), []).append(h.index_offset + 32 * k)
        for k in range(h.quarantine_count):
            off = struct.unpack_from("<Q", raw, h.quarantine_offset + 48 * k + 16)[0]
            locs.setdefault(off, []).append(h.quarantine_offset + 48 * k)
    return Base(name, raw, h, h.finalized, blocks, locs, payloads)


def reseal(raw: bytearray, base: Base) -> None:
    """Recompute every CRC (block tables and records, tables, metadata, header)."""
    n = len(raw)
    for pos in base.blocks:
        if pos + BLOCK_RECORD_SIZE > n:
            continue
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        end = pos + BLOCK_RECORD_SIZE + count * 48
        if end <= n:
            struct.pack_into("<I", raw, pos + 40, crc32c(bytes(raw[pos + 64 : end])))
        struct.pack_into("<I", raw, pos + 60, crc32c(bytes(raw[pos : pos + 60])))
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
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
        if off + size <= n and size < (64 << 20):
            struct.pack_into("<I", raw, at, crc32c(bytes(raw[off : off + size])))
    struct.pack_into("<I", raw, 508, crc32c(bytes(raw[:508])))


def reseal_payload(raw: bytearray, base: Base, offset: int, size: int) -> None:
    """Set the CRC of every entry naming the payload at ``offset`` to its current bytes."""
    crc = crc32c(bytes(raw[offset : offset + size]))
    for loc in base.entry_locs.get(offset, []):
        struct.pack_into("<I", raw, loc + 24, size)
        struct.pack_into("<I", raw, loc + 28, crc)


def _replace_final_meta(raw: bytearray, meta: bytes) -> None:
    h = Header.decode(bytes(raw[:HEADER_SIZE]))[0]
    del raw[h.meta_offset :]
    raw += meta + bytes(-len(meta) % 64)
    struct.pack_into("<Q", raw, 76, len(meta))
    struct.pack_into("<I", raw, 124, crc32c(meta))
    struct.pack_into("<I", raw, 508, crc32c(bytes(raw[:508])))


def _put_meta(raw: bytearray, base: Base, meta: bytes) -> bool:
    """Replace the metadata the header points at; False if it does not fit (a .tmp)."""
    h = base.header
    if h.finalized:
        _replace_final_meta(raw, meta)
        return True
    room = h.data_offset - h.meta_offset
    if len(meta) > room:
        return False
    raw[h.meta_offset : h.data_offset] = meta + bytes(room - len(meta))
    struct.pack_into("<Q", raw, 76, len(meta))
    return True


# --- mutations ------------------------------------------------------------------


def _interesting(rng: random.Random, fmt: str, v: int, n: int) -> int:
    bits = struct.calcsize(fmt) * 8
    signed = fmt[-1].islower() and fmt[-1] != "x"
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    pool = [
        0,
        1,
        v + 1,
        v - 1,
        v + 64,
        v - 64,
        v * 2,
        v // 2,
        hi,
        lo,
        hi - 63,
        n,
        n - 64,
        n + 64,
        1 << (bits - 1),
        (1 << (bits - 1)) - 64,
        v + 32,
        v ^ (1 << rng.randrange(bits)),
        rng.randint(lo, hi),
        rng.randint(0, max(0, n)),
    ]
    val = rng.choice(pool)
    if signed:
        return max(lo, min(hi, val))
    return val % (1 << bits)


def _set_field(raw: bytearray, pos: int, fmt: str, rng: random.Random) -> None:
    (v,) = struct.unpack_from(fmt, raw, pos)
    struct.pack_into(fmt, raw, pos, _interesting(rng, fmt, v, len(raw)))


Mutation = tuple[bytearray, bool, str]  # (bytes, every CRC resealed?, label)


def m_flip(rng: random.Random, b: Base) -> Mutation:
    raw = bytearray(b.raw)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    return raw, False, "flip-bits"


def m_flip_region(rng: random.Random, b: Base) -> Mutation:
    raw = bytearray(b.raw)
    h = b.header
    regions = {"header": (0, HEADER_SIZE), "meta": (h.meta_offset, h.meta_size)}
    if b.blocks:
        p = rng.choice(b.blocks)
        count = struct.unpack_from("<I", raw, p + 16)[0]
        regions["block-record"] = (p, 64)
        regions["block-table"] = (p + 64, max(1, count * 48))
    if b.payloads:
        off, size, _ = rng.choice(b.payloads)
        regions["payload"] = (off, max(1, size))
    if h.finalized:
        regions["index"] = (h.index_offset, h.index_size)
        regions["windows"] = (h.windows_offset, h.windows_size)
        regions["aux"] = (h.aux_offset, h.aux_size)
    name = rng.choice(sorted(regions))
    off, size = regions[name]
    pos = off + rng.randrange(max(1, size))
    if pos < len(raw):
        raw[pos] ^= 1 << rng.randrange(8)
    return raw, False, f"flip-{name}"


def m_truncate(rng: random.Random, b: Base) -> Mutation:
    cuts = [
        rng.randrange(len(b.raw)),
        *b.blocks,
        *(p + 64 for p in b.blocks),
        *(o + s for o, s, _ in b.payloads),
        b.header.index_offset,
    ]
    cut = max(0, min(len(b.raw) - 1, rng.choice(cuts) + rng.choice([0, 0, -1, 1, 7])))
    return bytearray(b.raw[:cut]), False, "truncate"


def m_extend(rng: random.Random, b: Base) -> Mutation:
    tail = rng.choice([bytes(rng.randrange(1, 300)), rng.randbytes(rng.randrange(1, 300))])
    return bytearray(b.raw + tail), False, "extend"


def m_zero(rng: random.Random, b: Base) -> Mutation:
    raw = bytearray(b.raw)
    pos = rng.randrange(len(raw)) // 64 * 64
    raw[pos : pos + 64] = bytes(len(raw[pos : pos + 64]))
    return raw, False, "zero-64"


def m_header(rng: random.Random, b: Base) -> Mutation:
    raw = bytearray(b.raw)
    off, fmt = rng.choice(_HEADER_FIELDS)
    _set_field(raw, off, fmt, rng)
    reseal(raw, b)
    return raw, True, f"header@{off}"


def m_entry(rng: random.Random, b: Base) -> Mutation | None:
    raw = bytearray(b.raw)
    if not b.entry_locs:
        return None
    off = rng.choice(sorted(b.entry_locs))
    locs = b.entry_locs[off]
    where = rng.choice(["one", "all"])
    fo, fmt = rng.choice(_ENTRY_FIELDS)
    (v,) = struct.unpack_from(fmt, raw, locs[0] + fo)
    new = _interesting(rng, fmt, v, len(raw))
    for loc in locs if where == "all" else [rng.choice(locs)]:
        struct.pack_into(fmt, raw, loc + fo, new)
    reseal(raw, b)
    return raw, True, f"entry@{fo}-{where}"


def m_alias(rng: random.Random, b: Base) -> Mutation | None:
    """Point other entries at one payload (aliasing); optionally many (amplification)."""
    raw = bytearray(b.raw)
    offs = sorted(b.entry_locs)
    if len(offs) < 2:
        return None
    target = rng.choice(offs)
    src = raw[b.entry_locs[target][0] : b.entry_locs[target][0] + 32]
    victims = rng.sample(offs, rng.choice([1, 2, len(offs) // 2 or 1, len(offs) - 1]))
    keep_flags = rng.random() < 0.5
    for off in victims:
        for loc in b.entry_locs[off]:
            if keep_flags:
                raw[loc + 16 : loc + 32] = src[16:32]
            else:
                raw[loc + 2 : loc + 4] = src[2:4]
                raw[loc + 16 : loc + 32] = src[16:32]
    reseal(raw, b)
    return raw, True, f"alias-{len(victims)}"


_BOMB: dict[int, bytes] = {}


def _bomb(size: int) -> bytes:
    if size not in _BOMB:
        _BOMB[size] = zstandard.ZstdCompressor(level=19).compress(bytes(size))
    return _BOMB[size]


def m_bomb(rng: random.Random, b: Base) -> Mutation | None:
    """Replace a payload by a small ZSTD frame that declares and decodes to many MB."""
    raw = bytearray(b.raw)
    size = rng.choice([1 << 20, 16 << 20, 64 << 20, 1000 << 20])
    bomb = _bomb(size) if size <= 64 << 20 else _fake_zstd(size)
    slots = [(o, s, f) for o, s, f in b.payloads if s >= len(bomb)]
    if not slots:
        return None
    off, _s, flags = rng.choice(slots)
    raw[off : off + len(bomb)] = bomb
    new_flags = (flags & ~0xF0 & ~(1 << 8)) | (2 << 4)
    for loc in b.entry_locs.get(off, []):
        struct.pack_into("<H", raw, loc + 2, new_flags)
    reseal_payload(raw, b, off, len(bomb))
    label = f"zstd-bomb-{size >> 20}M"
    if rng.random() < 0.5:  # and alias many entries onto it
        src = b.entry_locs[off][0]
        for o in rng.sample(sorted(b.entry_locs), min(len(b.entry_locs), 40)):
            for loc in b.entry_locs[o]:
                raw[loc + 2 : loc + 4] = raw[src + 2 : src + 4]
                raw[loc + 16 : loc + 32] = raw[src + 16 : src + 32]
        label += "-aliased"
    reseal(raw, b)
    return raw, True, label


def _fake_zstd(size: int) -> bytes:
    """A ZSTD frame header declaring ``size`` bytes, one RLE block of 1 byte."""
    frame = bytearray(zstandard.ZstdCompressor(level=1).compress(bytes(100)))
    real = zstandard.get_frame_parameters(bytes(frame))
    assert real.content_size == 100
    # magic(4) FHD(1) [window] FCS: rebuild with an 8-byte content size field
    fhd = 0b11 << 6 | 1 << 5  # FCS 8 bytes, single segment
    block = struct.pack("<I", (1 << 0) | (1 << 1) | (1 << 3))[:3] + b"\0"  # last, RLE, size 1
    return b"\x28\xb5\x2f\xfd" + bytes([fhd]) + struct.pack("<Q", size) + block


def m_codec(rng: random.Random, b: Base) -> Mutation | None:
    """Edit codec headers (LZ4 size prefix, ZSTD frame header) or codec flag bits; reseal."""
    raw = bytearray(b.raw)
    if not b.payloads:
        return None
    off, size, flags = rng.choice(b.payloads)
    kind = rng.choice(["prefix", "bytes", "flags", "table"])
    if kind in ("prefix", "table") and size >= 4:  # LZ4 size prefix, or a block-table u32
        at = 0 if kind == "prefix" else 4 * rng.randrange(min(8, size // 4))
        struct.pack_into(
            "<I",
            raw,
            off + at,
            rng.choice(
                [
                    0,
                    1,
                    4095,
                    4096,
                    size,
                    2**31,
                    2**32 - 1,
                    size * 255,
                    size * 300,
                    rng.randrange(2**32),
                ]
            ),
        )
    elif kind == "bytes" and size:
        for _ in range(rng.choice([1, 2, 3])):
            raw[off + rng.randrange(min(size, 16))] = rng.randrange(256)
    else:
        new = (flags & ~0xF0) | (rng.randrange(16) << 4)
        if rng.random() < 0.5:
            new ^= 1 << 8
        for loc in b.entry_locs.get(off, []):
            struct.pack_into("<H", raw, loc + 2, new)
    reseal_payload(raw, b, off, size)
    reseal(raw, b)
    return raw, True, f"codec-{kind}"


def m_table_row(rng: random.Random, b: Base) -> Mutation | None:
    raw = bytearray(b.raw)
    h = b.header
    if not h.finalized:
        return None
    tables = [
        ("aux", h.aux_offset, h.frame_count, 16, _AUX_FIELDS),
        ("window", h.windows_offset, h.window_count, 32, _WINDOW_FIELDS),
    ]
    if h.quarantine_count:
        tables.append(
            (
                "quarantine",
                h.quarantine_offset,
                h.quarantine_count,
                48,
                _ENTRY_FIELDS + [(32 + o, f) for o, f in _AUX_FIELDS],
            )
        )
    name, off, count, width, fields = rng.choice(tables)
    if not count:
        return None
    fo, fmt = rng.choice(fields)
    _set_field(raw, off + width * rng.randrange(count) + fo, fmt, rng)
    reseal(raw, b)
    return raw, True, f"{name}@{fo}"


def m_block(rng: random.Random, b: Base) -> Mutation | None:
    raw = bytearray(b.raw)
    if not b.blocks:
        return None
    pos = rng.choice(b.blocks)
    if rng.random() < 0.6:
        fo, fmt = rng.choice(_BLOCK_FIELDS)
        if fo == 8 and rng.random() < 0.5:
            struct.pack_into(
                "<q",
                raw,
                pos + 8,
                rng.choice(
                    [
                        -(2**63),
                        -1,
                        0,
                        2**62,
                        2**63 - 1,
                        (2**64 // WINDOW_NS),
                        184467440737,
                        184467440736,
                        10**11 * 2,
                    ]
                ),
            )
        else:
            _set_field(raw, pos + fo, fmt, rng)
        label = f"block@{fo}"
    else:
        count = struct.unpack_from("<I", raw, pos + 16)[0]
        if not count:
            return None
        k = rng.randrange(count)
        if rng.random() < 0.75:
            fo, fmt = rng.choice(_ENTRY_FIELDS)
            _set_field(raw, pos + 64 + 32 * k + fo, fmt, rng)
            label = f"block-entry@{fo}"
        else:
            fo, fmt = rng.choice(_AUX_FIELDS)
            _set_field(raw, pos + 64 + 32 * count + 16 * k + fo, fmt, rng)
            label = f"block-aux@{fo}"
    reseal(raw, b)
    return raw, True, label


_DTYPES = [
    "S",
    "V",
    "(0,)f4",
    "O",
    ">f8",
    "<f4",
    "u1",
    "f16",
    "S0",
    "(2,)f4",
    "M8[ns]",
    "c16",
    "i4,f4",
    "i4,O",
    "U0",
    "a",
    "(1,",
    "x" * 300,
    7,
    None,
    ["<f4"],
    "<f2",
    "(3,)u1",
]
_SHAPES = [
    [],
    [0],
    [-1, -1],
    [2**40],
    [-5],
    ["a"],
    [1.5],
    [True],
    [[2]],
    [-1, 0],
    [6],
    [-1, 4],
    [2**31, 2**31],
    [1] * 80,
    {"a": 1},
    "6",
    None,
    [-1, 2**62],
    [3, -1],
]
_NUMBERS = [0, -1, 1.5, "100", True, None, 2**64, 2**63, -(2**63), 1e300, 10**30, [1], {"x": 1}]


def _deep(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


def m_meta(rng: random.Random, b: Base) -> Mutation | None:
    """Mutate the metadata JSON (dtype, shape, numbers, types, nesting), reseal."""
    h = b.header
    doc = json.loads(b.raw[h.meta_offset : h.meta_offset + h.meta_size])
    streams = doc.get("streams") or []
    s = rng.choice(streams) if streams else {}
    kind = rng.choice(
        ["dtype", "shape", "number", "type", "nesting", "text", "dup", "unknown", "missing", "drop"]
    )
    text_sub: tuple[str, str] | None = None
    if kind == "dtype":
        s["dtype"] = rng.choice(_DTYPES)
        if rng.random() < 0.5:
            s["shuffle"] = True
    elif kind == "shape":
        s["shape"] = rng.choice(_SHAPES)
    elif kind == "number":
        key = rng.choice(
            [
                "window_ns",
                "stream.id",
                "stream.rate_hz",
                "stream.level",
                "file.segment_seq",
                "file.created_ns",
            ]
        )
        val = rng.choice(_NUMBERS)
        if key == "window_ns":
            doc["window_ns"] = val
        elif key.startswith("stream."):
            s[key[7:]] = val
        else:
            doc.setdefault("file", {})[key[5:]] = val
    elif kind == "type":
        key = rng.choice(
            ["codec", "name", "kind", "encoding", "extra", "timestamp_source", "shuffle", "level"]
        )
        s[key] = rng.choice([["x"], {"a": 1}, 5, None, "", "zstd" * 40, True, 1.5])
        if rng.random() < 0.3:
            doc[rng.choice(["streams", "file", "missing"])] = rng.choice([5, "x", [1], None])
    elif kind == "nesting":
        doc.setdefault("file", {})["extra"] = {"deep": "@@DEEP@@"}
        depth = rng.choice([50, 200, 2000, 100_000])
        text_sub = ('"@@DEEP@@"', "[" * depth + "]" * depth)
    elif kind == "text":
        key = rng.choice(["window_ns", "rate_hz", "id", "created_ns", "level"])
        token = rng.choice(
            [
                "1e400",
                "-1e400",
                "Infinity",
                "-Infinity",
                "NaN",
                "9" * 4000,
                "9" * 25,
                "-0",
                "1E5",
                "0.0000001",
            ]
        )
        target = doc if key == "window_ns" else doc.get("file", {}) if key == "created_ns" else s
        target[key] = "@@NUM@@"
        text_sub = ('"@@NUM@@"', token)
    elif kind == "dup" and streams:
        other = dict(rng.choice(streams))
        if rng.random() < 0.5:
            other["name"] = other["name"] + "x"
        else:
            other["id"] = (other["id"] + 1) % 65536
        streams.append(other)
    elif kind == "unknown":
        s["future_key"] = {"a": [1, 2]}
        doc["future"] = 1
        s["kind"] = rng.choice(["camera", "thermal", "other"])
    elif kind == "missing":
        doc["missing"] = rng.choice(
            [
                {"1": [0]},
                {"x": [0]},
                {"1": "a"},
                {"1": [70000]},
                {"9" * 30: [0]},
                [1],
                {"1": [[0]]},
                {"1": [0.5]},
            ]
        )
    else:
        key = rng.choice(["streams", "window_ns", "format", "file"])
        doc.pop(key, None)
    text = json.dumps(doc, separators=(",", ":"))
    if text_sub is not None:
        text = text.replace(*text_sub)
    raw = bytearray(b.raw)
    if not _put_meta(raw, b, text.encode()):
        return None
    reseal(raw, b)
    return raw, True, f"meta-{kind}"


def m_tmp_meta_flip(rng: random.Random, b: Base) -> Mutation | None:
    """One bit of an unfinished file's stream table, nothing resealed."""
    if b.finalized:
        return None
    raw = bytearray(b.raw)
    h = b.header
    raw[h.meta_offset + rng.randrange(h.meta_size)] ^= 1 << rng.randrange(8)
    return raw, False, "tmp-meta-flip"


def m_payload(rng: random.Random, b: Base) -> Mutation | None:
    """Random payload bytes with the CRC resealed: only the decoder can tell."""
    if not b.payloads:
        return None
    raw = bytearray(b.raw)
    off, size, _ = rng.choice(b.payloads)
    if not size:
        return None
    for _ in range(rng.choice([1, 4, 32])):
        raw[off + rng.randrange(size)] = rng.randrange(256)
    reseal_payload(raw, b, off, size)
    reseal(raw, b)
    return raw, True, "payload-resealed"


MUTATORS: list[tuple[Callable[[random.Random, Base], Mutation | None], float]] = [
    (m_flip, 10),
    (m_flip_region, 10),
    (m_truncate, 6),
    (m_extend, 2),
    (m_zero, 3),
    (m_header, 12),
    (m_entry, 12),
    (m_alias, 5),
    (m_bomb, 4),
    (m_codec, 8),
    (m_table_row, 6),
    (m_block, 10),
    (m_meta, 14),
    (m_tmp_meta_flip, 3),
    (m_payload, 4),
]


def make_case(
    seed: int, case: int, bases: list[Base], weights: list[float]
) -> tuple[Base, Mutation]:
    rng = random.Random(f"{seed}:{case}")
    while True:
        base = rng.choices(bases, weights)[0]
        fn = rng.choices([m for m, _ in MUTATORS], [w for _, w in MUTATORS])[0]
        mutation = fn(rng, base)
        if mutation is not None:
            return base, mutation


# --- probing one file -----------------------------------------------------------


def _content(reader: Any) -> tuple[dict[tuple[int, int, int], int], list[Any]]:
    """Every frame of every window and stream, arrays and quarantined frames."""
    content = {}
    for i in range(reader.window_count()):
        reader.get_window(i)
    for sid, s in reader.streams.items():
        for f in reader.frames(sid):
            content[(sid, f.timestamp_ns, f.stream_index)] = zlib.crc32(f.data)
            if s.dtype is not None:
                f.array()
    reader.aux()
    for i in range(len(reader.quarantine())):
        f = reader.quarantined_frame(i)
        content[(f.stream.id, f.timestamp_ns, f.stream_index)] = zlib.crc32(f.data)
    sig = [reader.window_ns] + [
        [s.id, s.name, s.dtype, list(s.shape) if s.shape else None, str(s.kind)]
        for s in reader.streams.values()
    ]
    return content, sig


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if "hyperframes" in f.filename] or list(tb)
    f = frames[-1] if frames else None
    loc = f"{Path(f.filename).name}:{f.lineno}" if f else "?"
    return f"{type(exc).__name__} at {loc}: {str(exc)[:160]}"


def probe(
    path: Path, out_dir: Path, base: Base | None, resealed: bool, verbose: bool = False
) -> dict[str, Any]:
    import hyperframes.cli.main
    from hyperframes.cli.main import main as cli_main
    from hyperframes.reader import HyperframeReader
    from hyperframes.recover import recover
    from hyperframes.verify import verify_file

    events: list[tuple[str, str]] = []  # (class, detail)
    hyperframes.cli.main.entry_points = lambda **_kw: []  # type: ignore[attr-defined,assignment]  # no plugins

    def untyped(stage: str, exc: BaseException) -> None:
        cls = "big-alloc" if isinstance(exc, MemoryError) else "untyped"
        events.append((cls, f"{stage}: {_where(exc)}"))
        if verbose:
            traceback.print_exception(exc)

    read_ok = False
    content: dict[tuple[int, int, int], int] = {}
    sig: list[Any] = []
    try:
        with HyperframeReader(path) as r:
            content, sig = _content(r)
        read_ok = True
    except HyperframesError as exc:
        events.append(("typed", f"read: {str(exc)[-120:]}"))
    except BaseException as exc:
        untyped("read", exc)
    verify_ok = None
    try:
        vres = verify_file(path)
        verify_ok = vres.ok
        if not verify_ok:
            events.append(("typed", f"verify: {vres.problems[0][-120:]}"))
    except BaseException as exc:
        untyped("verify", exc)
    if verify_ok and not read_ok and not any(c != "typed" for c, _ in events):
        events.append(("verify-ok-read-fails", "verify accepted, the reader refused"))
    if (
        base is not None
        and not resealed
        and read_ok
        and base.finalized
        and (content != base.content or sig != base.streams_sig)
    ):
        events.append(("silent-corruption", "finalized file read back different"))
    for argv in (["info", str(path)], ["info", "--json", str(path)], ["verify", str(path)]):
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                cli_main(argv)
        except SystemExit:
            pass
        except BaseException as exc:
            untyped(f"cli {' '.join(argv[:-1])}", exc)
    out = out_dir / "recovered.hf"
    report = None
    try:
        report = recover(path, out, overwrite=True)
    except HyperframesError as exc:
        events.append(("typed", f"recover: {str(exc)[-120:]}"))
    except BaseException as exc:
        untyped("recover", exc)
    if report is not None:
        try:
            res = verify_file(out)
            if not res.ok:
                events.append(("recover-verify-rejects", res.problems[0][-160:]))
            else:
                with HyperframeReader(out) as r:
                    rc, rsig = _content(r)
                if (
                    base is not None
                    and not resealed
                    and (
                        any(base.content.get(k) != v for k, v in rc.items())
                        or rsig != base.streams_sig
                    )
                ):
                    events.append(("silent-corruption", f"recovered {report.frames} frames differ"))
        except HyperframesError as exc:
            events.append(("verify-ok-read-fails", f"recovered: {str(exc)[-120:]}"))
        except BaseException as exc:
            untyped("recovered", exc)
    if not events:
        events.append(("ok", ""))
    return {"events": events}


def _worst(events: list[tuple[str, str]]) -> tuple[str, str]:
    return min(events, key=lambda e: CLASSES.index(e[0]))


def _vm_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def run_forked(
    path: Path, out_dir: Path, base: Base, resealed: bool, timeout: float, as_limit_mb: int
) -> dict[str, Any]:
    """Probe in a forked child: address-space limit, wall-clock limit, CPU and RSS measured."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            start_rss = _vm_kb("VmRSS:")
            limit = (_vm_kb("VmSize:") + as_limit_mb * 1024) * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            result = probe(path, out_dir, base, resealed)
            result["start_rss_kb"] = start_rss
            data = json.dumps(result).encode()
        except BaseException as exc:  # the harness itself must report
            data = json.dumps(
                {"events": [("untyped", f"harness: {_where(exc)}")], "start_rss_kb": 0}
            ).encode()
        with contextlib.suppress(OSError):
            os.write(wfd, data)
        os._exit(0)
    os.close(wfd)
    chunks, deadline, killed = [], time.monotonic() + timeout, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        ready, _, _ = select.select([rfd], [], [], left)
        if ready:
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(rfd)
    _, status, ru = os.wait4(pid, 0)
    cpu = ru.ru_utime + ru.ru_stime
    if killed:
        return {"class": "hang", "detail": f"killed after {timeout:.0f} s", "cpu": cpu}
    try:
        result = json.loads(b"".join(chunks))
    except ValueError:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        return {
            "class": "big-alloc" if sig == signal.SIGKILL else "untyped",
            "detail": f"child died (status {status})",
            "cpu": cpu,
        }
    events = [tuple(e) for e in result["events"]]
    grow_mb = (ru.ru_maxrss - result.get("start_rss_kb", 0)) / 1024
    return {"events": events, "cpu": cpu, "rss_mb": grow_mb}


# --- shards and the report --------------------------------------------------------


def load_bases(corpus: Path) -> tuple[list[Base], list[float]]:
    weights = json.loads((corpus / "weights.json").read_text())
    bases = []
    for name in weights:
        bases.append(parse_base(name, (corpus / name).read_bytes()))
    expected = json.loads((corpus / "expected.json").read_text())
    for b in bases:
        exp = expected[b.name]
        b.content = {tuple(k): v for k, v in exp["content"]}
        b.streams_sig = exp["sig"]
    return bases, [weights[b.name] for b in bases]


def expected_content(corpus: Path, weights: dict[str, float]) -> None:
    """What each base reads back as (a .tmp: what its recovery reads back as)."""
    from hyperframes.reader import HyperframeReader
    from hyperframes.recover import recover

    out: dict[str, Any] = {}
    for name in weights:
        path = corpus / name
        if name.endswith(".tmp"):
            rec = corpus / (name + ".expected")
            recover(path, rec, overwrite=True)
            path = rec
        with HyperframeReader(path) as r:
            content, sig = _content(r)
        out[name] = {"content": [[list(k), v] for k, v in content.items()], "sig": sig}
    (corpus / "expected.json").write_text(json.dumps(out))


def classify(res: dict[str, Any], slow_cpu: float, big_rss_mb: float) -> tuple[str, str]:
    if "class" in res:
        return res["class"], res["detail"]
    cls, detail = _worst(res["events"])
    if res["cpu"] > slow_cpu and CLASSES.index("slow") < CLASSES.index(cls):
        return "slow", f"{res['cpu']:.1f} CPU s ({detail})"
    if res.get("rss_mb", 0) > big_rss_mb and CLASSES.index("big-alloc") < CLASSES.index(cls):
        return "big-alloc", f"peak RSS +{res['rss_mb']:.0f} MB ({detail})"
    return cls, detail


def shard(args: argparse.Namespace) -> None:
    bases, weights = load_bases(args.corpus)
    work = Path(tempfile.mkdtemp(prefix=f"fz{args.shard}-", dir=args.tmp))
    deadline = time.monotonic() + args.time_limit
    counts: Counter[str] = Counter()
    stages: Counter[str] = Counter()  # cases with an untyped error, by where it escaped
    by_mut: dict[str, Counter[str]] = {}
    examples: dict[str, list[Any]] = {}
    done = 0
    out = Path(args.out)

    def flush() -> None:
        out.write_text(
            json.dumps(
                {
                    "done": done,
                    "counts": counts,
                    "by_mutation": by_mut,
                    "examples": examples,
                    "untyped_by_stage": stages,
                }
            )
        )

    try:
        for case in range(args.start + args.shard, args.cases, args.workers):
            if time.monotonic() > deadline:
                break
            base, (raw, resealed, label) = make_case(args.seed, case, bases, weights)
            name = "m.hf.tmp" if base.name.endswith(".tmp") else "m.hf"
            path = work / name
            path.write_bytes(bytes(raw))
            res = run_forked(path, work, base, resealed, args.case_timeout, args.as_limit_mb)
            cls, detail = classify(res, args.slow_cpu, args.big_rss_mb)
            counts[cls] += 1
            for stage in {d.split(":")[0] for c, d in res.get("events", []) if c == "untyped"}:
                stages[stage] += 1
            by_mut.setdefault(label.split("@")[0].split("-")[0], Counter())[cls] += 1
            ex = examples.setdefault(cls, [])
            if cls not in ("ok", "typed") and len(ex) < 40:
                ex.append([case, base.name, label, detail])
            done += 1
            if done % 100 == 0:
                flush()
    finally:
        flush()
        shutil.rmtree(work, ignore_errors=True)


def report(results: list[dict[str, Any]], elapsed: float) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    by_mut: dict[str, Counter[str]] = {}
    examples: dict[str, list[Any]] = {}
    done = 0
    for r in results:
        done += r["done"]
        counts.update(r["counts"])
        stages.update(r.get("untyped_by_stage", {}))
        for m, c in r["by_mutation"].items():
            by_mut.setdefault(m, Counter()).update(c)
        for cls, ex in r["examples"].items():
            examples.setdefault(cls, []).extend(ex)
    print(f"\n{done} mutated files in {elapsed:.0f} s")
    for cls in CLASSES:
        print(f"  {cls:<24} {counts.get(cls, 0):>7}")
    print("\ncases with an untyped error escaping from (a case may count in several):")
    for stage, n in sorted(stages.items()):
        print(f"  {stage:<24} {n:>7}")
    print("\nby mutation class (non-typed, non-ok outcomes):")
    for m, c in sorted(by_mut.items()):
        bad = {k: v for k, v in c.items() if k not in ("ok", "typed")}
        print(
            f"  {m:<12} {sum(c.values()):>6} cases  typed {c.get('typed', 0):>6}  "
            f"ok {c.get('ok', 0):>6}  {bad if bad else ''}"
        )
    for cls, ex in examples.items():
        print(f"\n{cls}: e.g.")
        for case, base, label, detail in sorted(ex)[:8]:
            print(f"  case {case} ({base}, {label}): {detail}")
    return {
        "done": done,
        "elapsed_s": elapsed,
        "counts": counts,
        "by_mutation": by_mut,
        "examples": examples,
        "untyped_by_stage": stages,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=25_000, help="run cases start .. cases-1")
    ap.add_argument("--start", type=int, default=0, help="first case (to continue a campaign)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=3600, help="seconds for the campaign")
    ap.add_argument("--case-timeout", type=float, default=20.0)
    ap.add_argument("--slow-cpu", type=float, default=3.0)
    ap.add_argument("--big-rss-mb", type=float, default=256.0)
    ap.add_argument("--as-limit-mb", type=int, default=1536)
    ap.add_argument(
        "--tmp", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    )
    ap.add_argument("--out", type=Path, default=Path("fuzz-campaign.json"))
    ap.add_argument("--replay", type=int, help="run one case in-process, with tracebacks")
    ap.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--shard", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.shard is not None:
        shard(args)
        return 0
    started = time.monotonic()
    corpus = Path(tempfile.mkdtemp(prefix="fz-corpus-", dir=args.tmp))
    try:
        weights = build_corpus(corpus)
        (corpus / "weights.json").write_text(json.dumps(weights))
        expected_content(corpus, weights)
        if args.replay is not None:
            bases, w = load_bases(corpus)
            base, (raw, resealed, label) = make_case(args.seed, args.replay, bases, w)
            path = corpus / ("replay.hf.tmp" if base.name.endswith(".tmp") else "replay.hf")
            path.write_bytes(bytes(raw))
            keep = Path(f"/tmp/fuzz-case-{args.replay}{''.join(path.suffixes)}")
            shutil.copy(path, keep)
            print(f"case {args.replay}: {base.name}, {label}, resealed={resealed}; file {keep}")
            res = probe(path, corpus, base, resealed, verbose=True)
            for e in res["events"]:
                print("  ", *e)
            return 0
        procs, outs = [], []
        for k in range(args.workers):
            out = corpus / f"shard{k}.json"
            outs.append(out)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--shard",
                        str(k),
                        "--workers",
                        str(args.workers),
                        "--cases",
                        str(args.cases),
                        "--start",
                        str(args.start),
                        "--seed",
                        str(args.seed),
                        "--corpus",
                        str(corpus),
                        "--time-limit",
                        str(args.time_limit - (time.monotonic() - started)),
                        "--case-timeout",
                        str(args.case_timeout),
                        "--as-limit-mb",
                        str(args.as_limit_mb),
                        "--out",
                        str(out),
                        *(["--tmp", str(args.tmp)] if args.tmp else []),
                    ]
                )
            )
        for p in procs:
            p.wait()
        results = [json.loads(o.read_text()) for o in outs if o.exists()]
        summary = report(results, time.monotonic() - started)
        summary["args"] = {k: str(v) for k, v in vars(args).items()}
        args.out.write_text(json.dumps(summary, indent=1))
        print(f"\nwritten {args.out}")
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
