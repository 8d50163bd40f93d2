"""Large frames stored in independent blocks (codecs 3 and 4) and decoded on several threads.

The layout and its checks (``hyperframes.format.payload_blocks``), the codec round
trip at every thread count, hostile block tables (typed errors, nothing
large allocated), the reader's CRC check running alongside the decode, and
the helper pool (``hyperframes.format.split``): every task once, errors in order,
and a forked child that decodes without hanging.
"""

from __future__ import annotations

import multiprocessing
import struct
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from test_hostile import first_entry, set_payload

from hyperframes import ChecksumError, CorruptFileError, FileMetadata
from hyperframes.cli.main import main
from hyperframes.format import split as _split
from hyperframes.format.codecs import (
    BLOCK_SIZE,
    CODEC_BLOSC2,
    CODEC_LZ4,
    CODEC_LZ4_BLOCKS,
    CODEC_SHIFT,
    CODEC_ZSTD,
    CODEC_ZSTD_BLOCKS,
    CodecError,
    CodecSpec,
    codec_of,
    decode_aligned,
    encode_frame,
    shuffle,
    unshuffle,
)
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import FrameFlags
from hyperframes.format.payload_blocks import MIN_BLOCK_SIZE, BlockTableError, parse
from hyperframes.format.split import box_is_busy, default_threads, run_split
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.verify import verify_file
from hyperframes.writer import HyperframeWriter

from conftest import T0, WINDOW_NS, lidar_sweep, small_streams

SMALL = MIN_BLOCK_SIZE  # a block size that splits test-sized frames


@pytest.fixture(autouse=True)
def split_even_when_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split paths are tested whatever the load of the box that runs the tests, and
    however short their tasks are next to a helper's start."""
    monkeypatch.setattr(_split._load, "check", lambda: False)
    monkeypatch.setattr(_split._wake, "pays", lambda rest_ns: True)


def sweep_bytes(points: int, seed: int = 0) -> bytes:
    """A lidar-like float32 sweep: compresses only when shuffled."""
    return lidar_sweep(seed, points).tobytes()


def runs(size: int, seed: int = 0) -> bytes:
    """Random bytes in runs of 64: compresses with or without shuffle."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, -(-size // 64), dtype=np.uint8).repeat(64)[:size].tobytes()


# --- codec round trip ---------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["lz4", "lz4hc:3", "zstd:1"])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("extra", [0, 3, 4096 + 17])
def test_blocked_round_trip_at_every_thread_count(spec: str, shuffled: bool, extra: int) -> None:
    raw = runs(3 * SMALL + extra)
    stored, flags = encode_frame(raw, CodecSpec.parse(spec, shuffled), 4, SMALL)
    blocked = CODEC_ZSTD_BLOCKS if spec.startswith("zstd") else CODEC_LZ4_BLOCKS
    assert codec_of(flags) == blocked
    assert bool(flags & FrameFlags.SHUFFLED) == shuffled
    assert parse(stored, 255, 64).count == -(-len(raw) // SMALL)
    for threads in (1, 2, 3, 8):
        out = decode_aligned(stored, flags, 4, 1 << 30, threads=threads)
        assert out.tobytes() == raw and out.ctypes.data % 64 == 0


def test_frames_under_two_blocks_stay_one_block() -> None:
    raw = runs(2 * SMALL - 16)
    assert codec_of(encode_frame(raw, CodecSpec("lz4"), 4, SMALL)[1]) == CODEC_LZ4
    assert codec_of(encode_frame(raw + bytes(16), CodecSpec("zstd"), 4, 0)[1]) == CODEC_ZSTD
    assert codec_of(encode_frame(raw + bytes(16), CodecSpec("zstd"), 4, SMALL)[1]) == (
        CODEC_ZSTD_BLOCKS
    )


def test_default_block_size_splits_a_real_lidar_sweep() -> None:
    raw = sweep_bytes(120_000)  # 1.9 MB, the vehicle profile's lidar
    single, _ = encode_frame(raw, CodecSpec("lz4", shuffle=True), 4, 0)
    stored, flags = encode_frame(raw, CodecSpec("lz4", shuffle=True), 4)
    assert codec_of(flags) == CODEC_LZ4_BLOCKS
    assert parse(stored, 255, 64).block_size == BLOCK_SIZE
    assert len(stored) <= len(single) * 1.01  # blocks cost (almost) no compression
    assert decode_aligned(stored, flags, 4, 1 << 30, threads=2).tobytes() == raw


def test_zstd_blocks_beyond_the_ratio_limit_become_lz4_blocks() -> None:
    raw = bytes(4 << 16)  # zeros: ZSTD would exceed 255:1 per block
    stored, flags = encode_frame(raw, CodecSpec("zstd", 19), 1, 1 << 16)
    assert codec_of(flags) == CODEC_LZ4_BLOCKS
    assert decode_aligned(stored, flags, 1, 1 << 30, threads=2).tobytes() == raw


def test_block_size_is_checked() -> None:
    with pytest.raises(ValueError, match="block_size"):
        encode_frame(b"x" * 100, CodecSpec("lz4"), 1, 100)
    with pytest.raises(ValueError, match="block_size"):
        HyperframeWriter("never.hf", small_streams(), WINDOW_NS, block_size=1)


@pytest.mark.parametrize("itemsize", [2, 4, 8, 12, 16, 32])
def test_parallel_unshuffle_matches_the_serial_one(itemsize: int) -> None:
    rng = np.random.default_rng(itemsize)
    raw = rng.integers(0, 256, BLOCK_SIZE + 7 * itemsize + 5, dtype=np.uint8).tobytes()
    sh = shuffle(raw, itemsize)
    for threads in (1, 2, 3):
        assert unshuffle(sh, itemsize, threads).tobytes() == raw


# --- hostile block tables -----------------------------------------------------------------


def _blocked(spec: str = "lz4") -> tuple[bytearray, int]:
    stored, flags = encode_frame(runs(3 * SMALL + 80), CodecSpec.parse(spec), 4, SMALL)
    return bytearray(stored), flags


def _put(buf: bytearray, pos: int, value: int) -> bytearray:
    struct.pack_into("<I", buf, pos, value)
    return buf


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b[:7], "shorter than the 8-byte"),
        (lambda b: _put(b, 4, 4095), "under the minimum"),
        (lambda b: _put(b, 4, 0), "under the minimum"),
        (lambda b: _put(b, 0, 0), "raw size 0"),
        (lambda b: _put(b, 0, 2**32 - 1), "do not fit|more than"),
        (lambda b: _put(b, 4, MIN_BLOCK_SIZE) and _put(b, 0, 2**31), "do not fit"),
        (lambda b: _put(b, 8, 0), "block 0 is empty"),
        (lambda b: _put(b, 12, struct.unpack_from("<I", b, 12)[0] + 1), "hold"),
        (lambda b: b + b"\x00", "hold"),
    ],
)
def test_hostile_block_tables_give_codec_errors(mutate, match: str) -> None:
    buf, flags = _blocked()
    bad = mutate(buf)
    with pytest.raises(CodecError, match=match):
        decode_aligned(bytes(bad), flags, 4, 1 << 30, threads=2)


def test_a_block_claiming_more_than_the_ratio_limit_is_refused() -> None:
    buf, flags = _blocked()
    sizes = struct.unpack_from("<4I", buf, 8)
    # move all but one byte of block 1 into block 0: block 1 then claims 4096 bytes from 1
    struct.pack_into("<4I", buf, 8, sizes[0] + sizes[1] - 1, 1, sizes[2], sizes[3])
    with pytest.raises(CodecError, match="block 1 claims"):
        decode_aligned(bytes(buf), flags, 4, 1 << 30)


@pytest.mark.parametrize("spec", ["lz4", "zstd"])
def test_a_block_that_does_not_decode_is_named(spec: str) -> None:
    buf, flags = _blocked(spec)
    table = parse(buf, 255, 64)
    lo, hi = int(table.offsets[2]), int(table.offsets[3])
    buf[lo:hi] = bytes(range(256)) * ((hi - lo) // 256) + bytes((hi - lo) % 256)
    for threads in (1, 2):
        with pytest.raises(CodecError, match="block 2"):
            decode_aligned(bytes(buf), flags, 4, 1 << 30, threads=threads)


def test_a_zstd_block_must_declare_its_own_size() -> None:
    import zstandard

    buf, flags = _blocked("zstd")
    table = parse(buf, 255, 64)
    lo, hi = int(table.offsets[0]), int(table.offsets[1])
    other = zstandard.ZstdCompressor(level=1).compress(bytes(SMALL // 2) + b"x" * (SMALL // 2 - 1))
    sizes = list(struct.unpack_from("<4I", buf, 8))
    sizes[0] = len(other)
    new = buf[:8] + struct.pack("<4I", *sizes) + other + buf[hi:]
    assert lo == 24
    with pytest.raises(CodecError, match=r"block 0.*declare"):
        decode_aligned(bytes(new), flags, 4, 1 << 30)


def test_a_huge_blocked_claim_allocates_nothing() -> None:
    # 2**32 - 4096 raw bytes in 4096-byte blocks would need a 4 MiB table: the table must fit
    head = struct.pack("<II", 2**32 - 4096, MIN_BLOCK_SIZE)
    stored = head + bytes(4000)
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match=r"do not fit|more than"):
            decode_aligned(stored, CODEC_LZ4_BLOCKS << CODEC_SHIFT, 1, 1 << 30, threads=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_parse_errors_are_value_errors() -> None:
    with pytest.raises(BlockTableError):
        parse(b"\x00" * 4, 255, 64)
    assert issubclass(BlockTableError, ValueError)


# --- files with blocked frames ------------------------------------------------------------


def _blocked_file(
    path: Path, finalize: bool = True, codec: str = "lz4"
) -> tuple[Path, list[bytes]]:
    sweeps = [sweep_bytes(4000 + 300 * i, i) for i in range(6)]  # 64-93 KB: 16-23 blocks
    w = HyperframeWriter(
        path,
        small_streams(),
        WINDOW_NS,
        FileMetadata(created_ns=T0),
        threads=2,
        block_size=SMALL,
        codecs={1: CodecSpec.parse(codec, shuffle=True)},
    )
    for i, s in enumerate(sweeps):
        w.append(1, T0 + 1 + i * 100_000_000, s)
        w.append(2, T0 + 2 + i * 100_000_000, np.full(6, i, "<f8").tobytes())
    if finalize:
        w.finalize()
        return path, sweeps
    w.abort()
    return Path(str(path) + ".tmp"), sweeps


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("codec", ["lz4", "blosc2-lz4:9", "blosc2-zstd"])  # 4 KiB chunks: 9
def test_reader_reads_blocked_frames(
    tmp_path: Path, threads: int, verify: bool, codec: str
) -> None:
    path, sweeps = _blocked_file(tmp_path / "b.hf", codec=codec)
    with HyperframeReader(path, threads=threads, verify=verify) as r:
        flags = r.index["flags"][r.index["stream_id"] == 1]
        want = CODEC_BLOSC2 if codec.startswith("blosc2") else CODEC_LZ4_BLOCKS
        assert {codec_of(int(f)) for f in flags} == {want}
        got = [f.data.tobytes() for f in r.frames("lidar")]
        assert got == sweeps
        assert [w.frames[1][0].array().shape for w in r] == [(len(s) // 16, 4) for s in sweeps]
    assert verify_file(path).ok


def test_reader_threads_are_checked(tmp_path: Path) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="threads"):
            HyperframeReader(path, threads=bad)  # type: ignore[arg-type]
    with HyperframeReader(path) as r:
        assert r.threads == default_threads()


@pytest.mark.parametrize("threads", [1, 2])
def test_checksum_error_wins_over_a_broken_block_table(tmp_path: Path, threads: int) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    raw = bytearray(path.read_bytes())
    e = first_entry(raw, 1)
    struct.pack_into("<I", raw, e["offset"] + 8, 0)  # block 0 empty; CRC left stale
    path.write_bytes(bytes(raw))
    with HyperframeReader(path, threads=threads) as r, pytest.raises(ChecksumError):
        r.read("lidar", T0)
    with (
        HyperframeReader(path, threads=threads, verify=False) as r,
        pytest.raises(CorruptFileError, match="block 0 is empty"),
    ):
        r.read("lidar", T0)


@pytest.mark.parametrize("threads", [1, 2])
def test_checksum_error_wins_over_a_block_that_does_not_decode(
    tmp_path: Path, threads: int
) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    raw = bytearray(path.read_bytes())
    e = first_entry(raw, 1)
    table = parse(raw[e["offset"] : e["offset"] + e["size"]], 255, 64)
    at = e["offset"] + int(table.offsets[5])
    raw[at : at + 64] = b"\xff" * 64
    path.write_bytes(bytes(raw))
    with HyperframeReader(path, threads=threads) as r, pytest.raises(ChecksumError):
        r.read("lidar", T0)
    result = verify_file(path)
    assert not result.ok and "CRC32C" in " ".join(result.problems)


def test_resealed_broken_block_is_caught_by_verify_and_recover(tmp_path: Path) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    raw = bytearray(path.read_bytes())
    e = first_entry(raw, 1)
    stored = bytearray(raw[e["offset"] : e["offset"] + e["size"]])
    struct.pack_into("<I", stored, 0, struct.unpack_from("<I", stored, 0)[0] + 4096)
    set_payload(raw, e["offset"], bytes(stored))  # CRCs resealed: only decoding can tell
    path.write_bytes(bytes(raw))
    result = verify_file(path)
    assert not result.ok and "lz4 (blocks)" in " ".join(result.problems)
    with HyperframeReader(path) as r, pytest.raises(CorruptFileError, match="lz4 \\(blocks\\)"):
        r.read("lidar", T0)


def test_recover_keeps_blocked_frames(tmp_path: Path) -> None:
    tmp, sweeps = _blocked_file(tmp_path / "c.hf", finalize=False)
    report = recover(tmp, tmp_path / "out.hf")
    assert report.frames >= 10  # all but the window still pending at the abort
    assert verify_file(tmp_path / "out.hf").ok
    with HyperframeReader(tmp_path / "out.hf") as r:
        got = [f.data.tobytes() for f in r.frames("lidar")]
    assert len(got) >= 5 and got == sweeps[: len(got)]


def test_info_and_verify_commands_on_blocked_files(tmp_path: Path, capsys) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    assert main(["info", str(path)]) == 0
    assert main(["verify", str(path)]) == 0
    assert "lidar" in capsys.readouterr().out


def test_crc_of_a_blocked_payload_covers_the_table(tmp_path: Path) -> None:
    path, _ = _blocked_file(tmp_path / "b.hf")
    raw = path.read_bytes()
    e = first_entry(raw, 1)
    assert crc32c(raw[e["offset"] : e["offset"] + e["size"]]) == e["crc32c"]


# --- the helper pool -----------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_run_split_runs_every_task_once(threads: int) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def task(i: int) -> None:
        with lock:
            seen.append(i)

    run_split(100, task, threads, first=lambda: seen.append(-1))
    assert sorted(seen) == [-1, *range(100)]
    if threads == 1:
        assert seen == [-1, *range(100)]  # in order on the calling thread


def test_a_busy_box_runs_every_task_on_the_calling_thread(monkeypatch) -> None:
    assert box_is_busy(2.0, 2) and box_is_busy(11.3, 2) and not box_is_busy(1.5, 2)
    monkeypatch.setattr(_split._load, "check", lambda: True)
    where: list[int] = []
    run_split(
        20,
        lambda i: where.append(threading.get_ident()),
        4,
        first=lambda: where.append(threading.get_ident()),
    )
    assert where == [threading.get_ident()] * 21


def test_work_short_next_to_a_helpers_start_stays_on_the_calling_thread(monkeypatch) -> None:
    monkeypatch.undo()  # the real rule, not the autouse fixture's
    monkeypatch.setattr(_split._load, "check", lambda: False)
    wake = _split._Wake()
    monkeypatch.setattr(_split, "_wake", wake)
    where: list[int] = []

    def slow(i: int) -> None:
        where.append(threading.get_ident())
        time.sleep(0.002)  # 2 ms a task, GIL released

    wake.ns, wake.at = 1e9, time.monotonic_ns()  # helpers take a second to start: no split
    run_split(8, slow, 4, first=lambda: where.append(-1))
    assert where == [threading.get_ident(), -1, *[threading.get_ident()] * 7]
    assert wake.ns == 1e9  # no split, nothing learned
    wake.ns = 0.0  # helpers start at once: split
    where.clear()
    run_split(8, slow, 4)
    assert len(where) == 8 and len(set(where)) > 1
    assert 0 < wake.ns < 1e9  # the start time of this split, learned


def test_a_helpers_start_time_is_averaged_and_forgotten() -> None:
    wake = _split._Wake()
    assert wake.pays(1) and wake.ns == 0  # unmeasured: split, and measure
    for _ in range(40):
        wake.observe(60_000)
    assert abs(wake.now_ns() - 60_000) < 100
    assert not wake.pays(4 * 60_000 - 1000) and wake.pays(4 * 60_000 + 1000)
    wake.observe(0)
    assert 0 < wake.now_ns() < 60_000  # one fast start moves it, one does not reset it
    wake.observe(10**9)  # a second-long start (a burst of load): no split for now...
    assert not wake.pays(10**8)
    wake.at -= 20 * _split._FORGET_NS  # ...and 40 s later, splits measure again
    assert wake.pays(10**8) and wake.now_ns() < 1000


def test_a_helper_that_starts_after_the_caller_finished_runs_nothing() -> None:
    """The caller does not wait for a helper that never started, and such a late helper
    must find the split closed: no task may run after run_split returned."""
    jobs = _split._pool.get(1)
    release = threading.Event()
    busy = threading.Event()

    def hold() -> None:  # keeps every helper of the pool busy until released
        busy.set()
        release.wait(10)

    for _ in range(_split._pool.size):
        jobs.put(hold)
    assert busy.wait(5)
    ran: list[tuple[int, bool]] = []
    returned = False

    def task(i: int) -> None:
        ran.append((i, returned))

    run_split(8, task, 2)
    returned = True
    release.set()
    time.sleep(0.05)  # the late job has run by now (it returns at once)
    assert sorted(i for i, _ in ran) == list(range(8))
    assert not any(after for _, after in ran)
    run_split(8, task, 2)  # and the pool still serves the next split
    assert len(ran) == 16


def test_first_runs_and_wins_when_the_first_task_fails() -> None:
    ran: list[str] = []

    def task(i: int) -> None:
        raise KeyError(i)

    def first() -> None:
        ran.append("first")
        raise RuntimeError("first")

    with pytest.raises(RuntimeError, match="first"):
        run_split(10, task, 3, first)
    assert ran == ["first"]


def test_run_split_raises_first_error_before_task_errors() -> None:
    def task(i: int) -> None:
        raise KeyError(i)

    def first() -> None:
        raise RuntimeError("first")

    for threads in (1, 3):
        with pytest.raises(RuntimeError, match="first"):
            run_split(10, task, threads, first)
        with pytest.raises(KeyError):
            run_split(10, task, threads)


def test_run_split_stops_starting_tasks_after_an_error() -> None:
    started: list[int] = []

    def task(i: int) -> None:
        started.append(i)
        raise ValueError(i)

    with pytest.raises(ValueError):
        run_split(1000, task, 3)
    assert len(started) <= 3  # at most one per thread


def _decode_in_child(stored: bytes, flags: int, expect: bytes, queue) -> None:
    out = decode_aligned(stored, flags, 4, 1 << 30, threads=3)
    queue.put(out.tobytes() == expect)


def test_a_forked_child_decodes_on_its_own_threads() -> None:
    raw = sweep_bytes(40_000)
    stored, flags = encode_frame(raw, CodecSpec("lz4", shuffle=True), 4, SMALL)
    assert decode_aligned(stored, flags, 4, 1 << 30, threads=3).tobytes() == raw  # pool up
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_decode_in_child, args=(bytes(stored), flags, raw, queue))
    child.start()
    child.join(30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung on the parent's helper threads"
    assert child.exitcode == 0 and queue.get(timeout=5)


def test_blocked_codec_ids_do_not_collide() -> None:
    assert len({CODEC_LZ4, CODEC_ZSTD, CODEC_LZ4_BLOCKS, CODEC_ZSTD_BLOCKS, CODEC_BLOSC2}) == 5
    assert CODEC_BLOSC2 < 16  # four bits of the index flags


def test_one_reader_shared_by_threads_splits_without_mixing_frames(tmp_path: Path) -> None:
    path, sweeps = _blocked_file(tmp_path / "b.hf")
    with HyperframeReader(path, threads=3) as r:
        ts = [int(t) for t in r.timestamps("lidar")]

        def reads(k: int) -> list[bool]:
            return [
                r.read("lidar", ts[(k + j) % 6]).data.tobytes() == sweeps[(k + j) % 6]
                for j in range(30)
            ]

        with ThreadPoolExecutor(4) as callers:
            results = list(callers.map(reads, range(4)))
    assert all(all(r) for r in results)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_many_small_lz4_blocks_decode_in_runs(threads: int) -> None:
    """4 MiB in 1,024 blocks of 4 KiB (issue 16: ~10 us of objects per block before): every
    block lands at its place, and a broken block is named, whichever run it falls in."""
    raw = runs(4 << 20, 3)
    stored, flags = encode_frame(raw, CodecSpec("lz4"), 1, SMALL)
    assert codec_of(flags) == CODEC_LZ4_BLOCKS
    table = parse(stored, 255, 64)
    assert table.count == 1024
    assert decode_aligned(stored, flags, 1, 1 << 30, threads=threads).tobytes() == raw
    bad = bytearray(stored)
    at = int(table.offsets[700])
    bad[at : at + 8] = b"\xff" * 8
    with pytest.raises(CodecError, match="block 700: lz4 data does not decode"):
        decode_aligned(bytes(bad), flags, 1, 1 << 30, threads=threads)
