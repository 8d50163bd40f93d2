"""Convert one archive: window block by window block, verified, then published atomically.

:func:`convert_archive` never modifies its input. It writes the output into a
private staging directory inside the output directory (``OUT/.staging/``;
the writer's own ``NAME.tmp`` there is renamed to ``NAME`` by finalize),
verifies it (:mod:`hyperframes.converter.verify`), and only then links it to
``OUT/NAME`` and fsyncs the directory. Any failure removes the staging
directory: no output, and an error naming the file, stream, frame and rule.

The input is read one window block at a time, in file order, so memory stays
bounded whatever the archive size: each block's frames are written to the
block they were stored in (late frames keep their block and LATE flag,
quarantined frames stay quarantined), with the same timestamps, stream
indices, flags, receive times and durations, and the file metadata plus a
conversion record (``extra["conversion"]``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np

from hyperframes.converter import __version__
from hyperframes.converter._camera import CameraTrack, describe
from hyperframes.converter._layout import Block, source_blocks
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.errors import (
    ConversionError,
    ConverterError,
    InputError,
    OutputExistsError,
)
from hyperframes.converter.plan import StreamPlan, Treatment, config_key, plan_streams
from hyperframes.converter.verify import VerifyReport, stored_sizes, verify_conversion
from hyperframes.errors import CorruptFileError, HyperframesError
from hyperframes.format.layout import FrameFlags
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.storage.local import fsync_dir, safe_dir
from hyperframes.verify import verify_file
from hyperframes.writer import TMP_SUFFIX, HyperframeWriter, WriteFrame

__all__ = [
    "STAGING_DIR",
    "StreamResult",
    "ConversionResult",
    "Progress",
    "PhaseProgress",
    "convert_archive",
    "file_sha256",
    "conversion_record",
    "sweep_staging",
]

log = logging.getLogger(__name__)

STAGING_DIR: Final = ".staging"
_USER_FLAGS: Final = int(
    FrameFlags.KEYFRAME | FrameFlags.HW_TIMESTAMP | FrameFlags.LATE | FrameFlags.QUARANTINED
)
_KEY: Final = int(FrameFlags.KEYFRAME)
_LOOKAHEAD: Final = 2  # window blocks the camera encoders may run ahead of the writer

#: ``progress(frames_done, frames_total, stored_bytes_read)``, called after every window block.
Progress = Callable[[int, int, int], None]


class PhaseProgress(Protocol):
    """A :data:`Progress` that also hears of a bucket task's transfers: ``phase`` is
    ``download``, ``upload`` or ``re-read`` (bytes done, bytes in all, bytes done)."""

    def __call__(self, done: int, total: int, nbytes: int, phase: str = "convert", /) -> None:
        """One step of the current phase."""


@dataclass(slots=True)
class StreamResult:
    """One stream of a converted archive."""

    name: str
    kind: str
    treatment: str
    frames: int
    bytes_in: int
    bytes_out: int
    encoder: str | None = None
    quality: dict[str, Any] | None = None  # CameraQuality.to_dict() for H.265 streams

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)


@dataclass(slots=True)
class ConversionResult:
    """What :func:`convert_archive` did."""

    input: str
    output: str
    sha256: str
    config_key: str
    seconds: float
    frames: int
    bytes_in: int
    bytes_out: int
    streams: list[StreamResult] = field(default_factory=list)
    write_seconds: float = 0.0  # reading, encoding, writing, finalizing
    verify_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**dataclasses.asdict(self), "streams": [s.to_dict() for s in self.streams]}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (lowercase hex), read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def conversion_record(metadata: FileMetadata) -> dict[str, Any] | None:
    """The conversion record of a converted file's metadata, or None."""
    record = metadata.extra.get("conversion")
    return record if isinstance(record, dict) else None


def is_conversion_of(path: Path, sha256: str, key: str) -> bool:
    """True when the file ``path`` is a verified conversion of the input with ``sha256``
    under the config ``key``: an output a marker was lost for, adopted rather than redone."""
    try:
        with HyperframeReader(path, verify=False) as r:
            record = conversion_record(r.metadata)
    except Exception:
        return False
    if not record or record.get("config_key") != key:
        return False
    src = record.get("source")
    if not isinstance(src, dict) or src.get("sha256") != sha256:
        return False
    return verify_file(path).ok


# --- staging and publishing ---------------------------------------------------


class _Staging:
    """A private directory under ``OUT/.staging/``, locked (flock) while a conversion runs."""

    def __init__(self, out_dir: Path) -> None:
        root = out_dir / STAGING_DIR
        out_dir.mkdir(parents=True, exist_ok=True)
        safe_dir(root, 0o755)  # a link here would put staged files elsewhere
        self.dir = Path(tempfile.mkdtemp(prefix=f"{socket.gethostname()}-{os.getpid()}-", dir=root))
        flags = os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(self.dir / ".lock", flags, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(OSError):  # not empty: another conversion is staging
            self.dir.parent.rmdir()


def sweep_staging(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Remove staging directories left by conversions that died (kill -9, power cut).

    A directory whose lock file is still held by a live conversion is left
    alone. Returns the directories removed.
    """
    root = Path(out_dir) / STAGING_DIR
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for d in sorted(root.iterdir()):
        lock = d / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = -1
        except OSError:
            continue
        try:
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
        else:
            d.unlink(missing_ok=True)
        if fd >= 0:
            os.close(fd)
        removed.append(d)
    return removed


def _publish(staged: Path, final: Path) -> None:
    """Give ``staged`` (finalized, fsynced) its final name without replacing anything."""
    try:
        os.link(staged, final)  # atomic, and fails rather than replace an existing file
    except FileExistsError:
        raise OutputExistsError(final, "appeared while this conversion ran") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if final.exists():  # a file system without hard links: check, then rename
            raise OutputExistsError(final, "appeared while this conversion ran") from None
        staged.rename(final)
    else:
        staged.unlink()
    fsync_dir(final.parent)


# --- the conversion -----------------------------------------------------------


def _open_input(path: Path) -> HyperframeReader:
    if path.name.endswith(TMP_SUFFIX):
        raise InputError(
            path,
            "not finalized (a .tmp file: a recording cut short or a copy in progress); "
            f"salvage it with `hyperframes recover {path}`",
            rule="finalized",
        )
    try:
        return HyperframeReader(path)
    except HyperframesError as exc:
        raise InputError(path, str(exc).removeprefix(f"{path}: "), rule="container") from None


def convert_archive(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    config: ConvertConfig,
    *,
    sha256: str | None = None,
    progress: Progress | None = None,
    encoder: str | None = None,
) -> ConversionResult:
    """Convert ``source`` into ``out_dir/<same name>``; see the module docstring.

    ``sha256`` is the input's checksum when the caller already computed it.
    ``encoder`` overrides ``config.video.encoder`` for this run only (a Ray
    task placed on a host without NVENC runs ``x265``); the conversion record
    keeps the configured value and names the encoder that ran.
    Raises :class:`~hyperframes.converter.errors.ConverterError` subclasses:
    :class:`InputError` (the input cannot be converted),
    :class:`VerificationError` (the output broke a rule),
    :class:`OutputExistsError`, :class:`ConversionError`.
    """
    t0 = time.monotonic()
    src, out = Path(source), Path(out_dir)
    final = out / src.name
    if final.exists():
        raise OutputExistsError(final, "remove it or choose another --out")
    with _open_input(src) as reader:
        digest = sha256 or file_sha256(src)
        plans = plan_streams(reader.streams.values(), config, src.name)
        blocks = source_blocks(reader)
        staging = _Staging(out)
        try:
            staged = staging.dir / src.name
            video = config.video
            if encoder is not None:
                video = dataclasses.replace(video, encoder=encoder)
            tracks = {
                p.source.id: CameraTrack(
                    reader, p, video, os.fspath(src), config.verify.psnr_floor_db
                )
                for p in plans
                if p.treatment is Treatment.H265
            }
            try:
                plans = _start_tracks(plans, tracks)
                meta = _metadata(reader, src, digest, config, plans, tracks)
                _write(reader, blocks, plans, tracks, staged, meta, config, progress)
            finally:
                for t in tracks.values():
                    t.close()
            t_write = time.monotonic()
            seed = int(digest[:16], 16)
            encoded = {t.name: t.codec_mse + t.colour_mse for t in tracks.values()}
            report = verify_conversion(
                staged,
                reader,
                plans,
                config,
                seed=seed,
                encoded=encoded,
                encoded_by={t.name: t.checked_by for t in tracks.values()},
            )
            t_verify = time.monotonic()
            _publish(staged, final)
            log.info(
                "%s: written in %.1f s, verified in %.1f s",
                src.name,
                t_write - t0,
                t_verify - t_write,
            )
        except CorruptFileError as exc:  # a payload or table of the input fails its checks
            raise InputError(src, str(exc).removeprefix(f"{src}: "), rule="container") from None
        except HyperframesError as exc:
            if isinstance(exc, ConverterError):
                raise
            raise ConversionError(src, str(exc)) from exc
        finally:
            staging.cleanup()
        result = _result(reader, src, final, digest, config, plans, tracks, report, t0)
        result.write_seconds = round(t_write - t0, 3)
        result.verify_seconds = round(t_verify - t_write, 3)
        return result


def _start_tracks(
    plans: tuple[StreamPlan, ...], tracks: dict[int, CameraTrack]
) -> tuple[StreamPlan, ...]:
    """Open every camera's encoder on its first frame; record the picture size in the plan."""
    out = []
    for plan in plans:
        track = tracks.get(plan.source.id)
        picture = track.start() if track is not None else None
        if picture is None:
            out.append(plan)
            continue
        extra = {**plan.output.extra, "width": picture.width, "height": picture.height}
        out.append(dataclasses.replace(plan, output=dataclasses.replace(plan.output, extra=extra)))
    return tuple(out)


def _metadata(
    reader: HyperframeReader,
    src: Path,
    digest: str,
    config: ConvertConfig,
    plans: tuple[StreamPlan, ...],
    tracks: dict[int, CameraTrack],
) -> FileMetadata:
    streams = {}
    for p in plans:
        entry = p.to_dict()
        if p.source.id in tracks:
            entry.update(describe(tracks[p.source.id]))
        streams[p.source.name] = entry
    record: dict[str, Any] = {
        "converter": "hyperframes convert",
        "converter_version": __version__,
        "config_key": config_key(config),
        "source": {"name": src.name, "sha256": digest, "bytes": src.stat().st_size},
        "settings": config.fingerprint(),
        "streams": streams,
        "host": socket.gethostname(),
        "converted_ns": time.time_ns(),
    }
    previous = conversion_record(reader.metadata)
    if previous is not None:
        record["previous"] = previous
    m = reader.metadata
    return dataclasses.replace(m, extra={**m.extra, "conversion": record})


def _write(
    reader: HyperframeReader,
    blocks: list[Block],
    plans: tuple[StreamPlan, ...],
    tracks: dict[int, CameraTrack],
    staged: Path,
    meta: FileMetadata,
    config: ConvertConfig,
    progress: Progress | None,
) -> None:
    streams: list[StreamInfo] = [p.output for p in plans]
    codecs = {p.source.id: p.codec for p in plans}
    index, aux, quarantine = reader.index, reader.aux(), reader.quarantine()
    writer = HyperframeWriter(staged, streams, reader.window_ns, meta, codecs=codecs)
    done_frames = done_bytes = 0
    total = len(index) + len(quarantine)
    cameras = _Cameras(tracks, index, config.video.threads)
    try:
        try:
            ahead: deque[list[Future[None]]] = deque(
                cameras.schedule(b) for b in blocks[:_LOOKAHEAD]
            )
            for i, block in enumerate(blocks):
                for f in ahead.popleft():
                    f.result()
                if i + _LOOKAHEAD < len(blocks):
                    ahead.append(cameras.schedule(blocks[i + _LOOKAHEAD]))
                frames = [_frame(e, reader, index, aux, quarantine, tracks) for e in block.entries]
                writer.write_window(block.window_id, frames, missing=block.missing)
                done_frames += len(block.entries)
                done_bytes += _stored_bytes(block.entries, index, quarantine)
                if progress is not None:
                    progress(done_frames, total, done_bytes)
        finally:
            cameras.close()
        writer.finalize()
    except BaseException:
        _discard(writer)
        raise


class _Cameras:
    """One single-thread executor per camera: a camera's blocks are encoded in order, the
    cameras in parallel (at most ``threads`` at once), up to ``_LOOKAHEAD`` blocks ahead of
    the block being written."""

    def __init__(
        self, tracks: dict[int, CameraTrack], index: np.ndarray, threads: int | None
    ) -> None:
        self.tracks = tracks
        self.index = index
        self._slots = threading.BoundedSemaphore(threads or max(1, len(tracks)))
        self._pools = {
            sid: ThreadPoolExecutor(1, thread_name_prefix=f"hf-convert-{t.name}")
            for sid, t in tracks.items()
        }

    def _run(self, track: CameraTrack, position: int) -> None:
        with self._slots:
            track.encode_through(position)

    def schedule(self, block: Block) -> list[Future[None]]:
        """Start encoding every camera frame of ``block``; one future per camera."""
        if not self.tracks:
            return []
        e = block.entries[block.entries >= 0]
        sids = self.index["stream_id"][e]
        futures = []
        for sid, track in self.tracks.items():
            mine = e[sids == sid]
            if len(mine):
                last = int(mine.max()) - track.base
                futures.append(self._pools[sid].submit(self._run, track, last))
        return futures

    def close(self) -> None:
        """Stop: queued work is cancelled, running work finishes."""
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)


def _discard(writer: HyperframeWriter) -> None:
    """Stop a failed writer and delete its ``.tmp``: a failed conversion leaves no output."""
    try:
        writer.abort()
    except Exception as exc:  # the original error matters more; the file goes anyway
        log.debug("abort of %s failed: %s", writer.tmp_path, exc)
    finally:
        writer.tmp_path.unlink(missing_ok=True)
        writer.path.unlink(missing_ok=True)


def _frame(
    e: np.int64,
    reader: HyperframeReader,
    index: np.ndarray,
    aux: np.ndarray,
    quarantine: np.ndarray,
    tracks: dict[int, CameraTrack],
) -> WriteFrame:
    p = int(e)
    if p >= 0:
        row, extra = index[p], aux[p]
    else:
        row = extra = quarantine[-p - 1]
    sid, flags, ts = (
        int(row["stream_id"]),
        int(row["flags"]) & _USER_FLAGS,
        int(row["timestamp_ns"]),
    )
    track = tracks.get(sid)
    payload: Any
    if track is None:
        payload = reader.frame_at(p).data if p >= 0 else reader.quarantined_frame(-p - 1).data
    else:
        if p >= 0:
            au = track.take(p - track.base)
        else:
            au = track.encode_quarantined(-p - 1, reader.quarantined_frame(-p - 1).data, ts)
        payload = au.data
        flags = (flags & ~_KEY) | (_KEY if au.keyframe else 0)
    return WriteFrame(
        sid,
        ts,
        payload,
        flags=flags,
        stream_index=int(row["stream_index"]),
        receive_ns=int(extra["receive_ns"]),
        duration_ns=int(extra["duration_ns"]),
    )


def _stored_bytes(entries: np.ndarray, index: np.ndarray, quarantine: np.ndarray) -> int:
    pos, q = entries[entries >= 0], -entries[entries < 0] - 1
    return int(
        index["size"][pos].astype(np.int64).sum() + quarantine["size"][q].astype(np.int64).sum()
    )


def _result(
    reader: HyperframeReader,
    src: Path,
    final: Path,
    digest: str,
    config: ConvertConfig,
    plans: tuple[StreamPlan, ...],
    tracks: dict[int, CameraTrack],
    report: VerifyReport,
    t0: float,
) -> ConversionResult:
    before = stored_sizes(reader)
    with HyperframeReader(final, verify=False) as out:
        after = stored_sizes(out)
        frames: dict[int, int] = {}
        for sid in out.streams:
            lo, hi = out.stream_slice(sid)
            frames[sid] = hi - lo
    result = ConversionResult(
        input=os.fspath(src),
        output=os.fspath(final),
        sha256=digest,
        config_key=config_key(config),
        seconds=round(time.monotonic() - t0, 3),
        frames=int(sum(frames.values())),
        bytes_in=src.stat().st_size,
        bytes_out=final.stat().st_size,
    )
    for p in plans:
        sid = p.source.id
        cam = report.cameras.get(p.source.name)
        quality = cam.to_dict() if cam is not None else None
        if quality is not None and sid in tracks:
            t = tracks[sid]
            quality.update(
                quality_start=config.video.quality,
                quality_best=t.best_quality_used,
                gops_reencoded=t.gops_reencoded,
            )
        result.streams.append(
            StreamResult(
                name=p.source.name,
                kind=str(p.source.kind),
                treatment=str(p.treatment),
                frames=frames[sid],
                bytes_in=before[sid],
                bytes_out=after[sid],
                encoder=tracks[sid].encoder_name if sid in tracks else None,
                quality=quality,
            )
        )
    return result
