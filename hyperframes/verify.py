"""Full integrity check of a file: the strictest reader there is.

Beyond what the reader refuses on open (header, tables, metadata, every
offset and size, aliasing), ``verify`` checks every payload against its
CRC32C over its own exact byte range, decodes every payload and checks its
size against the stream's dtype and shape (each stored byte once: entries
aliasing a payload already checked are reported, not decoded again), checks
the header span and the frame counts, and compares the index, aux and
quarantine tables and the window table with the window block records (what
recovery would rely on).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hyperframes._blocks import END_OF_FILE, scan_blocks
from hyperframes._structure import Structure, load_aux, load_quarantine, load_structure
from hyperframes.errors import HyperframesError
from hyperframes.format.checks import overlap, payload_problem
from hyperframes.format.crc import crc32c
from hyperframes.format.layout import AUX_DTYPE, INDEX_DTYPE, QUARANTINE_DTYPE, FrameFlags
from hyperframes.format.streams import StreamInfo
from hyperframes.storage.objects import RemoteFile, is_url
from hyperframes.storage.source import Fd, pread_exact
from hyperframes.writer import file_span

__all__ = ["VerifyResult", "verify_file"]

_CHUNK = 16 << 20
_MAX_FRAME = 1 << 30


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


class _TooMany(Exception):
    """Enough problems reported; stop looking."""


class _Problems:
    def __init__(self, result: VerifyResult, limit: int) -> None:
        self.result = result
        self.limit = limit

    def add(self, text: str) -> None:
        self.result.problems.append(f"{self.result.path}: {text}")
        if len(self.result.problems) >= self.limit:
            self.result.problems.append(f"{self.result.path}: stopped after {self.limit} problems")
            raise _TooMany


def verify_file(
    path: str | os.PathLike[str],
    max_problems: int = 20,
    progress: Callable[[int, int], None] | None = None,
    *,
    decode: bool = True,
) -> VerifyResult:
    """Check ``path`` completely; never raises for a bad file, reports problems instead.

    ``progress(done_bytes, total_bytes)`` is called after each chunk read.
    ``decode=False`` checks every payload's CRC32C but does not decode it
    (for files whose payloads are byte copies of frames that decoded, such as
    the outputs of ``slice`` and ``cat``).
    """
    name = os.fspath(path)
    result = VerifyResult(name)
    fd: Fd
    try:
        # an s3:// object is read through once, 8 MiB per request
        fd = RemoteFile(name, readahead=8 << 20) if is_url(name) else os.open(name, os.O_RDONLY)
    except OSError as exc:
        result.problems.append(f"{name}: cannot open: {exc.strerror}")
        return result
    except HyperframesError as exc:
        result.problems.append(str(exc))
        return result
    try:
        s = load_structure(fd, name, allow_overlap=True)
        aux = load_aux(fd, name, s.header, len(s.index))
        quarantine = load_quarantine(fd, name, s.header)
    except HyperframesError as exc:
        result.problems.append(str(exc))
        _close(fd)
        return result
    result.frames, result.windows = len(s.index), len(s.windows)
    try:
        _check(fd, name, s, aux, quarantine, _Problems(result, max_problems), progress, decode)
    except _TooMany:
        pass
    except HyperframesError as exc:  # the block walk found the stream table unreadable
        result.problems.append(str(exc))
    finally:
        _close(fd)
    return result


def _close(fd: Fd) -> None:
    if isinstance(fd, int):
        os.close(fd)


def _check(
    fd: Fd,
    name: str,
    s: Structure,
    aux: np.ndarray,
    quarantine: np.ndarray,
    problems: _Problems,
    progress: Callable[[int, int], None] | None,
    decode: bool = True,
) -> None:
    streams = {st.id: st for st in s.meta.streams}
    q_entries = quarantine[list(INDEX_DTYPE.names or ())].astype(INDEX_DTYPE)
    for sid in set(q_entries["stream_id"].tolist()) - set(streams):
        problems.add(f"quarantine table names unknown stream {sid}")
    both = np.concatenate([s.index, q_entries])
    pair = overlap(both["offset"], both["size"])
    if pair is not None:
        problems.add(
            f"payloads of entries at offsets {int(both['offset'][pair[0]])} and "
            f"{int(both['offset'][pair[1]])} overlap (aliasing)"
        )
    _placement(s, quarantine, problems)
    _payloads(fd, both, streams if decode else {}, problems, progress)
    _blocks(fd, name, s, aux, quarantine, problems)


def _placement(s: Structure, quarantine: np.ndarray, problems: _Problems) -> None:
    """Every indexed frame inside the header span; blocks hold index + quarantine frames."""
    h = s.header
    if not len(quarantine) and (h.quarantine_offset or h.quarantine_crc):
        problems.add("header names a quarantine table (offset or CRC) but it holds no rows")
    ts = s.index["timestamp_ns"]
    lo, hi = file_span(ts[:0], ts, h.window_ns)  # the windows of the indexed frames
    if len(ts) and (lo < h.start_ns or hi > h.end_ns):
        problems.add(
            f"frames stamped {int(ts.min())}..{int(ts.max())} ns lie outside the header "
            f"span ({h.start_ns}, {h.end_ns}]"
        )
    in_blocks = int(s.windows["frame_count"].sum())
    if in_blocks != len(s.index) + len(quarantine):
        problems.add(
            f"window blocks hold {in_blocks} frames, index and quarantine table "
            f"{len(s.index)} + {len(quarantine)}"
        )


def _payloads(
    fd: Fd,
    entries: np.ndarray,
    streams: dict[int, StreamInfo],
    problems: _Problems,
    progress: Callable[[int, int], None] | None,
) -> None:
    """CRC32C of every payload over its own range, then decode it and check its size
    (payloads of the streams in ``streams``; all of them unless ``decode=False``).

    Each stored byte is checked once: an entry whose payload overlaps one
    already checked (aliasing, reported by ``_check``) is counted, not
    decoded again, so that the work stays bounded by the file's size and not
    by entries x payload (a thousand entries naming one payload).
    """
    idx = entries[np.argsort(entries["offset"], kind="stable")]
    rows, aliased, reach = [], 0, 0
    for row in idx.tolist():
        off, size = row[4], row[5]
        if size and off < reach:
            aliased += 1
            continue
        reach = max(reach, off + size)
        rows.append(row)
    if aliased:
        problems.add(
            f"{aliased} entries name bytes of payloads checked already (aliasing); "
            "not checked again"
        )
    total = sum(r[5] for r in rows)
    done, i, n = 0, 0, len(rows)
    while i < n:
        # one sequential read covering as many payloads as fit in a chunk; its end is the
        # furthest end of any of them (payloads may overlap in a hostile file)
        base = rows[i][4]
        end = base + rows[i][5]
        j = i + 1
        while j < n and max(end, rows[j][4] + rows[j][5]) - base <= _CHUNK:
            end = max(end, rows[j][4] + rows[j][5])
            j += 1
        view = memoryview(pread_exact(fd, end - base, base))
        for sid, flags, _sidx, ts, off, size, crc in rows[i:j]:
            stored = view[off - base : off - base + size]
            what = f"frame of stream {sid} at t={ts} ns (offset {off})"
            actual = crc32c(stored)
            if len(stored) != size:
                problems.add(f"{what}: truncated ({len(stored)}/{size} bytes)")
            elif actual != crc:
                problems.add(
                    f"{what}: CRC32C mismatch (stored {crc:#010x}, computed {actual:#010x})"
                )
            elif sid in streams:
                problem = payload_problem(streams[sid], flags, stored, _MAX_FRAME)
                if problem is not None:
                    problems.add(f"{what}: {problem}")
            done += size
            problems.result.payload_bytes = done
        if progress is not None:
            progress(done, total)
        i = j


def _blocks(
    fd: Fd, name: str, s: Structure, aux: np.ndarray, quarantine: np.ndarray, problems: _Problems
) -> None:
    """The window block records must be intact and say what the tables say."""
    scan = scan_blocks(fd, name, check_payloads=False)
    if scan.stop_reason != END_OF_FILE or len(scan.windows) != len(s.windows):
        problems.add(
            f"window blocks: {scan.stop_reason} ({len(scan.windows)} of {len(s.windows)} "
            "blocks intact)"
        )
        return
    if not np.array_equal(scan.windows, np.sort(s.windows, order="window_id")):
        problems.add("window table does not match the window block records")
    # what the trailer must hold, derived from the blocks as write_trailer derives it
    block_rows = _rows(scan.entries, scan.aux)
    quarantined = (scan.entries["flags"] & FrameFlags.QUARANTINED) != 0
    has_aux = s.header.aux_size > 0
    index_rows = _rows(s.index, aux if has_aux else None)
    want = block_rows[~quarantined]
    if not has_aux:
        want = _rows(scan.entries[~quarantined], None)
    differ = _differ(index_rows, want)
    if differ is not None:
        problems.add(
            f"index{' or aux table' if has_aux else ''} does not match the window "
            f"block records ({differ})"
        )
    q_rows = quarantine.view(np.uint8).reshape(len(quarantine), QUARANTINE_DTYPE.itemsize)
    q_want = block_rows[quarantined]
    if q_rows.shape != q_want.shape or not np.array_equal(q_rows, q_want):
        problems.add("quarantine table does not match the window block records (write order)")


def _rows(entries: np.ndarray, aux: np.ndarray | None) -> np.ndarray:
    """Entries (and aux rows) as raw byte rows, 32 or 48 bytes each."""
    n = len(entries)
    parts = [np.ascontiguousarray(entries).view(np.uint8).reshape(n, INDEX_DTYPE.itemsize)]
    if aux is not None:
        parts.append(np.ascontiguousarray(aux).view(np.uint8).reshape(n, AUX_DTYPE.itemsize))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]


def _differ(got: np.ndarray, want: np.ndarray) -> str | None:
    """How two sets of byte rows differ (as multisets), or None when they are the same."""
    if got.shape != want.shape:
        return f"{len(got)} entries, the blocks hold {len(want)}"
    a = np.sort(got.view(f"V{got.shape[1]}").ravel()) if len(got) else got
    b = np.sort(want.view(f"V{want.shape[1]}").ravel()) if len(want) else want
    if np.array_equal(a, b):
        return None
    k = int(np.argmax(a != b))
    e = np.frombuffer(bytes(a[k])[: INDEX_DTYPE.itemsize], INDEX_DTYPE)[0]
    return f"e.g. stream {int(e['stream_id'])} at t={int(e['timestamp_ns'])} ns"
