"""Times as people type them for catalog questions (``--since 7d``, ``--until 2025-03-01``). Pure.

:func:`parse_when` turns one of these into ns since the epoch (UTC):

- a duration back from now: ``90s``, ``90m``, ``36h``, ``7d``, ``2w`` (``1.5h`` too);
- an ISO 8601 date, ``2025-03-01``: its midnight (UTC); as the end of a range
  (``end=True``) the midnight after it, so ``--until 2025-03-07`` includes that day;
- an ISO 8601 date and time, ``2025-03-01T12:30``, ``2025-03-01 12:30:05.5+02:00``,
  ``...Z``: that instant (UTC when it names no zone);
- ``now``; or an integer of ns since the epoch (``1735689600000000000``).

:func:`date_range` gives the ``date`` partitions (``YYYY-MM-DD``) a time range touches,
which is what lets a query open only the folders it needs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re

from hyperframes.format.times import parse_duration

__all__ = ["When", "parse_when", "to_ns", "date_range"]

When = str | int | dt.datetime | dt.date
"""What a ``since``/``until`` argument may be: text (above), ns since the epoch, a datetime
(naive means UTC) or a date."""

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_NS = 1_000_000_000


def _dt_ns(t: dt.datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    delta = t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86400 + delta.seconds) * _NS + delta.microseconds * 1000


def parse_when(text: str, now_ns: int, *, end: bool = False) -> int:
    """``text`` (a duration back from ``now_ns``, an ISO date or time, ``now``, integer ns)
    as ns since the epoch. ``end``: a bare date means the midnight after it.

    Raises ``ValueError`` naming the text and the forms accepted.
    """
    s = text.strip()
    if s.lower() == "now":
        return now_ns
    with contextlib.suppress(ValueError):  # a duration back from now
        return now_ns - round(parse_duration(s, bare_seconds=False) * _NS)
    if s.lstrip("-").isdigit() and len(s) > 8:  # ns since the epoch (not a year or a date)
        return int(s)
    if _DATE.match(s):
        try:
            day = dt.date.fromisoformat(s)
        except ValueError:
            raise ValueError(f"{text!r} is no date") from None
        return to_ns(day + dt.timedelta(days=1) if end else day)
    try:
        t = dt.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"cannot read the time {text!r}: give a duration back from now (90m, 36h, 7d, 2w), "
            "an ISO date or time (2025-03-01, 2025-03-01T12:30Z), 'now' or ns since the epoch"
        ) from None
    return _dt_ns(t)


def to_ns(when: When, now_ns: int | None = None, *, end: bool = False) -> int:
    """Any :data:`When` as ns since the epoch (text needs ``now_ns`` for durations)."""
    if isinstance(when, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(when, int):
        return when
    if isinstance(when, dt.datetime):
        return _dt_ns(when)
    if isinstance(when, dt.date):
        midnight = dt.datetime(when.year, when.month, when.day, tzinfo=dt.UTC)
        return _dt_ns(midnight + dt.timedelta(days=1) if end else midnight)
    if isinstance(when, str):
        if now_ns is None:
            raise ValueError("a time given as text needs the present time (now_ns)")
        return parse_when(when, now_ns, end=end)
    raise TypeError(f"a time must be text, ns, a datetime or a date, not {type(when).__name__}")


def date_range(
    start_ns: int | None, end_ns: int | None, *, slack_days: int = 0
) -> tuple[dt.date | None, dt.date | None]:
    """The first and last ``date`` partition (UTC) that rows in ``[start_ns, end_ns)`` can be
    in; ``slack_days`` widens the start (rows partitioned by a time before their own, say a
    segment that began the day before). None: unbounded."""
    first = last = None
    if start_ns is not None:
        first = _date(start_ns) - dt.timedelta(days=slack_days)
    if end_ns is not None:
        last = _date(max(end_ns - 1, 0))
    return first, last


def _date(t_ns: int) -> dt.date:
    return dt.datetime.fromtimestamp(max(0, t_ns) // _NS, dt.UTC).date()
