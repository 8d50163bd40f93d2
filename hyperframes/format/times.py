"""Times as people write them: parsing ``--start``, ``--from``/``--to``..., showing stamps. Pure."""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["DURATION_UNITS", "format_utc", "parse_duration", "parse_range", "parse_time"]

_SECONDS = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)s?")
_NS_DIGITS = 13  # an integer this long is an absolute time in ns (after 1970-01-01 00:16:40)
_UNIX = re.compile(r"\d{10,12}(\.\d*)?")  # Unix seconds: 2001-09-09 to year 33658
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""Seconds per unit of a duration (``90s``, ``30m``, ``36h``, ``7d``, ``2w``)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)", re.IGNORECASE)


def parse_duration(text: str, *, bare_seconds: bool = True) -> float:
    """``90s``, ``30m``, ``36h``, ``7d``, ``2w`` (or, with ``bare_seconds``, a plain number
    of seconds) as seconds; ``ValueError`` naming the text otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or (not m[2] and not bare_seconds):
        raise ValueError(f"duration {text!r}: use a number with s, m, h, d or w (e.g. 7d)")
    return float(m[1]) * DURATION_UNITS.get(m[2].lower(), 1)


def parse_time(text: str, origin_ns: int) -> int:
    """A time in ns since the epoch from one of:

    - seconds from ``origin_ns`` (the recording's start): ``2.5``, ``+2.5``, ``2.5s``;
    - Unix seconds: 10 to 12 digits before an optional fraction, ``1735689602.5``;
    - an absolute time in ns since the epoch: an integer of 13 or more digits;
    - an ISO 8601 date and time (UTC unless it says otherwise): ``2025-01-01T00:00:02.5Z``.

    Raises ValueError naming the accepted forms.
    """
    t = text.strip()
    if t.isdigit() and len(t) >= _NS_DIGITS:
        return int(t)
    if _UNIX.fullmatch(t):
        return _seconds_ns(t)
    if _SECONDS.fullmatch(t):
        return origin_ns + _seconds_ns(t.lstrip("+").rstrip("s"))
    try:
        when = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"time {text!r}: use seconds from the start (2.5), Unix seconds (1735689602.5), "
            "ns since the epoch (1735689600000000000) or ISO 8601 (2025-01-01T00:00:02.5Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _seconds_ns(seconds: str) -> int:
    """``"12.5"`` as 12_500_000_000 ns, exactly (no float)."""
    whole, _, frac = seconds.partition(".")
    return int(whole or 0) * 1_000_000_000 + int((frac + "0" * 9)[:9])


def format_utc(ns: int) -> str:
    """A timestamp in ns since the Unix epoch as ISO 8601 UTC to the millisecond."""
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000 // 1_000_000:03d}Z"


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
