"""The ``cpu`` decoder: FFmpeg's HEVC decoder through PyAV.

One ``CodecContext.create("hevc", "r")`` per decoder, reused across seeks,
fed ``av.Packet(au)`` per access unit (not the parser, which holds back the
last frame); slice threading only, so a picture comes out of the call that
fed its access unit; ``decode(None)`` drains and ``flush_buffers()`` resets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hyperframes.video._deps import require
from hyperframes.video.backend import DecodedPicture, Output, check_output
from hyperframes.video.color import Yuv420
from hyperframes.video.errors import DecodeError

__all__ = ["CpuDecoder"]


class CpuDecoder:
    """PyAV HEVC decoding on the CPU (see the module docstring)."""

    name = "cpu"

    def __init__(self, output: Output = "rgb", *, threads: int = 0) -> None:
        check_output(output)
        self._av: Any = require("av")
        self.output: Output = output
        self._threads = threads
        self._ctx: Any = self._open()
        cs = self._av.video.reformatter
        # RGB out: BT.709 limited in, full range out, as color.yuv420_to_rgb does
        self._rgb_args = {
            "format": "rgb24",
            "src_colorspace": cs.Colorspace.ITU709,
            "src_color_range": cs.ColorRange.MPEG,
            "dst_color_range": cs.ColorRange.JPEG,
        }  # ACCURATE_RND was measured 2-3 levels off on flat colours; the default is within 1

    def _open(self) -> Any:
        ctx = self._av.CodecContext.create("hevc", "r")
        ctx.thread_type = "SLICE"  # frame threading would delay every picture
        ctx.thread_count = self._threads
        return ctx

    def decode(
        self, au: bytes | np.ndarray, pts: int, *, convert: bool = True
    ) -> list[DecodedPicture]:
        """Feed one access unit; returns its picture (none if the data was not decodable);
        with ``convert=False`` its ``image`` is None (no copy, no colour conversion)."""
        data = au.tobytes() if isinstance(au, np.ndarray) else bytes(au)
        packet = self._av.Packet(data)
        packet.pts = pts
        try:
            frames = self._ctx.decode(packet)
        except self._av.error.FFmpegError as exc:
            raise DecodeError(f"HEVC decoder rejected access unit pts={pts}: {exc}") from None
        if not convert:
            return [DecodedPicture(_pts(f), None) for f in frames]
        return [self._picture(f) for f in frames]

    def flush(self) -> list[DecodedPicture]:
        """Drain, then reset so that the next access unit (an IDR) starts afresh."""
        try:
            frames = self._ctx.decode(None)
        except self._av.error.FFmpegError as exc:
            raise DecodeError(f"HEVC decoder failed to drain: {exc}") from None
        out = [self._picture(f) for f in frames]
        self.reset()
        return out

    def reset(self) -> None:
        """Drop references and held pictures (``flush_buffers``)."""
        self._ctx.flush_buffers()

    def close(self) -> None:
        """Release the codec context."""
        self._ctx = None

    def _picture(self, frame: Any) -> DecodedPicture:
        pts = _pts(frame)
        if frame.format.name != "yuv420p":
            raise DecodeError(f"decoded picture pts={pts} is {frame.format.name}, not yuv420p")
        if self.output == "rgb":
            image: Any = frame.to_ndarray(**self._rgb_args)
        elif self.output == "nv12":
            image = _yuv420(frame).to_nv12()
        else:
            image = _yuv420(frame)
        return DecodedPicture(pts, image)


def _pts(frame: Any) -> int:
    return int(frame.pts) if frame.pts is not None else -1


def plane_views(frame: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, Cb and Cr planes of a 4:2:0 AVFrame as 2-D views of its buffers, without the
    row padding (writable where the frame is; valid while the frame lives)."""
    h, w = frame.height, frame.width
    y, u, v = (
        np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:rows, :cols]
        for p, rows, cols in zip(
            frame.planes, (h, h // 2, h // 2), (w, w // 2, w // 2), strict=True
        )
    )
    return y, u, v


def _yuv420(frame: Any) -> Yuv420:
    """A yuv420p AVFrame as :class:`Yuv420`: each plane copied once, without its row padding."""
    y, u, v = plane_views(frame)
    return Yuv420(y.copy(), u.copy(), v.copy())
