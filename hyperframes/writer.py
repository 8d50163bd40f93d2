"""HyperframeWriter: append frames window by window into ``NAME.tmp``, finalize, rename.

Durability model (docs/FORMAT.md, "Crash recovery"): the header and the stream
table are written and fsynced when the file is created; every window is then
written as one block that starts with a checksummed record of its index
entries; blocks are fsynced at a bounded cadence. A power cut therefore loses
at most the blocks written since the last fsync, and ``hyperframes recover``
rebuilds a valid file from the blocks that survived. The final index, written
by :meth:`HyperframeWriter.finalize`, makes the block records redundant.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Self

import numpy as np

from hyperframes.format.checks import fits_block
from hyperframes.format.codecs import (
    BLOCK_SIZE,
    CODEC_BLOSC2,
    CODEC_LZ4,
    CODEC_LZ4_BLOCKS,
    CODEC_NONE,
    CODEC_ZSTD,
    CODEC_ZSTD_BLOCKS,
    DEFAULT_ARRAY_CODEC,
    CodecSpec,
    block_size_problem,
    encode_frame,
    preload,
)
from hyperframes.format.crc import BytesLike, PayloadLike, byte_view, crc32c
from hyperframes.format.layout import (
    ALIGN,
    AUX_DTYPE,
    BLOCK_RECORD_SIZE,
    CODEC_MASK,
    CODEC_SHIFT,
    HEADER_SIZE,
    INDEX_DTYPE,
    QUARANTINE_DTYPE,
    WINDOW_DTYPE,
    WINDOW_FLAG_HAS_LATE,
    WINDOW_FLAG_INCOMPLETE,
    BlockRecord,
    FrameFlags,
    Header,
    HeaderFlags,
    pad_len,
)
from hyperframes.format.meta import Meta, encode_meta, window_ns_problem
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.format.windows import window_of
from hyperframes.storage.local import copy_range, create_new, fsync_dir, rename_noreplace, write_all

__all__ = [
    "HyperframeWriter",
    "WriteFrame",
    "StoredFrame",
    "CopiedBlock",
    "default_codec",
    "file_span",
    "replacing_writer",
    "TMP_SUFFIX",
]

TMP_SUFFIX = ".tmp"
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
_USER_FLAGS = (
    FrameFlags.KEYFRAME | FrameFlags.HW_TIMESTAMP | FrameFlags.LATE | FrameFlags.QUARANTINED
)
_CODEC_BITS = CODEC_MASK | int(FrameFlags.SHUFFLED)  # plain ints: enum ops cost ~1 us each
_USER_BITS = int(_USER_FLAGS)
_LATE = int(FrameFlags.LATE)
_QUARANTINED = int(FrameFlags.QUARANTINED)
_ZEROS = bytes(ALIGN)
# Frames stored raw (codec none: only checksummed) or smaller than this are encoded on the
# caller's thread: handing one to the pool costs more (~20 us and a GIL switch a frame;
# 200 Hz IMU samples of a ROS bag import spent more there than in everything else)
_INLINE_BYTES = 32 << 10


class WriteFrame(NamedTuple):
    """One frame handed to :meth:`HyperframeWriter.write_window`."""

    stream_id: int
    timestamp_ns: int
    payload: PayloadLike
    flags: int | None = None
    stream_index: int | None = None
    receive_ns: int = 0
    duration_ns: int = 0


class StoredFrame(NamedTuple):
    """One frame as another file stored it, for :meth:`HyperframeWriter.write_stored_window`.

    ``stored`` are the stored payload bytes and ``flags`` the source's index
    flags (codec and shuffle bits included); ``crc32c`` is the CRC of
    ``stored``. ``raw_size`` (the decoded size, for the writer's totals) may
    be 0 when unknown.
    """

    stream_id: int
    timestamp_ns: int
    stored: BytesLike
    flags: int
    stream_index: int
    crc32c: int
    receive_ns: int = 0
    duration_ns: int = 0
    raw_size: int = 0


class CopiedBlock(NamedTuple):
    """Where one window block of a source file lies, for :meth:`HyperframeWriter.copy_blocks`."""

    window_id: int
    record_offset: int  # the block record
    payload_offset: int  # the first payload
    payload_size: int  # bytes from there to the end of the block
    frames: int  # frames stored in the block
    missing: tuple[int, ...] = ()


def default_codec(stream: StreamInfo) -> CodecSpec:
    """The codec a stream is written with: its own setting, or the encoding's policy.

    Pre-compressed encodings (JPEG, H.265...) are never compressed again;
    array encodings default to Blosc2 chunks of LZ4 with byte shuffle (codec
    5: the size of LZ4 + our shuffle, written and read faster,
    bench/bench_codecs.py; LZ4 + shuffle where python-blosc2 cannot be
    imported); anything else to LZ4.
    """
    if stream.precompressed:
        if stream.codec not in (None, "none"):
            raise ValueError(
                f"stream {stream.id} ({stream.name}): encoding {stream.encoding!r} is already "
                f"compressed; codec {stream.codec!r} would gain ~1% for a full pass over the "
                "bytes; use codec 'none'"
            )
        return CodecSpec("none")
    if stream.codec is not None:
        return CodecSpec(stream.codec, stream.level, stream.shuffle)
    if stream.dtype is not None and stream.itemsize > 1:
        return CodecSpec(DEFAULT_ARRAY_CODEC, None, True)
    return CodecSpec("lz4")


@dataclass(slots=True)
class _Pending:
    """A frame whose payload is being compressed on the pool."""

    stream_id: int
    timestamp_ns: int
    stream_index: int
    flags: int
    receive_ns: int
    duration_ns: int
    raw_size: int
    future: Future[tuple[BytesLike, int, int]]


def _encode(
    payload: memoryview, spec: CodecSpec, itemsize: int, block_size: int
) -> tuple[BytesLike, int, int]:
    stored, codec_flags = encode_frame(payload, spec, itemsize, block_size)
    return stored, codec_flags, crc32c(stored)


class HyperframeWriter:
    """Writes one hyperframe file (a segment of many windows).

    Use as a context manager. Frames go in with :meth:`append` (the writer
    groups them by window and writes a window when a frame of a later window
    arrives) or a whole window at a time with :meth:`write_window`. Leaving
    the ``with`` block normally finalizes the file; an exception leaves a
    recoverable ``NAME.tmp`` and never a file under the final name.

    Not thread-safe: one thread drives a writer. Compression runs on an
    internal pool of ``threads`` workers (LZ4 and ZSTD release the GIL);
    frames stored raw, and frames under 32 KiB, are encoded on the calling
    thread (the hand-off would cost more).
    A compressed frame of at least two ``block_size`` blocks is stored in
    independent blocks that readers decode on several threads (0: never).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        streams: Sequence[StreamInfo],
        window_ns: int,
        metadata: FileMetadata | None = None,
        *,
        codecs: Mapping[int, CodecSpec] | None = None,
        fsync_interval_s: float = 1.0,
        threads: int | None = None,
        block_size: int = BLOCK_SIZE,
    ) -> None:
        problem = window_ns_problem(window_ns)
        if problem is not None:
            raise ValueError(f"window_ns: {problem}")
        if fsync_interval_s < 0:
            raise ValueError(f"fsync_interval_s must be >= 0, got {fsync_interval_s}")
        problem = block_size_problem(block_size)
        if problem is not None:
            raise ValueError(problem)
        self.block_size = block_size
        ids = [s.id for s in streams]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate stream ids in {sorted(ids)}")
        names = [s.name for s in streams]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate stream names in {sorted(names)}")
        self.path = Path(path)
        self.tmp_path = self.path.with_name(self.path.name + TMP_SUFFIX)
        self.streams: dict[int, StreamInfo] = {s.id: s for s in streams}
        self.window_ns = window_ns
        self.metadata = metadata or FileMetadata(created_ns=time.time_ns())
        self._codecs = {s.id: default_codec(s) for s in streams}
        if codecs:
            unknown = set(codecs) - set(self.streams)
            if unknown:
                raise ValueError(f"codecs given for unknown stream ids {sorted(unknown)}")
            self._codecs.update(codecs)
        preload(self._codecs.values())  # not on the first frame's time
        self._itemsize = {s.id: s.itemsize for s in streams}
        self._hw_default = {
            s.id: FrameFlags.HW_TIMESTAMP if s.hardware_timestamps else FrameFlags.NONE
            for s in streams
        }
        self.fsync_interval_s = fsync_interval_s
        self._pool = ThreadPoolExecutor(
            max_workers=threads or min(4, os.cpu_count() or 1), thread_name_prefix="hf-compress"
        )
        self._next_index: dict[int, int] = dict.fromkeys(self.streams, 0)
        self._pending: list[_Pending] = []
        self._pending_window: int | None = None
        # closed windows whose payloads may still be compressing, oldest first
        self._queued: list[tuple[int, list[_Pending], tuple[int, ...]]] = []
        self._last_window: int | None = None
        self._entries: list[np.ndarray] = []
        self._aux: list[np.ndarray] = []
        self._windows: list[tuple[int, int, int, int, int]] = []
        self._missing: dict[int, tuple[int, ...]] = {}
        self.bytes_in = 0
        self.bytes_stored = 0
        # per stream, of the windows written so far: [frames, raw bytes, stored bytes]
        self.stream_totals: dict[int, list[int]] = {sid: [0, 0, 0] for sid in self.streams}
        self.frame_count = 0
        self._closed = False

        if self.path.exists():
            raise FileExistsError(f"{self.path}: already exists; refusing to overwrite")
        meta = encode_meta(self._meta())
        self._meta_size = len(meta)
        self._meta_crc = crc32c(meta)
        self._fd = create_new(self.tmp_path, 0o644)
        try:
            self._pos = HEADER_SIZE + self._meta_size + pad_len(self._meta_size)
            self._data_offset = self._pos
            header = self._initial_header()
            write_all(self._fd, [header.encode(), meta, bytes(pad_len(self._meta_size))])
            os.fsync(self._fd)
            fsync_dir(self.tmp_path.parent)
        except BaseException:
            os.close(self._fd)
            self.tmp_path.unlink(missing_ok=True)
            raise
        self._last_sync = time.monotonic()
        # periodic fsyncs run here, so writing goes on while the disk catches up
        self._fsync_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-fsync")
        self._syncing: Future[None] | None = None

    # --- public API -------------------------------------------------------

    def append(
        self,
        stream_id: int,
        timestamp_ns: int,
        payload: PayloadLike,
        *,
        flags: int | None = None,
        stream_index: int | None = None,
        receive_ns: int = 0,
        duration_ns: int = 0,
    ) -> None:
        """Add one frame; its window is closed once a frame of a later window arrives.

        A closed window is written while the next one compresses (one window
        of lag keeps both cores busy). ``payload`` must not change until its
        window is written. ``flags`` defaults to the stream's timestamp source (HW_TIMESTAMP for
        hardware-stamped streams); pass KEYFRAME for codec keyframes.
        ``stream_index`` defaults to a per-stream counter. A frame of a window
        that was already written lands in the current block, flagged LATE.
        """
        self._check_open()
        window = window_of(timestamp_ns, self.window_ns)
        if self._pending_window is None:
            self._pending_window = window
        elif window > self._pending_window:
            self._close_pending(())
            self._pending_window = window
        elif window < self._pending_window:
            flags = (flags if flags is not None else self._hw_default.get(stream_id, 0)) | (
                FrameFlags.LATE
            )
        self._submit(stream_id, timestamp_ns, payload, flags, stream_index, receive_ns, duration_ns)

    def write_window(
        self,
        window_id: int,
        frames: Iterable[WriteFrame],
        missing: Iterable[int] = (),
    ) -> None:
        """Add one complete window; it is written when the next one arrives (or on flush).

        ``frames`` may include late frames of earlier windows (flag them LATE)
        and quarantined frames; ``missing`` lists streams that delivered
        nothing in this window. Window ids must increase from call to call.
        Payloads must not change until the window is written.
        """
        self._check_open()
        self._close_pending(())
        self._pending_window = window_id
        for f in frames:
            self._check_window(window_id, f)
            self._submit(
                f.stream_id,
                f.timestamp_ns,
                f.payload,
                f.flags,
                f.stream_index,
                f.receive_ns,
                f.duration_ns,
            )
        self._close_pending(missing)

    def write_stored_window(
        self,
        window_id: int,
        frames: Iterable[StoredFrame],
        missing: Iterable[int] = (),
    ) -> None:
        """Add one window of frames copied as stored: no decoding, no compression.

        Used to cut and join files (``hyperframes slice``, ``cat``): the
        payload bytes, their codec flags and CRC32C go into the block as they
        are; the placement rules of :meth:`write_window` apply. The stream
        table should name the source's codecs (``codecs=`` at creation).
        The caller checks the output (``verify``): a damaged source payload
        is copied as it is.
        """
        self._check_open()
        self._close_pending(())
        self._pending_window = window_id
        window_ns, streams = self.window_ns, self.streams
        for f in frames:
            user = f.flags & _USER_BITS
            ts = f.timestamp_ns
            if f.stream_id not in streams:
                raise ValueError(
                    f"{self.path}: unknown stream id {f.stream_id}; known: {sorted(streams)}"
                )
            if not 0 <= ts <= _U64_MAX:
                raise ValueError(f"stream {f.stream_id}: timestamp {ts} outside 0..2**64-1")
            if not user & _QUARANTINED:
                own = (ts - 1) // window_ns  # window_of, inline: this loop runs per frame
                if not (own < window_id if user & _LATE else own == window_id):
                    self._check_window(window_id, WriteFrame(f.stream_id, ts, b"", user))
            if not 0 <= f.stream_index <= _U32_MAX:
                raise ValueError(f"stream {f.stream_id}: stream_index {f.stream_index} outside u32")
            done: Future[tuple[BytesLike, int, int]] = Future()
            done.set_result((f.stored, f.flags & _CODEC_BITS, f.crc32c & _U32_MAX))
            self._next_index[f.stream_id] = f.stream_index + 1
            self._pending.append(
                _Pending(
                    f.stream_id,
                    ts,
                    f.stream_index,
                    user,
                    f.receive_ns & _U64_MAX,
                    min(f.duration_ns, _U32_MAX),
                    f.raw_size or len(byte_view(f.stored)),
                    done,
                )
            )
        self._close_pending(missing)

    def copy_blocks(
        self,
        blocks: Sequence[CopiedBlock],
        entries: np.ndarray,
        aux: np.ndarray,
        src_fd: int,
    ) -> None:
        """Append window blocks of another file, copied verbatim, records rewritten.

        ``blocks`` lie back to back in ``src_fd`` (each one's record right
        after the previous one's end) and were laid out as this writer lays
        out a block; ``entries`` (INDEX_DTYPE) and ``aux`` (AUX_DTYPE) are
        their frames in write order, block after block, offsets as in the
        source. The bytes go across in one ``copy_file_range`` (nothing
        through Python); each block record and entry table is then rewritten
        with the offsets shifted to their new place. The placement rules of
        :meth:`write_window` apply; payloads are not checked (verify the
        output).
        """
        self._check_open()
        self.flush()
        if not blocks:
            return
        counts = np.array([b.frames for b in blocks], np.int64)
        if int(counts.sum()) != len(entries) or len(aux) != len(entries) or counts.min() < 1:
            raise ValueError(f"{self.path}: block frame counts do not match the entries")
        wids = [b.window_id for b in blocks]
        prev = self._last_window
        for b in blocks:
            if prev is not None and b.window_id <= prev:
                raise ValueError(
                    f"{self.path}: window {b.window_id} added after window {prev}; "
                    "window ids must increase"
                )
            prev = b.window_id
        for b, nxt in zip(blocks, [*blocks[1:], None], strict=True):
            head = BLOCK_RECORD_SIZE + b.frames * 48
            if b.record_offset % ALIGN or b.payload_offset - b.record_offset != head + pad_len(
                head
            ):
                raise ValueError(
                    f"{self.path}: block of window {b.window_id} is not laid out as this "
                    "writer lays out blocks"
                )
            if nxt is not None and b.payload_offset + b.payload_size != nxt.record_offset:
                raise ValueError(f"{self.path}: blocks to copy are not back to back")
        sid, flags = entries["stream_id"], entries["flags"].astype(np.int64)
        unknown = set(np.unique(sid).tolist()) - set(self.streams)
        if unknown:
            raise ValueError(f"{self.path}: unknown stream ids {sorted(unknown)}")
        ts = entries["timestamp_ns"]
        own = ((ts - np.uint64(1)) // np.uint64(self.window_ns)).astype(np.int64)
        own[ts == 0] = -1
        block_of = np.repeat(np.array(wids, np.int64), counts)
        late = (flags & _LATE) != 0
        ok = ((flags & _QUARANTINED) != 0) | np.where(late, own < block_of, own == block_of)
        if not ok.all():
            bad = int(np.argmin(ok))
            f = WriteFrame(int(sid[bad]), int(ts[bad]), b"", int(flags[bad]) & _USER_BITS)
            self._check_window(int(block_of[bad]), f)
        src_start = blocks[0].record_offset
        src_end = blocks[-1].payload_offset + blocks[-1].payload_size
        delta = self._pos - src_start
        out = entries.astype(INDEX_DTYPE, copy=True)
        out["offset"] = out["offset"].astype(np.int64) + delta
        aux = aux.astype(AUX_DTYPE, copy=True)
        copy_range(src_fd, src_start, self._fd, self._pos, src_end - src_start)
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        late_in = np.add.reduceat(late.astype(np.int64), bounds[:-1]).tolist()
        for k, b in enumerate(blocks):
            lo, hi = bounds[k], bounds[k + 1]
            table = out[lo:hi].tobytes() + aux[lo:hi].tobytes()
            missing_ids = tuple(sorted(set(b.missing)))
            block_flags = (WINDOW_FLAG_HAS_LATE if late_in[k] else 0) | (
                WINDOW_FLAG_INCOMPLETE if missing_ids else 0
            )
            record = BlockRecord(
                window_id=b.window_id,
                frame_count=hi - lo,
                flags=block_flags,
                block_size=b.payload_offset + b.payload_size - b.record_offset,
                payload_offset=b.payload_offset + delta,
                entries_crc=crc32c(table),
            )
            os.pwrite(self._fd, record.encode() + table, b.record_offset + delta)
            if missing_ids:
                self._missing[b.window_id] = missing_ids
            self._windows.append(
                (b.window_id, b.payload_offset + delta, b.payload_size, hi - lo, block_flags)
            )
        self._pos += src_end - src_start
        os.lseek(self._fd, self._pos, os.SEEK_SET)
        self._entries.append(out)
        self._aux.append(aux)
        self._last_window = prev
        self.frame_count += len(out)
        sizes = entries["size"].astype(np.int64)
        self.bytes_in += int(sizes.sum())
        self.bytes_stored += int(sizes.sum())
        for s_id in np.unique(sid).tolist():
            mine = sid == s_id
            totals = self.stream_totals[s_id]
            totals[0] += int(mine.sum())
            totals[1] += int(sizes[mine].sum())
            totals[2] += int(sizes[mine].sum())
            top = int(entries["stream_index"][mine].max()) + 1
            self._next_index[s_id] = max(self._next_index[s_id], top)

    def flush(self) -> None:
        """Write every window added so far, including the one :meth:`append` is collecting."""
        self._check_open()
        self._close_pending(())
        self._write_queued(keep=0)

    def sync(self) -> None:
        """Write every window added so far and fsync: it all survives a power cut."""
        self.flush()
        self._wait_sync()
        os.fsync(self._fd)
        self._last_sync = time.monotonic()

    @property
    def bytes_written(self) -> int:
        """Size of the ``.tmp`` file so far."""
        return self._pos

    def finalize(self) -> Path:
        """Write index and tables, mark the file finalized, fsync, rename; returns the path."""
        self._check_open()
        try:
            self.flush()
            self._wait_sync()
            entries = np.concatenate(self._entries) if self._entries else np.empty(0, INDEX_DTYPE)
            aux = np.concatenate(self._aux) if self._aux else np.empty(0, AUX_DTYPE)
            windows = np.array(self._windows, dtype=WINDOW_DTYPE)
            write_trailer(
                self._fd,
                self._pos,
                self._data_offset,
                entries,
                aux,
                windows,
                self._meta(),
            )
            os.close(self._fd)
            self._closed = True
            rename_noreplace(self.tmp_path, self.path)  # a file that appeared meanwhile stays
            fsync_dir(self.path.parent)
        except BaseException:
            self._abort()
            raise
        finally:
            self._pool.shutdown(wait=True)
            self._fsync_pool.shutdown(wait=True)
        return self.path

    def abort(self) -> Path:
        """Stop without finalizing: write what is complete, fsync, keep ``NAME.tmp``."""
        if not self._closed:
            try:
                self.flush()
            finally:
                self._abort()
        return self.tmp_path

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.finalize()
        else:
            self.abort()

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("HyperframeWriter holds an open file and cannot be pickled")

    # --- internals --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")

    def _meta(self) -> Meta:
        with_codecs = tuple(
            dataclasses.replace(s, codec=c.name, level=c.level, shuffle=c.shuffle)
            for s, c in ((s, self._codecs[s.id]) for s in self.streams.values())
        )
        return Meta(with_codecs, self.metadata, self.window_ns, dict(self._missing))

    def _initial_header(self) -> Header:
        """The header written at creation: not finalized, stream table at offset 512.

        MetaCrc is set already, so recovery can prove the stream table of a
        ``.tmp`` intact before it trusts it.
        """
        return Header(
            flags=HeaderFlags.LITTLE_ENDIAN,
            start_ns=0,
            end_ns=0,
            frame_count=0,
            stream_count=len(self.streams),
            index_offset=0,
            index_size=0,
            window_ns=self.window_ns,
            data_offset=self._pos,
            meta_offset=HEADER_SIZE,
            meta_size=self._meta_size,
            windows_offset=0,
            windows_size=0,
            aux_offset=0,
            aux_size=0,
            window_count=0,
            index_crc=0,
            meta_crc=self._meta_crc,
            windows_crc=0,
            aux_crc=0,
        )

    def _check_window(self, window_id: int, f: WriteFrame) -> None:
        """A frame of a block is of its window, LATE (an earlier window) or QUARANTINED."""
        flags = f.flags or 0
        if not 0 <= f.timestamp_ns <= _U64_MAX:
            return  # fails in _submit with its own message
        if fits_block(f.timestamp_ns, flags, window_id, self.window_ns):
            return
        own = window_of(f.timestamp_ns, self.window_ns)
        if flags & FrameFlags.LATE:
            raise ValueError(
                f"{self.path}: stream {f.stream_id} frame at {f.timestamp_ns} ns is flagged "
                f"LATE but belongs to window {own}, not before window {window_id}"
            )
        raise ValueError(
            f"{self.path}: stream {f.stream_id} frame at {f.timestamp_ns} ns belongs to "
            f"window {own}, not {window_id}; flag it LATE or QUARANTINED"
        )

    def _submit(
        self,
        stream_id: int,
        timestamp_ns: int,
        payload: PayloadLike,
        flags: int | None,
        stream_index: int | None,
        receive_ns: int,
        duration_ns: int,
    ) -> None:
        if stream_id not in self.streams:
            raise ValueError(
                f"{self.path}: unknown stream id {stream_id}; known: {sorted(self.streams)}"
            )
        if not 0 <= timestamp_ns <= _U64_MAX:
            raise ValueError(f"stream {stream_id}: timestamp {timestamp_ns} outside 0..2**64-1")
        view = byte_view(payload)
        size = view.nbytes
        if size > _U32_MAX:
            raise ValueError(f"stream {stream_id}: payload of {size} bytes exceeds 4 GiB")
        problem = self.streams[stream_id].size_problem(size)
        if problem is not None:
            raise ValueError(f"{self.path}: {problem}")
        if flags is None:
            flags = self._hw_default[stream_id]
        if flags & ~_USER_FLAGS:
            raise ValueError(f"stream {stream_id}: flags {flags:#x} set bits the writer owns")
        if stream_index is None:
            stream_index = self._next_index[stream_id]
        if not 0 <= stream_index <= _U32_MAX:
            raise ValueError(f"stream {stream_id}: stream_index {stream_index} outside u32")
        self._next_index[stream_id] = stream_index + 1
        spec = self._codecs[stream_id]
        args = (view, spec, self._itemsize[stream_id], self.block_size)
        if spec.codec_id == CODEC_NONE or size < _INLINE_BYTES:
            future: Future[tuple[BytesLike, int, int]] = Future()
            try:
                future.set_result(_encode(*args))
            except Exception as exc:  # raised from result(), as a pool's would be
                future.set_exception(exc)
        else:
            future = self._pool.submit(_encode, *args)
        self._pending.append(
            _Pending(
                stream_id,
                timestamp_ns,
                stream_index,
                int(flags),
                receive_ns & _U64_MAX,
                min(duration_ns, _U32_MAX),
                size,
                future,
            )
        )

    def _close_pending(self, missing: Iterable[int]) -> None:
        """Queue the window being collected; write the one queued before it."""
        window_id = self._pending_window
        pending, self._pending, self._pending_window = self._pending, [], None
        if window_id is None or not pending:
            return
        if self._last_window is not None and window_id <= self._last_window:
            for p in pending:
                p.future.cancel()
            raise ValueError(
                f"{self.path}: window {window_id} added after window {self._last_window}; "
                "window ids must increase"
            )
        self._last_window = window_id
        self._queued.append((window_id, pending, tuple(sorted(set(missing)))))
        self._write_queued(keep=1)

    def _write_queued(self, keep: int) -> None:
        while len(self._queued) > keep:
            self._write_block(*self._queued.pop(0))

    def _write_block(
        self, window_id: int, pending: list[_Pending], missing_ids: tuple[int, ...]
    ) -> None:
        n = len(pending)
        entries = np.zeros(n, INDEX_DTYPE)
        aux = np.zeros(n, AUX_DTYPE)
        payload_offset = self._pos + BLOCK_RECORD_SIZE + n * 48
        payload_offset += pad_len(payload_offset)
        buffers: list[BytesLike] = []
        offset = payload_offset
        block_flags = 0
        for i, p in enumerate(pending):
            stored, codec_flags, crc = p.future.result()
            flags = p.flags | codec_flags
            if flags & _LATE:
                block_flags |= WINDOW_FLAG_HAS_LATE
            entries[i] = (
                p.stream_id,
                flags,
                p.stream_index,
                p.timestamp_ns,
                offset,
                len(stored),
                crc,
            )
            aux[i] = (p.receive_ns, p.duration_ns, 0)
            buffers.append(stored)
            pad = pad_len(len(stored))
            if pad:
                buffers.append(_ZEROS[:pad])
            offset += len(stored) + pad
            self.bytes_in += p.raw_size
            self.bytes_stored += len(stored)
            totals = self.stream_totals[p.stream_id]
            totals[0] += 1
            totals[1] += p.raw_size
            totals[2] += len(stored)
        if missing_ids:
            block_flags |= WINDOW_FLAG_INCOMPLETE
            self._missing[window_id] = missing_ids
        table = entries.tobytes() + aux.tobytes()
        record = BlockRecord(
            window_id=window_id,
            frame_count=n,
            flags=block_flags,
            block_size=offset - self._pos,
            payload_offset=payload_offset,
            entries_crc=crc32c(table),
        )
        head_pad = payload_offset - self._pos - BLOCK_RECORD_SIZE - len(table)
        write_all(self._fd, [record.encode(), table, bytes(head_pad), *buffers])
        self._windows.append((window_id, payload_offset, offset - payload_offset, n, block_flags))
        self._entries.append(entries)
        self._aux.append(aux)
        self._pos = offset
        self.frame_count += n
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval_s:
            if self._syncing is not None and self._syncing.done():
                self._wait_sync()  # raises if the last background fsync failed
            if self._syncing is None:
                self._last_sync = now
                self._syncing = self._fsync_pool.submit(os.fsync, self._fd)

    def _wait_sync(self) -> None:
        """Wait for a background fsync; an fsync error surfaces here."""
        syncing, self._syncing = self._syncing, None
        if syncing is not None:
            syncing.result()

    def _abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        for p in [*self._pending, *(q for _, ps, _ in self._queued for q in ps)]:
            p.future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            self._fsync_pool.shutdown(wait=True)
            os.fsync(self._fd)
        finally:
            os.close(self._fd)


def _header_bits(flags: np.ndarray) -> int:
    """Header flag bits naming the codecs and filters used by any frame."""
    codecs = set(((flags & CODEC_MASK) >> CODEC_SHIFT).tolist())
    bits = HeaderFlags.LITTLE_ENDIAN
    if codecs & {CODEC_LZ4, CODEC_LZ4_BLOCKS}:
        bits |= HeaderFlags.USES_LZ4
    if codecs & {CODEC_ZSTD, CODEC_ZSTD_BLOCKS}:
        bits |= HeaderFlags.USES_ZSTD
    if CODEC_BLOSC2 in codecs:
        bits |= HeaderFlags.USES_BLOSC2
    if np.any(flags & FrameFlags.SHUFFLED):
        bits |= HeaderFlags.USES_SHUFFLE
    return int(bits)


def file_span(window_ids: np.ndarray, timestamps: np.ndarray, window_ns: int) -> tuple[int, int]:
    """The header span: the windows of the file and the window of every indexed frame.

    A late frame written into a later segment widens that segment's span back
    to its own window, so every frame lies inside the span of its file.
    Clamped to 0..2**64-1. ``(0, 0)`` for a file without windows.
    """
    ids = [int(window_ids.min()), int(window_ids.max())] if len(window_ids) else []
    if len(timestamps):
        ids += [
            window_of(int(timestamps.min()), window_ns),
            window_of(int(timestamps.max()), window_ns),
        ]
    if not ids:
        return 0, 0
    lo, hi = min(ids), max(ids)
    return (
        min(max(0, lo * window_ns), _U64_MAX),
        min(max(0, (hi + 1) * window_ns), _U64_MAX),
    )


def write_trailer(
    fd: int,
    end: int,
    data_offset: int,
    entries: np.ndarray,
    aux: np.ndarray,
    windows: np.ndarray,
    meta: Meta,
) -> Header:
    """Append index, aux table, window table and metadata after ``end``; finalize the header.

    Shared by the writer and by recovery. ``entries`` and ``aux`` are in write
    order; quarantined entries go to the quarantine table (write order), the
    rest are sorted here by (stream_id, timestamp_ns, stream_index). The file
    is fsynced before and after the header is marked finalized.
    """
    quarantined = (entries["flags"] & FrameFlags.QUARANTINED) != 0
    quarantine = np.zeros(int(quarantined.sum()), QUARANTINE_DTYPE)
    for name in INDEX_DTYPE.names or ():
        quarantine[name] = entries[name][quarantined]
    for name in AUX_DTYPE.names or ():
        quarantine[name] = aux[name][quarantined]
    entries, aux = entries[~quarantined], aux[~quarantined]
    order = np.lexsort((entries["stream_index"], entries["timestamp_ns"], entries["stream_id"]))
    index = entries[order]
    aux_sorted = aux[order]
    windows = np.sort(windows, order="window_id")
    meta_bytes = encode_meta(meta)
    parts = [index.tobytes(), aux_sorted.tobytes(), windows.tobytes(), meta_bytes]
    if len(quarantine):  # absent (offset and size 0) when nothing was quarantined
        parts.insert(3, quarantine.tobytes())
    offsets = []
    pos = end + pad_len(end)
    buffers: list[BytesLike] = [bytes(pos - end)]
    for part in parts:
        offsets.append(pos)
        buffers.append(part)
        pad = pad_len(len(part))
        buffers.append(bytes(pad))
        pos += len(part) + pad
    os.lseek(fd, end, os.SEEK_SET)
    write_all(fd, buffers)
    os.ftruncate(fd, pos)
    os.fsync(fd)
    start_ns, end_ns = file_span(windows["window_id"], index["timestamp_ns"], meta.window_ns)
    q_offset = offsets[3] if len(quarantine) else 0
    header = Header(
        flags=_header_bits(np.concatenate([index["flags"], quarantine["flags"]]))
        | HeaderFlags.FINALIZED,
        start_ns=start_ns,
        end_ns=end_ns,
        frame_count=len(index),
        stream_count=len(meta.streams),
        index_offset=offsets[0],
        index_size=len(parts[0]),
        window_ns=meta.window_ns,
        data_offset=data_offset,
        meta_offset=offsets[-1],
        meta_size=len(meta_bytes),
        windows_offset=offsets[2],
        windows_size=len(parts[2]),
        aux_offset=offsets[1],
        aux_size=len(parts[1]),
        window_count=len(windows),
        index_crc=crc32c(parts[0]),
        meta_crc=crc32c(meta_bytes),
        windows_crc=crc32c(parts[2]),
        aux_crc=crc32c(parts[1]),
        quarantine_offset=q_offset,
        quarantine_size=quarantine.nbytes,
        quarantine_count=len(quarantine),
        quarantine_crc=crc32c(parts[3]) if len(quarantine) else 0,
    )
    os.pwrite(fd, header.encode(), 0)
    os.fsync(fd)
    return header


@contextlib.contextmanager
def replacing_writer(
    path: Path, streams: Sequence[StreamInfo], window_ns: int, metadata: FileMetadata
) -> Iterator[HyperframeWriter]:
    """A writer of a whole new file at ``path`` (the caller checked ``--force``), finalized
    when the block ends.

    A file already at ``path`` is replaced only once the new one is finalized: the new
    one is written beside it (``.NAME.importing``) and renamed over it, so a failure
    keeps the old file. On any exception nothing new is left behind.
    """
    target = path if not path.exists() else path.with_name(f".{path.name}.importing")
    writer = HyperframeWriter(target, streams, window_ns, metadata)
    try:
        yield writer
        writer.finalize()
    except BaseException:
        writer.abort()
        writer.tmp_path.unlink(missing_ok=True)
        raise
    if target != path:
        os.replace(target, path)
        fsync_dir(path.parent)  # the rename over the old file survives a power cut
