"""Payloads to numpy arrays, by stream encoding; runs inside DataLoader workers.

- ``jpeg``: simplejpeg (libjpeg-turbo; releases the GIL), Pillow where
  simplejpeg is not installed; ``png``: Pillow. Both give ``(H, W, 3)`` uint8 RGB.
- array encodings (a stream dtype: ``xyzi-f32``, ``imu-f64``...): the
  stream's dtype and shape as a view of the 64-byte-aligned payload, no copy.
  Raw cameras with ``width``/``height`` in the stream's ``extra``
  (:func:`hyperframes.images.raw_image`): ``raw-rgb`` and ``raw-bgr`` become
  ``(H, W, 3)`` uint8 R, G, B (bgr swapped), ``raw-gray8``/``raw-gray16``/``raw-f32``
  one channel ``(H, W)`` uint8/uint16/float32; without a size, the stored bytes.
- ``points`` (a structured dtype, ROS PointCloud2 with mixed field types): ``(N, k)``
  float32, x, y, z first, then the other fields (:func:`hyperframes.images.point_columns`);
  ``points-f32`` is an array encoding, ``(N, k)`` float32 as stored.
- anything else (``bytes``, ``json``, ``h264``...): the payload as uint8.

H.265 is decoded through the video layer (:mod:`hyperframes.torch.video`).
"""

from __future__ import annotations

import numpy as np

from hyperframes.format.streams import StreamInfo
from hyperframes.images import (
    IMAGE_ENCODINGS,
    RAW_IMAGE_ENCODINGS,
    ImageLayoutError,
    decode_image,
    jpeg_backend,
    point_columns,
    raw_image,
    raw_size,
)
from hyperframes.reader import Frame

__all__ = ["IMAGE_ENCODINGS", "is_image", "decode_image", "decode_frame", "jpeg_backend"]


def is_image(stream: StreamInfo) -> bool:
    """True for encodings decoded to an image here (JPEG, PNG)."""
    return stream.encoding in IMAGE_ENCODINGS


def _raw_image(frame: Frame) -> np.ndarray:
    s = frame.stream
    try:
        size = raw_size(s.encoding, s.extra, s.shape)
    except ImageLayoutError:
        return frame.data  # no size in the stream table: the stored bytes
    return raw_image(frame.data, s.encoding, *size)


def decode_frame(frame: Frame) -> np.ndarray:
    """One frame as a numpy array (see the module docstring); raises ValueError on bad data."""
    s = frame.stream
    if s.encoding in IMAGE_ENCODINGS:
        try:
            return decode_image(frame.data, s.encoding)
        except (OSError, ValueError) as exc:  # simplejpeg: ValueError; Pillow: OSError
            raise ValueError(f"not a decodable {s.encoding}: {exc}") from None
    if s.encoding in RAW_IMAGE_ENCODINGS:
        return _raw_image(frame)
    if s.encoding == "points" and s.dtype is not None:
        fields = s.extra.get("fields")
        return point_columns(frame.array(), fields if isinstance(fields, list) else None)
    if s.dtype is not None:
        return frame.array()
    return frame.data
