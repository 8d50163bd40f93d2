"""Decoders behind one interface, chosen by name: ``cpu`` (PyAV), ``nvdec`` (GPU), ``auto``.

A decoder is fed one access unit at a time with the caller's ``pts`` and
returns :class:`DecodedPicture` objects. For streams that follow the
convention (no reordering) the picture of an access unit comes out of the same
``decode`` call. :meth:`Decoder.reset` drops all state before a seek;
:meth:`Decoder.flush` drains at the end of the data.

Output formats (``output=``): ``"rgb"`` an ``(H, W, 3)`` uint8 R'G'B' image,
``"nv12"`` an ``(H*3/2, W)`` uint8 NV12 image, ``"yuv420p"`` a
:class:`~hyperframes.video.color.Yuv420`. The CPU decoder returns numpy
arrays; NVDEC returns torch CUDA tensors where torch is installed (``"rgb"``
and ``"nv12"``), numpy otherwise.

The interface and its types live in :mod:`hyperframes.video.backend`, which the
backends import; they are re-exported here. Backends are imported only when one
is created.
"""

from __future__ import annotations

import logging
from typing import Any

from hyperframes.video._nvprobe import probe
from hyperframes.video.backend import (
    OUTPUTS,
    DecodedPicture,
    Decoder,
    DecoderFactory,
    Output,
    check_output,
)
from hyperframes.video.errors import DecoderUnavailableError

__all__ = [
    "Output",
    "OUTPUTS",
    "DecodedPicture",
    "Decoder",
    "DecoderFactory",
    "DECODERS",
    "register_decoder",
    "create_decoder",
]

log = logging.getLogger(__name__)


def _cpu(output: Output = "rgb", **kwargs: Any) -> Decoder:
    from hyperframes.video._pyav_decoder import CpuDecoder  # noqa: PLC0415 - optional backend

    return CpuDecoder(output, **kwargs)


def _nvdec(output: Output = "rgb", **kwargs: Any) -> Decoder:
    from hyperframes.video._nvdec import NvdecDecoder  # noqa: PLC0415 - optional backend

    return NvdecDecoder(output, **kwargs)


DECODERS: dict[str, DecoderFactory] = {"cpu": _cpu, "nvdec": _nvdec}


def register_decoder(name: str, factory: DecoderFactory) -> None:
    """Make a decoder available to :func:`create_decoder` under ``name``."""
    if name == "auto":
        raise ValueError("'auto' is reserved")
    DECODERS[name] = factory


def create_decoder(name: str = "auto", output: Output = "rgb", **kwargs: Any) -> Decoder:
    """The decoder called ``name`` (``cpu``, ``nvdec``, ``auto``, or a registered one).

    ``auto`` picks NVDEC when the probe finds a usable GPU and falls back to
    the CPU decoder otherwise, logging why. Keyword arguments go to the
    decoder (``gpu_id`` and ``device`` for NVDEC, ``threads`` for CPU).
    """
    check_output(output)
    if name == "auto":
        caps = probe()
        if caps.can_decode:
            try:
                return DECODERS["nvdec"](output, **kwargs)
            except DecoderUnavailableError as exc:
                log.info("decoder auto: %s; using cpu", exc)
        else:
            log.info("decoder auto: NVDEC unavailable (%s); using cpu", caps.summary())
        kwargs = {k: v for k, v in kwargs.items() if k == "threads"}
        return DECODERS["cpu"](output, **kwargs)
    factory = DECODERS.get(name)
    if factory is None:
        raise ValueError(f"unknown decoder {name!r}; choose from auto, {', '.join(DECODERS)}")
    return factory(output, **kwargs)
