"""A batch over a bucket: ``hyperframes convert --inbox s3://... --out s3://...``.

:func:`run_bucket_batch` runs the one batch loop
(:mod:`hyperframes.converter.batch.loop`) over a :class:`BucketInbox`, the
bucket's side of the seam (:mod:`hyperframes.converter.batch.inbox`): the same
guarantees as a directory's and the same engines (the local pool, or Ray
tasks that read and write the bucket themselves, so the cluster needs no
shared disk):

- the inbox is the objects under the ``--inbox`` prefix (``*.hf``; a
  ``*.tmp`` deferred, then failed after ``batch.stale_tmp_s``); named inputs
  are URLs (globs in the last component allowed);
- a key the store cannot address (a ``.`` or ``..`` segment, ``//``, a control
  character: :func:`~hyperframes.converter.bucket.keys.key_problem`) stops
  nothing: an inbox key is one ``ignored`` record (once per batch, named
  printably, with why) and is counted in the summary, left where it is; a
  named one fails alone;
- an input whose marker exists is skipped; the ETag marker lets a re-run
  skip without downloading anything;
- before a task starts, the batch takes the output name's lease
  (:mod:`hyperframes.converter.bucket.leases`); a name leased by another
  converter is deferred (in ``--watch``, retried on later scans), so two
  converters on one inbox convert each input once;
- before anything else the batch probes the output's store
  (:mod:`hyperframes.converter.bucket.probe`): how it takes conditional requests
  decides how this batch and its tasks publish and lease, or stops the batch
  with one line naming the setting to use;
- each task converts on its worker's own disk and publishes through a
  staging key (:mod:`hyperframes.converter.bucket.task`); at start, and on
  every scan, the batch deletes staging keys whose owner no longer holds its
  lease;
- failed inputs (fault ``input`` or ``verify``) are copied to
  ``INBOX/failed/NAME`` with ``NAME.reason.json``, then deleted from the
  inbox (by the task, which holds the lease; a stale ``*.tmp`` by the batch);
- every result is one JSON object under ``OUT/ledger/`` (S3 has no append),
  named so that key order is time order (:mod:`hyperframes.converter.bucket.ledger`).

The command line's side (``hyperframes convert`` with URLs, ``--show-ledger``)
is :mod:`hyperframes.converter.bucket.cli`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hyperframes.converter.batch.inbox import Entry, Item
from hyperframes.converter.batch.ledger import JsonLinesLedger, Ledger
from hyperframes.converter.batch.loop import run_loop
from hyperframes.converter.bucket.keys import (
    Layout,
    key_problem,
    lease_state,
    printable,
    scan_objects,
)
from hyperframes.converter.bucket.leases import acquire
from hyperframes.converter.bucket.ledger import BucketLedger
from hyperframes.converter.bucket.probe import PROBE_OWNER, PROBE_SWEEP_AFTER_S, store_modes
from hyperframes.converter.bucket.store import Bucket, BucketError, StoreModes, as_url
from hyperframes.converter.bucket.task import make_bucket_request, move_to_failed
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.errors import ConfigError
from hyperframes.converter.outcome import Outcome
from hyperframes.converter.plan import config_key
from hyperframes.converter.progress import BatchDisplay
from hyperframes.storage.objects import list_urls, split_s3_url

__all__ = ["BucketOptions", "BucketInbox", "run_bucket_batch", "sweep_staging_keys"]

log = logging.getLogger(__name__)

_LIST_MARKERS_OVER: Final = 20  # new inbox objects in one scan above which markers are listed


@dataclass(frozen=True, slots=True)
class BucketOptions:
    """What ``hyperframes convert`` was asked to do, with URLs."""

    out: str
    config: ConvertConfig
    inputs: tuple[str, ...] = ()
    inbox: str | None = None
    watch: bool = False
    ledger: str | None = None  # an s3:// prefix or a local JSON Lines file; default OUT/ledger/
    ray: str | None = None
    quiet: bool = False


def _prefix(url: str) -> tuple[str, str]:
    bucket, key = split_s3_url(url)
    return bucket, key.strip("/")


def sweep_staging_keys(bucket: Bucket, layout: Layout) -> list[str]:
    """Delete staging keys whose owner does not hold the output name's lease; returns them.

    A staging key exists only while its owner holds the lease (it is deleted
    before the lease is released), so a key without its lease belongs to a
    converter that died; a running peer's keys are left alone. A store probe's
    scratch keys (:mod:`~hyperframes.converter.bucket.probe`) hold no lease: they
    are left alone for an hour (a running probe takes well under a second).
    """
    removed = []
    now = time.time()
    for obj in bucket.objects(layout.staging_prefix):
        parsed = layout.parse_staging(obj.key)
        if parsed is None:
            continue
        owner, name = parsed
        if owner.startswith(PROBE_OWNER) and now - obj.mtime < PROBE_SWEEP_AFTER_S:
            continue
        got = bucket.get_json(layout.lease(name))
        if lease_state(got[0] if got else None, now, owner) == "mine":
            continue
        bucket.delete(obj.key)
        removed.append(bucket.url(obj.key))
    return removed


def _check(opts: BucketOptions) -> None:
    if not opts.inputs and opts.inbox is None:
        raise ConfigError("", "nothing to convert: give INPUT URLs or --inbox s3://BUCKET/PREFIX")
    if opts.watch and opts.inbox is None:
        raise ConfigError("--watch", "needs --inbox s3://BUCKET/PREFIX (the prefix to watch)")
    for what, url in (
        ("--out", opts.out),
        ("--inbox", opts.inbox),
        *(("INPUT", u) for u in opts.inputs),
    ):
        if url is None:
            continue
        try:
            split_s3_url(url)
        except ValueError as exc:
            raise ConfigError(what, str(exc)) from None
    if opts.inbox is not None:
        (ib, ip), (ob, op) = _prefix(opts.inbox), _prefix(opts.out)
        if ib == ob and (ip == op or not ip or op.startswith(ip + "/")):
            raise ConfigError(
                "--out", "must not be the inbox or under it (outputs would be converted again)"
            )


class BucketInbox:
    """The bucket's side of :class:`~hyperframes.converter.batch.inbox.Inbox`."""

    transient: tuple[type[Exception], ...] = (BucketError,)  # the store failed: scan again later
    tasks_set_aside = True  # a task holds its lease while it moves its input to failed/

    def __init__(self, opts: BucketOptions) -> None:
        self.opts = opts
        out_bucket, out_prefix = _prefix(opts.out)
        self.outb = Bucket(out_bucket)
        self.inbox: tuple[Bucket, str] | None = None
        if opts.inbox is not None:
            ib, ip = _prefix(opts.inbox)
            self.inbox = (self.outb if ib == out_bucket else Bucket(ib), ip)
        self.layout = Layout(out_prefix, self.inbox[1] if self.inbox else None)
        self.key = config_key(opts.config)
        self.run_id = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.n = 0
        self.odd: set[str] = set()  # inbox keys the store cannot address, seen in a scan
        self.modes: StoreModes | None = None  # the probe's, once the session started

    def _bucket(self, name: str) -> Bucket:
        """The output's bucket, the inbox's, or another of the same store (a named input)."""
        if name == self.outb.name:
            return self.outb
        if self.inbox is not None and name == self.inbox[0].name:
            return self.inbox[0]
        return Bucket(name, self.modes)

    @contextlib.contextmanager
    def session(self) -> Iterator[Ledger]:
        """The store probe (:func:`~hyperframes.converter.bucket.probe.store_modes`: before
        anything is converted or written, it picks the modes of every bucket of the batch,
        or stops it), then the ledger (``OUT/ledger/``, or ``--ledger``: a prefix or a local
        file); the batch holds nothing else (a lease per output name: :meth:`claim`)."""
        opts = self.opts
        self.modes = store_modes(self.outb, self.layout, self.run_id)
        self.outb.configure(self.modes)
        if self.inbox is not None:
            self.inbox[0].configure(self.modes)
        ledger: Ledger
        if opts.ledger and as_url(opts.ledger):
            lb, lp = _prefix(opts.ledger)
            ledger = BucketLedger(self._bucket(lb), lp)
        elif opts.ledger:
            ledger = JsonLinesLedger(Path(opts.ledger))
        else:
            ledger = BucketLedger(self.outb, self.layout.ledger_prefix)
        try:
            yield ledger
        finally:
            ledger.close()

    def sweep(self) -> None:
        """:func:`sweep_staging_keys` (after the store probe of :meth:`session`, whose first
        request ends the batch on a wrong store, bucket or credentials)."""
        for url in sweep_staging_keys(self.outb, self.layout):
            log.info("removed the staging key of an interrupted conversion: %s", url)

    def named(self) -> Iterator[Item | Outcome]:
        """Each INPUT URL (globs expanded), HEAD first: a pattern matching nothing or an
        object gone is a ``failed`` outcome (``input``)."""
        for pattern in self.opts.inputs:
            urls = list_urls(pattern)
            if not urls:
                yield {
                    "input": pattern,
                    "status": "failed",
                    "fault": "input",
                    "reason": f"{pattern}: no object matches",
                }
            for url in urls:
                b, k = split_s3_url(url)
                problem = key_problem(k)
                if problem is not None:
                    yield {
                        "input": printable(url),
                        "status": "failed",
                        "fault": "input",
                        "reason": f"the key has {problem}: this converter cannot read it",
                    }
                    continue
                obj = self._bucket(b).head(k)
                if obj is None:
                    yield {
                        "input": url,
                        "status": "failed",
                        "fault": "input",
                        "reason": f"{url}: no such object",
                    }
                    continue
                yield Item(url, k.rpartition("/")[2], False, etag=obj.etag, size=obj.size)

    def scan(self) -> list[Entry]:
        """The staging sweep, then :func:`~hyperframes.converter.bucket.keys.scan_objects`
        over one listing of the inbox prefix."""
        if self.inbox is None:
            return []
        self.sweep()
        bucket, prefix = self.inbox
        rows = [(o.key, o.size, o.etag, o.mtime) for o in bucket.listing(prefix)]
        stale_s = self.opts.config.batch.stale_tmp_s
        entries = []
        for e in scan_objects(rows, stale_s, time.time(), prefix):
            url = bucket.url(e.key)
            if e.action == "ignore":  # a key the store cannot address: named, never read
                self.odd.add(e.key)
                url = printable(url)
            item = Item(url, e.name, True, e.identity, e.etag, e.size)
            entries.append(Entry(item, e.action, e.reason))
        return entries

    def settled(self, items: list[Item]) -> list[Outcome | None]:
        """``skipped`` for each item whose ETag marker exists (its input is not downloaded)."""
        marked = self._marked(items)
        settled: list[Outcome | None] = []
        for item in items:
            if (
                item.etag
                and item.size is not None
                and self.layout.etag_marker(item.etag, item.size, self.key) in marked
            ):
                settled.append(
                    {
                        "input": item.key,
                        "status": "skipped",
                        "config_key": self.key,
                        "output": self.outb.url(self.layout.final(item.name)),
                        "reason": "already converted (ETag marker: not downloaded)",
                    }
                )
            else:
                settled.append(None)
        return settled

    def _marked(self, items: list[Item]) -> set[str]:
        """The names of ETag markers that exist among ``items``' (one LIST, or HEADs)."""
        keys = {
            self.layout.etag_marker(i.etag, i.size, self.key)
            for i in items
            if i.etag and i.size is not None
        }
        if len(keys) > _LIST_MARKERS_OVER:
            return keys & {o.key for o in self.outb.objects(self.layout.etag_marker_prefix)}
        return {k for k in keys if self.outb.head(k) is not None}

    def claim(self, item: Item) -> str | None:
        """The output name's lease, for a new owner per task; a live lease of another
        converter: why the item waits."""
        self.n += 1
        owner = f"{self.run_id}-{self.n}"
        lease_s = self.opts.config.batch.lease_s
        held = acquire(self.outb, self.layout.lease(item.name), owner, item.name, item.key, lease_s)
        if held is not None:
            until = time.strftime("%H:%M:%S", time.gmtime(float(held.get("expires", 0))))
            return f"being converted by {held.get('owner')} (lease until {until} UTC); left for it"
        item.owner = owner
        return None

    def request(self, item: Item) -> str:
        """:func:`~hyperframes.converter.bucket.task.make_bucket_request` (the lease's owner
        goes with it: the task renews the lease and releases it)."""
        return make_bucket_request(
            item.key,
            self.opts.out,
            self.opts.config,
            owner=item.owner,
            lease_s=self.opts.config.batch.lease_s,
            inbox=self.opts.inbox if item.inbox else None,
            etag=item.etag,
            size=item.size,
            name=item.name,
            store=self.modes,
        )

    def release(self, item: Item) -> None:
        """Delete the lease of a task known dead, so that the next batch need not wait for it
        to expire; its staging key is swept then."""
        key = self.layout.lease(item.name)
        try:
            got = self.outb.get_json(key)
            if got is not None and got[0].get("owner") == item.owner:
                self.outb.delete(key)
        except BucketError as exc:
            log.warning("%s", exc)

    def set_aside(self, item: Item, outcome: Outcome) -> None:
        """:func:`~hyperframes.converter.bucket.task.move_to_failed` (a stale ``*.tmp``; a
        task sets its own input aside)."""
        if self.inbox is None:
            return
        bucket = self.inbox[0]
        try:
            key = split_s3_url(item.key)[1]
            outcome["moved_to"] = move_to_failed(bucket, self.layout, key, item.name, outcome)
        except BucketError as exc:
            outcome["move_error"] = f"could not move to failed/: {exc}"

    def notes(self) -> list[str]:
        """The inbox keys the store cannot address, counted (``INBOX/failed/`` is not: one
        more listing of the store)."""
        if not self.odd or self.opts.inbox is None:
            return []
        return [
            f"{len(self.odd)} key(s) under {self.opts.inbox} cannot be read through the store "
            "(a '.' or '..' segment, '//', a control character): left in place, each in the "
            "ledger as ignored; rename or delete them"
        ]


def run_bucket_batch(opts: BucketOptions, *, display: BatchDisplay | None = None) -> int:
    """Run a bucket batch (see the module docstring); returns the exit status like
    :func:`hyperframes.converter.directory.inbox.run_batch`."""
    _check(opts)
    display = display or BatchDisplay(quiet=opts.quiet)
    return run_loop(BucketInbox(opts), opts.config, watch=opts.watch, ray=opts.ray, display=display)
