"""Batch conversion from a bucket: ``hyperframes convert --inbox s3://... --out s3://...``.

The bucket counterpart of :mod:`hyperframes.converter.batch`, with the same guarantees
and the same engines (the local pool, or Ray tasks that read and write the
bucket themselves, so the cluster needs no shared disk):

- the inbox is the objects directly under the ``--inbox`` prefix (``*.hf``;
  a ``*.tmp`` deferred, then failed after ``batch.stale_tmp_s``); named
  inputs are URLs (globs in the last component allowed);
- an input whose marker exists is skipped; the ETag marker lets a re-run
  skip without downloading anything;
- before a task starts, the batch takes the output name's lease
  (:mod:`hyperframes.converter.leases`); a name leased by another converter is deferred
  (in ``--watch``, retried on later scans), so two converters on one inbox
  convert each input once;
- each task converts on its worker's own disk and publishes through a
  staging key (:mod:`hyperframes.converter.remote_task`); at start, and on every scan,
  the batch deletes staging keys whose owner no longer holds its lease;
- failed inputs (fault ``input`` or ``verify``) are copied to
  ``INBOX/failed/NAME`` with ``NAME.reason.json``, then deleted from the inbox;
- every result is one JSON object under ``OUT/ledger/`` (S3 has no append),
  named so that key order is time order (:mod:`hyperframes.converter.bucket_ledger`).

The command line's side (``hyperframes convert`` with URLs, ``--show-ledger``)
is :mod:`hyperframes.converter.remote_cli`.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hyperframes.converter.batch import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    _Ledger,
    _now_iso,
    _Stop,
)
from hyperframes.converter.bucket import Bucket, BucketError, as_url
from hyperframes.converter.bucket_keys import Layout, ScanEntry, lease_state, scan_objects
from hyperframes.converter.bucket_ledger import BucketLedger
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.engines import Engine, Outcome, make_engine
from hyperframes.converter.errors import ConfigError
from hyperframes.converter.leases import acquire
from hyperframes.converter.plan import config_key
from hyperframes.converter.progress import BatchDisplay, Tally
from hyperframes.converter.remote_task import make_bucket_request, move_to_failed
from hyperframes.storage.objects import list_urls, split_s3_url

__all__ = ["BucketOptions", "run_bucket_batch", "sweep_staging_keys"]

log = logging.getLogger(__name__)

_LIST_MARKERS_OVER = 20  # new inbox objects in one scan above which markers are listed


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


class _Writer(Protocol):
    def write(self, doc: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def sweep_staging_keys(bucket: Bucket, layout: Layout) -> list[str]:
    """Delete staging keys whose owner does not hold the output name's lease; returns them.

    A staging key exists only while its owner holds the lease (it is deleted
    before the lease is released), so a key without its lease belongs to a
    converter that died; a running peer's keys are left alone.
    """
    removed = []
    now = time.time()
    for obj in bucket.objects(layout.staging_prefix):
        parsed = layout.parse_staging(obj.key)
        if parsed is None:
            continue
        owner, name = parsed
        got = bucket.get_json(layout.lease(name))
        if lease_state(got[0] if got else None, now, owner) == "mine":
            continue
        bucket.delete(obj.key)
        removed.append(bucket.url(obj.key))
    return removed


@dataclass(slots=True)
class _Item:
    url: str
    name: str
    etag: str | None
    size: int | None
    inbox: bool
    identity: tuple[str, str, int] | None = None
    owner: str = ""  # of the lease, while it runs


@dataclass(slots=True)
class _State:
    queue: list[_Item] = field(default_factory=list)
    running: dict[str, _Item] = field(default_factory=dict)
    seen: set[tuple[str, str, int]] = field(default_factory=set)
    deferred_reported: set[tuple[str, str, int]] = field(default_factory=set)
    names: set[str] = field(default_factory=set)


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


class _Batch:
    def __init__(self, opts: BucketOptions, display: BatchDisplay, tally: Tally) -> None:
        self.opts = opts
        self.display = display
        self.tally = tally
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
        self.ledger: _Writer
        if opts.ledger and as_url(opts.ledger):
            lb, lp = _prefix(opts.ledger)
            self.ledger = BucketLedger(self.outb if lb == out_bucket else Bucket(lb), lp)
        elif opts.ledger:
            self.ledger = _Ledger(Path(opts.ledger))
        else:
            self.ledger = BucketLedger(self.outb, self.layout.ledger_prefix)
        self.state = _State()

    # --- results -------------------------------------------------------------

    def done(self, outcome: Outcome) -> None:
        doc = {"time": _now_iso(), "engine": self.opts.ray or "local", **outcome}
        self.ledger.write(doc)
        self.tally.add(outcome)
        self.display.finished(outcome)

    def deferred(self, item: _Item, reason: str) -> None:
        """Not now: reported once outside ``--watch``; in ``--watch`` tried again later."""
        if item.identity is not None:
            if self.opts.watch:  # looked at again on the next scan
                self.state.seen.discard(item.identity)
                return
            if item.identity in self.state.deferred_reported:
                return
            self.state.deferred_reported.add(item.identity)
        self.done({"input": item.url, "status": "deferred", "reason": reason})

    # --- inputs --------------------------------------------------------------

    def named(self) -> None:
        for pattern in self.opts.inputs:
            urls = list_urls(pattern)
            if not urls:
                self.done(
                    {
                        "input": pattern,
                        "status": "failed",
                        "fault": "input",
                        "reason": f"{pattern}: no object matches",
                    }
                )
            for url in urls:
                b, k = split_s3_url(url)
                bucket = self.outb if b == self.outb.name else Bucket(b)
                obj = bucket.head(k)
                if obj is None:
                    self.done(
                        {
                            "input": url,
                            "status": "failed",
                            "fault": "input",
                            "reason": f"{url}: no such object",
                        }
                    )
                    continue
                item = _Item(url, k.rpartition("/")[2], obj.etag, obj.size, inbox=False)
                self.enqueue([item])

    def scan(self) -> None:
        if self.inbox is None:
            return
        bucket, prefix = self.inbox
        rows = [(o.key, o.size, o.etag, o.mtime) for o in bucket.objects(prefix)]
        fresh: list[_Item] = []
        stale_s = self.opts.config.batch.stale_tmp_s
        for entry in scan_objects(rows, stale_s, time.time(), prefix):
            if entry.identity in self.state.seen:
                continue
            item = _Item(
                bucket.url(entry.key), entry.name, entry.etag, entry.size, True, entry.identity
            )
            if entry.action == "defer":
                self.deferred(item, entry.reason)
                continue
            self.state.seen.add(entry.identity)
            if entry.action == "fail":
                self.fail_tmp(bucket, entry)
            else:
                fresh.append(item)
        self.enqueue(fresh)

    def fail_tmp(self, bucket: Bucket, entry: ScanEntry) -> None:
        outcome: Outcome = {
            "input": bucket.url(entry.key),
            "status": "failed",
            "fault": "input",
            "reason": entry.reason,
            "error": {"error": "NotFinalized", "message": entry.reason, "rule": "finalized"},
        }
        self.display.queued()
        try:
            outcome["moved_to"] = move_to_failed(
                bucket, self.layout, entry.key, entry.name, outcome
            )
        except BucketError as exc:
            outcome["move_error"] = f"could not move to failed/: {exc}"
        self.done(outcome)

    def marked(self, items: list[_Item]) -> set[str]:
        """The names of ETag markers that exist among ``items``' (one LIST, or HEADs)."""
        keys = {
            self.layout.etag_marker(i.etag, i.size, self.key)
            for i in items
            if i.etag and i.size is not None
        }
        if len(keys) > _LIST_MARKERS_OVER:
            return keys & {o.key for o in self.outb.objects(self.layout.etag_marker_prefix)}
        return {k for k in keys if self.outb.head(k) is not None}

    def enqueue(self, items: list[_Item]) -> None:
        marked = self.marked(items) if items else set()
        for item in items:
            self.display.queued()
            if (
                item.etag
                and item.size is not None
                and (self.layout.etag_marker(item.etag, item.size, self.key) in marked)
            ):
                self.done(
                    {
                        "input": item.url,
                        "status": "skipped",
                        "config_key": self.key,
                        "output": self.outb.url(self.layout.final(item.name)),
                        "reason": "already converted (ETag marker: not downloaded)",
                    }
                )
                continue
            if item.name in self.state.names:
                self.done(
                    {
                        "input": item.url,
                        "status": "failed",
                        "fault": "converter",
                        "reason": f"another input named {item.name} is in this batch; its "
                        "output would take the same name (convert it in a separate batch)",
                    }
                )
                continue
            self.state.names.add(item.name)
            self.state.queue.append(item)

    # --- running -------------------------------------------------------------

    def submit(self, engine: Engine, item: _Item) -> None:
        self.n += 1
        owner = f"{self.run_id}-{self.n}"
        lease_s = self.opts.config.batch.lease_s
        held = acquire(self.outb, self.layout.lease(item.name), owner, item.name, item.url, lease_s)
        if held is not None:
            self.state.names.discard(item.name)
            until = time.strftime("%H:%M:%S", time.gmtime(float(held.get("expires", 0))))
            self.deferred(
                item,
                f"being converted by {held.get('owner')} (lease until {until} UTC); left for it",
            )
            return
        request = make_bucket_request(
            item.url,
            self.opts.out,
            self.opts.config,
            owner=owner,
            lease_s=lease_s,
            inbox=self.opts.inbox if item.inbox else None,
            etag=item.etag,
            name=item.name,
        )
        item.owner = owner
        self.state.running[item.url] = item
        self.display.started(item.url)
        engine.submit(item.url, request)

    def release(self, item: _Item) -> None:
        """Drop the lease of a task known dead (cancelled, or lost for good), so that the
        next batch need not wait for it to expire; its staging key is swept then."""
        key = self.layout.lease(item.name)
        try:
            got = self.outb.get_json(key)
            if got is not None and got[0].get("owner") == item.owner:
                self.outb.delete(key)
        except BucketError as exc:
            log.warning("%s", exc)

    def finished(self, key: str, outcome: Outcome) -> None:
        outcome.setdefault("input", key)
        item = self.state.running.pop(key, None)
        if item is not None:
            self.state.names.discard(item.name)
            if outcome.get("fault") == "system":  # the worker died (twice, or lost on Ray)
                self.release(item)
        if outcome.get("status") == "deferred" and item is not None:
            self.deferred(item, str(outcome.get("reason", "")))
        else:
            self.done(outcome)

    def sweep(self) -> None:
        for url in sweep_staging_keys(self.outb, self.layout):
            log.info("removed the staging key of an interrupted conversion: %s", url)

    def loop(self, engine: Engine, stop: _Stop) -> bool:
        self.sweep()  # the first request: a wrong store or credentials end the batch here
        self.named()
        next_scan = 0.0
        state = self.state
        while True:
            if stop.requested is not None:
                for key in engine.cancel_all():
                    if key in state.running:
                        self.release(state.running.pop(key))
                    self.done(
                        {
                            "input": key,
                            "status": "interrupted",
                            "reason": f"stopped by signal {stop.requested}",
                        }
                    )
                return True
            now = time.monotonic()
            if self.inbox is not None and now >= next_scan:
                try:
                    self.sweep()
                    self.scan()
                except BucketError as exc:
                    if not self.opts.watch:
                        raise
                    log.warning(
                        "scan failed, trying again in %g s: %s", self.opts.config.batch.poll_s, exc
                    )
                next_scan = now + self.opts.config.batch.poll_s
            while state.queue and engine.active() < engine.slots:
                self.submit(engine, state.queue.pop(0))
            for key, outcome in engine.poll(0.2):
                self.finished(key, outcome)
            if not self.opts.watch and not state.queue and engine.active() == 0:
                return False


def run_bucket_batch(opts: BucketOptions, *, display: BatchDisplay | None = None) -> int:
    """Run a bucket batch (see the module docstring); returns the exit status like
    :func:`hyperframes.converter.batch.run_batch`."""
    _check(opts)
    display = display or BatchDisplay(quiet=opts.quiet)
    tally = Tally()
    batch = _Batch(opts, display, tally)
    engine = make_engine(opts.ray, opts.config.batch, opts.config.video.encoder, display.progress)
    try:
        with display, _Stop() as stop:
            interrupted = batch.loop(engine, stop)
    finally:
        engine.close()
        batch.ledger.close()
    display.summary(tally)
    if interrupted and not opts.watch:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK
