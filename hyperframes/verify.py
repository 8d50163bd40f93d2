"""Full integrity check of a file: structure, every table checksum, every payload CRC32C."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hyperframes._crc import crc32c
from hyperframes._io import pread_exact
from hyperframes._structure import Structure, load_aux, load_quarantine, load_structure
from hyperframes.errors import HyperframesError
from hyperframes.layout import INDEX_DTYPE
from hyperframes.recover import scan_blocks
from hyperframes.writer import file_span

__all__ = ["VerifyResult", "verify_file"]

_CHUNK = 16 << 20


@dataclass(slots=True)
class VerifyResult:
    """Outcome of :func:`verify_file`; ``ok`` only if ``problems`` is empty."""

    path: str
    frames: int = 0
    windows: int = 0
    payload_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the file is structurally valid and every checksum matches."""
        return not self.problems


def _placement_problems(name: str, s: Structure, quarantine: np.ndarray) -> list[str]:
    """Every indexed frame inside the header span; blocks hold index + quarantine frames."""
    problems = []
    h = s.header
    ts = s.index["timestamp_ns"]
    lo, hi = file_span(ts[:0], ts, h.window_ns)  # the windows of the indexed frames
    if len(ts) and (lo < h.start_ns or hi > h.end_ns):
        problems.append(
            f"{name}: frames stamped {int(ts.min())}..{int(ts.max())} ns lie outside the header "
            f"span ({h.start_ns}, {h.end_ns}]"
        )
    in_blocks = int(s.windows["frame_count"].sum())
    if in_blocks != len(s.index) + len(quarantine):
        problems.append(
            f"{name}: window blocks hold {in_blocks} frames, index and quarantine table "
            f"{len(s.index)} + {len(quarantine)}"
        )
    return problems


def verify_file(
    path: str | os.PathLike[str],
    max_problems: int = 20,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Check ``path`` completely; never raises for a bad file, reports problems instead.

    ``progress(done_bytes, total_bytes)`` is called after each chunk read.
    """
    name = os.fspath(path)
    result = VerifyResult(name)
    try:
        fd = os.open(name, os.O_RDONLY)
    except OSError as exc:
        result.problems.append(f"{name}: cannot open: {exc.strerror}")
        return result
    try:
        try:
            s = load_structure(fd, name)
            load_aux(fd, name, s.header, len(s.index))
            quarantine = load_quarantine(fd, name, s.header)
        except HyperframesError as exc:
            result.problems.append(str(exc))
            return result
        result.frames, result.windows = len(s.index), len(s.windows)
        result.problems += _placement_problems(name, s, quarantine)
        both = np.concatenate(
            [s.index, quarantine[list(INDEX_DTYPE.names or ())].astype(INDEX_DTYPE)]
        )
        idx = both[np.argsort(both["offset"], kind="stable")]
        offsets = idx["offset"].astype(np.int64)
        sizes = idx["size"].astype(np.int64)
        total = int(sizes.sum())
        result.payload_bytes = total
        done = 0
        i, n = 0, len(idx)
        while i < n:
            # one sequential read covering as many consecutive payloads as fit in a chunk
            j = i + 1
            while j < n and offsets[j] + sizes[j] - offsets[i] <= _CHUNK:
                j += 1
            base = int(offsets[i])
            buf = pread_exact(fd, int(offsets[j - 1] + sizes[j - 1]) - base, base)
            view = memoryview(buf)
            for k in range(i, j):
                rel = int(offsets[k]) - base
                actual = crc32c(view[rel : rel + int(sizes[k])])
                if actual != int(idx["crc32c"][k]):
                    result.problems.append(
                        f"{name}: frame of stream {int(idx['stream_id'][k])} at "
                        f"t={int(idx['timestamp_ns'][k])} ns (offset {int(offsets[k])}): "
                        f"CRC32C mismatch (stored {int(idx['crc32c'][k]):#010x}, "
                        f"computed {actual:#010x})"
                    )
                    if len(result.problems) >= max_problems:
                        result.problems.append(f"{name}: stopped after {max_problems} problems")
                        return result
                done += int(sizes[k])
            if progress is not None:
                progress(done, total)
            i = j
        # the window block records (what recovery would rely on) must be intact too
        scan = scan_blocks(fd, name, check_payloads=False)
        if scan.stop_reason != "end of file" or len(scan.windows) != len(s.windows):
            result.problems.append(
                f"{name}: window blocks: {scan.stop_reason} "
                f"({len(scan.windows)} of {len(s.windows)} blocks intact)"
            )
    finally:
        os.close(fd)
    return result
