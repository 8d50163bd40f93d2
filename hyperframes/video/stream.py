"""Random and streaming access to a stored H.265 camera stream: :class:`VideoStream`.

A stream with encoding ``h265`` holds one access unit per index entry; the
index KEYFRAME flag marks the IDRs. ``frame_at(i)`` decodes from the nearest
IDR at or before ``i``. The stream remembers how far its decoder has got, so
consecutive requests (``frames()``, or ``frame_at(i)`` then ``frame_at(i+1)``)
decode forward one access unit each instead of restarting at the keyframe
(the streaming pattern of temporal models); a jump backwards, or forwards
past the next IDR, seeks: the decoder is reset and fed from that IDR.

One :class:`VideoStream` per camera and per process (DataLoader worker), like
the reader it reads from; it is not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np

from hyperframes.errors import FrameNotFoundError
from hyperframes.format import search
from hyperframes.format.layout import FrameFlags
from hyperframes.reader import HyperframeReader, Mode
from hyperframes.video.decode import Decoder, Output, create_decoder
from hyperframes.video.errors import BitstreamError, DecodeError, NotVideoStreamError
from hyperframes.video.rules import StreamChecker, Violation

__all__ = ["VideoFrame", "VideoStream", "AccessStats", "check_stored_stream"]

_KEYFRAME = int(FrameFlags.KEYFRAME)


@dataclass(frozen=True, slots=True)
class VideoFrame:
    """A decoded camera frame: its position in the stream, capture time and picture."""

    index: int  # 0-based position among the stream's frames
    timestamp_ns: int
    keyframe: bool
    image: Any  # see hyperframes.video.decode for the types per output and decoder


@dataclass(slots=True)
class AccessStats:
    """Counters of a :class:`VideoStream`: how requests were served."""

    requests: int = 0
    seeks: int = 0  # decoder resets and restarts at an IDR
    fed: int = 0  # access units decoded


def _stream_positions(reader: HyperframeReader, sid: int) -> tuple[int, np.ndarray]:
    """The stream's first index position and its frames' flags."""
    lo, hi = reader.stream_slice(sid)
    return lo, reader.index["flags"][lo:hi]


class VideoStream:
    """Decoded frames of one ``h265`` stream of a :class:`HyperframeReader`.

    ``decoder`` is a name for :func:`~hyperframes.video.decode.create_decoder`
    (``"auto"``, ``"cpu"``, ``"nvdec"``) or a ready :class:`Decoder`; one
    decoder serves every request of this stream (same resolution and codec).
    """

    def __init__(
        self,
        reader: HyperframeReader,
        stream: int | str,
        *,
        decoder: str | Decoder = "auto",
        output: Output = "rgb",
        **decoder_options: Any,
    ) -> None:
        info = reader.stream(stream)
        if info.encoding != "h265":
            raise NotVideoStreamError(
                f"{reader.path}: stream {info.id} ({info.name}) has encoding {info.encoding!r}, "
                "not 'h265'"
            )
        self.reader = reader
        self.info = info
        self._base, flags = _stream_positions(reader, info.id)
        self._timestamps = reader.timestamps(info.id)
        self._keyframes = np.flatnonzero(flags.astype(np.int64) & _KEYFRAME)
        if isinstance(decoder, str):
            decoder = create_decoder(decoder, output, **decoder_options)
        self.decoder: Decoder = decoder
        self._next: int | None = None  # position the decoder would produce next if fed on
        self.stats = AccessStats()

    # --- facts -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def timestamps(self) -> np.ndarray:
        """Capture timestamps of the stream's frames, in order (uint64)."""
        return self._timestamps

    @property
    def keyframes(self) -> np.ndarray:
        """Positions of the IDR access units (the KEYFRAME flag of the index)."""
        return self._keyframes

    def index_of(
        self,
        timestamp_ns: int,
        mode: Mode | Literal["exact"] = "exact",
        tolerance_ns: int | None = None,
    ) -> int:
        """The position of a frame by timestamp: ``"exact"`` (default) or as :meth:`reader.find`.

        Raises :class:`~hyperframes.errors.FrameNotFoundError` when there is no such frame.
        """
        if mode != "exact":
            return self.reader.find(self.info.id, timestamp_ns, mode, tolerance_ns) - self._base
        ts = self._timestamps
        i = int(np.searchsorted(ts, np.uint64(max(0, timestamp_ns)), "left"))
        if i < len(ts) and int(ts[i]) == timestamp_ns:
            return i
        j = search.find(ts, timestamp_ns, "nearest")
        near = int(ts[j]) if j is not None else None
        raise FrameNotFoundError(
            str(self.reader.path), self.info.id, timestamp_ns, "no frame at exactly this time", near
        )

    # --- access ------------------------------------------------------------

    def frame_at(
        self,
        index: int | None = None,
        *,
        timestamp_ns: int | None = None,
        mode: Mode | Literal["exact"] = "exact",
        tolerance_ns: int | None = None,
    ) -> VideoFrame:
        """The frame at stream position ``index`` or at ``timestamp_ns`` (one of the two).

        ``mode``/``tolerance_ns`` apply to ``timestamp_ns`` (see :meth:`index_of`).
        """
        if timestamp_ns is not None:
            if index is not None:
                raise TypeError("frame_at takes index or timestamp_ns, not both")
            index = self.index_of(timestamp_ns, mode, tolerance_ns)
        elif index is None:
            raise TypeError("frame_at needs index or timestamp_ns")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"frame {index} out of range (stream has {n})")
        index %= n
        self.stats.requests += 1
        return VideoFrame(
            index,
            int(self._timestamps[index]),
            bool(len(self._keyframes))
            and int(self._keyframes[np.searchsorted(self._keyframes, index, "right") - 1]) == index,
            self._decode_to(index),
        )

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[VideoFrame]:
        """Frames ``start .. stop-1`` in order, decoded forward (one seek at most)."""
        stop = len(self) if stop is None else min(stop, len(self))
        for i in range(max(0, start), stop):
            yield self.frame_at(i)

    def frames_between(self, start_ns: int, end_ns: int) -> Iterator[VideoFrame]:
        """Frames with ``start_ns <= timestamp <= end_ns``, in order."""
        ts = self._timestamps
        a = int(np.searchsorted(ts, np.uint64(max(0, start_ns)), "left"))
        b = int(np.searchsorted(ts, np.uint64(max(0, end_ns)), "right"))
        return self.frames(a, b)

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Release the decoder."""
        self.decoder.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- internals ------------------------------------------------------------

    def _keyframe_before(self, index: int) -> int:
        k = int(np.searchsorted(self._keyframes, index, "right")) - 1
        if k < 0:
            raise BitstreamError(
                "starts_with_idr", index, f"no IDR at or before frame {index} of {self.info.name}"
            )
        return int(self._keyframes[k])

    def _decode_to(self, target: int) -> Any:
        kf = self._keyframe_before(target)
        if self._next is not None and kf <= self._next <= target:
            start = self._next  # streaming: decode forward from where we are
        else:
            self.decoder.reset()
            self._next = None
            self.stats.seeks += 1
            start = kf
        found: Any = None
        for pos in range(start, target + 1):
            au = self.reader.frame_at(self._base + pos).data
            self._next = None  # in case decode raises
            for pic in self.decoder.decode(au, pos, convert=pos == target):
                if pic.pts == target:
                    found = pic.image
            self._next = pos + 1
            self.stats.fed += 1
        if found is None:  # a decoder that held the picture back: drain it
            for pic in self.decoder.flush():
                if pic.pts == target:
                    found = pic.image
            self._next = None
        if found is None:
            raise DecodeError(
                f"{self.reader.path}: stream {self.info.name}: no picture for frame {target}"
            )
        return found


def check_stored_stream(
    reader: HyperframeReader, stream: int | str, max_gop: int | None = None
) -> list[Violation]:
    """Check every access unit of a stored ``h265`` stream, with its KEYFRAME flag."""
    info = reader.stream(stream)
    if info.encoding != "h265":
        raise NotVideoStreamError(f"stream {info.id} ({info.name}) is {info.encoding!r}")
    checker = StreamChecker(max_gop)
    found: list[Violation] = []
    for frame in reader.frames(info.id):
        found += checker.check(frame.data.tobytes(), frame.keyframe)
    return found
