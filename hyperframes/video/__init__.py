"""The H.265 video layer: encode camera frames to H.265, decode only the frames asked for.

- :mod:`~hyperframes.video.color`: JPEG/RGB to BT.709 limited 4:2:0 (:class:`Yuv420`)
- :mod:`~hyperframes.video.nal`, :mod:`~hyperframes.video.rules`: the bitstream
  convention (docs/VIDEO.md) as a pure NAL parser and rule checker
- :mod:`~hyperframes.video.gop`: where IDRs go (:class:`IdrPlanner`)
- :mod:`~hyperframes.video.encode`: encoders ``x265``, ``nvenc``, ``auto``
- :mod:`~hyperframes.video.decode`: decoders ``cpu``, ``nvdec``, ``auto``
- :mod:`~hyperframes.video.stream`: :class:`VideoStream`, random and streaming
  access to a stored ``h265`` stream
- :mod:`~hyperframes.video.quality`: :func:`psnr`, the one picture quality measure

The optional packages (PyAV, simplejpeg, PyNvVideoCodec, torch) are imported
only when an encoder or decoder is created; without them this package still
imports, and creating one raises :class:`MissingDependencyError` naming the
extra to install (``pip install 'hyperframes-sensors[video]'``).
"""

from hyperframes.video.color import Yuv420, rgb_to_yuv420, yuv420_to_rgb
from hyperframes.video.decode import DecodedPicture, Decoder, create_decoder, register_decoder
from hyperframes.video.encode import (
    EncodedAU,
    Encoder,
    EncoderSettings,
    create_encoder,
    register_encoder,
)
from hyperframes.video.errors import (
    BitstreamError,
    DecodeError,
    DecoderUnavailableError,
    EncoderUnavailableError,
    FrameFormatError,
    MissingDependencyError,
    NotVideoStreamError,
    VideoError,
)
from hyperframes.video.gop import DEFAULT_K, DEFAULT_MAX_GOP, IdrPlanner, plan_idrs
from hyperframes.video.pictures import Picture, decode_jpeg, to_yuv420
from hyperframes.video.quality import psnr
from hyperframes.video.rules import (
    RULES,
    StreamChecker,
    Violation,
    check_access_units,
    validate_access_units,
)
from hyperframes.video.stream import VideoFrame, VideoStream, check_stored_stream
from hyperframes.video.transcode import EncodedFrame, encode_pictures

__all__ = [
    "Yuv420",
    "rgb_to_yuv420",
    "yuv420_to_rgb",
    "Picture",
    "decode_jpeg",
    "to_yuv420",
    "EncoderSettings",
    "EncodedAU",
    "Encoder",
    "create_encoder",
    "register_encoder",
    "DecodedPicture",
    "Decoder",
    "create_decoder",
    "register_decoder",
    "IdrPlanner",
    "plan_idrs",
    "DEFAULT_K",
    "DEFAULT_MAX_GOP",
    "RULES",
    "StreamChecker",
    "Violation",
    "check_access_units",
    "validate_access_units",
    "VideoFrame",
    "VideoStream",
    "check_stored_stream",
    "EncodedFrame",
    "encode_pictures",
    "psnr",
    "VideoError",
    "MissingDependencyError",
    "FrameFormatError",
    "BitstreamError",
    "EncoderUnavailableError",
    "DecoderUnavailableError",
    "DecodeError",
    "NotVideoStreamError",
]
