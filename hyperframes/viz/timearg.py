"""Parsing ``--from``/``--to`` times: :func:`hyperframes.timearg.parse_time`, and ranges."""

from __future__ import annotations

from hyperframes.timearg import parse_time

__all__ = ["parse_time", "parse_range"]


def parse_range(
    start: str | None, end: str | None, first_ns: int, last_ns: int
) -> tuple[int | None, int | None]:
    """``--from``/``--to`` of a recording spanning ``first_ns .. last_ns``, as ns (or None).

    Seconds count from ``first_ns``. Raises ValueError in the user's own
    terms (the text given, seconds from the start) when the range is empty
    or misses the recording.
    """
    lo = parse_time(start, first_ns) if start is not None else None
    hi = parse_time(end, first_ns) if end is not None else None
    length = f"{(last_ns - first_ns) / 1e9:.3f}".rstrip("0").rstrip(".")
    if lo is not None and lo > last_ns:
        raise ValueError(
            f"--from {start}: after the end of the recording, which lasts {length} s "
            f"(give seconds from its start, 0 to {length})"
        )
    if hi is not None and hi < first_ns:
        raise ValueError(f"--to {end}: before the start of the recording (it lasts {length} s)")
    if lo is not None and hi is not None and hi <= lo:
        raise ValueError(f"--to {end} is not after --from {start}")
    return lo, hi
