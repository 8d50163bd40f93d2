"""Payloads to numpy arrays, by stream encoding; runs inside DataLoader workers.

- ``jpeg``: simplejpeg (libjpeg-turbo; releases the GIL), Pillow where
  simplejpeg is not installed; ``png``: Pillow. Both give ``(H, W, 3)`` uint8 RGB.
- array encodings (a stream dtype: ``xyzi-f32``, ``imu-f64``...): the
  stream's dtype and shape as a view of the 64-byte-aligned payload, no copy.
  ``raw-rgb``/``raw-gray8`` with ``width``/``height`` in the stream's
  ``extra`` become ``(H, W, 3)``/``(H, W)``.
- anything else (``bytes``, ``json``, ``h264``...): the payload as uint8.

H.265 is decoded through the video layer (:mod:`hyperframes.torch.video`).
"""

from __future__ import annotations

import numpy as np

from hyperframes.format.streams import StreamInfo
from hyperframes.images import IMAGE_ENCODINGS, decode_image, jpeg_backend
from hyperframes.reader import Frame

__all__ = ["IMAGE_ENCODINGS", "is_image", "decode_image", "decode_frame", "jpeg_backend"]


def is_image(stream: StreamInfo) -> bool:
    """True for encodings decoded to an image here (JPEG, PNG)."""
    return stream.encoding in IMAGE_ENCODINGS


def _raw_image(frame: Frame) -> np.ndarray:
    s = frame.stream
    width, height = s.extra.get("width"), s.extra.get("height")
    if not (isinstance(width, int) and isinstance(height, int)):
        return frame.data
    channels = 3 if s.encoding == "raw-rgb" else 1
    if frame.data.size != width * height * channels:
        raise ValueError(
            f"{frame.data.size} bytes is not a {width}x{height}x{channels} {s.encoding} image"
        )
    shape = (height, width, 3) if channels == 3 else (height, width)
    return frame.data.reshape(shape)


def decode_frame(frame: Frame) -> np.ndarray:
    """One frame as a numpy array (see the module docstring); raises ValueError on bad data."""
    s = frame.stream
    if s.encoding in IMAGE_ENCODINGS:
        try:
            return decode_image(frame.data, s.encoding)
        except (OSError, ValueError) as exc:  # simplejpeg: ValueError; Pillow: OSError
            raise ValueError(f"not a decodable {s.encoding}: {exc}") from None
    if s.encoding in ("raw-rgb", "raw-gray8"):
        return _raw_image(frame)
    if s.dtype is not None:
        return frame.array()
    return frame.data
