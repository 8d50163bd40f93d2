"""The ``nvenc`` encoder: NVIDIA's hardware HEVC encoder through PyNvVideoCodec 2.x.

Pictures go in as NV12 from host memory (already BT.709 limited, made by
:mod:`hyperframes.video.color`); NVENC's own ``colorspace`` option is not used
(it marks full range). Each frame asked to be an IDR is sent with the picture
flags FORCEIDR | OUTPUT_SPSPPS. ``Encode``/``EndEncode`` return lists of
``{data, timestamp, picture_type}`` about 3 frames late; the timestamp is our
frame number, matched back to the caller's pts. Every SPS that comes out is
rewritten to signal BT.709 limited range (:func:`~hyperframes.video.vui.set_bt709_limited`)
before the convention check.

A100, H100 and H200 have no NVENC: creating the encoder fails there and this
raises :class:`EncoderUnavailableError`, which ``auto`` turns into x265.
"""

from __future__ import annotations

from typing import Any

from hyperframes.video._nvprobe import nvc_module, probe
from hyperframes.video.backend import EncodedAU, EncoderSettings, OutputCheck
from hyperframes.video.color import Yuv420
from hyperframes.video.errors import EncoderUnavailableError
from hyperframes.video.nal import SPS_NUT, split_nal_units
from hyperframes.video.vui import set_bt709_limited

__all__ = ["NvencEncoder", "nvenc_options", "fix_parameter_sets"]

DEFAULT_PRESET = "P4"


def nvenc_options(settings: EncoderSettings) -> dict[str, str]:
    """The CreateEncoder keyword options for the bitstream convention (values as strings)."""
    return {
        "codec": "hevc",
        "preset": (settings.preset or DEFAULT_PRESET).upper(),
        "tuning_info": "high_quality",
        "gpu_id": str(settings.gpu_id),
        "fps": str(max(1, round(settings.rate_hz))),
        "gop": str(max(2, settings.max_gop)),  # the cap itself is enforced by forced IDRs
        "idrperiod": str(max(2, settings.max_gop)),
        "bf": "0",
        "repeatspspps": "1",
        "rc": "constqp",
        "initqp": str(settings.quality),
    }


def fix_parameter_sets(au: bytes) -> bytes:
    """The access unit with every SPS rewritten to signal BT.709 limited range."""
    units = split_nal_units(au)
    if not any(u.type == SPS_NUT for u in units):
        return au
    parts = []
    for u in units:
        data = set_bt709_limited(u.data) if u.type == SPS_NUT else u.data
        parts.append(b"\x00\x00\x00\x01" + data)
    return b"".join(parts)


class NvencEncoder:
    """NVENC HEVC via PyNvVideoCodec (see the module docstring)."""

    name = "nvenc"

    def __init__(self, settings: EncoderSettings) -> None:
        caps = probe()
        nvc: Any = nvc_module()
        if nvc is None or not caps.can_try_encode:
            raise EncoderUnavailableError("nvenc", caps.summary())
        self.settings = settings
        self._out = OutputCheck(settings)
        try:
            self._enc: Any = nvc.CreateEncoder(
                settings.width, settings.height, "NV12", True, **nvenc_options(settings)
            )
        except Exception as exc:  # PyNvVideoCodec raises its own exception types
            gpu = caps.devices[settings.gpu_id] if settings.gpu_id < len(caps.devices) else "?"
            raise EncoderUnavailableError(
                "nvenc", f"creating the encoder on GPU {settings.gpu_id} ({gpu}) failed: {exc}"
            ) from exc
        self._nvc = nvc
        flags = nvc.NV_ENC_PIC_FLAGS
        self._idr_flags = int(flags.FORCEIDR) | int(flags.OUTPUT_SPSPPS)

    def encode(self, picture: Yuv420, pts: int, *, idr: bool = False) -> list[EncodedAU]:
        """Submit one picture; returns whatever access units NVENC hands back now."""
        n, idr = self._out.submit(picture, pts, idr)
        params = self._nvc.NV_ENC_PIC_PARAMS()
        params.inputTimeStamp = n
        if idr:
            params.encodePicFlags = self._idr_flags
        return self._collect(self._enc.Encode(picture.to_nv12().reshape(-1), params))

    def flush(self) -> list[EncodedAU]:
        """Drain the frames NVENC still holds."""
        return self._collect(self._enc.EndEncode())

    def close(self) -> None:
        """Release the encoder."""
        self._enc = None

    def _collect(self, packets: list[dict[str, Any]]) -> list[EncodedAU]:
        out = [
            self._out.emit(int(p["timestamp"]), fix_parameter_sets(bytes(p["data"])))
            for p in packets
        ]
        out.sort(key=lambda au: au.pts)
        return out
