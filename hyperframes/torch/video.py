"""H.265 cameras in datasets: decode in the worker (``cpu``) or demux there, decode later (``gpu``).

``decode="cpu"``: each worker keeps one :class:`~hyperframes.video.VideoStream`
(one CPU decoder) per camera and file and decodes the frames a sample needs
in ascending order, so consecutive frames (a window, a clip, neighbouring
windows) decode forward without seeking; cameras run in threads (the decoder
releases the GIL).

``decode="gpu"``: workers never touch CUDA. For each camera a worker reads
the access units from the IDR at or before the first frame a sample needs to
the last one it needs, and returns them as an *encoded span* (bytes plus
offsets, all CPU tensors). In the main process :class:`GpuVideoDecoder`
decodes the spans of a collated batch with one cached decoder per camera
(NVDEC by default) and puts the pictures into the batch as CUDA tensors.
This is the demux/decode split of the design notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hyperframes.torch._read import read_frames
from hyperframes.torch._state import WorkerState
from hyperframes.video import VideoStream, create_decoder
from hyperframes.video.decode import Decoder

__all__ = ["decode_cpu", "read_span", "EncodedSpan", "GpuVideoDecoder"]

EncodedSpan = dict[str, Any]
"""One camera's access units for one sample step, as returned by a worker.

Keys: ``au`` (uint8 tensor, the access units back to back), ``offsets``
(int64 tensor, ``k + 1`` byte offsets), ``first`` (stream position of the
first access unit, an IDR; -1 when empty), ``want`` (int64 tensor: the
stream position of each frame of the step, -1 for a pad), ``key`` (file and
stream: decoder state is only reused within one stream of one file).
"""


def decode_cpu(
    state: WorkerState, path: str, sid: int, positions: Sequence[int]
) -> dict[int, np.ndarray]:
    """RGB pictures ``(H, W, 3)`` uint8 at stream-relative ``positions`` (ascending order).

    Uses the worker's cached :class:`VideoStream` of this camera, so frames
    after the last one decoded continue forward without a seek; the frame
    cache (when enabled) is checked first.
    """
    vs = state.videos.get((path, sid))
    if vs is None:
        vs = VideoStream(state.reader(path), sid, decoder="cpu", output="rgb")
        state.videos[(path, sid)] = vs
    base, _ = state.stream(path, sid)
    out: dict[int, np.ndarray] = {}
    for p in sorted(set(positions)):
        key = (path, base + p)
        cached = state.cache.get(key) if state.cache is not None else None
        if cached is not None:
            out[p] = cached
            continue
        image = np.asarray(vs.frame_at(p).image)
        if state.cache is not None:
            state.cache.put(key, image)
        out[p] = image
    return out


def read_span(state: WorkerState, path: str, sid: int, want: Sequence[int | None]) -> EncodedSpan:
    """The encoded span of one camera for frames ``want`` (stream positions; None for pads)."""
    valid = [w for w in want if w is not None]
    want_t = torch.tensor([-1 if w is None else w for w in want], dtype=torch.int64)
    key = f"{path}\x00{sid}"
    if not valid:
        return {
            "au": torch.empty(0, dtype=torch.uint8),
            "offsets": torch.zeros(1, dtype=torch.int64),
            "first": -1,
            "want": want_t,
            "key": key,
        }
    lo, hi = min(valid), max(valid)
    kf = state.keyframes(path, sid)
    k = int(np.searchsorted(kf, lo, "right")) - 1
    if k < 0:
        raise ValueError(f"no IDR (KEYFRAME) at or before frame {lo} of the stream")
    first = int(kf[k])
    base, _ = state.stream(path, sid)
    frames = read_frames(state.reader(path), base, range(first, hi + 1))
    parts = [frames[p].data for p in range(first, hi + 1)]
    sizes = np.array([0] + [len(p) for p in parts], np.int64)
    au = torch.from_numpy(np.concatenate(parts)) if parts else torch.empty(0, dtype=torch.uint8)
    return {
        "au": au,
        "offsets": torch.from_numpy(np.cumsum(sizes)),
        "first": first,
        "want": want_t,
        "key": key,
    }


@dataclass(slots=True)
class _Camera:
    decoder: Decoder
    key: str | None = None
    next: int | None = None  # stream position the decoder would produce next


class GpuVideoDecoder:
    """Decodes the encoded spans of collated batches in this process (``decode="gpu"``).

    ``decoder`` names a :func:`~hyperframes.video.create_decoder` backend
    (``"nvdec"`` by default; ``"cpu"`` runs the same split on a machine
    without a GPU). One decoder per camera stream name is created on first use
    and kept; a span that continues where that camera's decoder stopped (the
    next window, the next step of a clip) is decoded forward without a reset.
    Call it on a batch: ``batch = gpu_decoder(batch)`` fills ``data`` of every
    H.265 stream with a ``(B, F, H, W, 3)`` uint8 tensor (``(B, T, F, ...)``
    for clips) on the decoder's device (CUDA for NVDEC) and drops ``encoded``.
    Use it from the main process or one dedicated thread, never in a worker.
    """

    def __init__(self, decoder: str = "nvdec", **decoder_options: Any) -> None:
        self.decoder_name = decoder
        self.decoder_options = decoder_options
        self._cameras: dict[str, _Camera] = {}
        self.reset_count = 0
        self.fed_count = 0

    def _camera(self, name: str) -> _Camera:
        cam = self._cameras.get(name)
        if cam is None:
            cam = _Camera(create_decoder(self.decoder_name, "rgb", **self.decoder_options))
            self._cameras[name] = cam
        return cam

    def decode_span(self, name: str, span: EncodedSpan) -> list[torch.Tensor | None]:
        """The pictures of one span, one per ``want`` entry (None for pads)."""
        want = [int(w) for w in span["want"].tolist()]
        valid = sorted({w for w in want if w >= 0})
        if not valid:
            return [None] * len(want)
        cam = self._camera(name)
        first, key = int(span["first"]), str(span["key"])
        offsets = span["offsets"].tolist()
        last = first + len(offsets) - 2
        if valid[-1] > last or valid[0] < first:
            raise ValueError(f"span of {name} covers {first}..{last}, not {valid[0]}..{valid[-1]}")
        if cam.key == key and cam.next is not None and first <= cam.next <= valid[0]:
            start = cam.next
        else:
            cam.decoder.reset()
            cam.key, cam.next = key, None
            self.reset_count += 1
            start = first
        au = span["au"].numpy()
        wanted = set(valid)
        got: dict[int, Any] = {}
        for pos in range(start, valid[-1] + 1):
            k = pos - first
            cam.next = None
            for pic in cam.decoder.decode(au[offsets[k] : offsets[k + 1]], pos):
                if pic.pts in wanted:
                    got[pic.pts] = pic.image
            cam.next = pos + 1
            self.fed_count += 1
        if len(got) < len(wanted):  # a decoder that held pictures back: drain it
            for pic in cam.decoder.flush():
                if pic.pts in wanted:
                    got[pic.pts] = pic.image
            cam.next = None
        missing = wanted - set(got)
        if missing:
            raise ValueError(f"{name}: decoder returned no picture for frames {sorted(missing)}")
        return [_tensor(got[w]) if w >= 0 else None for w in want]

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Decode every encoded span of a collated batch in place; returns the batch."""
        for key, group in batch.items():
            if not isinstance(group, dict) or key == "meta":
                continue
            for name, entry in group.items():
                if isinstance(entry, dict) and "encoded" in entry:
                    entry["data"] = self._decode_entry(name, entry)
                    del entry["encoded"]
        return batch

    def _decode_entry(self, name: str, entry: dict[str, Any]) -> torch.Tensor:
        is_pad: torch.Tensor = entry["is_pad"]
        lead = tuple(is_pad.shape)  # (B, F) or (B, T, F)
        flat_pad = is_pad.reshape(-1, lead[-1])
        spans: list[EncodedSpan] = entry["encoded"]
        if len(spans) != flat_pad.shape[0]:
            raise ValueError(f"{name}: {len(spans)} spans for {flat_pad.shape[0]} samples")
        pictures = [self.decode_span(name, span) for span in spans]
        sample = next((p for row in pictures for p in row if p is not None), None)
        if sample is None:
            return torch.zeros(lead, dtype=torch.uint8)
        out = torch.zeros(
            (flat_pad.shape[0], lead[-1], *sample.shape), dtype=sample.dtype, device=sample.device
        )
        for b, row in enumerate(pictures):
            for f, pic in enumerate(row):
                if pic is not None:
                    out[b, f] = pic
        return out.reshape(*lead, *sample.shape)

    @property
    def cameras(self) -> list[str]:
        """Camera streams with a decoder so far."""
        return list(self._cameras)

    def close(self) -> None:
        """Release every decoder."""
        for cam in self._cameras.values():
            cam.decoder.close()
        self._cameras.clear()


def _tensor(image: Any) -> torch.Tensor:
    if isinstance(image, torch.Tensor):
        return image
    return torch.from_numpy(np.ascontiguousarray(image))
