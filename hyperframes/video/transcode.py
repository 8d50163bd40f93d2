"""Camera frames in, H.265 access units out: the loop a converter runs per camera stream.

Pictures (JPEG bytes, RGB arrays or :class:`~hyperframes.video.color.Yuv420`)
are converted to BT.709 limited 4:2:0 on a small thread pool (simplejpeg
releases the GIL) while the encoder works on the previous ones; the
:class:`~hyperframes.video.gop.IdrPlanner` decides each frame's IDR from its
timestamp. Store each result with ``flags=FrameFlags.KEYFRAME`` (plus
``HW_TIMESTAMP`` for hardware-stamped cameras) exactly when ``keyframe`` is
True.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from hyperframes.video.color import Yuv420
from hyperframes.video.encode import EncodedAU, Encoder
from hyperframes.video.gop import IdrPlanner
from hyperframes.video.pictures import Picture, to_yuv420

__all__ = ["EncodedFrame", "encode_pictures"]


@dataclass(frozen=True, slots=True)
class EncodedFrame:
    """One camera frame as stored in an ``h265`` stream."""

    timestamp_ns: int
    data: bytes  # one Annex-B access unit
    keyframe: bool  # an IDR: set FrameFlags.KEYFRAME on its index entry


def _frames(aus: list[EncodedAU]) -> Iterator[EncodedFrame]:
    for au in aus:
        yield EncodedFrame(au.pts, au.data, au.keyframe)


def encode_pictures(
    frames: Iterable[tuple[int, Picture]],
    encoder: Encoder,
    planner: IdrPlanner,
    *,
    workers: int = 1,
) -> Iterator[EncodedFrame]:
    """Encode ``(timestamp_ns, picture)`` pairs given in timestamp order; yields in that order.

    The encoder is drained at the end (``flush``); it can not be used afterwards.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with ThreadPoolExecutor(workers, thread_name_prefix="hf-video-convert") as pool:
        queued: deque[tuple[int, Future[Yuv420]]] = deque()
        for ts, picture in frames:
            queued.append((ts, pool.submit(to_yuv420, picture)))
            if len(queued) > workers:
                t, fut = queued.popleft()
                yield from _frames(encoder.encode(fut.result(), t, idr=planner.is_idr(t)))
        while queued:
            t, fut = queued.popleft()
            idr = planner.is_idr(t, last=not queued)
            yield from _frames(encoder.encode(fut.result(), t, idr=idr))
    yield from _frames(encoder.flush())
