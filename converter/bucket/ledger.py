"""The bucket batch's ledger: one JSON object per result under ``OUT/ledger/``.

S3 has no append, so each result is its own object, named by the UTC time it
was written (to the microsecond), then host, process and a sequence number
(:func:`hyperframes.converter.bucket.keys.ledger_name`): key order is time order.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from hyperframes.converter.bucket.keys import Layout, ledger_name
from hyperframes.converter.bucket.store import Bucket, BucketError
from hyperframes.storage.objects import split_s3_url

__all__ = ["BucketLedger", "read_ledger"]

log = logging.getLogger(__name__)


class BucketLedger:
    """One JSON object per result under a prefix; names sort in writing order."""

    def __init__(self, bucket: Bucket, prefix: str) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.host = socket.gethostname()
        self.seq = 0

    def write(self, doc: dict[str, Any]) -> None:
        """Store one result (a failure to store it is logged, never fatal)."""
        self.seq += 1
        name = ledger_name(time.time_ns(), self.host, os.getpid(), self.seq)
        key = f"{self.prefix}/{name}" if self.prefix else name
        try:
            self.bucket.put_json(key, doc)
        except BucketError as exc:
            log.error("ledger: %s", exc)

    def close(self) -> None:
        """Nothing to release."""


def read_ledger(url: str) -> list[dict[str, Any]]:
    """Every result of a bucket ledger (``s3://BUCKET/OUT`` or its ``ledger/`` prefix), in order.

    Order is the objects' key order: the time each was written (UTC,
    microseconds, by the clock of the converter that wrote it), then host,
    process and sequence number.
    """
    bucket_name, key = split_s3_url(url)
    prefix = key.strip("/")
    if prefix.rpartition("/")[2] != "ledger":
        prefix = Layout(prefix).ledger_prefix
    bucket = Bucket(bucket_name)
    records = []
    for obj in bucket.objects(prefix):
        if obj.key.endswith(".json"):
            got = bucket.get_json(obj.key)
            if got is not None:
                records.append(got[0])
    return records
