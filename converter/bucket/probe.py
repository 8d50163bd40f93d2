"""Know the store before doing the work: one probe per batch, then the modes it allows.

S3-compatible stores differ in exactly what the bucket batch relies on
(docs/CONVERTER.md, "Buckets"), and a store that ignores a condition says
``200`` all the same. So before converting anything, :func:`store_modes` makes a
few small requests on scratch keys under ``OUT/.staging/.probe-RUN/`` (deleted
again; one left by a killed probe is swept once it is an hour old) and
:func:`choose_modes` picks, from what they did (:class:`Findings`), how this
batch and its tasks publish and lease (:class:`~hyperframes.converter.bucket.store.StoreModes`),
or stops the batch with one line that names the setting to use
(:class:`StoreModeError`). Nothing is kept between processes.

The requests (:func:`probe`), each checked by its effect, not its status:

1. ``PUT`` with ``If-None-Match: *`` twice on one key: the second must be refused
   (412). rclone stores it (the store cannot refuse a write).
2. ``PUT`` with ``If-Match`` and the ETag just returned, quoted, then bare when the
   quoted one was refused (Ceph RGW 16 refuses its own quoted ETag on a PUT);
   then with a superseded ETag, which must be refused.
3. ``GET`` with ``If-Match`` (quoted, then bare): the form conditional GETs take.
4. The copy of ``HYPERFRAMES_S3_FINAL_COPY`` (``multipart`` unset): it must make
   the same bytes (rclone's UploadPartCopy answers 200 and would complete an empty
   object); then the same copy again onto the existing key must be refused (Ceph
   RGW before Squid ignores ``If-None-Match: *`` on CompleteMultipartUpload).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Final

from hyperframes.converter.bucket.keys import Layout
from hyperframes.converter.bucket.store import (
    FINAL_COPY_ENV,
    Bucket,
    BucketError,
    KeyExistsError,
    PreconditionFailedError,
    StoreModes,
    etag_in,
    explicit_final_copy_mode,
)
from hyperframes.converter.errors import ConfigError

__all__ = ["Findings", "StoreModeError", "probe", "choose_modes", "store_modes", "PROBE_OWNER"]

log = logging.getLogger(__name__)

#: Scratch keys live under ``OUT/.staging/.probe-RUN/``; the sweep spares them this long.
PROBE_OWNER: Final = ".probe-"  # no converter's owner (a host name) starts with "."
PROBE_SWEEP_AFTER_S: Final = 3600.0
_FORMS: Final = ("quoted", "bare")


class StoreModeError(ConfigError):
    """The store cannot run the batch as configured; the message names the setting to use."""

    def __init__(self, problem: str) -> None:
        super().__init__("", problem)


@dataclass(slots=True)
class Findings:
    """What the store did with the probe's requests."""

    create_refused: bool = False  # a second PUT with If-None-Match: * was refused
    put_form: str | None = None  # the ETag form If-Match on a PUT takes (None: neither)
    stale_refused: bool = False  # a PUT with a superseded ETag in If-Match was refused
    get_form: str | None = None  # the ETag form If-Match on a GET takes
    copy_mode: str = "multipart"  # the publish mode tried
    copy_problem: str | None = None  # why its copy does not work (None: it made the bytes)
    copy_refused: bool | None = None  # the same copy onto the existing key was refused
    requests: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def conditional(self) -> bool:
        """The store refuses writes on conditions: leases can work."""
        return self.create_refused and self.put_form is not None and self.stale_refused


def _put_if_match(bucket: Bucket, key: str, data: bytes, etag: str) -> tuple[str, str] | None:
    """A PUT with ``If-Match`` in each form until one is taken: ``(form, new ETag)``."""
    for form in _FORMS:
        with contextlib.suppress(PreconditionFailedError):
            return form, bucket.put_bytes(key, data, if_match=etag_in(etag, form))
    return None


def _get_form(bucket: Bucket, key: str, etag: str) -> str | None:
    """The form of ``etag`` that a GET with ``If-Match`` takes."""
    for form in _FORMS:
        with contextlib.suppress(PreconditionFailedError):
            bucket.read(key, if_match=etag_in(etag, form))
            return form
    return None


def _copy(bucket: Bucket, src: str, dst: str, want: bytes, found: Findings) -> None:
    """The copy of the mode under test, its bytes, then the same copy again."""
    try:
        bucket.copy(src, dst)
        got, _ = bucket.read(dst)
    except BucketError as exc:
        found.copy_problem = exc.problem
        return
    if got != want:
        found.copy_problem = f"made an object of {len(got)} bytes from one of {len(want)}"
        return
    if found.copy_mode == "head":
        return
    try:
        bucket.copy(src, dst)
        found.copy_refused = False
    except KeyExistsError:
        found.copy_refused = True
    except BucketError as exc:
        found.copy_refused = False
        found.notes.append(f"a copy onto an existing key failed: {exc.problem}")


def _conditions(bucket: Bucket, key: str, found: Findings) -> tuple[bytes, str]:
    """Requests 1 and 2 of the module docstring; the bytes under ``key`` now and their ETag."""
    try:
        first = bucket.put_bytes(key, b"probe 1", if_absent=True)
    except BucketError as exc:  # If-None-Match not taken at all? a plain PUT tells
        first = bucket.put_bytes(key, b"probe 1")
        found.notes.append(f"a PUT with If-None-Match: * failed: {exc.problem}")
    else:
        try:
            first = bucket.put_bytes(key, b"probe 2", if_absent=True)
        except KeyExistsError:
            found.create_refused = True
    data = b"probe 1" if found.create_refused else b"probe 2"
    taken = _put_if_match(bucket, key, b"probe 3", first)
    if taken is None:
        return data, first
    found.put_form, etag = taken
    try:  # ``first`` is superseded now
        etag = bucket.put_bytes(key, b"probe 4", if_match=etag_in(first, found.put_form))
    except PreconditionFailedError:
        found.stale_refused = True
        return b"probe 3", etag
    return b"probe 4", etag


def probe(bucket: Bucket, prefix: str, copy_mode: str) -> Findings:
    """Make the probe's requests (the module docstring) under ``prefix/``; the scratch keys
    are deleted whatever happens. A store failure (no bucket, refused credentials) is raised."""
    t0, n0 = time.monotonic(), bucket.requests
    found = Findings(copy_mode=copy_mode)
    a, b = f"{prefix}/a", f"{prefix}/b"
    try:
        data, etag = _conditions(bucket, a, found)
        found.get_form = _get_form(bucket, a, etag)
        _copy(bucket, a, b, data, found)
    finally:
        for key in (a, b):
            with contextlib.suppress(BucketError):
                bucket.delete(key)
    found.requests = bucket.requests - n0
    found.seconds = round(time.monotonic() - t0, 3)
    return found


def _why_not_conditional(found: Findings) -> str:
    if not found.create_refused:
        return "a PUT with If-None-Match: * replaced an existing object"
    if found.put_form is None:
        return "a PUT with If-Match and the object's own ETag was refused, quoted and bare"
    return "a PUT with If-Match and a superseded ETag was accepted"


def choose_modes(found: Findings, explicit: str | None, where: str) -> tuple[StoreModes, list[str]]:
    """The modes for ``found`` (``explicit``: ``HYPERFRAMES_S3_FINAL_COPY`` when set), and the
    warnings to log; :class:`StoreModeError` when the batch must not run (``where``: the
    output prefix's URL, for the message)."""
    warnings = list(found.notes)
    mode = explicit or "multipart"
    if not found.conditional and mode != "head":
        raise StoreModeError(
            f"the store at {where} cannot refuse a write ({_why_not_conditional(found)}), so no "
            "lease and no copy guard work there; set HYPERFRAMES_S3_FINAL_COPY=head to convert "
            "with one converter at a time (no lease protects the outputs)"
        )
    if found.copy_problem is not None:
        setting = f"{FINAL_COPY_ENV}={mode}" + ("" if explicit else " (the default)")
        raise StoreModeError(
            f"{setting} does not work on the store at {where}: its copy {found.copy_problem}; "
            f"set {FINAL_COPY_ENV}=head (a HEAD check, then a plain copy"
            + ("; the leases still keep a second converter off)" if found.conditional else ")")
        )
    if found.copy_refused is False:
        warnings.append(
            f"the store at {where} ignores If-None-Match: * on a {mode} copy (Ceph RGW before "
            "Squid: CompleteMultipartUpload): only the HEAD check before each copy and the "
            "leases keep an output from being replaced (two converters finishing one name in "
            "the same instant could both copy; either copy is a verified output)"
        )
    if not found.conditional:
        warnings.append(
            f"the store at {where} cannot refuse a write ({_why_not_conditional(found)}): "
            f"{FINAL_COPY_ENV}=head converts with one converter at a time; no lease protects "
            "the outputs, and a second converter on this output prefix may convert an input twice"
        )
    if found.get_form is None:
        warnings.append(
            f"the store at {where} refuses If-Match on a GET with the object's own ETag: "
            "downloads are not conditional (an input replaced while queued is converted as it is)"
        )
    modes = StoreModes(
        publish=mode,
        leases="conditional" if found.conditional else "head",
        etag_put=found.put_form or "quoted",
        etag_get=found.get_form,
    )
    return modes, warnings


def store_modes(bucket: Bucket, layout: Layout, run_id: str) -> StoreModes:
    """:func:`probe` the output's store, then :func:`choose_modes`: logged on one line (and a
    warning each), or :class:`StoreModeError`."""
    explicit = explicit_final_copy_mode()
    mode = explicit or "multipart"
    tester = Bucket(bucket.name, StoreModes(publish=mode))
    found = probe(tester, f"{layout.staging_prefix}/{PROBE_OWNER}{run_id}", mode)
    modes, warnings = choose_modes(found, explicit, bucket.url(layout.out))
    log.info(
        "store probe (%d requests, %.2f s): publish %s, leases %s, If-Match %s on PUT, %s on GET",
        found.requests,
        found.seconds,
        modes.publish,
        modes.leases,
        modes.etag_put if modes.leases == "conditional" else "unused",
        modes.etag_get or "not sent",
    )
    for line in warnings:
        log.warning("%s", line)
    return modes
