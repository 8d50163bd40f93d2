"""The ``x265`` encoder: libx265 through PyAV, on the CPU.

With ``tune=zerolatency`` and the x265-params below, one access unit comes out
per ``encode(frame)``; an IDR on a chosen frame needs the codec option
``forced-idr=1`` and ``frame.pict_type = I``. With
:attr:`~hyperframes.video.backend.EncoderSettings.measure`, x265 also reports
the PSNR of each picture's reconstruction (:mod:`hyperframes.video._x265_stats`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hyperframes.video._deps import require
from hyperframes.video._pyav_decoder import plane_views
from hyperframes.video._x265_stats import FrameStats
from hyperframes.video.backend import EncodedAU, EncoderSettings, OutputCheck
from hyperframes.video.color import Yuv420

__all__ = ["X265Encoder", "open_codec_context", "x265_params"]

DEFAULT_PRESET = "fast"


def x265_params(settings: EncoderSettings) -> str:
    """The x265-params string that makes libx265 follow the bitstream convention.

    The GOP cap is enforced by forcing IDRs (:class:`OutputCheck`); keyint is
    at least 2 because x265 signals an intra profile (not Main) for keyint 1.
    """
    g = max(2, settings.max_gop)
    params = [
        f"keyint={g}",
        f"min-keyint={g}",
        "scenecut=0",
        "open-gop=0",
        "bframes=0",
        "repeat-headers=1",
        "annexb=1",
        "info=0",
        "log-level=error",
        "colorprim=bt709",
        "transfer=bt709",
        "colormatrix=bt709",
        "range=limited",
        f"crf={settings.quality}",
    ]
    if settings.threads is not None:
        params.append(f"pools={settings.threads}")
    return ":".join(params)


def open_codec_context(settings: EncoderSettings, extra_params: list[str] | None = None) -> Any:
    """The opened PyAV libx265 context of :class:`X265Encoder`, without its checks.

    yuv420p at ``settings``' size, time base 1/rate, the preset (default
    :data:`DEFAULT_PRESET`), ``tune=zerolatency``, ``forced-idr=1`` and
    :func:`x265_params` (then ``extra_params``, which win). Also the baseline
    of ``bench/bench_video.py``.
    """
    av: Any = require("av")
    rate = Fraction(settings.rate_hz).limit_denominator(1001)
    ctx = av.CodecContext.create("libx265", "w")
    ctx.width, ctx.height = settings.width, settings.height
    ctx.pix_fmt = "yuv420p"
    ctx.time_base = 1 / rate
    ctx.framerate = rate
    ctx.options = {
        "preset": settings.preset or DEFAULT_PRESET,
        "tune": "zerolatency",
        "forced-idr": "1",
        "x265-params": ":".join([x265_params(settings), *(extra_params or [])]),
    }
    ctx.open()
    return ctx


class X265Encoder:
    """libx265 via PyAV (see the module docstring)."""

    name = "x265"

    def __init__(self, settings: EncoderSettings) -> None:
        self._av: Any = require("av")
        self.settings = settings
        self._out = OutputCheck(settings)
        self._stats = FrameStats.create() if settings.measure else None
        try:
            self._ctx: Any = open_codec_context(
                settings, self._stats.params() if self._stats else None
            )
        except BaseException:
            if self._stats is not None:
                self._stats.close()
            raise
        if self._stats is not None:
            self._stats.attach()
        self._picture_i = self._av.video.frame.PictureType.I

    def encode(self, picture: Yuv420, pts: int, *, idr: bool = False) -> list[EncodedAU]:
        """Encode one picture; with zerolatency its access unit comes straight back."""
        n, idr = self._out.submit(picture, pts, idr)
        frame = self._av.VideoFrame(picture.width, picture.height, "yuv420p")
        for dst, src in zip(plane_views(frame), (picture.y, picture.u, picture.v), strict=True):
            dst[...] = src  # each plane copied once, straight into the AVFrame
        frame.pts = n
        if idr:
            frame.pict_type = self._picture_i
        return self._emit(self._ctx.encode(frame))

    def flush(self) -> list[EncodedAU]:
        """Drain (nothing is held with zerolatency, but the protocol asks)."""
        return self._emit(self._ctx.encode(None))

    def _emit(self, packets: list[Any]) -> list[EncodedAU]:
        psnr = self._stats.read() if self._stats is not None and packets else {}
        return [self._out.emit(int(p.pts), bytes(p), psnr.get(int(p.pts))) for p in packets]

    def close(self) -> None:
        """Release the codec context (and the PSNR log)."""
        self._ctx = None
        if self._stats is not None:
            self._stats.close()
            self._stats = None
