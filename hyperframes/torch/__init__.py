"""PyTorch datasets over hyperframe files (needs the ``torch`` extra).

- :class:`HyperframeDataset`: one sample per window, nested by sensor kind
  and stream, with masks for missing streams and aligned pads
- :class:`SequenceDataset`: clips of consecutive windows for temporal models
- :func:`collate`: stack per stream, pad variable frame counts with masks
- :class:`WindowSampler`: order from (seed, epoch), resumable, sharded by rank
- :class:`GpuVideoDecoder`: decode H.265 spans in the main process (NVDEC)
- :class:`FrameCache`: the per-worker LRU of decoded frames, sized in MB
- :func:`tune_malloc`: keep freed frame buffers in the heap (glibc), ~20% faster workers

See docs/TRAINING.md.
"""

from hyperframes._install import install_hint

try:
    import torch as _torch  # noqa: F401 - fail early with the extra to install
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        f"hyperframes.torch needs PyTorch: {install_hint('torch')} "
        "(see README: a GPU host installs the CUDA build of torch first)"
    ) from exc

from hyperframes.torch._load import DecodeMode
from hyperframes.torch.cache import CacheStats, FrameCache
from hyperframes.torch.catalog import Align, Catalog, build_catalog, expand_paths
from hyperframes.torch.collate import collate
from hyperframes.torch.dataset import HyperframeDataset, Sample, SequenceDataset
from hyperframes.torch.decode import decode_frame, jpeg_backend
from hyperframes.torch.errors import (
    DatasetError,
    SampleError,
    SamplerStateError,
    StreamSelectionError,
)
from hyperframes.torch.malloc import tune_malloc
from hyperframes.torch.sampler import WindowSampler, rank_slice, shuffled_order
from hyperframes.torch.video import EncodedSpan, GpuVideoDecoder

__all__ = [
    "HyperframeDataset",
    "SequenceDataset",
    "Sample",
    "DecodeMode",
    "Align",
    "collate",
    "WindowSampler",
    "shuffled_order",
    "rank_slice",
    "GpuVideoDecoder",
    "EncodedSpan",
    "FrameCache",
    "CacheStats",
    "tune_malloc",
    "Catalog",
    "build_catalog",
    "expand_paths",
    "decode_frame",
    "jpeg_backend",
    "DatasetError",
    "StreamSelectionError",
    "SampleError",
    "SamplerStateError",
]
