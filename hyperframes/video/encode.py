"""Encoders behind one interface, chosen by name: ``x265`` (CPU), ``nvenc`` (GPU), ``auto``.

Every encoder takes :class:`~hyperframes.video.color.Yuv420` pictures (BT.709
limited, see :mod:`hyperframes.video.pictures` for JPEG and RGB input), a
caller ``pts`` and a per-frame ``idr`` decision (see
:class:`~hyperframes.video.gop.IdrPlanner`), and returns
:class:`EncodedAU` objects: one Annex-B access unit per picture, matched back
to the caller's ``pts`` even when the encoder delays its output (NVENC holds
about 3 frames; x265 with ``tune=zerolatency`` none). Every access unit is
checked against the bitstream convention on its way out
(:class:`~hyperframes.video.rules.StreamChecker`), so a misconfigured encoder
fails loudly instead of writing a stream readers cannot use.

``auto`` tries NVENC and falls back to x265, logging why; the encoder's
``name`` says which one runs.

The interface, the settings and :class:`OutputCheck` live in
:mod:`hyperframes.video.backend`, which the backends import; they are re-exported
here. Backends are imported only when one is created.
"""

from __future__ import annotations

import logging

from hyperframes.video.backend import (
    EncodedAU,
    Encoder,
    EncoderFactory,
    EncoderSettings,
    OutputCheck,
)
from hyperframes.video.errors import EncoderUnavailableError

__all__ = [
    "EncoderSettings",
    "EncodedAU",
    "Encoder",
    "EncoderFactory",
    "OutputCheck",
    "ENCODERS",
    "register_encoder",
    "create_encoder",
]

log = logging.getLogger(__name__)


def _x265(settings: EncoderSettings) -> Encoder:
    from hyperframes.video._x265 import X265Encoder  # noqa: PLC0415 - optional backend

    return X265Encoder(settings)


def _nvenc(settings: EncoderSettings) -> Encoder:
    from hyperframes.video._nvenc import NvencEncoder  # noqa: PLC0415 - optional backend

    return NvencEncoder(settings)


ENCODERS: dict[str, EncoderFactory] = {"x265": _x265, "nvenc": _nvenc}


def register_encoder(name: str, factory: EncoderFactory) -> None:
    """Make an encoder available to :func:`create_encoder` under ``name``."""
    if name == "auto":
        raise ValueError("'auto' is reserved")
    ENCODERS[name] = factory


def create_encoder(name: str, settings: EncoderSettings) -> Encoder:
    """The encoder called ``name`` (``x265``, ``nvenc``, ``auto``, or a registered one).

    ``auto`` returns NVENC where it works and x265 otherwise, logging the
    reason at INFO; check ``encoder.name`` for the one chosen.
    """
    if name == "auto":
        try:
            enc = ENCODERS["nvenc"](settings)
        except EncoderUnavailableError as exc:
            log.info("encoder auto: %s; using x265", exc)
            return ENCODERS["x265"](settings)
        log.info("encoder auto: using nvenc")
        return enc
    factory = ENCODERS.get(name)
    if factory is None:
        raise ValueError(f"unknown encoder {name!r}; choose from auto, {', '.join(ENCODERS)}")
    return factory(settings)
