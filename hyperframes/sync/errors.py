"""Errors of :mod:`hyperframes.sync`, rooted at :class:`SyncError`.

Each error carries what it is about (file, streams, clocks, query times) as
attributes, so callers can act on them without parsing the message.
"""

from __future__ import annotations

from hyperframes.errors import HyperframesError

__all__ = ["SyncError", "ClockMismatchError", "NoMatchError"]


class SyncError(HyperframesError, ValueError):
    """Root of the errors raised by :mod:`hyperframes.sync`."""


class ClockMismatchError(SyncError):
    """Two streams are stamped by different clocks and matching them was not allowed.

    Hardware capture times (sensor clock, HW_TIMESTAMP set) and host times
    (the recorder's clock at receive) differ by an unknown, drifting offset:
    matching them needs a clock model, or an explicit
    ``allow_mixed_clocks=True`` that is then reported.
    """

    def __init__(self, path: str, ref: str, ref_clock: str, other: str, other_clock: str) -> None:
        self.path = path
        self.ref = ref
        self.ref_clock = ref_clock
        self.other = other
        self.other_clock = other_clock
        where = f"{path}: " if path else ""
        super().__init__(
            f"{where}stream {other!r} is stamped by the {other_clock} clock, reference "
            f"{ref!r} by the {ref_clock} clock: they are never matched silently; pass "
            "allow_mixed_clocks=True (reported) or match streams of the same clock"
        )


class NoMatchError(SyncError, LookupError):
    """A timestamp query found no frame within its tolerance (strict queries only)."""

    def __init__(
        self,
        path: str,
        stream: str,
        query_ns: list[int],
        nearest_ns: list[int | None],
        tolerance_ns: int | None,
    ) -> None:
        self.path = path
        self.stream = stream
        self.query_ns = query_ns
        self.nearest_ns = nearest_ns
        self.tolerance_ns = tolerance_ns
        shown = ", ".join(
            f"{q} (nearest {n})" for q, n in zip(query_ns[:5], nearest_ns[:5], strict=False)
        )
        more = f" and {len(query_ns) - 5} more" if len(query_ns) > 5 else ""
        where = f"{path}: " if path else ""
        super().__init__(
            f"{where}stream {stream!r}: no frame within {tolerance_ns} ns of queries {shown}{more}"
        )
