"""The checks a converted file must pass before it gets its final name.

:func:`verify_conversion` opens the finished (not yet published) output next
to its input and checks, in this order, every rule of :data:`RULES`; the
first broken rule raises :class:`~hyperframes.converter.errors.VerificationError` naming
the file, the stream, the frame and the rule. It reads both files frame by
frame (memory stays bounded) and decodes camera frames by random access, as
a training loader would:

- container: ``hyperframes verify`` (structure, every CRC32C);
- metadata, stream table, window blocks, missing streams;
- per stream (indexed and quarantined frames): the same count, timestamps,
  stream indices, flags, receive times and durations, each frame in the
  block it was stored in;
- lossless streams: every payload decodes to exactly the input bytes;
- H.265 streams: every rule of the bitstream convention on every access
  unit (:func:`hyperframes.video.check_stored_stream`), and the PSNR floor
  on every frame, two ways. Every frame: the converter measured it while
  encoding (``encoded``: x265's PSNR of each plane of its reconstruction, or
  where an encoder reports none its access unit decoded and compared with
  the encoder's input; the per-plane errors carried to R'G'B', plus what the
  colour conversion loses on the stream's first frame), an estimate of its
  R'G'B' PSNR against the source. A sample: GOPs (first, last and one random
  middle frame of each sampled GOP; the first and last GOP always) decoded
  again from the output file by random access, as a loader reads them, and
  compared exactly in R'G'B' with the source picture (the JPEG decoded, or
  the raw frame); the sample also says how far off the estimate was. Both
  must be at or above the floor. Without ``encoded`` only the sample is
  checked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from hyperframes.converter._camera import source_rgb
from hyperframes.converter._layout import source_blocks
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.errors import VerificationError
from hyperframes.converter.plan import StreamPlan
from hyperframes.format.layout import FrameFlags
from hyperframes.reader import HyperframeReader
from hyperframes.verify import verify_file
from hyperframes.video import (
    RULES as BITSTREAM_RULES,
)
from hyperframes.video import (
    StreamChecker,
    VideoError,
    VideoStream,
    check_stored_stream,
    create_decoder,
)
from hyperframes.video.quality import psnr

__all__ = [
    "RULES",
    "CameraQuality",
    "VerifyReport",
    "psnr",
    "sample_frames",
    "stored_sizes",
    "verify_conversion",
]

RULES: Final = {
    "container": "the output passes `hyperframes verify` (structure and every CRC32C)",
    "metadata": "file metadata equals the input's, plus the conversion record in extra",
    "streams": "same ids, names, kinds, timestamp sources and rates; encodings as planned",
    "windows": "same window blocks (ids, flags, missing streams); each frame in its input block",
    "frame_count": "per stream the same number of indexed and of quarantined frames",
    "timestamps": "per stream the same timestamps and stream indices, in the same order",
    "flags": "same HW_TIMESTAMP, LATE, QUARANTINED flags; lossless streams also KEYFRAME",
    "aux": "the same receive time and exposure/scan duration per frame",
    "lossless_bytes": "every frame of a lossless stream decodes to exactly the input bytes",
    "psnr_floor": "every camera frame at or above the PSNR floor (dB, R'G'B')",
    **BITSTREAM_RULES,
}

_KEPT_FLAGS: Final = int(FrameFlags.HW_TIMESTAMP | FrameFlags.LATE | FrameFlags.QUARANTINED)
_KEY: Final = int(FrameFlags.KEYFRAME)


@dataclass(slots=True)
class CameraQuality:
    """PSNR of one H.265 stream: of every frame (when measured at encode time) and of the
    frames decoded again from the output (the sample and every quarantined frame)."""

    stream: str
    gops: int = 0
    gops_sampled: int = 0
    values: list[float] = field(default_factory=list)  # decoded from the output file
    every: np.ndarray | None = None  # per indexed frame, estimated R'G'B' PSNR
    every_by: str = "decoded at encode time"  # how ``every`` was measured
    estimate_error_db: tuple[float, float] | None = None  # sample: measured - estimate
    worst_frame: int | None = None

    @property
    def minimum(self) -> float | None:
        """Lowest PSNR (dB) of every frame checked."""
        lows = [min(self.values)] if self.values else []
        if self.every is not None and self.every.size:
            lows.append(float(self.every.min()))
        return min(lows) if lows else None

    @property
    def median(self) -> float | None:
        """Median PSNR (dB) of every frame (of the sample without encode-time measures)."""
        if self.every is not None and self.every.size:
            return float(np.median(self.every))
        return float(np.median(self.values)) if self.values else None

    @property
    def method(self) -> str:
        """How the frames were checked, in words (for the result and the summary)."""
        decoded = f"{len(self.values)} frames decoded again from the output vs the source"
        if self.every is None:
            return f"sample only: {decoded}"
        gap = self.estimate_error_db
        within = f" (estimate {gap[0]:+.2f}..{gap[1]:+.2f} dB off there)" if gap else ""
        return (
            f"every frame ({self.every.size}) {self.every_by} vs the encoder input, "
            f"R'G'B' estimate; and {decoded}{within}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinite PSNR of identical frames as None)."""

        def finite(v: float | None) -> float | None:
            return None if v is None or math.isinf(v) else round(v, 3)

        return {
            "psnr_min_db": finite(self.minimum),
            "psnr_median_db": finite(self.median),
            "checked": "every_frame" if self.every is not None else "sample",
            "frames_checked": int(self.every.size) if self.every is not None else len(self.values),
            "samples": len(self.values),
            "sample_psnr_min_db": finite(min(self.values)) if self.values else None,
            "method": self.method,
            "estimate_error_db": (
                [round(x, 3) for x in self.estimate_error_db] if self.estimate_error_db else None
            ),
            "gops": self.gops,
            "gops_sampled": self.gops_sampled,
            "worst_frame": self.worst_frame,
        }


@dataclass(slots=True)
class VerifyReport:
    """What verification measured: PSNR per camera and the frames compared."""

    cameras: dict[str, CameraQuality] = field(default_factory=dict)
    frames_compared: int = 0
    lossless_bytes: int = 0


def sample_frames(
    keyframes: np.ndarray, count: int, fraction: float, rng: np.random.Generator
) -> tuple[list[int], int, int]:
    """Frames to decode: (positions in visiting order, GOPs, GOPs sampled).

    A GOP runs from one keyframe to the frame before the next. Sampled GOPs:
    the first, the last and a random ``fraction`` of the rest; in each, its
    first and last frame and one random frame between. GOPs are visited in
    random order (random access, not one forward pass).
    """
    if count == 0 or len(keyframes) == 0:
        return [], 0, 0
    starts = [int(k) for k in keyframes]
    ends = [*(s - 1 for s in starts[1:]), count - 1]
    n = len(starts)
    want = min(n, max(1, math.ceil(fraction * n)))
    chosen = {0, n - 1}
    rest = list(range(1, n - 1))
    extra = max(0, want - len(chosen))
    if extra and rest:
        chosen.update(int(g) for g in rng.choice(rest, size=min(extra, len(rest)), replace=False))
    gops = sorted(chosen)
    rng.shuffle(gops)
    order: list[int] = []
    for g in gops:
        a, b = starts[g], ends[g]
        picks = [a, b] if b > a else [a]
        if b - a > 1:
            picks.insert(1, int(rng.integers(a + 1, b)))
        order += picks
    return order, n, len(chosen)


def _fail(path: str, what: str, rule: str, **where: Any) -> VerificationError:
    return VerificationError(path, what, rule=rule, **where)


def verify_conversion(
    output: str | os.PathLike[str],
    source: HyperframeReader,
    plans: tuple[StreamPlan, ...],
    config: ConvertConfig,
    *,
    seed: int = 0,
    encoded: dict[str, np.ndarray] | None = None,
    encoded_by: dict[str, str] | None = None,
) -> VerifyReport:
    """Check ``output`` against ``source`` (see the module docstring); raises on the first problem.

    ``encoded``: per camera name, the R'G'B' mean squared error of every indexed
    frame measured at encode time (:attr:`hyperframes.converter._camera.CameraTrack.codec_mse`);
    ``encoded_by``: per camera, how (:attr:`hyperframes.converter._camera.CameraTrack.checked_by`).
    Errors name the input file (the output has no name of its own yet).
    """
    path = os.fspath(source.path)
    result = verify_file(output)
    if not result.ok:
        raise _fail(path, f"output: {result.problems[0]}", "container")
    report = VerifyReport()
    with HyperframeReader(output) as out:
        _check_metadata(path, source, out, plans)
        _check_entries(path, source, out, plans, report)
        for plan in plans:
            if plan.lossless:
                _check_lossless(path, source, out, plan, report)
            else:
                _check_bitstream(path, out, plan, config)
                quality = _check_psnr(
                    path,
                    source,
                    out,
                    plan,
                    config,
                    np.random.default_rng([seed, plan.source.id]),
                    None if encoded is None else encoded.get(plan.source.name),
                    (encoded_by or {}).get(plan.source.name),
                )
                report.cameras[plan.source.name] = quality
    return report


def _check_metadata(
    path: str, src: HyperframeReader, out: HyperframeReader, plans: tuple[StreamPlan, ...]
) -> None:
    a, b = src.metadata, out.metadata
    extra = {k: v for k, v in b.extra.items() if k != "conversion"}
    if (a.vehicle_id, a.recorder_version, a.segment_seq, a.created_ns) != (
        b.vehicle_id,
        b.recorder_version,
        b.segment_seq,
        b.created_ns,
    ) or extra != {k: v for k, v in a.extra.items() if k != "conversion"}:
        raise _fail(path, f"file metadata differs: {a.to_dict()} -> {b.to_dict()}", "metadata")
    if "conversion" not in b.extra:
        raise _fail(path, "no conversion record in the file metadata", "metadata")
    if out.window_ns != src.window_ns:
        raise _fail(path, f"window length {out.window_ns} ns, input {src.window_ns}", "windows")
    if sorted(out.streams) != sorted(src.streams):
        raise _fail(
            path, f"stream ids {sorted(out.streams)}, input {sorted(src.streams)}", "streams"
        )
    for plan in plans:
        o, s, want = out.streams[plan.source.id], plan.source, plan.output
        same = (o.name, o.kind, o.timestamp_source, o.rate_hz) == (
            s.name,
            s.kind,
            s.timestamp_source,
            s.rate_hz,
        ) and (o.encoding, o.dtype, o.shape) == (want.encoding, want.dtype, want.shape)
        if not same:
            raise _fail(
                path,
                f"stream table entry {o.to_dict()}, planned {want.to_dict()}",
                "streams",
                stream=s.name,
            )
    if out.missing != src.missing:
        raise _fail(
            path, f"missing streams per window differ: {out.missing} vs {src.missing}", "windows"
        )
    wa, wb = src.window_table, out.window_table
    for name in ("window_id", "frame_count", "flags"):
        if len(wa) != len(wb) or not np.array_equal(wa[name], wb[name]):
            raise _fail(path, f"window table {name} differs from the input's", "windows")


def _block_of(reader: HyperframeReader) -> tuple[np.ndarray, np.ndarray]:
    """For each index entry and each quarantine row: the number of its block."""
    of_index = np.empty(len(reader.index), np.int64)
    of_quarantine = np.empty(len(reader.quarantine()), np.int64)
    for b, block in enumerate(source_blocks(reader)):
        e = block.entries
        of_index[e[e >= 0]] = b
        of_quarantine[-e[e < 0] - 1] = b
    return of_index, of_quarantine


def _check_entries(
    path: str,
    src: HyperframeReader,
    out: HyperframeReader,
    plans: tuple[StreamPlan, ...],
    report: VerifyReport,
) -> None:
    names = {p.source.id: p.source.name for p in plans}
    lossless = np.array([p.source.id for p in plans if p.lossless], np.int64)
    blocks_a, qblocks_a = _block_of(src)
    blocks_b, qblocks_b = _block_of(out)
    for table, blocks, what in (
        ((src.index, out.index), (blocks_a, blocks_b), "indexed"),
        ((src.quarantine(), out.quarantine()), (qblocks_a, qblocks_b), "quarantined"),
    ):
        a, b = table
        for plan in plans:
            sid = plan.source.id
            na = int((a["stream_id"] == sid).sum())
            nb = int((b["stream_id"] == sid).sum())
            if na != nb:
                raise _fail(
                    path,
                    f"{nb} {what} frames, input has {na}",
                    "frame_count",
                    stream=plan.source.name,
                )
        if len(a) != len(b):  # a stream id outside the plan
            raise _fail(path, f"{len(b)} {what} frames, input has {len(a)}", "frame_count")
        flags_a, flags_b = a["flags"].astype(np.int64), b["flags"].astype(np.int64)
        key_mask = np.where(np.isin(a["stream_id"], lossless), _KEY, 0)
        checks = (
            ("timestamps", a["stream_id"] != b["stream_id"]),
            ("timestamps", a["timestamp_ns"] != b["timestamp_ns"]),
            ("timestamps", a["stream_index"] != b["stream_index"]),
            ("flags", (flags_a & (_KEPT_FLAGS | key_mask)) != (flags_b & (_KEPT_FLAGS | key_mask))),
            ("windows", blocks[0] != blocks[1]),
        )
        for rule, bad in checks:
            _raise_first(path, rule, bad, a, names, what)
        aux_a = src.aux() if what == "indexed" else a
        aux_b = out.aux() if what == "indexed" else b
        for name in ("receive_ns", "duration_ns"):
            _raise_first(path, "aux", aux_a[name] != aux_b[name], a, names, what)
        report.frames_compared += len(a)


def _raise_first(
    path: str, rule: str, bad: np.ndarray, table: np.ndarray, names: dict[int, str], what: str
) -> None:
    if not np.any(bad):
        return
    i = int(np.flatnonzero(bad)[0])
    sid = int(table["stream_id"][i])
    first = int(np.flatnonzero(table["stream_id"] == sid)[0])
    label = "quarantined frame" if what == "quarantined" else "frame"
    raise _fail(
        path,
        f"{label} differs from the input ({RULES[rule]})",
        rule,
        stream=names.get(sid, str(sid)),
        frame=i - first,
        timestamp_ns=int(table["timestamp_ns"][i]),
    )


def _check_lossless(
    path: str, src: HyperframeReader, out: HyperframeReader, plan: StreamPlan, report: VerifyReport
) -> None:
    base, end = src.stream_slice(plan.source.id)
    count = end - base
    for r in range(count):
        a, b = src.frame_at(base + r), out.frame_at(base + r)
        if a.data.size != b.data.size or not np.array_equal(a.data, b.data):
            raise _fail(
                path,
                f"payload differs from the input ({a.data.size} -> {b.data.size} bytes)",
                "lossless_bytes",
                stream=plan.source.name,
                frame=r,
                timestamp_ns=a.timestamp_ns,
            )
        report.lossless_bytes += int(a.data.size)
    for q in np.flatnonzero(src.quarantine()["stream_id"] == plan.source.id):
        a, b = src.quarantined_frame(int(q)), out.quarantined_frame(int(q))
        if not np.array_equal(a.data, b.data):
            raise _fail(
                path,
                f"quarantined frame {int(q)}: payload differs from the input",
                "lossless_bytes",
                stream=plan.source.name,
            )
        report.lossless_bytes += int(a.data.size)


def _check_bitstream(
    path: str, out: HyperframeReader, plan: StreamPlan, config: ConvertConfig
) -> None:
    name = plan.source.name
    found = check_stored_stream(out, plan.source.id, max_gop=config.video.max_gop)
    if found:
        v = found[0]
        ts = (
            int(out.timestamps(plan.source.id)[v.frame])
            if v.frame < len(out.timestamps(name))
            else None
        )
        raise _fail(path, v.detail, v.rule, stream=name, frame=v.frame, timestamp_ns=ts)
    for q in np.flatnonzero(out.quarantine()["stream_id"] == plan.source.id):
        frame = out.quarantined_frame(int(q))
        problems = StreamChecker().check(frame.data.tobytes(), frame.keyframe)
        if problems:
            raise _fail(
                path,
                f"quarantined frame {int(q)}: {problems[0].detail}",
                problems[0].rule,
                stream=name,
            )


def _check_psnr(
    path: str,
    src: HyperframeReader,
    out: HyperframeReader,
    plan: StreamPlan,
    config: ConvertConfig,
    rng: np.random.Generator,
    encoded: np.ndarray | None = None,
    encoded_by: str | None = None,
) -> CameraQuality:
    name = plan.source.name
    floor = config.verify.psnr_floor_db
    quality = CameraQuality(name)
    if encoded_by is not None:
        quality.every_by = encoded_by
    base, _end = src.stream_slice(plan.source.id)
    sampled: list[tuple[float, int]] = []  # (PSNR, position) decoded from the output
    try:
        with VideoStream(out, plan.source.id, decoder=config.verify.decoder, output="rgb") as vs:
            order, quality.gops, quality.gops_sampled = sample_frames(
                vs.keyframes, len(vs), config.verify.sample_gops, rng
            )
            for r in order:
                decoded = vs.frame_at(r)
                value = psnr(_host(decoded.image), source_rgb(plan, src.frame_at(base + r).data))
                quality.values.append(value)
                sampled.append((value, r))
        decoder = create_decoder(config.verify.decoder, "rgb")
        for q in np.flatnonzero(out.quarantine()["stream_id"] == plan.source.id):
            decoder.reset()
            frame = out.quarantined_frame(int(q))
            pictures = decoder.decode(frame.data, int(q)) + decoder.flush()
            if len(pictures) != 1:
                raise _fail(
                    path,
                    f"quarantined frame {int(q)} decoded to {len(pictures)} pictures",
                    "one_picture",
                    stream=name,
                )
            ref = source_rgb(plan, src.quarantined_frame(int(q)).data)
            quality.values.append(psnr(_host(pictures[0].image), ref))
        decoder.close()
    except VideoError as exc:
        raise _fail(path, f"decoding failed: {exc}", "annexb", stream=name) from exc
    candidates = list(sampled)
    if encoded is not None:
        if len(encoded) != len(out.timestamps(plan.source.id)) or np.isnan(encoded).any():
            raise _fail(path, "frames without an encode-time measure", "psnr_floor", stream=name)
        with np.errstate(divide="ignore"):
            quality.every = np.where(encoded > 0, 10.0 * np.log10(255.0**2 / encoded), np.inf)
        gaps = [v - float(quality.every[r]) for v, r in sampled if np.isfinite(v)]
        quality.estimate_error_db = (min(gaps), max(gaps)) if gaps else None
        if quality.every.size:
            r = int(np.argmin(quality.every))
            candidates.append((float(quality.every[r]), r))
    worst = min(candidates) if candidates else None
    if worst is not None:
        quality.worst_frame = worst[1]
    low = quality.minimum
    if low is not None and low < floor:
        at = worst if worst is not None and worst[0] == low else None
        raise _fail(
            path,
            f"PSNR {low:.2f} dB is below the floor of {floor:g} dB "
            f"(median {quality.median:.2f} dB; checked {quality.method})",
            "psnr_floor",
            stream=name,
            frame=at[1] if at else None,
            timestamp_ns=int(out.timestamps(plan.source.id)[at[1]]) if at else None,
        )
    return quality


def _host(image: Any) -> np.ndarray:
    """A decoded picture as a host numpy array (NVDEC may return a CUDA tensor)."""
    if isinstance(image, np.ndarray):
        return image
    return np.asarray(image.cpu().numpy())


def stored_sizes(reader: HyperframeReader) -> dict[int, int]:
    """Stored bytes per stream id (indexed and quarantined frames)."""
    sizes: dict[int, int] = dict.fromkeys(reader.streams, 0)
    for table in (reader.index, reader.quarantine()):
        ids, sz = table["stream_id"], table["size"].astype(np.int64)
        for sid in sizes:
            sizes[sid] += int(sz[ids == sid].sum())
    return sizes
