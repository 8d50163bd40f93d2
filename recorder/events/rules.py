"""Event rules on the data: frames in, events out. Pure: no I/O, no clock read here.

Two kinds, configured under ``events.rules`` in the vehicle YAML:

- **threshold**: a numeric field of an array stream (``field``: the index in
  the frame's last axis, or a name from the stream's ``extra.fields``) is
  ``below`` or ``above`` a value for at least ``for_ms`` of sensor time. A
  frame satisfies the condition when every row does (a frame of several IMU
  samples: all of them). The event is stamped with the first frame of the
  run, once the run has lasted ``for_ms``, and fires once per run: the
  condition must clear before it fires again.
- **stale**: a stream delivers nothing for ``stale_ms`` of host time (since
  its last frame, or since the start for a stream never seen). Stamped with
  the sensor time at which it went quiet (its last frame plus ``stale_ms``,
  or the caller's estimate of sensor time); fires once until the stream
  delivers again.

The daemon calls :meth:`RuleEngine.on_frame` for frames of watched streams
only (one set lookup per frame otherwise) and :meth:`RuleEngine.tick` from
its ticker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hyperframes.events import Event
from hyperframes.format.streams import StreamInfo

__all__ = ["ThresholdRule", "StaleRule", "Rule", "RuleEngine"]


@dataclass(frozen=True, slots=True)
class ThresholdRule:
    """``stream``'s ``field`` below/above ``value`` for ``for_ns`` -> event ``name``."""

    name: str
    stream_id: int
    field: int
    below: float | None = None
    above: float | None = None
    for_ns: int = 0
    pre_s: float = 0.0
    post_s: float = 0.0


@dataclass(frozen=True, slots=True)
class StaleRule:
    """No frame of ``stream`` for ``stale_ns`` of host time -> event ``name``."""

    name: str
    stream_id: int
    stale_ns: int
    pre_s: float = 0.0
    post_s: float = 0.0


Rule = ThresholdRule | StaleRule


@dataclass(slots=True)
class _Run:
    start_ns: int | None = None
    fired: bool = False


@dataclass(slots=True)
class _Seen:
    host_ns: int
    t_ns: int | None = None
    fired: bool = False


class RuleEngine:
    """Evaluates rules on frames; ``streams`` describe the watched streams' arrays."""

    def __init__(
        self, rules: Iterable[Rule], streams: Mapping[int, StreamInfo], start_host_ns: int
    ) -> None:
        self.thresholds: dict[int, list[tuple[ThresholdRule, _Run]]] = {}
        self.stale: list[tuple[StaleRule, _Seen]] = []
        self._streams = dict(streams)
        for r in rules:
            if isinstance(r, ThresholdRule):
                self.thresholds.setdefault(r.stream_id, []).append((r, _Run()))
            else:
                self.stale.append((r, _Seen(start_host_ns)))
        self._stale_by_stream: dict[int, list[_Seen]] = {}
        for r, seen in self.stale:
            self._stale_by_stream.setdefault(r.stream_id, []).append(seen)
        self.watched = frozenset(self.thresholds) | frozenset(self._stale_by_stream)
        """Stream ids whose frames the engine needs to see."""
        self._layouts: dict[int, tuple[np.dtype[Any], int]] = {}
        self.unreadable = 0
        """Frames of a threshold stream whose payload did not fit its dtype and shape."""

    def on_frame(self, stream_id: int, t_ns: int, payload: memoryview, host_ns: int) -> list[Event]:
        """Feed one frame (call only for ``stream_id in watched``); returns the events fired."""
        for seen in self._stale_by_stream.get(stream_id, ()):
            seen.host_ns, seen.t_ns, seen.fired = host_ns, t_ns, False
        rules = self.thresholds.get(stream_id)
        if not rules:
            return []
        info = self._streams[stream_id]
        dtype, width = self._layout(info)
        try:
            rows = np.frombuffer(payload, dtype=dtype).reshape(-1, width)
        except (ValueError, TypeError):
            self.unreadable += 1
            return []
        if rows.shape[0] == 1:  # the usual IMU frame: one sample, no reductions
            hi = lo = rows[0].tolist()
        elif rows.shape[0] == 0:
            return []
        else:
            hi, lo = rows.max(axis=0).tolist(), rows.min(axis=0).tolist()
        out: list[Event] = []
        for rule, run in rules:
            if rule.field >= width:
                continue
            if rule.below is not None:
                worst = hi[rule.field]
                ok = worst < rule.below
            else:
                worst = lo[rule.field]
                ok = rule.above is not None and worst > rule.above
            if not ok:
                run.start_ns, run.fired = None, False
                continue
            if run.start_ns is None or t_ns < run.start_ns:
                run.start_ns = t_ns
            if not run.fired and t_ns - run.start_ns >= rule.for_ns:
                run.fired = True
                limit = rule.below if rule.below is not None else rule.above
                out.append(Event(
                    run.start_ns, rule.name, rule.pre_s, rule.post_s,
                    tags={"rule": "threshold", "stream": info.name},
                    payload={"field": rule.field, "value": worst, "limit": limit,
                             "op": "below" if rule.below is not None else "above",
                             "held_ms": (t_ns - run.start_ns) / 1e6},
                    source="rule", clock=str(info.timestamp_source),
                ))  # fmt: skip
        return out

    def _layout(self, info: StreamInfo) -> tuple[np.dtype[Any], int]:
        got = self._layouts.get(info.id)
        if got is None:
            got = self._layouts[info.id] = (np.dtype(info.dtype), info.shape[-1] if info.shape
                                            else 1)  # fmt: skip
        return got

    def tick(self, host_ns: int, sensor_now_ns: int) -> list[Event]:
        """Stale rules at host time ``host_ns``; ``sensor_now_ns`` estimates sensor time now."""
        out: list[Event] = []
        for rule, seen in self.stale:
            quiet = host_ns - seen.host_ns
            if seen.fired or quiet < rule.stale_ns:
                continue
            seen.fired = True
            if seen.t_ns is not None:
                t = seen.t_ns + rule.stale_ns
            else:
                t = sensor_now_ns - (quiet - rule.stale_ns)
            name = self._streams[rule.stream_id].name if rule.stream_id in self._streams else ""
            out.append(Event(
                t, rule.name, rule.pre_s, rule.post_s,
                tags={"rule": "stale", "stream": name},
                payload={"stale_ms": rule.stale_ns / 1e6, "never_seen": seen.t_ns is None},
                source="rule", clock="host" if seen.t_ns is None else "hardware",
            ))  # fmt: skip
        return out
