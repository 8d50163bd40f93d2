"""The ``nvdec`` decoder: NVIDIA's hardware decoder through PyNvVideoCodec 2.x.

One ``CreateDecoder(codec=HEVC)`` per decoder, fed one ``PacketData`` per
access unit: ``bsl_data`` takes an integer address, so the numpy buffer is
kept alive until ``Decode`` returns; low-latency mode plus the ENDOFPICTURE
flag make one access unit give one picture. Decoded pictures are views that
the next ``Decode`` overwrites, so each one is copied (torch: ``from_dlpack``
then ``clone``; numpy: ``from_dlpack`` then ``copy``) before it is returned.
Pictures stay on the GPU as torch tensors when torch is installed
(``device="cuda"``), else come back as numpy arrays in host memory.

Needs the driver's video libraries; see :mod:`hyperframes.video._nvprobe`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from hyperframes.video._deps import available, require
from hyperframes.video._nvprobe import nvc_module, probe
from hyperframes.video.backend import DecodedPicture, Output, check_output
from hyperframes.video.color import Yuv420
from hyperframes.video.errors import DecodeError, DecoderUnavailableError
from hyperframes.video.nal import SPS_NUT, parse_sps, split_nal_units

__all__ = ["NvdecDecoder"]


class NvdecDecoder:
    """NVDEC HEVC decoding (see the module docstring)."""

    name = "nvdec"

    def __init__(
        self,
        output: Output = "rgb",
        *,
        gpu_id: int = 0,
        device: Literal["cuda", "cpu"] | None = None,
    ) -> None:
        check_output(output)
        caps = probe()
        nvc: Any = nvc_module()
        if nvc is None or not caps.can_decode:
            raise DecoderUnavailableError("nvdec", caps.summary())
        if not 0 <= gpu_id < len(caps.devices):
            raise DecoderUnavailableError("nvdec", f"no GPU {gpu_id}; found {caps.devices}")
        if device is None:
            device = "cuda" if available("torch") else "cpu"
        self._torch: Any = require("torch") if device == "cuda" else None
        self.output: Output = output
        self.device = device
        self.gpu_id = gpu_id
        self._nvc = nvc
        colour = nvc.OutputColorType.RGB if output == "rgb" else nvc.OutputColorType.NATIVE
        try:
            self._dec: Any = nvc.CreateDecoder(
                gpuid=gpu_id,
                codec=nvc.cudaVideoCodec.HEVC,
                cudacontext=0,
                cudastream=0,
                usedevicememory=device == "cuda",
                outputColorType=colour,
                latency=nvc.DisplayDecodeLatencyType.LOW,
            )
        except Exception as exc:  # PyNvVideoCodec raises its own exception types
            raise DecoderUnavailableError("nvdec", f"CreateDecoder failed: {exc}") from exc
        self._size: tuple[int, int] | None = None  # (width, height) from the last SPS

    def decode(
        self, au: bytes | np.ndarray, pts: int, *, convert: bool = True
    ) -> list[DecodedPicture]:
        """Feed one access unit; returns its picture (``convert=False``: image None, no copy)."""
        buf = np.ascontiguousarray(
            au if isinstance(au, np.ndarray) else np.frombuffer(au, np.uint8), np.uint8
        ).reshape(-1)
        self._note_size(buf)
        packet = self._nvc.PacketData()
        packet.bsl = buf.size
        packet.bsl_data = buf.ctypes.data  # buf stays referenced until Decode returns
        packet.pts = pts
        packet.decode_flag = self._nvc.VideoPacketFlag.ENDOFPICTURE
        try:
            frames = self._dec.Decode(packet)
        except Exception as exc:  # PyNvVideoCodec raises its own exception types
            raise DecodeError(f"NVDEC rejected access unit pts={pts}: {exc}") from None
        if not convert:
            return [DecodedPicture(int(f.getPTS()), None) for f in frames]
        return [self._picture(f) for f in frames]

    def flush(self) -> list[DecodedPicture]:
        """Send end-of-stream and return the pictures still held."""
        packet = self._nvc.PacketData()
        packet.bsl = 0
        packet.decode_flag = self._nvc.VideoPacketFlag.ENDOFSTREAM
        return [self._picture(f) for f in self._dec.Decode(packet)]

    def reset(self) -> None:
        """Drain and drop whatever is held; the next access unit must be an IDR."""
        self.flush()

    def close(self) -> None:
        """Release the decoder."""
        self._dec = None

    def _note_size(self, buf: np.ndarray) -> None:
        head = bytes(buf[:512])  # parameter sets come first in an IDR access unit
        if b"\x00\x00\x01\x42" not in head:  # 0x42: SPS NAL header, first byte
            return
        for unit in split_nal_units(buf.tobytes()):
            if unit.type == SPS_NUT:
                sps = parse_sps(unit.data)
                self._size = (sps.width, sps.height)
                return

    def _picture(self, frame: Any) -> DecodedPicture:
        if self._size is None:
            raise DecodeError("NVDEC returned a picture before any SPS was seen")
        w, h = self._size
        pts = int(frame.getPTS())
        shape = (h, w, 3) if self.output == "rgb" else (h * 3 // 2, w)
        if self._torch is not None:
            image: Any = self._torch.from_dlpack(frame).clone().reshape(shape)
            if self.output == "yuv420p":
                image = Yuv420.from_nv12(image.cpu().numpy(), w, h)
        else:
            image = np.from_dlpack(frame).copy().reshape(shape)
            if self.output == "yuv420p":
                image = Yuv420.from_nv12(image, w, h)
        return DecodedPicture(pts, image)
