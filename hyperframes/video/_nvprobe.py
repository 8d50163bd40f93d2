"""One cached look at what NVIDIA video hardware this process can use.

``import PyNvVideoCodec`` raises RuntimeError (not ImportError) where the
driver's video libraries are missing, even to decode, and checks for
``libnvidia-encode`` on import. So the probe first loads the driver libraries
with ctypes (``libcuda.so.1``, ``libnvcuvid.so.1``, ``libnvidia-encode.so.1``),
counts GPUs with the CUDA driver API, and only then imports PyNvVideoCodec
inside ``except Exception``. The answer is computed once per process.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import logging
from dataclasses import dataclass
from types import ModuleType

from hyperframes._install import install_hint

__all__ = ["NvCapabilities", "probe", "nvc_module"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NvCapabilities:
    """What the probe found; ``reasons`` says why each missing piece is missing."""

    cuda: bool  # libcuda loaded and cuInit succeeded
    devices: tuple[str, ...]  # GPU names, by device ordinal
    nvdec_library: bool  # libnvcuvid.so.1
    nvenc_library: bool  # libnvidia-encode.so.1
    module: bool  # PyNvVideoCodec imported
    reasons: tuple[str, ...]

    @property
    def can_decode(self) -> bool:
        """NVDEC should work: a GPU, the decode library and PyNvVideoCodec."""
        return self.cuda and bool(self.devices) and self.nvdec_library and self.module

    @property
    def can_try_encode(self) -> bool:
        """NVENC may work (A100/H100/H200 have none: creating an encoder still fails there)."""
        return self.can_decode and self.nvenc_library

    def summary(self) -> str:
        """One line for logs and error messages."""
        gpus = ", ".join(self.devices) or "no NVIDIA GPU"
        why = "; ".join(self.reasons) or "all present"
        return f"{gpus}; {why}"


def _load(name: str) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _devices(cuda: ctypes.CDLL) -> tuple[str, ...] | None:
    if cuda.cuInit(0) != 0:
        return None
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    names = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        buf = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGet(ctypes.byref(dev), i) == 0 and cuda.cuDeviceGetName(buf, 256, dev) == 0:
            names.append(buf.value.decode(errors="replace"))
        else:
            names.append(f"GPU {i}")
    return tuple(names)


@functools.cache
def probe() -> NvCapabilities:
    """Probe once per process (cached); never raises."""
    reasons: list[str] = []
    cuda_lib = _load("libcuda.so.1")
    devices: tuple[str, ...] = ()
    cuda = False
    if cuda_lib is None:
        reasons.append("libcuda.so.1 not found (no NVIDIA driver)")
    else:
        found = _devices(cuda_lib)
        if found is None:
            reasons.append("cuInit failed (driver present, no usable GPU)")
        else:
            cuda, devices = True, found
            if not devices:
                reasons.append("no CUDA device")
    nvdec = _load("libnvcuvid.so.1") is not None
    nvenc = _load("libnvidia-encode.so.1") is not None
    if not nvdec:
        reasons.append("libnvcuvid.so.1 not found (driver's video decode library)")
    if not nvenc:
        reasons.append("libnvidia-encode.so.1 not found (no NVENC library)")
    module = False
    if cuda and devices and nvdec and nvenc:  # PyNvVideoCodec needs both to import
        try:
            importlib.import_module("PyNvVideoCodec")
            module = True
        except ImportError:
            reasons.append(f"PyNvVideoCodec not installed ({install_hint('nvidia')})")
        except Exception as exc:  # it raises RuntimeError on driver problems
            reasons.append(f"PyNvVideoCodec failed to import: {str(exc).splitlines()[0]}")
    elif cuda and devices:
        reasons.append("PyNvVideoCodec not tried: it needs both driver video libraries")
    caps = NvCapabilities(cuda, devices, nvdec, nvenc, module, tuple(reasons))
    log.debug("NVIDIA video probe: %s", caps.summary())
    return caps


def nvc_module() -> ModuleType | None:
    """The imported PyNvVideoCodec module when the probe could import it, else None."""
    if not probe().module:
        return None
    return importlib.import_module("PyNvVideoCodec")
