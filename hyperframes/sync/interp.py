"""Interpolation of high-rate streams at query times: linear, and slerp for orientations.

Pure numpy, no I/O. Weights are computed from integer nanosecond differences
(never from absolute timestamps in float64, which would lose ~256 ns at
today's epoch). A query is padded (``is_pad``) when its two samples are more
than ``max_gap_ns`` apart (a dropout: no interpolation across it) or when it
lies outside the samples by more than ``extrapolate_ns``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hyperframes.sync._arrays import TimesLike, as_ns, as_sorted_ns

__all__ = ["Interpolated", "interpolate_linear", "slerp"]

_NLERP_BELOW = 1e-6  # sin(angle) below which slerp falls back to a normalised lerp


@dataclass(frozen=True, slots=True)
class Interpolated:
    """Values at the query times; NaN rows where ``is_pad``."""

    values: np.ndarray  # (n, *value_shape) float64
    is_pad: np.ndarray  # bool (n,)


def _brackets(
    q: np.ndarray, ts: np.ndarray, max_gap_ns: int | None, extrapolate_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Left/right sample positions, weight of the right one, and validity per query."""
    n = len(ts)
    if max_gap_ns is not None and max_gap_ns < 0:
        raise ValueError(f"max_gap_ns must be >= 0 or None, got {max_gap_ns}")
    if extrapolate_ns < 0:
        raise ValueError(f"extrapolate_ns must be >= 0, got {extrapolate_ns}")
    if n == 1:  # no slope: only exact hits
        zero = np.zeros(len(q), np.int64)
        return zero, zero, np.zeros(len(q)), q == ts[0]
    left = np.clip(np.searchsorted(ts, q, "right") - 1, 0, n - 2)
    right = left + 1
    dt = ts[right] - ts[left]
    off = q - ts[left]
    w = np.divide(off, dt, out=np.zeros(len(q)), where=dt > 0)
    # a query on a sample takes that sample exactly (w is 0 or 1), whatever the gap around it
    exact = (q == ts[left]) | (q == ts[right])
    inside = (q >= ts[0]) & (q <= ts[-1])
    beyond = np.maximum(ts[0] - q, q - ts[-1])
    ok = inside | (beyond <= extrapolate_ns)
    if max_gap_ns is not None:
        ok &= (dt <= max_gap_ns) | exact
    return left, right, w, ok


def interpolate_linear(
    query_ns: TimesLike,
    timestamps_ns: TimesLike,
    values: np.ndarray,
    *,
    max_gap_ns: int | None,
    extrapolate_ns: int = 0,
) -> Interpolated:
    """Linear interpolation of ``values`` (one row per timestamp) at ``query_ns``.

    For accelerations, angular rates, speeds: ``(1 - w) * v0 + w * v1`` with
    ``w`` from the ns offsets, so a query on a sample returns it exactly.
    """
    q = as_ns(query_ns, "query_ns")
    ts = as_sorted_ns(timestamps_ns, "timestamps_ns")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or len(v) != len(ts):
        raise ValueError(f"{len(ts)} timestamps but values of shape {v.shape}")
    out = np.full((len(q), *v.shape[1:]), np.nan)
    if len(ts) == 0 or len(q) == 0:
        return Interpolated(out, np.ones(len(q), bool))
    left, right, w, ok = _brackets(q, ts, max_gap_ns, extrapolate_ns)
    wb = w.reshape(-1, *([1] * (v.ndim - 1)))
    res = (1.0 - wb) * v[left] + wb * v[right]
    out[ok] = res[ok]
    return Interpolated(out, ~ok)


def slerp(
    query_ns: TimesLike,
    timestamps_ns: TimesLike,
    quaternions: np.ndarray,
    *,
    max_gap_ns: int | None,
    extrapolate_ns: int = 0,
) -> Interpolated:
    """Spherical linear interpolation of unit quaternions ``(n, 4)`` at ``query_ns``.

    The component order does not matter (``wxyz`` or ``xyzw``): results come
    back in the order given, normalised. The shorter arc is taken (``q`` and
    ``-q`` are the same rotation). A constant angular velocity between two
    samples is reproduced exactly.
    """
    q_ns = as_ns(query_ns, "query_ns")
    ts = as_sorted_ns(timestamps_ns, "timestamps_ns")
    quats = np.asarray(quaternions, dtype=np.float64)
    if quats.ndim != 2 or quats.shape[1] != 4 or len(quats) != len(ts):
        raise ValueError(f"expected ({len(ts)}, 4) quaternions, got shape {quats.shape}")
    out = np.full((len(q_ns), 4), np.nan)
    if len(ts) == 0 or len(q_ns) == 0:
        return Interpolated(out, np.ones(len(q_ns), bool))
    norms = np.linalg.norm(quats, axis=1, keepdims=True)
    if (norms == 0).any() or not np.isfinite(norms).all():
        raise ValueError("quaternions must be finite and non-zero")
    unit = quats / norms
    left, right, w, ok = _brackets(q_ns, ts, max_gap_ns, extrapolate_ns)
    a, b = unit[left], unit[right]
    dot = np.sum(a * b, axis=1)
    b = np.where((dot < 0)[:, None], -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_t = np.sin(theta)
    small = sin_t < _NLERP_BELOW
    safe = np.where(small, 1.0, sin_t)
    wa = np.where(small, 1.0 - w, np.sin((1.0 - w) * theta) / safe)
    wb = np.where(small, w, np.sin(w * theta) / safe)
    res = wa[:, None] * a + wb[:, None] * b
    res /= np.linalg.norm(res, axis=1, keepdims=True)
    out[ok] = res[ok]
    return Interpolated(out, ~ok)
