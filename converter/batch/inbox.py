"""The seam between the one batch loop and the two kinds of inbox and output.

:mod:`hyperframes.converter.batch.loop` drives every batch through :class:`Inbox`;
a directory (:mod:`hyperframes.converter.directory.inbox`) and a bucket prefix
(:mod:`hyperframes.converter.bucket.inbox`) implement it. The loop owns what
both share: which entries were seen, settle and defer reporting, output
names taken once per batch, the engine's slots, stopping, the tally. What
differs lives behind the seam:

============================  ===============================  ================================
                              directory                        bucket
============================  ===============================  ================================
holding the output            one ``flock`` on                 nothing for the batch; a lease
                              ``OUT/.convert.lock``, all run   per output name (:meth:`claim`)
leftovers swept at start      staging directories              staging keys without a lease
inbox rules                   ``settle_s``, links ignored      whole once listed; any depth
settled without a task        never                            an ETag marker
a failed input set aside      a rename into ``failed/``        a conditional copy, then a
                              (by the batch)                   delete (by the task, which
                                                               holds the lease)
the ledger                    ``OUT/ledger.jsonl``             one object per record under
                                                               ``OUT/ledger/``
============================  ===============================  ================================
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from hyperframes.converter.batch.ledger import Ledger
from hyperframes.converter.outcome import Outcome

__all__ = ["Item", "Entry", "Inbox"]


@dataclass(slots=True)
class Item:
    """One input of a batch, from the command line or the inbox."""

    key: str  # the input as the ledger and the engine name it: a path or an s3:// URL
    name: str  # its output's name below OUT (one input per name in a batch)
    inbox: bool  # found in the inbox (set aside when it fails), not named
    identity: Hashable | None = None  # as listed: an entry seen again unchanged is not reconsidered
    etag: str | None = None  # an object's ETag and size as listed (ETag markers, If-Match)
    size: int | None = None
    owner: str = ""  # who holds the claim on its output name while it runs (a lease's owner)


@dataclass(frozen=True, slots=True)
class Entry:
    """An inbox entry and what to do with it now."""

    item: Item
    action: str  # "convert" | "defer" | "fail" | "ignore"
    reason: str = ""


class Inbox(Protocol):
    """One kind of inbox and output, as the batch loop uses it."""

    #: Errors of a scan that ``--watch`` rides out (logged; the next scan tries again).
    transient: tuple[type[Exception], ...]
    #: True when a task sets its own failed input aside (and says so in its outcome).
    tasks_set_aside: bool

    def session(self) -> AbstractContextManager[Ledger]:
        """The batch's hold on its output for the whole run; gives the open ledger."""
        ...

    def sweep(self) -> None:
        """Remove what conversions that died left behind (the batch's first step)."""
        ...

    def named(self) -> Iterator[Item | Outcome]:
        """The inputs named on the command line, in order; an outcome for one that is not."""
        ...

    def scan(self) -> list[Entry]:
        """The inbox's entries now, each with its action (none without an inbox)."""
        ...

    def settled(self, items: list[Item]) -> list[Outcome | None]:
        """Per item, an outcome that settles it without a task (e.g. ``skipped``), or None."""
        ...

    def claim(self, item: Item) -> str | None:
        """Claim the item's output name for one task: None when claimed, else why it waits."""
        ...

    def request(self, item: Item) -> str:
        """The engine's JSON request for a claimed item."""
        ...

    def release(self, item: Item) -> None:
        """Drop the claim of a task known dead (cancelled, or lost for good)."""
        ...

    def set_aside(self, item: Item, outcome: Outcome) -> None:
        """Move a failed inbox input to ``failed/`` with ``NAME.reason.json``; sets
        ``moved_to`` in the outcome, or ``move_error`` when it could not."""
        ...

    def notes(self) -> list[str]:
        """Lines for the summary, once the batch is over."""
        ...
