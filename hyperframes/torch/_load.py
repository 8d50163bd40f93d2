"""From a window (or a clip of windows) of one file to sample dicts: plan, read, decode.

A *plan* lists, per selected stream, the stream-relative positions of the
frames one step needs (None for a pad: an aligned query that matched
nothing). Loading unions the positions of all steps of a sample per stream,
reads and decodes each frame once, and then builds one dict per step.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from hyperframes.errors import HyperframesError
from hyperframes.format import search
from hyperframes.format.streams import StreamInfo
from hyperframes.format.windows import window_end, window_of, window_start
from hyperframes.sync import NoMatchError, nearest
from hyperframes.torch._read import read_frames
from hyperframes.torch._state import WorkerState
from hyperframes.torch.catalog import Align, Catalog
from hyperframes.torch.decode import decode_frame, is_image
from hyperframes.torch.errors import SampleError
from hyperframes.torch.video import decode_cpu, read_span

__all__ = ["DecodeMode", "StepPlan", "plan_step", "load_steps"]

DecodeMode = Literal["cpu", "gpu", "raw"]
_Arrays = dict[int, np.ndarray]


@dataclass(frozen=True, slots=True)
class StepPlan:
    """The frames one window contributes to a sample."""

    window: int  # position of the window in its file
    window_id: int
    start_ns: int  # exclusive
    end_ns: int  # inclusive
    positions: dict[str, list[int | None]]  # stream name -> stream-relative positions
    missing: dict[str, bool]  # stream name -> no frame of it in this window


def plan_step(
    state: WorkerState, catalog: Catalog, file: int, window: int, align: Align | None
) -> StepPlan:
    """Which frames of each selected stream window ``window`` of file ``file`` needs."""
    fw = catalog.files[file]
    wid = int(fw.window_ids[window])
    start, end = window_start(wid, catalog.window_ns), window_end(wid, catalog.window_ns)
    lo, hi = start, end  # (lo, hi]: the window, or the part of it in a manifest's clip
    if fw.span is not None:
        lo, hi = max(lo, fw.span[0] - 1), min(hi, fw.span[1])
    own: dict[str, range] = {}
    for name, sid in fw.stream_ids.items():
        _, ts = state.stream(fw.path, sid)
        a, b = search.window_between(ts, lo, hi)
        own[name] = range(a, b)
    missing = {name: len(r) == 0 for name, r in own.items()}
    if align is None:
        return StepPlan(window, wid, start, end, {n: list(r) for n, r in own.items()}, missing)
    _, ref_ts = state.stream(fw.path, fw.stream_ids[align.ref])
    query = ref_ts[own[align.ref].start : own[align.ref].stop]
    positions: dict[str, list[int | None]] = {}
    for name, sid in fw.stream_ids.items():
        if name == align.ref:
            positions[name] = list(own[name])
            continue
        _, ts = state.stream(fw.path, sid)
        m = nearest(query, ts, tolerance_ns=align.tolerance_ns, mode=align.mode)
        if align.strict and m.is_pad.any():
            q = query[m.is_pad]
            near = nearest(q, ts, tolerance_ns=None)
            raise NoMatchError(
                fw.path,
                name,
                [int(t) for t in q],
                [None if p else int(ts[i]) for i, p in zip(near.index, near.is_pad, strict=True)],
                align.tolerance_ns,
            )
        positions[name] = [None if p else int(i) for i, p in zip(m.index, m.is_pad, strict=True)]
    return StepPlan(window, wid, start, end, positions, missing)


def _load_stream(
    state: WorkerState,
    path: str,
    stream: StreamInfo,
    sid: int,
    positions: list[int],
    decode: DecodeMode,
    window_ns: int,
) -> _Arrays:
    if stream.encoding == "h265" and decode == "cpu":
        return decode_cpu(state, path, sid, positions)
    base, _ = state.stream(path, sid)
    cache = state.cache if decode != "raw" and is_image(stream) else None
    out: _Arrays = {}
    todo = []
    for p in positions:
        hit = cache.get((path, base + p)) if cache is not None else None
        if hit is None:
            todo.append(p)
        else:
            out[p] = hit
    for p, frame in read_frames(state.reader(path), base, todo).items():
        if decode == "raw":
            out[p] = frame.data
            continue
        try:
            arr = decode_frame(frame)
        except ValueError as exc:
            wid = window_of(frame.timestamp_ns, window_ns)
            raise SampleError(path, stream.name, frame.timestamp_ns, wid, str(exc)) from None
        if cache is not None:
            cache.put((path, base + p), arr)
        out[p] = arr
    return out


def _stream_entry(
    plan: StepPlan, name: str, ts: np.ndarray, arrays: _Arrays | None, span: Any
) -> dict[str, Any]:
    positions = plan.positions[name]
    stamps = [0 if p is None else int(ts[p]) for p in positions]
    entry: dict[str, Any] = {
        "timestamp_ns": torch.tensor(stamps, dtype=torch.int64),
        "is_pad": torch.tensor([p is None for p in positions], dtype=torch.bool),
        "missing": plan.missing[name],
    }
    if arrays is not None:
        entry["data"] = [None if p is None else torch.from_numpy(arrays[p]) for p in positions]
    else:
        entry["encoded"] = span
    return entry


def load_steps(
    state: WorkerState,
    catalog: Catalog,
    file: int,
    plans: list[StepPlan],
    decode: DecodeMode,
    threads: int,
) -> list[dict[str, Any]]:
    """Read and decode what ``plans`` need; one sample dict per plan (see the datasets)."""
    fw = catalog.files[file]
    path = fw.path
    jobs: dict[str, Callable[[], _Arrays]] = {}
    spans: list[np.ndarray] = []
    for stream in catalog.streams:
        if decode == "gpu" and stream.encoding == "h265":
            continue
        sid = fw.stream_ids[stream.name]
        wanted = sorted({p for plan in plans for p in plan.positions[stream.name] if p is not None})
        spans.append(state.stream(path, sid)[0] + np.asarray(wanted, dtype=np.int64))

        def job(s: StreamInfo = stream, i: int = sid, w: list[int] = wanted) -> _Arrays:
            return _load_stream(state, path, s, i, w, decode, catalog.window_ns)

        jobs[stream.name] = job
    held = _hold_span(state.reader(path), spans)
    try:
        arrays = _run(state, jobs, threads, path, plans)
    finally:
        if held is not None:  # an open reader keeps no sample's bytes
            held.release()
    samples = []
    for plan in plans:
        sample: dict[str, Any] = {
            "file": path,
            "window": plan.window,
            "window_id": plan.window_id,
            "start_ns": plan.start_ns,
            "end_ns": plan.end_ns,
        }
        for stream in catalog.streams:
            sid = fw.stream_ids[stream.name]
            _, ts = state.stream(path, sid)
            span = None
            if decode == "gpu" and stream.encoding == "h265":
                try:
                    span = read_span(state, path, sid, plan.positions[stream.name])
                except (ValueError, HyperframesError) as exc:
                    raise SampleError(
                        path, stream.name, plan.start_ns, plan.window_id, str(exc)
                    ) from exc
            group = sample.setdefault(str(stream.kind), {})
            group[stream.name] = _stream_entry(plan, stream.name, ts, arrays.get(stream.name), span)
        samples.append(sample)
    return samples


_HOLD_MAX = 64 << 20  # larger spans are read stream by stream


def _hold_span(reader: Any, positions: list[np.ndarray]) -> Any:
    """From a bucket: fetch the bytes of every frame the sample needs in one request (a
    window's frames are contiguous in the file), so the streams' reads share it; returns
    the remote file holding them (None: nothing held)."""
    remote = reader.remote
    if remote is None or not positions:
        return None
    idx = np.concatenate(positions)
    if idx.size < 2:
        return None
    rows = reader.index[idx]
    start = int(rows["offset"].min())
    end = int((rows["offset"] + rows["size"]).max())
    if end - start > _HOLD_MAX:
        return None
    remote.hold(start, end - start)
    return remote


def _run(
    state: WorkerState,
    jobs: dict[str, Callable[[], _Arrays]],
    threads: int,
    path: str,
    plans: list[StepPlan],
) -> dict[str, _Arrays]:
    """Run the per-stream jobs inline or on the worker's thread pool; errors name the stream."""
    results: dict[str, _Arrays] = {}
    futures: dict[str, Future[_Arrays]] = {}
    if threads > 1 and len(jobs) > 1:
        pool = state.pool(threads)
        futures = {name: pool.submit(job) for name, job in jobs.items()}
    for name, job in jobs.items():
        try:
            results[name] = futures[name].result() if futures else job()
        except SampleError:
            raise
        except (ValueError, HyperframesError) as exc:
            raise SampleError(path, name, plans[0].start_ns, plans[0].window_id, str(exc)) from exc
    return results
