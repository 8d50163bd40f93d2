"""Pure upload logic: which file goes first, where it goes, how long to wait.

No I/O here: the service feeds in what it listed and the clock it reads.

What the service uploads falls in three classes (:data:`CLASSES`), sent in
this order: event ``clip`` files (``OUTPUT_DIR/clips/NAME.hf``), files a depot
``requested`` (staged under ``OUTPUT_DIR/.requests/ID/``), then the finalized
``segment`` files themselves (``upload.mode: all`` only). Within segments,
those that events protect or that match ``priority_glob`` go first; oldest
first within each group (:func:`order`).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CLASSES",
    "CLIPS_DIR",
    "Candidate",
    "object_key",
    "clip_key",
    "candidate_key",
    "order",
    "backoff_s",
    "EntryBackoff",
    "TokenBucket",
]

CLASSES: Final = ("clip", "requested", "segment")
"""What the service uploads, in the order it uploads it (docs/OPERATIONS.md, Upload)."""
CLIPS_DIR: Final = "clips"
"""Where event clips lie under ``OUTPUT_DIR``, and their folder under ``PREFIX/VEHICLE/``."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A file waiting to be uploaded.

    ``name`` is its path relative to ``OUTPUT_DIR`` with ``/`` separators, the key
    of its mark: a segment's file name (so marks written before classes existed
    still count), ``clips/NAME.hf`` for a clip, ``.requests/ID/...`` for a
    requested file. ``key`` is its object key when the class gives one (clips,
    requested files); a segment's follows :func:`object_key`.
    """

    name: str
    vehicle: str
    start: dt.datetime  # UTC: a segment's start from its name; a clip's or request's file time
    seq: int  # a segment's sequence number; else the rank its class listed it in
    size: int
    kind: str = "segment"
    """One of :data:`CLASSES`."""
    key: str | None = None
    source: str | None = None
    """The file to read when it is not ``OUTPUT_DIR/name`` (a clips directory set
    elsewhere, a staged file): an absolute path."""

    def __post_init__(self) -> None:
        if self.kind not in CLASSES:
            raise ValueError(f"{self.kind!r} is not one of {', '.join(CLASSES)}")


def _prefix_parts(prefix: str) -> list[str]:
    return [p for p in prefix.strip("/").split("/") if p]


def object_key(prefix: str, vehicle: str, start: dt.datetime, name: str) -> str:
    """``PREFIX/VEHICLE/YYYY-MM-DD/NAME`` (no leading slash; an empty prefix is left out)."""
    return "/".join([*_prefix_parts(prefix), vehicle, f"{start:%Y-%m-%d}", name])


def clip_key(prefix: str, vehicle: str, name: str) -> str:
    """A clip's key: ``PREFIX/VEHICLE/clips/NAME.hf`` (``name``: the clip's file name)."""
    base = name.rsplit("/", 1)[-1]
    return "/".join([*_prefix_parts(prefix), vehicle, CLIPS_DIR, base])


def candidate_key(prefix: str, c: Candidate) -> str:
    """Where ``c`` goes: the key its class gave, else the segment layout of :func:`object_key`."""
    if c.key is not None:
        return c.key
    return object_key(prefix, c.vehicle, c.start, c.name)


def order(
    candidates: Sequence[Candidate],
    protected: Collection[str] = (),
    priority_glob: str | None = None,
) -> list[Candidate]:
    """Upload order: clips, then requested files, then segments (:data:`CLASSES`); among
    segments those that events protect (or that match ``priority_glob``) first; oldest
    first within each group (start time, then sequence)."""
    rank = {k: i for i, k in enumerate(CLASSES)}

    def later(c: Candidate) -> bool:
        if c.kind != "segment":
            return False
        return not (
            c.name in protected or bool(priority_glob and fnmatch.fnmatch(c.name, priority_glob))
        )

    return sorted(candidates, key=lambda c: (rank[c.kind], later(c), c.start, c.seq))


def backoff_s(
    attempt: int, *, base_s: float = 1.0, cap_s: float = 300.0, rng: random.Random | None = None
) -> float:
    """Exponential backoff with full jitter: uniform in ``[0, min(cap, base * 2**attempt)]``.

    ``attempt`` counts consecutive failures from 0. Full jitter keeps a fleet
    that lost its depot link at the same moment from retrying in lockstep.
    """
    ceiling = min(cap_s, base_s * 2.0 ** min(attempt, 62))
    return (rng or random).uniform(0.0, ceiling)


@dataclass(slots=True)
class EntryBackoff:
    """Segments that failed alone (unreadable, a checksum mismatch, a conflict...), each
    waiting on its own backoff while the others go.

    The ``n``-th consecutive failure of one entry (from 0) waits uniformly in
    ``[c/2, c]``, ``c = min(cap_s, base_s * 2**n)``: jittered, capped, and never
    less than half, so an entry is tried (and its failure logged) once per
    wait, not once per pass; a ``longest`` failure (one that retrying soon cannot
    fix) waits in ``[cap_s/2, cap_s]`` at once. The clock is passed in.
    """

    base_s: float
    cap_s: float
    _entries: dict[str, tuple[int, float, str]] = field(default_factory=dict)  # n, until, why

    def waiting(self, name: str, now: float) -> bool:
        """Whether ``name`` is still in its backoff at ``now``."""
        got = self._entries.get(name)
        return got is not None and now < got[1]

    def failed(
        self,
        name: str,
        now: float,
        rng: random.Random | None = None,
        *,
        reason: str = "",
        longest: bool = False,
    ) -> float:
        """Count a failure of ``name`` (for ``reason``) at ``now``; the seconds it waits."""
        n = self._entries.get(name, (0, 0.0, ""))[0]
        ceiling = self.cap_s if longest else min(self.cap_s, self.base_s * 2.0 ** min(n, 62))
        delay = (rng or random).uniform(ceiling / 2, ceiling)
        self._entries[name] = (n + 1, now + delay, reason)
        return delay

    def ok(self, name: str) -> None:
        """``name`` went through: its backoff is over."""
        self._entries.pop(name, None)

    def keep(self, names: Collection[str]) -> None:
        """Forget entries no longer there (uploaded, deleted)."""
        for gone in self._entries.keys() - set(names):
            del self._entries[gone]

    def reasons(self) -> dict[str, int]:
        """How many entries wait, by the reason of their last failure."""
        out: dict[str, int] = {}
        for _, _, why in self._entries.values():
            out[why] = out.get(why, 0) + 1
        return out

    def __len__(self) -> int:
        return len(self._entries)


class TokenBucket:
    """A bandwidth cap: :meth:`delay` says how long to wait before sending ``n`` bytes.

    ``rate`` bytes per second, bursts of at most ``burst`` bytes (default: one
    second's worth). ``rate=None`` never waits. The clock is passed in.
    """

    def __init__(self, rate: float | None, burst: float | None = None, now: float = 0.0) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else (rate or 0.0)
        self._tokens = self.burst
        self._t = now

    def delay(self, n: int, now: float) -> float:
        """Take ``n`` bytes' worth of tokens; the seconds to sleep before sending them."""
        if self.rate is None:
            return 0.0
        self._tokens = min(self.burst, self._tokens + (now - self._t) * self.rate)
        self._t = now
        self._tokens -= n
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
