"""Leases: one converter at a time per output name, over a bucket, with an expiry.

A lease is the object ``OUT/.leases/NAME.json`` (:mod:`hyperframes.converter.bucket.keys`):
created with ``If-None-Match: *`` (one creator wins), renewed by its holder
every quarter of ``lease_s`` with ``If-Match: ETAG`` (a renewal after a
takeover fails), and taken over with ``If-Match`` once it has expired (its
holder was killed, or stalled longer than ``lease_s``). A lease only avoids
duplicate work: the final key is protected on its own by the conditional
copy, so a holder that lost its lease and still finishes can never replace
an output.

A renewal refused while the lease still names its holder is no other
converter's doing: the store refused this holder's own ``If-Match`` (an ETag
form it does not take, say). That is a :class:`LeaseRefusedError`: the task
fails (the batch exits non-zero) and releases the lease, where a lease taken
over by another converter is only ``deferred`` and left to its new holder.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from hyperframes.converter.bucket.keys import lease_doc, lease_state
from hyperframes.converter.bucket.store import Bucket, BucketError, KeyExistsError, LeaseLostError

__all__ = ["Lease", "LeaseRefusedError", "acquire"]

log = logging.getLogger(__name__)


class LeaseRefusedError(LeaseLostError):
    """The store refused this holder's own renewal: nobody else wrote the lease."""


class Lease:
    """A lease this process holds; :meth:`start` renews it in a thread until :meth:`release`."""

    def __init__(
        self, bucket: Bucket, key: str, owner: str, doc: dict[str, Any], etag: str, lease_s: float
    ) -> None:
        self.bucket = bucket
        self.key = key
        self.owner = owner
        self.doc = doc
        self.etag = etag
        self.lease_s = lease_s
        self.lost: LeaseLostError | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @classmethod
    def adopt(cls, bucket: Bucket, key: str, owner: str, lease_s: float) -> Lease:
        """The lease ``owner`` was given (by the batch that submitted this task), not renewed
        yet: the caller renews it (:meth:`renew`) and releases it in any case.

        Raises :class:`LeaseLostError` when it is gone or another's. One that
        expired before the task started (a slow start) but was not taken over
        is still this owner's: the renewal (``If-Match``) decides.
        """
        got = bucket.get_json(key)
        if got is None or got[0].get("owner") != owner:
            state = lease_state(got[0] if got else None, time.time(), owner)
            raise LeaseLostError(bucket.url(key), f"not held by this task ({state})")
        doc, etag = got
        return cls(bucket, key, owner, doc, etag, lease_s)

    def renew(self) -> None:
        """Extend the lease by ``lease_s``: :class:`LeaseLostError` after a takeover or a
        removal, :class:`LeaseRefusedError` when the store refused it although the lease
        is still this holder's.

        Renewals are serialized (the heartbeat and :meth:`check` share one
        ETag). A renewal refused although it was stored (a retried request
        whose first try went through) is recognised by its ``renewed`` stamp.
        """
        with self._lock:
            now = time.time()
            doc = {**self.doc, "renewed": round(now, 3), "expires": round(now + self.lease_s, 3)}
            try:
                self.etag = self.bucket.put_json(self.key, doc, if_etag=self.etag)
            except LeaseLostError as exc:
                got = self.bucket.get_json(self.key)
                if got is None:
                    why = "removed (by the batch that gave this task up, or by hand)"
                    raise LeaseLostError(exc.url, why) from None
                if got[0] != doc:
                    raise self._lost(exc, got[0]) from None
                self.etag = got[1]
            self.doc = doc

    def _lost(self, exc: LeaseLostError, now: dict[str, Any]) -> LeaseLostError:
        """Why a renewal was refused, by what the lease says now."""
        holder = now.get("owner")
        if holder != self.owner:
            return LeaseLostError(exc.url, f"taken over by {holder} (it had expired)")
        return LeaseRefusedError(
            exc.url,
            f"the store refused this converter's own renewal ({exc.problem}) although no other "
            "converter wrote the lease: a store problem, not a second converter; the input is "
            "left for the next run and the lease released",
        )

    def start(self) -> Lease:
        """Renew in a daemon thread every ``lease_s / 4``."""
        self._thread = threading.Thread(target=self._run, name="hf-lease", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                self.renew()
            except LeaseLostError as exc:
                self.lost = exc
                log.warning("%s", exc)
                return
            except BucketError as exc:  # the store failed: try again next time
                log.warning("lease renewal failed: %s", exc)

    def check(self) -> None:
        """Raise :class:`LeaseLostError` when the lease was lost; else renew it now."""
        if self.lost is not None:
            raise self.lost
        self.renew()

    def release(self) -> None:
        """Stop renewing and delete the lease, when it is still this holder's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with contextlib.suppress(BucketError):
            got = self.bucket.get_json(self.key)
            if got is not None and got[0].get("owner") == self.owner:
                self.bucket.delete(self.key)


def acquire(
    bucket: Bucket, key: str, owner: str, name: str, source: str, lease_s: float
) -> dict[str, Any] | None:
    """Take the lease of output ``name`` for ``owner``: None when taken, else the holder's.

    Free: created with ``If-None-Match: *``; expired: taken over with
    ``If-Match`` on the ETag read (of two takers, one wins).
    """
    for _ in range(3):
        doc = lease_doc(owner, name, source, lease_s, time.time())
        try:
            bucket.put_json(key, doc, if_absent=True)
            return None
        except KeyExistsError:
            pass
        got = bucket.get_json(key)
        if got is None:
            continue  # released meanwhile: try to create it again
        held, etag = got
        state = lease_state(held, time.time(), owner)
        if state == "live":
            return held
        try:
            bucket.put_json(key, doc, if_etag=etag)
        except LeaseLostError:
            continue
        if state == "expired":
            log.info("%s: took over an expired lease of %s", bucket.url(key), held.get("owner"))
        return None
    got = bucket.get_json(key)
    return got[0] if got is not None else {"owner": "?", "expires": 0}
