"""One bucket input, converted by one worker: download, convert locally, upload, publish.

:func:`run_bucket_task` is what :func:`hyperframes.converter.task.run_task` runs for a
request made by :func:`make_bucket_request` (JSON in, JSON out, on the local
pool or as a Ray task: every byte goes through the bucket, so a Ray cluster
needs no shared disk). The worker holds the lease the batch took for the
output name (:mod:`hyperframes.converter.bucket.leases`) and renews it while it runs. Steps:

1. read the input's header with one ranged GET and refuse an object that is no
   hyperframe file (fault ``input``: set aside) before downloading a byte more;
   then download it into a private temporary directory on the worker's own
   disk (``If-Match`` the ETag listed), hashing it on the way;
2. a marker for its SHA-256 and config key: ``skipped`` (and the ETag marker
   written); an output under the final key that is this input's verified
   conversion: adopted; any other: the input fails (``converter``);
3. :func:`hyperframes.converter.convert.convert_archive` into the temporary directory:
   converted and verified locally exactly like a local batch;
4. upload to ``OUT/.staging/OWNER/NAME``, re-read it and compare size and
   SHA-256 with the local file;
5. check the lease, copy the staging key to ``OUT/NAME`` only if that key is
   absent (:meth:`hyperframes.converter.bucket.store.Bucket.copy_if_absent`), HEAD it;
6. write the markers, delete the staging key, release the lease.

A worker killed at any step leaves at most a staging key (swept by the next
batch once the lease is gone) and an expiring lease; never a final key
before step 5, and step 5 is one atomic request.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from hyperframes._structure import read_header
from hyperframes.converter import __version__
from hyperframes.converter.bucket.keys import Layout
from hyperframes.converter.bucket.leases import Lease, LeaseRefusedError
from hyperframes.converter.bucket.store import (
    CHANGED,
    Bucket,
    BucketError,
    KeyExistsError,
    LeaseLostError,
    StoreModes,
)
from hyperframes.converter.cataloging import catalog_output
from hyperframes.converter.config import ConvertConfig, parse_config
from hyperframes.converter.convert import (
    PhaseProgress,
    convert_archive,
    file_sha256,
    is_conversion_of,
)
from hyperframes.converter.errors import ConversionError, InputError, OutputExistsError
from hyperframes.converter.outcome import error_of, fault_of
from hyperframes.errors import HyperframesError
from hyperframes.format.layout import HEADER_SIZE
from hyperframes.storage.objects import split_s3_url
from hyperframes.storage.source import HeldBytes

__all__ = [
    "BUCKET_FAULT_ENV",
    "make_bucket_request",
    "run_bucket_task",
    "move_to_failed",
]

log = logging.getLogger(__name__)

#: Test-only fault injection: ``exit-after-staging:NAME`` makes the worker converting
#: NAME exit abruptly right after its staging upload (a worker killed before the copy);
#: ``if-match:FORM`` makes the worker's lease renewals send ``If-Match`` in FORM
#: (``quoted``, ``bare``, or ``stale``: an ETag the lease never had), whatever the probe found.
BUCKET_FAULT_ENV: Final = "HYPERFRAMES_BUCKET_FAULT"


def make_bucket_request(
    source: str,
    out: str,
    config: ConvertConfig,
    *,
    owner: str,
    lease_s: float,
    inbox: str | None = None,
    etag: str | None = None,
    size: int | None = None,
    encoder: str | None = None,
    name: str | None = None,
    store: StoreModes | None = None,
) -> str:
    """The JSON request for :func:`run_bucket_task` (``inbox``: the input's inbox URL;
    ``etag``, ``size``: the object as listed; ``name``: the output's name below ``out``, by
    default the input's last component; ``store``: how the batch's probe found the store
    takes conditional requests, by default what the environment says)."""
    return json.dumps(
        {
            "kind": "bucket",
            "input": source,
            "name": name or split_s3_url(source)[1].rpartition("/")[2],
            "out": out,
            "inbox": inbox,
            "etag": etag,
            "size": size,
            "owner": owner,
            "lease_s": lease_s,
            "config": config.to_dict(),
            "encoder": encoder,
            "store": None if store is None else store.to_dict(),
        }
    )


def _bucket_and_prefix(url: str) -> tuple[str, str]:
    bucket, key = split_s3_url(url)
    return bucket, key.strip("/")


def move_to_failed(
    bucket: Bucket, layout: Layout, key: str, name: str, outcome: dict[str, Any]
) -> str:
    """Set inbox object ``key`` (``name`` below the inbox) aside: copy it to
    ``INBOX/failed/NAME``, write the reason beside it, delete it.

    Crash-safe in that order: a kill before the delete leaves the input in
    the inbox too, and the next attempt finds its own copy (a reason with the
    same SHA-256, or the same size when there is none) instead of another.
    """
    src = bucket.head(key)
    for n in range(1000):
        target = layout.failed(name, n)
        reason_key = target + ".reason.json"
        try:
            bucket.copy_if_absent(key, target)
        except KeyExistsError:
            old = bucket.get_json(reason_key)
            same_sha = old is not None and old[0].get("sha256") == outcome.get("sha256")
            there = bucket.head(target)
            if not (same_sha and there is not None and src is not None and there.size == src.size):
                continue
        reason = {
            "input": name,
            "moved_from": bucket.url(key),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "reason": outcome.get("reason"),
            "fault": outcome.get("fault"),
            "error": outcome.get("error"),
            "sha256": outcome.get("sha256"),
            "converter_version": __version__,
        }
        bucket.put_json(reason_key, reason)
        bucket.delete(key)
        return bucket.url(target)
    raise BucketError(bucket.url(layout.failed(name)), "1000 failed copies of this name")


def _check_header(bucket: Bucket, key: str, *, etag: str | None, size: int | None) -> None:
    """Refuse ``key`` unless it starts with a hyperframe file's header (the reader's checks:
    magic, version, CRC32C...), reading only that: one ranged GET of 512 bytes, none when
    ``size`` (as listed) is shorter. Raises :class:`InputError` (rule ``header``)."""
    url = bucket.url(key)
    data = b""
    if size is None or size >= HEADER_SIZE:
        data, obj = bucket.head_bytes(key, HEADER_SIZE, etag=etag)
        size = obj.size
    try:
        read_header(HeldBytes(data, size), url, size)
    except HyperframesError as exc:
        why = str(exc).removeprefix(f"{url}: ")
        raise InputError(
            url, f"refused after its header: {why}; not downloaded", rule="header"
        ) from None


def _inject_fault(name: str) -> None:
    spec = os.environ.get(BUCKET_FAULT_ENV, "")
    if spec == f"exit-after-staging:{name}":
        os._exit(70)


def _faulty_lease(lease: Lease) -> None:
    """``if-match:FORM`` of :data:`BUCKET_FAULT_ENV`: renewals in that form (or stale)."""
    kind, _, form = os.environ.get(BUCKET_FAULT_ENV, "").partition(":")
    if kind != "if-match":
        return
    if form in ("quoted", "bare"):
        lease.bucket.configure(replace(lease.bucket.modes, etag_put=form))
    elif form == "stale":
        lease.etag = '"00000000000000000000000000000000"'


class _Job:
    """The state of one task (see the module docstring for the steps)."""

    def __init__(self, req: dict[str, Any], config: ConvertConfig, tmp: Path) -> None:
        self.req = req
        self.config = config
        self.tmp = tmp
        self.source: str = req["input"]
        in_bucket, self.in_key = _bucket_and_prefix(self.source)
        out_bucket, out_prefix = _bucket_and_prefix(req["out"])
        modes = StoreModes.from_dict(req.get("store"))
        self.inb = Bucket(in_bucket, modes)
        self.outb = self.inb if out_bucket == in_bucket else Bucket(out_bucket, modes)
        inbox = req.get("inbox")
        self.layout = Layout(out_prefix, _bucket_and_prefix(inbox)[1] if inbox else None)
        self.name: str = req.get("name") or self.in_key.rpartition("/")[2]
        self.final = self.layout.final(self.name)
        self.owner: str = req["owner"]
        from hyperframes.converter.plan import config_key  # noqa: PLC0415

        self.key = config_key(config)

    def markers(self, sha: str, etag: str, size: int, doc: dict[str, Any]) -> None:
        self.outb.put_json(self.layout.marker(sha, self.key), doc)
        self.outb.put_json(self.layout.etag_marker(etag, size, self.key), doc)

    def adopt_final(self, sha: str) -> bool:
        local = self.tmp / "existing" / self.name.rpartition("/")[2]
        local.parent.mkdir()
        self.outb.download(self.final, local)
        return is_conversion_of(local, sha, self.key)

    def run(self, outcome: dict[str, Any], progress: PhaseProgress | None) -> None:
        src = self.tmp / "in" / self.name.rpartition("/")[2]
        src.parent.mkdir()
        self.progress = progress
        _check_header(self.inb, self.in_key, etag=self.req.get("etag"), size=self.req.get("size"))
        obj, sha = self.inb.download(
            self.in_key, src, etag=self.req.get("etag"), progress=self._phase("download")
        )
        outcome["sha256"] = sha
        outcome["output"] = self.outb.url(self.final)
        base = {
            "input": self.source,
            "sha256": sha,
            "config_key": self.key,
            "output": self.outb.url(self.final),
            "converter_version": __version__,
        }
        if self.outb.get_json(self.layout.marker(sha, self.key)) is not None:
            self.markers(sha, obj.etag, obj.size, base)
            outcome.update(status="skipped", reason="already converted (marker)")
            return
        if self.outb.head(self.final) is not None:
            if not self.adopt_final(sha):
                raise OutputExistsError(
                    outcome["output"],
                    "it is not a conversion of this input under this config; "
                    "remove it or choose another --out",
                )
            self.markers(sha, obj.etag, obj.size, {**base, "adopted": True})
            outcome.update(
                status="skipped",
                reason="output existed with this input's conversion record; marker written",
            )
            return
        result = convert_archive(
            src,
            self.tmp / "out",
            self.config,
            sha256=sha,
            progress=progress,
            encoder=self.req.get("encoder"),
        )
        doc = result.to_dict()
        doc.update(input=self.source, output=outcome["output"])
        self.publish(Path(result.output), outcome)
        if outcome.get("status") == "skipped":
            self.markers(sha, obj.etag, obj.size, {**base, "adopted": True})
            return
        self.markers(
            sha, obj.etag, obj.size, {**base, "converted_ns": time.time_ns(), "result": doc}
        )
        outcome.update(status="converted", result=doc)
        catalog_output(self.config.catalog, result.output, outcome, uri=outcome["output"],
                       etag=self.published_etag, sha256=outcome.get("output_sha256"))  # fmt: skip

    def _phase(self, phase: str) -> Callable[[int, int], None] | None:
        """A transfer's ``(bytes done, bytes in all)`` reported as ``phase``."""
        report = self.progress
        if report is None:
            return None
        return lambda done, total: report(done, total, done, phase)

    progress: PhaseProgress | None = None
    published_etag: str | None = None

    def publish(self, local: Path, outcome: dict[str, Any]) -> None:
        """Steps 4 and 5: staging upload, its check, the conditional copy."""
        size, sha = local.stat().st_size, file_sha256(local)
        staging = self.layout.staging(self.owner, self.name)
        try:
            self.outb.upload(local, staging, progress=self._phase("upload"))
            _inject_fault(self.name)
            got = self.outb.sha256(staging, progress=self._phase("re-read"))
            if got != (size, sha):
                raise ConversionError(
                    local.name,
                    f"the uploaded {self.outb.url(staging)} reads back as {got[0]} bytes with "
                    f"SHA-256 {got[1][:16]}..., not {size} bytes {sha[:16]}...",
                    rule="upload",
                )
            self.lease.check()
            try:
                self.outb.copy_if_absent(staging, self.final)
            except KeyExistsError:  # another converter published it meanwhile
                if not self.adopt_final(outcome["sha256"]):
                    raise OutputExistsError(
                        outcome["output"], "appeared while this conversion ran"
                    ) from None
                outcome.update(status="skipped", reason="converted meanwhile by another converter")
                return
            there = self.outb.head(self.final)
            if there is None or there.size != size:
                raise ConversionError(
                    local.name,
                    f"{outcome['output']} has {there.size if there else 'no'} bytes after the "
                    f"copy, not {size}",
                    rule="upload",
                )
            outcome["output_sha256"] = sha
            self.published_etag = there.etag
        finally:
            self.outb.delete(staging)

    lease: Lease


def _failed(outcome: dict[str, Any], exc: BaseException) -> None:
    if isinstance(exc, LeaseRefusedError):  # this converter's own doing: a failure
        outcome.update(status="failed", fault="converter", error=error_of(exc), reason=str(exc))
    elif isinstance(exc, LeaseLostError):  # another converter has it now
        outcome.update(status="deferred", reason=f"lease lost: {exc}")
    elif (
        isinstance(exc, BucketError)
        and exc.url == outcome["input"]
        and exc.problem
        in (
            "no such object",
            CHANGED,
        )
    ):
        outcome.update(status="deferred", reason=f"{exc}: left for the next scan")
    else:
        outcome.update(status="failed", fault=fault_of(exc), error=error_of(exc), reason=str(exc))


def run_bucket_task(request: str, progress: PhaseProgress | None = None) -> str:
    """Run one bucket request; returns the outcome as JSON text (never raises for its errors)."""
    t0 = time.monotonic()
    req = json.loads(request)
    outcome: dict[str, Any] = {
        "input": req["input"],
        "converter_version": __version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    tmp = Path(tempfile.mkdtemp(prefix="hf-convert-"))
    job: _Job | None = None
    lease: Lease | None = None
    try:
        config = parse_config(req["config"])
        job = _Job(req, config, tmp)
        outcome["config_key"] = job.key
        lease = job.lease = Lease.adopt(
            job.outb, job.layout.lease(job.name), job.owner, float(req["lease_s"])
        )
        _faulty_lease(lease)
        lease.renew()
        lease.start()
        job.run(outcome, progress)
    except Exception as exc:  # every application error becomes an outcome, never a retry
        _failed(outcome, exc)
        if (
            job is not None
            and job.layout.inbox is not None
            and outcome.get("status") == "failed"
            and outcome.get("fault") in ("input", "verify")
        ):
            try:
                outcome["moved_to"] = move_to_failed(
                    job.inb, job.layout, job.in_key, job.name, outcome
                )
            except BucketError as exc2:
                outcome["move_error"] = f"could not move to failed/: {exc2}"
    finally:
        if lease is not None:
            lease.release()
        shutil.rmtree(tmp, ignore_errors=True)
    outcome["seconds"] = round(time.monotonic() - t0, 3)
    return json.dumps(outcome)
