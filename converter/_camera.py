"""One camera stream on its way to H.265: source pictures, the encoder, IDR placement.

A :class:`CameraTrack` encodes the stream's indexed frames in index order
(timestamp order: the order a :class:`~hyperframes.video.VideoStream` decodes
them), on demand: the converter asks for the access units of the frames of
one window block and the track reads and encodes up to the last of them. A
LATE frame stored in a later block is encoded at its timestamp position and
held until its block is written, so memory stays bounded by the lateness.

Quarantined frames are not in the index, so no reader decodes them as part
of the stream; each becomes a stand-alone IDR access unit from a second,
all-IDR encoder (:meth:`CameraTrack.encode_quarantined`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from converter.config import VideoConfig
from converter.errors import ConversionError, InputError
from converter.plan import StreamPlan
from hyperframes.reader import HyperframeReader
from hyperframes.video import (
    BitstreamError,
    EncodedAU,
    Encoder,
    EncoderSettings,
    EncoderUnavailableError,
    FrameFormatError,
    IdrPlanner,
    VideoError,
    Yuv420,
    create_encoder,
    decode_jpeg,
    to_yuv420,
    yuv420_to_rgb,
)

__all__ = ["CameraTrack", "open_encoder", "source_yuv", "source_rgb"]

log = logging.getLogger(__name__)


def _raw_size(plan: StreamPlan) -> tuple[int, int]:
    extra = plan.source.extra
    try:
        width, height = int(extra["width"]), int(extra["height"])
    except (KeyError, TypeError, ValueError):
        raise FrameFormatError(
            f"{plan.source.encoding} stream needs extra.width and extra.height in its stream table"
        ) from None
    return width, height


def source_yuv(plan: StreamPlan, data: np.ndarray) -> Yuv420:
    """A stored camera payload as the BT.709 limited 4:2:0 picture the encoder takes."""
    enc = plan.source.encoding
    if enc == "jpeg":
        return to_yuv420(data)
    width, height = _raw_size(plan)
    if enc == "raw-nv12":
        return Yuv420.from_nv12(data, width, height)
    if data.size != width * height * 3:
        raise FrameFormatError(f"raw-rgb payload of {data.size} bytes is not {width}x{height}x3")
    return to_yuv420(data.reshape(height, width, 3))


def source_rgb(plan: StreamPlan, data: np.ndarray) -> np.ndarray:
    """A stored camera payload as 8-bit R'G'B' ``(H, W, 3)``: the PSNR reference."""
    enc = plan.source.encoding
    if enc == "jpeg":
        return decode_jpeg(data)
    width, height = _raw_size(plan)
    if enc == "raw-nv12":
        return yuv420_to_rgb(Yuv420.from_nv12(data, width, height))
    return data.reshape(height, width, 3)


def open_encoder(
    choice: str, width: int, height: int, rate_hz: float, video: VideoConfig, max_gop: int
) -> Encoder:
    """The encoder ``choice`` (``auto``, ``nvenc``, ``x265``) with that backend's preset.

    ``auto`` tries NVENC and falls back to x265 (A100/H100/H200 and CPU hosts
    have no NVENC), as :func:`hyperframes.video.create_encoder` does, but with
    the preset of the backend actually used.
    """

    def settings(preset: str) -> EncoderSettings:
        return EncoderSettings(
            width, height, rate_hz=rate_hz, max_gop=max_gop, quality=video.quality, preset=preset
        )

    if choice in ("auto", "nvenc"):
        try:
            return create_encoder("nvenc", settings(video.nvenc_preset))
        except EncoderUnavailableError as exc:
            if choice == "nvenc":
                raise
            log.info("encoder auto: %s; using x265", exc)
    return create_encoder("x265", settings(video.x265_preset))


class CameraTrack:
    """Encodes one camera stream on demand (see the module docstring). Not thread-safe."""

    def __init__(
        self, reader: HyperframeReader, plan: StreamPlan, video: VideoConfig, path: str
    ) -> None:
        self.reader = reader
        self.plan = plan
        self.video = video
        self.path = path
        self.name = plan.source.name
        lo, hi = reader.stream_slice(plan.source.id)
        self.base, self.count = lo, hi - lo
        self.planner = IdrPlanner(reader.window_ns, k=video.k, max_gop=video.max_gop)
        self.rate_hz = plan.source.rate_hz or 30.0
        self._encoder: Encoder | None = None
        self._q_encoder: Encoder | None = None
        self._next = 0  # next stream position to submit
        self._flushed = False
        self._done: dict[int, EncodedAU] = {}
        self._first: Yuv420 | None = None  # frame 0, decoded by start()
        self._lock = threading.Lock()
        self.encoder_name: str | None = None
        self.frames = 0

    # --- indexed frames ---------------------------------------------------

    def encode_through(self, position: int) -> None:
        """Encode until the access unit of stream position ``position`` is out."""
        with self._lock:
            while position not in self._done:
                if self._next < self.count:
                    self._submit(self._next)
                    self._next += 1
                elif not self._flushed:
                    self._flushed = True
                    self._flush()
                else:
                    raise ConversionError(
                        self.path,
                        "the encoder returned no access unit for this frame",
                        stream=self.name,
                        frame=position,
                    )

    def start(self) -> Yuv420 | None:
        """Open the encoder on the stream's first frame (its size decides the settings).

        Returns that picture (None for a stream without indexed frames); the
        encoder's name is then in :attr:`encoder_name`.
        """
        if self.count == 0 or self._encoder is not None:
            return None
        ts = int(self.reader.index["timestamp_ns"][self.base])
        picture = self._first = self._picture(self.reader.frame_at(self.base).data, 0, ts)
        self._main_encoder(picture)
        return picture

    def _main_encoder(self, picture: Yuv420) -> Encoder:
        if self._encoder is None:
            self._encoder = self._open(picture, self.video.encoder, self.video.max_gop)
            self.encoder_name = self._encoder.name
        return self._encoder

    def _flush(self) -> None:
        if self._encoder is None:
            return
        try:
            self._collect(self._encoder.flush())
        except BitstreamError as exc:
            raise ConversionError(
                self.path, exc.detail, stream=self.name, frame=exc.frame, rule=exc.rule
            ) from None

    def take(self, position: int) -> EncodedAU:
        """The access unit of ``position`` (call :meth:`encode_through` first); forgets it."""
        return self._done.pop(position)

    def _submit(self, r: int) -> None:
        ts = int(self.reader.index["timestamp_ns"][self.base + r])
        if r == 0 and self._first is not None:
            picture, self._first = self._first, None
        else:
            picture = self._picture(self.reader.frame_at(self.base + r).data, r, ts)
        encoder = self._main_encoder(picture)
        idr = self.planner.is_idr(ts, last=r == self.count - 1)
        try:
            out = encoder.encode(picture, r, idr=idr)
        except FrameFormatError as exc:  # a frame of another size mid-stream
            raise InputError(
                self.path, str(exc), stream=self.name, frame=r, timestamp_ns=ts, rule="same_format"
            ) from None
        except BitstreamError as exc:  # the encoder broke the convention
            raise ConversionError(
                self.path, exc.detail, stream=self.name, frame=exc.frame, rule=exc.rule
            ) from None
        self._collect(out)
        self.frames += 1

    def _collect(self, aus: list[EncodedAU]) -> None:
        for au in aus:
            self._done[au.pts] = au

    def _picture(self, data: np.ndarray, r: int | str, ts: int) -> Yuv420:
        try:
            return source_yuv(self.plan, data)
        except FrameFormatError as exc:
            raise InputError(
                self.path,
                f"camera frame does not decode: {exc}",
                stream=self.name,
                frame=r if isinstance(r, int) else None,
                timestamp_ns=ts,
                rule="source_frame",
            ) from None

    def _open(self, picture: Yuv420, choice: str, max_gop: int) -> Encoder:
        try:
            return open_encoder(
                choice, picture.width, picture.height, self.rate_hz, self.video, max_gop
            )
        except FrameFormatError as exc:  # odd dimensions
            raise InputError(
                self.path,
                f"{exc}; keep this stream as it is with --keep {self.name}",
                stream=self.name,
                rule="even_dimensions",
            ) from None
        except VideoError as exc:  # unavailable encoder, missing PyAV
            raise ConversionError(self.path, str(exc), stream=self.name, rule="encoder") from exc

    # --- quarantined frames -------------------------------------------------

    def encode_quarantined(self, q: int, data: np.ndarray, timestamp_ns: int) -> EncodedAU:
        """Quarantine row ``q`` as one stand-alone IDR access unit (VPS/SPS/PPS included)."""
        picture = self._picture(data, f"q{q}", timestamp_ns)
        if self._q_encoder is None:
            # the same backend as the main encoder where one is open (NVENC sessions are few)
            choice = self.encoder_name or self.video.encoder
            self._q_encoder = self._open(picture, choice, 1)
        try:
            out = self._q_encoder.encode(picture, q, idr=True) + self._q_encoder.flush()
        except FrameFormatError as exc:
            raise InputError(
                self.path,
                f"quarantined frame {q}: {exc}",
                stream=self.name,
                timestamp_ns=timestamp_ns,
                rule="same_format",
            ) from None
        except BitstreamError as exc:
            raise ConversionError(
                self.path, f"quarantined frame {q}: {exc.detail}", stream=self.name, rule=exc.rule
            ) from None
        self._q_encoder.close()
        self._q_encoder = None  # flushed: the next quarantined frame gets a fresh encoder
        if len(out) != 1 or not out[0].keyframe:
            raise ConversionError(
                self.path,
                f"quarantined frame {q}: expected one IDR access unit, got {len(out)}",
                stream=self.name,
                rule="one_picture",
            )
        return out[0]

    def close(self) -> None:
        """Release the encoders."""
        for enc in (self._encoder, self._q_encoder):
            if enc is not None:
                enc.close()
        self._encoder = self._q_encoder = None


def describe(track: CameraTrack) -> dict[str, Any]:
    """Provenance of one camera stream: which encoder ran with which settings."""
    v = track.video
    preset = v.nvenc_preset if track.encoder_name == "nvenc" else v.x265_preset
    return {
        "encoder": track.encoder_name,
        "quality": v.quality,
        "preset": preset,
        "k": v.k,
        "max_gop": v.max_gop,
    }
