"""One camera stream on its way to H.265: source pictures, the encoder, IDR placement.

A :class:`CameraTrack` encodes the stream's indexed frames in index order
(timestamp order: the order a :class:`~hyperframes.video.VideoStream` decodes
them), on demand: the converter asks for the access units of the frames of
one window block and the track reads and encodes up to the last of them. A
LATE frame stored in a later block is encoded at its timestamp position and
held until its block is written, so memory stays bounded by the lateness.

Every frame is checked as it is encoded, one GOP at a time: x265 reports the
PSNR of each plane of its reconstruction (the picture a decoder outputs)
against the picture it was given (:attr:`hyperframes.video.EncodedAU.psnr`);
an encoder that reports none (NVENC) has the GOP's access units decoded (the
CPU decoder, fed exactly the bytes that will be stored) and compared with its
input. The per-plane errors, carried to R'G'B' (:func:`rgb_mse_estimate`),
are kept per frame (:attr:`CameraTrack.codec_mse`) for verification, which
also decodes a sample of GOPs from the output independently. A GOP with a
frame under the PSNR floor is encoded again on its own, ``quality_step``
better each time, down to ``best_quality``; the GOPs after it start again at
``quality``. The GOP plan comes from the timestamps of the whole stream
(:func:`hyperframes.video.plan_idrs`), so a GOP's frames are known before
its first one is encoded.

Quarantined frames are not in the index, so no reader decodes them as part
of the stream; each becomes a stand-alone IDR access unit from a second,
all-IDR encoder (:meth:`CameraTrack.encode_quarantined`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from hyperframes.converter.config import VideoConfig
from hyperframes.converter.errors import ConversionError, InputError
from hyperframes.converter.plan import StreamPlan
from hyperframes.images import ImageLayoutError, raw_image, raw_size
from hyperframes.reader import HyperframeReader
from hyperframes.video import (
    BitstreamError,
    Decoder,
    EncodedAU,
    Encoder,
    EncoderSettings,
    EncoderUnavailableError,
    FrameFormatError,
    VideoError,
    Yuv420,
    create_decoder,
    create_encoder,
    decode_jpeg,
    plan_idrs,
    to_yuv420,
    yuv420_to_rgb,
)
from hyperframes.video.quality import (
    mse_of_psnr,
    mse_u8,
    plane_mse,
    psnr_of_mse,
    rgb_mse_estimate,
)

__all__ = ["CameraTrack", "open_encoder", "source_yuv", "source_rgb"]

log = logging.getLogger(__name__)


def _raw_size(plan: StreamPlan) -> tuple[int, int]:
    s = plan.source
    try:
        return raw_size(s.encoding, s.extra, s.shape)
    except ImageLayoutError as exc:
        raise FrameFormatError(str(exc)) from None


def _raw_rgb(plan: StreamPlan, data: np.ndarray) -> np.ndarray:
    """A ``raw-rgb``/``raw-bgr``/``raw-gray8`` payload as ``(H, W, 3)`` uint8 R'G'B'
    (bgr swapped; gray repeated in all three channels)."""
    enc = plan.source.encoding
    try:
        pixels = raw_image(data, enc, *_raw_size(plan))
    except ValueError as exc:
        raise FrameFormatError(f"{plan.source.name}: {exc}") from None
    if pixels.ndim == 2:
        return np.repeat(pixels[:, :, None], 3, axis=2)
    return pixels


def source_yuv(plan: StreamPlan, data: np.ndarray) -> Yuv420:
    """A stored camera payload as the BT.709 limited 4:2:0 picture the encoder takes."""
    enc = plan.source.encoding
    if enc == "jpeg":
        return to_yuv420(data)
    if enc == "raw-nv12":
        return Yuv420.from_nv12(data, *_raw_size(plan))
    return to_yuv420(_raw_rgb(plan, data))


def source_rgb(plan: StreamPlan, data: np.ndarray) -> np.ndarray:
    """A stored camera payload as 8-bit R'G'B' ``(H, W, 3)``: the PSNR reference."""
    enc = plan.source.encoding
    if enc == "jpeg":
        return decode_jpeg(data)
    if enc == "raw-nv12":
        return yuv420_to_rgb(Yuv420.from_nv12(data, *_raw_size(plan)))
    return _raw_rgb(plan, data)


def open_encoder(
    choice: str,
    width: int,
    height: int,
    rate_hz: float,
    video: VideoConfig,
    max_gop: int,
    quality: int | None = None,
    *,
    measure: bool = False,
) -> Encoder:
    """The encoder ``choice`` (``auto``, ``nvenc``, ``x265``) with that backend's preset.

    ``auto`` tries NVENC and falls back to x265 (A100/H100/H200 and CPU hosts
    have no NVENC), as :func:`hyperframes.video.create_encoder` does, but with
    the preset of the backend actually used. ``measure``: ask for each
    picture's reconstruction PSNR (:attr:`hyperframes.video.EncodedAU.psnr`).
    """

    def settings(preset: str) -> EncoderSettings:
        return EncoderSettings(
            width,
            height,
            rate_hz=rate_hz,
            max_gop=max_gop,
            quality=video.quality if quality is None else quality,
            preset=preset,
            measure=measure,
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
        self,
        reader: HyperframeReader,
        plan: StreamPlan,
        video: VideoConfig,
        path: str,
        psnr_floor_db: float = 0.0,
    ) -> None:
        self.reader = reader
        self.plan = plan
        self.video = video
        self.path = path
        self.floor = psnr_floor_db
        self.name = plan.source.name
        lo, hi = reader.stream_slice(plan.source.id)
        self.base, self.count = lo, hi - lo
        self._ts = reader.index["timestamp_ns"][lo:hi]
        idrs = plan_idrs(self._ts.tolist(), reader.window_ns, k=video.k, max_gop=video.max_gop)
        self._idr = idrs
        starts = [i for i, x in enumerate(idrs) if x]
        self._gop_end = np.empty(self.count, np.int64)  # last position of each frame's GOP
        for a, b in zip(starts, [*starts[1:], self.count], strict=True):
            self._gop_end[a:b] = b - 1
        self.rate_hz = plan.source.rate_hz or 30.0
        self._encoder: Encoder | None = None
        self._q_encoder: Encoder | None = None
        self._decoder: Decoder | None = None
        self._next = 0  # next stream position to submit
        self._checked = 0  # positions before this one are checked (and final)
        self._flushed = False
        self._done: dict[int, EncodedAU] = {}
        self._pictures: dict[int, Yuv420] = {}  # submitted, not yet checked
        self._first: Yuv420 | None = None  # frame 0, decoded by start()
        self._lock = threading.Lock()
        self.encoder_name: str | None = None
        self.frames = 0
        #: per indexed frame: R'G'B' mean squared error of its decoded picture against the
        #: encoder's input (NaN until checked)
        self.codec_mse = np.full(self.count, np.nan)
        self.gops = len(starts)
        self.frames_by_encoder = 0  # checked from the encoder's reconstruction PSNR
        self.frames_decoded = 0  # checked by decoding (encoders that do not measure)
        self.gops_reencoded = 0
        self.best_quality_used = video.quality  # the lowest CRF/QP any GOP ended at
        self.colour_mse = 0.0  # R'G'B' MSE of the colour conversion of frame 0 (start())

    # --- indexed frames ---------------------------------------------------

    def encode_through(self, position: int) -> None:
        """Encode and check the GOPs up to the one holding stream position ``position``."""
        with self._lock:
            while self._checked <= position:
                end = int(self._gop_end[self._checked])
                while any(r not in self._done for r in range(self._checked, end + 1)):
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
                            frame=next(
                                r for r in range(self._checked, end + 1) if r not in self._done
                            ),
                        )
                self._check_gop(self._checked, end)
                self._checked = end + 1

    def _check_gop(self, a: int, b: int) -> None:
        """Decode GOP ``a..b``, measure every frame; re-encode it better while under the floor."""
        quality = self.video.quality
        while True:
            worst = self._measure(a, b) + self.colour_mse
            if psnr_of_mse(worst) >= self.floor or quality <= self.video.best_quality:
                break
            quality = max(self.video.best_quality, quality - self.video.quality_step)
            log.info(
                "%s: %s: GOP at frame %d under %.4g dB (%.2f dB); encoding it again at %d",
                self.path,
                self.name,
                a,
                self.floor,
                psnr_of_mse(worst),
                quality,
            )
            self._reencode(a, b, quality)
            self.gops_reencoded += 1
            self.best_quality_used = min(self.best_quality_used, quality)
        for r in range(a, b + 1):
            del self._pictures[r]

    def _measure(self, a: int, b: int) -> float:
        """Record the error of each frame of ``a..b``; the worst.

        From the encoder's own reconstruction where it reported one for every
        frame of the GOP (x265), else by decoding the GOP's access units.
        """
        reported = [p for r in range(a, b + 1) if (p := self._done[r].psnr) is not None]
        if len(reported) == b - a + 1:
            worst = 0.0
            for r, planes in enumerate(reported, start=a):
                mse = rgb_mse_estimate(*(mse_of_psnr(db) for db in planes))
                self.codec_mse[r] = mse
                worst = max(worst, mse)
            self.frames_by_encoder += b - a + 1
            return worst
        return self._decode_and_measure(a, b)

    def _decode_and_measure(self, a: int, b: int) -> float:
        """Decode the access units of ``a..b`` and record each frame's error; the worst."""
        if self._decoder is None:
            try:
                self._decoder = create_decoder("cpu", "yuv420p", threads=1)  # least CPU
            except VideoError as exc:
                raise ConversionError(
                    self.path, str(exc), stream=self.name, rule="decoder"
                ) from exc
        dec = self._decoder
        dec.reset()
        worst = 0.0
        try:
            for r in range(a, b + 1):
                pictures = dec.decode(self._done[r].data, r)
                if len(pictures) != 1:
                    raise ConversionError(
                        self.path,
                        f"access unit decoded to {len(pictures)} pictures",
                        stream=self.name,
                        frame=r,
                        timestamp_ns=int(self._ts[r]),
                        rule="one_picture",
                    )
                mse = rgb_mse_estimate(*plane_mse(pictures[0].image, self._pictures[r]))
                self.codec_mse[r] = mse
                worst = max(worst, mse)
        except VideoError as exc:
            raise ConversionError(
                self.path,
                f"decoding what was encoded failed: {exc}",
                stream=self.name,
                frame=r,
                rule="annexb",
            ) from exc
        self.frames_decoded += b - a + 1
        return worst

    def _reencode(self, a: int, b: int, quality: int) -> None:
        """GOP ``a..b`` again, on a fresh encoder at ``quality`` (its first frame an IDR)."""
        first = self._pictures[a]
        enc = self._open(
            first, self.encoder_name or self.video.encoder, self.video.max_gop, quality
        )
        try:
            out: list[EncodedAU] = []
            for r in range(a, b + 1):
                out += enc.encode(self._pictures[r], r, idr=r == a)
            out += enc.flush()
        except BitstreamError as exc:
            raise ConversionError(
                self.path, exc.detail, stream=self.name, frame=exc.frame, rule=exc.rule
            ) from None
        finally:
            enc.close()
        got = {au.pts: au for au in out}
        if sorted(got) != list(range(a, b + 1)):
            raise ConversionError(
                self.path,
                f"re-encoding frames {a}..{b} returned access units for {sorted(got)}",
                stream=self.name,
                frame=a,
                rule="one_picture",
            )
        self._done.update(got)

    def start(self) -> Yuv420 | None:
        """Open the encoder on the stream's first frame (its size decides the settings).

        Returns that picture (None for a stream without indexed frames); the
        encoder's name is then in :attr:`encoder_name`.
        """
        if self.count == 0 or self._encoder is not None:
            return None
        ts = int(self.reader.index["timestamp_ns"][self.base])
        data = self.reader.frame_at(self.base).data
        picture = self._first = self._picture(data, 0, ts)
        # what the colour conversion alone loses (4:2:0, limited range), on this frame: the
        # encode-time check adds it, as verification adds what it measures on its sample
        self.colour_mse = mse_u8(yuv420_to_rgb(picture), source_rgb(self.plan, data))
        self._main_encoder(picture)
        return picture

    @property
    def checked_by(self) -> str:
        """How every indexed frame was measured at encode time, in words."""
        if self.frames_decoded == 0:
            return "from the encoder's reconstruction (x265's PSNR per plane)"
        if self.frames_by_encoder == 0:
            return "decoded at encode time"
        return (
            f"{self.frames_by_encoder} from the encoder's reconstruction and "
            f"{self.frames_decoded} decoded at encode time"
        )

    @property
    def psnr_min_db(self) -> float | None:
        """Lowest per-frame PSNR measured while encoding (R'G'B', codec only)."""
        done = self.codec_mse[~np.isnan(self.codec_mse)]
        return psnr_of_mse(float(done.max())) if done.size else None

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
        self._pictures[r] = picture
        idr = self._idr[r]
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

    def _open(
        self,
        picture: Yuv420,
        choice: str,
        max_gop: int,
        quality: int | None = None,
        *,
        measure: bool = True,
    ) -> Encoder:
        try:
            return open_encoder(
                choice,
                picture.width,
                picture.height,
                self.rate_hz,
                self.video,
                max_gop,
                quality,
                measure=measure,
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
            self._q_encoder = self._open(picture, choice, 1, measure=False)  # decoded by verify
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
        if self._decoder is not None:
            self._decoder.close()
            self._decoder = None
        self._pictures.clear()


def describe(track: CameraTrack) -> dict[str, Any]:
    """Provenance of one camera stream: which encoder ran with which settings."""
    v = track.video
    preset = v.nvenc_preset if track.encoder_name == "nvenc" else v.x265_preset
    return {
        "encoder": track.encoder_name,
        "quality": v.quality,
        "best_quality": v.best_quality,
        "preset": preset,
        "k": v.k,
        "max_gop": v.max_gop,
    }
