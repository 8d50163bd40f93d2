"""Cut and join recordings without decoding: ``hyperframes slice`` and ``cat``.

Both copy window blocks as stored: each frame's stored payload, codec flags
and CRC32C go into the block of the same window in the output
(:meth:`HyperframeWriter.write_stored_window`), LATE and QUARANTINED frames
included, so nothing is decoded or re-encoded. A late frame that crossed a
segment boundary lands in the same file as its window, where the reader lists
it with that window. The output is written under a hidden name, checked with
:func:`~hyperframes.verify.verify_file` (structure, block records against the
tables, every payload's CRC32C; payloads are byte copies, so they are not
decoded again) and its frame count, and only then renamed into place; a
failure leaves no output.

``slice`` keeps the frames stamped in ``[start, end]`` of the streams asked
for; an H.265 (or other inter-coded) stream starts at the keyframe at or
before ``start`` so that its first frame decodes on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hyperframes.drive import Drive, Segment, open_drive
from hyperframes.drive.blockmap import source_blocks
from hyperframes.errors import CorruptFileError, DriveError, HyperframesError
from hyperframes.format.codecs import CodecSpec
from hyperframes.format.layout import AUX_DTYPE, BLOCK_RECORD_SIZE, INDEX_DTYPE, FrameFlags, pad_len
from hyperframes.format.meta import Meta
from hyperframes.format.naming import parse_segment_name
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.format.windows import window_end, window_start
from hyperframes.reader import HyperframeReader
from hyperframes.storage.local import check_output, fsync_dir
from hyperframes.storage.source import pread_exact
from hyperframes.verify import verify_file
from hyperframes.writer import CopiedBlock, HyperframeWriter, StoredFrame

__all__ = ["CutResult", "KeyframeStart", "cat_files", "slice_drive", "INTER_CODED"]

INTER_CODED = frozenset({"h264", "h265", "av1"})  # encodings whose frames depend on earlier ones
Progress = Callable[[int, int], None]  # segments done, segments in all


@dataclass(frozen=True, slots=True)
class KeyframeStart:
    """An inter-coded stream of a slice starts at its keyframe before ``--start``."""

    stream: str
    keyframe_ns: int
    before_ns: int  # how far before the requested start


@dataclass(slots=True)
class CutResult:
    """What ``slice`` or ``cat`` wrote (after verification)."""

    output: Path
    frames: int = 0
    quarantined: int = 0
    windows: int = 0
    bytes: int = 0
    segments: int = 0
    keyframe_starts: list[KeyframeStart] = field(default_factory=list)


def _codecs(streams: Sequence[StreamInfo]) -> dict[int, CodecSpec]:
    return {s.id: CodecSpec(s.codec, s.level, s.shuffle) for s in streams if s.codec is not None}


class _Copier:
    """Writes blocks of source segments into one output, then verifies and publishes it."""

    def __init__(
        self,
        output: Path,
        streams: Sequence[StreamInfo],
        window_ns: int,
        metadata: FileMetadata,
        overwrite: bool,
    ) -> None:
        self.output = check_output(output, overwrite)
        self.stage = self.output.with_name(f".{self.output.name}.cut")
        self.stage.unlink(missing_ok=True)
        Path(f"{self.stage}.tmp").unlink(missing_ok=True)
        self.writer = HyperframeWriter(
            self.stage, streams, window_ns, metadata, codecs=_codecs(streams), fsync_interval_s=5.0
        )
        self.result = CutResult(self.output)
        self.last_window: int | None = None
        self.last_source = ""

    def copy(
        self, r: HyperframeReader, keep: np.ndarray, keep_q: np.ndarray, streams: set[int]
    ) -> None:
        """Copy the frames of ``r`` whose index (``keep``) or quarantine (``keep_q``) mask
        is set, block by block."""
        index, aux = r.index, r.aux()
        quarantine = r.quarantine()
        fd = os.open(r.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        run: list[CopiedBlock] = []  # whole blocks back to back, copied in one go
        run_entries: list[np.ndarray] = []

        def flush_run() -> None:
            if run:
                ent, ax = _rows(np.concatenate(run_entries), index, aux, quarantine)
                self.writer.copy_blocks(run, ent, ax, fd)
                run.clear()
                run_entries.clear()

        try:
            for block in source_blocks(r):
                e = block.entries
                pick = np.zeros(len(e), bool)
                ix, qx = e >= 0, e < 0
                pick[ix] = keep[e[ix]]
                pick[qx] = keep_q[-e[qx] - 1]
                chosen = e[pick]
                if not len(chosen):
                    continue
                if self.last_window is not None and block.window_id <= self.last_window:
                    raise DriveError(
                        r.path,
                        f"window {block.window_id} comes after window {self.last_window} of "
                        f"{self.last_source}: the segments overlap (a clock went back, or the "
                        "same segment twice); cut them apart first",
                    )
                self.last_window, self.last_source = block.window_id, r.path.name
                missing = tuple(s for s in block.missing if s in streams)
                self.result.windows += 1
                self.result.frames += int(np.count_nonzero(chosen >= 0))
                self.result.quarantined += int(np.count_nonzero(chosen < 0))
                if len(chosen) == len(e):  # the whole block: its bytes verbatim, in the kernel
                    head = BLOCK_RECORD_SIZE + len(e) * 48
                    at = block.payload_offset - head - pad_len(head)
                    if run and run[-1].payload_offset + run[-1].payload_size != at:
                        flush_run()
                    run.append(CopiedBlock(block.window_id, at, block.payload_offset,
                                           block.payload_size, len(e), missing))  # fmt: skip
                    run_entries.append(e)
                    continue
                flush_run()
                frames = self._frames(fd, r, chosen, index, aux, quarantine)
                self.writer.write_stored_window(block.window_id, frames, missing)
            flush_run()
        except EOFError as exc:
            raise CorruptFileError(r.path, f"cut short while copying: {exc}") from None
        finally:
            os.close(fd)
        self.result.segments += 1

    @staticmethod
    def _frames(
        fd: int,
        r: HyperframeReader,
        chosen: np.ndarray,
        index: np.ndarray,
        aux: np.ndarray,
        quarantine: np.ndarray,
    ) -> list[StoredFrame]:
        """The chosen entries (write order) as stored frames, their payloads read at once."""
        ix, qx = chosen[chosen >= 0], -chosen[chosen < 0] - 1
        # rows as tuples: stream_id, flags, stream_index, timestamp_ns, offset, size, crc32c
        from_index = iter(index[ix].tolist())
        from_aux = iter(aux[ix][["receive_ns", "duration_ns"]].tolist())
        from_q = iter(quarantine[qx].tolist())
        rows = []
        for p in chosen.tolist():
            if p >= 0:
                rows.append((*next(from_index), *next(from_aux)))
            else:
                rows.append(next(from_q)[:9])
        lo = min(row[4] for row in rows)
        hi = max(row[4] + row[5] for row in rows)
        buf = memoryview(pread_exact(fd, hi - lo, lo))
        if len(buf) != hi - lo:
            raise CorruptFileError(r.path, f"payloads at [{lo}, {hi}) cut short: file truncated?")
        return [
            StoredFrame(sid, ts, buf[off - lo : off - lo + size], flags, sidx, crc, rcv, dur)
            for sid, flags, sidx, ts, off, size, crc, rcv, dur in rows
        ]

    def publish(self) -> CutResult:
        """Finalize, verify, and rename into place; on any failure remove everything."""
        try:
            self.writer.finalize()
            check = verify_file(self.stage, decode=False)  # payloads are byte copies
            if not check.ok:
                raise CorruptFileError(
                    self.output, f"output failed verification, not published: {check.problems[0]}"
                )
            if check.frames != self.result.frames:
                raise DriveError(
                    self.output,
                    f"output holds {check.frames} frames, {self.result.frames} were copied",
                )
            os.replace(self.stage, self.output)
            fsync_dir(self.output.parent)
        except BaseException:
            self.discard()
            raise
        self.result.bytes = self.output.stat().st_size
        return self.result

    def discard(self) -> None:
        """Remove the partial output."""
        if not self.writer._closed:
            self.writer.abort()
        self.stage.unlink(missing_ok=True)
        Path(f"{self.stage}.tmp").unlink(missing_ok=True)


_INDEX_FIELDS = list(INDEX_DTYPE.names or ())
_AUX_FIELDS = list(AUX_DTYPE.names or ())


def _rows(
    e: np.ndarray, index: np.ndarray, aux: np.ndarray, quarantine: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Index entries and aux rows of a block's frames (``e``: positions, write order)."""
    ent = np.empty(len(e), INDEX_DTYPE)
    ax = np.zeros(len(e), AUX_DTYPE)
    ix, qx = e >= 0, e < 0
    ent[ix] = index[e[ix]]
    ax[ix] = aux[e[ix]]
    if qx.any():
        q = quarantine[-e[qx] - 1]
        ent[qx] = q[_INDEX_FIELDS].astype(INDEX_DTYPE)
        ax[qx] = q[_AUX_FIELDS].astype(AUX_DTYPE)
    return ent, ax


def _same_tables(segments: Sequence[tuple[str, Meta]], what: str) -> None:
    first_name, first = segments[0]
    want = [s.to_dict() for s in first.streams]
    for name, meta in segments[1:]:
        got = [s.to_dict() for s in meta.streams]
        if got != want:
            a = {s["name"]: s for s in want}
            b = {s["name"]: s for s in got}
            if a.keys() != b.keys():
                diff = f"streams {sorted(a.keys() ^ b.keys())} are in only one of them"
            else:
                n = next(k for k in sorted(a) if a[k] != b[k])
                fields = sorted(k for k in a[n] if a[n].get(k) != b[n].get(k))
                diff = f"stream {n!r} differs in {', '.join(fields)}"
            raise DriveError(
                name,
                f"stream table differs from {first_name}'s ({diff}); {what} only joins segments "
                "of one stream table",
            )


def cat_files(
    paths: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> CutResult:
    """Join segments of one vehicle (in the order given) into one verified file.

    Refuses (:class:`DriveError`) segments of different vehicles, window
    lengths or stream tables, and segments whose windows overlap.
    """
    if not paths:
        raise DriveError("cat", "no input files")
    readers = []
    try:
        for p in paths:
            if os.fspath(p).endswith(".tmp"):
                raise DriveError(p, "not finalized (.tmp); run hyperframes recover first")
            readers.append(HyperframeReader(p, verify=False))
        metas = [
            (r.path.name, Meta(tuple(r.streams.values()), r.metadata, r.window_ns)) for r in readers
        ]
        vehicles = {r.metadata.vehicle_id for r in readers}
        named = {n.vehicle for r in readers if (n := parse_segment_name(r.path.name))}
        if len(vehicles) > 1 or len(named) > 1:
            raise DriveError(
                "cat",
                f"segments of several vehicles ({', '.join(sorted(vehicles | named))}); "
                "cat joins one vehicle's segments",
            )
        lengths = {r.window_ns for r in readers}
        if len(lengths) > 1:
            raise DriveError(
                "cat", f"window lengths differ ({sorted(lengths)} ns); cat joins one window length"
            )
        _same_tables(metas, "cat")
        first = readers[0]
        meta = FileMetadata(
            first.metadata.vehicle_id,
            first.metadata.recorder_version,
            first.metadata.segment_seq,
            first.metadata.created_ns,
            {
                **first.metadata.extra,
                "joined": {"first": first.path.name, "last": readers[-1].path.name,
                           "segments": len(readers)},
            },
        )  # fmt: skip
        copier = _Copier(
            Path(output), list(first.streams.values()), first.window_ns, meta, overwrite
        )
        try:
            for i, r in enumerate(readers):
                keep = np.ones(r.frame_count, bool)
                copier.copy(r, keep, np.ones(len(r.quarantine()), bool), set(r.streams))
                if progress is not None:
                    progress(i + 1, len(readers))
        except BaseException:
            copier.discard()
            raise
        return copier.publish()
    finally:
        for r in readers:
            r.close()


def _keyframe_before(drive: Drive, stream: str, t: int) -> int | None:
    """Timestamp of the last keyframe of ``stream`` at or before ``t`` (None: no frame before)."""
    while True:
        try:
            hit = drive.find(stream, t, "before")
        except (KeyError, HyperframesError):
            return None
        r = drive.reader(hit.segment)
        assert r is not None
        lo, _ = r.stream_slice(stream)
        flags = r.index["flags"][lo : hit.position + 1]
        keys = np.flatnonzero(flags & FrameFlags.KEYFRAME)
        if len(keys):
            return int(r.index["timestamp_ns"][lo + int(keys[-1])])
        t = int(r.index["timestamp_ns"][lo]) - 1  # the GOP began in an earlier segment


def slice_drive(
    source: Drive | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    start_ns: int,
    end_ns: int,
    output: str | os.PathLike[str],
    *,
    streams: Sequence[str] | None = None,
    vehicle: str | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
    extra: Mapping[str, Any] | None = None,
) -> CutResult:
    """Copy the frames stamped in ``[start_ns, end_ns]`` into one verified file.

    ``source`` is a :class:`Drive` or what :func:`open_drive` takes (one file
    too). ``streams`` (names) limits the copy; H.265/H.264/AV1 streams start
    at the keyframe at or before ``start_ns`` (listed in
    :attr:`CutResult.keyframe_starts`). Quarantined frames of the chosen
    streams stored in the chosen windows are kept. ``extra`` adds keys to the
    output's ``FileMetadata.extra`` (after the first segment's and ``slice``).
    """
    if end_ns < start_ns:
        raise ValueError(f"end {end_ns} is before start {start_ns}")
    drive = source if isinstance(source, Drive) else open_drive(source, vehicle=vehicle)
    try:
        return _slice(
            drive, start_ns, end_ns, Path(output), streams, overwrite, progress, dict(extra or {})
        )
    finally:
        if drive is not source:
            drive.close()


def _slice(
    drive: Drive,
    start_ns: int,
    end_ns: int,
    output: Path,
    names: Sequence[str] | None,
    overwrite: bool,
    progress: Progress | None,
    extra: dict[str, Any],
) -> CutResult:
    all_streams = drive.streams
    known = sorted(s.name for s in all_streams.values())
    for n in names or ():
        if n not in known:
            raise DriveError(drive.source, f"no stream named {n!r}; streams: {', '.join(known)}")
    chosen = [drive.stream(n) for n in names] if names else sorted(all_streams.values(), key=_id)
    chosen_ids = {s.id for s in chosen}
    begin: dict[int, int] = {}
    starts: list[KeyframeStart] = []
    for s in chosen:
        begin[s.id] = start_ns
        if s.encoding in INTER_CODED:
            k = _keyframe_before(drive, s.name, start_ns)
            if k is not None and k < start_ns:
                begin[s.id] = k
                starts.append(KeyframeStart(s.name, k, start_ns - k))
    lo = min(begin.values(), default=start_ns)
    positions = drive._spans.overlapping(lo, end_ns)
    positions.sort(key=lambda p: (drive.segments[p].start_ns, p))
    if not positions:
        raise DriveError(
            drive.source,
            f"no segment covers [{start_ns}, {end_ns}]; the drive spans "
            f"[{drive.start_ns}, {drive.end_ns}]",
        )
    tables: list[tuple[str, Meta]] = []
    for p in positions:
        seg: Segment = drive.segments[p]
        m = drive._meta(p)
        if m is not None:
            only = Meta(tuple(x for x in m.streams if x.id in chosen_ids), m.file, m.window_ns)
            tables.append((seg.path.name, only))
    if not tables:
        raise DriveError(drive.source, "every segment of that range is damaged")
    _same_tables([(n, _fill(m, chosen)) for n, m in tables], "slice")
    first = drive.segments[positions[0]].meta().file
    meta = FileMetadata(
        first.vehicle_id,
        first.recorder_version,
        first.segment_seq,
        first.created_ns,
        {**first.extra, "slice": {"start_ns": start_ns, "end_ns": end_ns}, **extra},
    )
    copier = _Copier(output, chosen, drive.window_ns, meta, overwrite)
    copier.result.keyframe_starts = starts
    try:
        for done, p in enumerate(positions):
            r = drive.reader(p)
            if r is None:
                continue
            idx = r.index
            ts = idx["timestamp_ns"]
            keep = np.zeros(len(idx), bool)
            for s in chosen:
                if s.id in r.streams:
                    a, b = r.stream_slice(s.id)
                    seg_ts = ts[a:b]
                    keep[a:b] = (seg_ts >= np.uint64(begin[s.id])) & (seg_ts <= np.uint64(end_ns))
            q = r.quarantine()
            keep_q = np.isin(q["stream_id"], list(chosen_ids))
            if len(q):
                keep_q &= _in_windows(r, q, drive.window_ns, start_ns, end_ns)
            copier.copy(r, keep, keep_q, chosen_ids)
            if progress is not None:
                progress(done + 1, len(positions))
    except BaseException:
        copier.discard()
        raise
    return copier.publish()


def _id(s: StreamInfo) -> int:
    return s.id


def _fill(m: Meta, chosen: Sequence[StreamInfo]) -> Meta:
    """A segment's table of the chosen streams, with the chosen definition where it lacks one."""
    have = {s.id for s in m.streams}
    extra = tuple(s for s in chosen if s.id not in have)
    return Meta(tuple(sorted((*m.streams, *extra), key=_id)), m.file, m.window_ns)


def _in_windows(
    r: HyperframeReader, q: np.ndarray, window_ns: int, start_ns: int, end_ns: int
) -> np.ndarray:
    """Which quarantined frames are stored in a block whose window meets ``[start, end]``."""
    blocks = r.window_table
    order = np.argsort(blocks["payload_offset"])
    offs = blocks["payload_offset"][order]
    which = np.searchsorted(offs, q["offset"], "right") - 1
    wid = blocks["window_id"][order][np.maximum(which, 0)]
    lo = np.array([window_start(int(w), window_ns) for w in wid], dtype=np.int64)
    hi = np.array([window_end(int(w), window_ns) for w in wid], dtype=np.int64)
    return np.asarray((hi >= start_ns) & (lo < end_ns))
