"""The ``upload:`` section of the vehicle YAML, validated like the rest of it.

.. code-block:: yaml

    upload:
      dest: s3://fleet-raw/recordings   # or a directory: /mnt/depot/recordings
      endpoint_url: https://minio.depot:9000   # else AWS_ENDPOINT_URL / the profile
      profile: depot                    # an AWS profile (~/.aws/config, credentials)
      part_mb: 16                       # multipart part size (5..5120 MiB)
      bandwidth_mb_s: 4                 # cap, MB/s (absent: no cap)
      when: [/usr/local/bin/depot-link-up]   # argv; exit 0 = uploading allowed now
      delete_after_upload: false
      verify: auto                      # auto | reread | no-reread (s3:// only)
      catalog: s3://fleet-raw/catalog   # a fleet catalog to add each uploaded segment to
      mode: all                         # all | events: clips, requests and catalog rows only
      requests: s3://fleet-raw/requests # where the depot writes requests (absent: none)
      requests_interval_s: 60           # how often to poll them (jittered)

``mode`` says what goes up: ``all`` (default) every finalized segment, after
clips and requested files; ``events`` only event clips, the files a depot
requested and the catalog rows of every finalized segment (so ``catalog`` is
required), the segments themselves staying on the vehicle until requested or
evicted by the disk policy (docs/OPERATIONS.md, Upload).

``verify`` says what may prove that an object holds the segment's bytes
(docs/OPERATIONS.md, Upload): ``auto`` takes the store's ETag (an MD5 form) or,
on AWS S3 itself, its SHA-256, and reads the object back where neither proves
it; ``reread`` always reads it back; ``no-reread`` never does (on a metered
link a re-read costs one download of the object), and a segment nothing else
proves waits, unmarked, as ``unverifiable``.

Credentials come from the usual AWS chain (``AWS_ACCESS_KEY_ID`` and friends,
a profile, an instance role). Keys in the YAML are accepted as
``access_key_id`` plus ``secret_access_key_file``; a plain-text
``secret_access_key`` only with ``allow_inline_secret: true``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframes import _yamlconf as v
from hyperframes._yamlconf import Section
from hyperframes.errors import ConfigError
from hyperframes.storage.objects import redact_credentials

__all__ = ["UploadConfig", "S3Settings", "parse_upload", "VERIFY_MODES", "UPLOAD_MODES"]

_KEYS: Final = (
    "dest",
    "endpoint_url",
    "region",
    "profile",
    "access_key_id",
    "secret_access_key",
    "secret_access_key_file",
    "allow_inline_secret",
    "part_mb",
    "bandwidth_mb_s",
    "when",
    "when_interval_s",
    "priority_glob",
    "delete_after_upload",
    "scan_interval_s",
    "retry_max_s",
    "metrics",
    "verify",
    "catalog",
    "mode",
    "requests",
    "requests_interval_s",
    "requests_max_range_s",
)
VERIFY_MODES: Final = ("auto", "reread", "no-reread")
UPLOAD_MODES: Final = ("all", "events")


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How to reach an S3-compatible store; ``None`` fields come from the AWS chain."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    secret_access_key_file: Path | None = None

    def secret(self) -> str | None:
        """The secret key: inline, else the first line of ``secret_access_key_file``."""
        if self.secret_access_key is not None or self.secret_access_key_file is None:
            return self.secret_access_key
        try:
            raw = self.secret_access_key_file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                "upload.secret_access_key_file",
                f"cannot read {self.secret_access_key_file}: {exc.strerror or exc}",
            ) from None
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError:  # never echo the bytes: they are the secret
            raise ConfigError(
                "upload.secret_access_key_file", f"{self.secret_access_key_file} is not UTF-8 text"
            ) from None
        return lines[0].strip() if lines else ""


@dataclass(frozen=True, slots=True)
class UploadConfig:
    """A validated ``upload:`` section."""

    dest: str
    """``s3://BUCKET[/PREFIX]`` or a directory path."""
    s3: S3Settings = S3Settings()
    part_mb: int = 16
    bandwidth_mb_s: float | None = None
    when: tuple[str, ...] | None = None
    """The argv of a command whose exit status 0 allows uploading now; ``None``: always."""
    when_interval_s: float = 60.0
    priority_glob: str | None = None
    delete_after_upload: bool = False
    scan_interval_s: float = 10.0
    retry_max_s: float = 300.0
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    verify: str = "auto"
    """What proves an object: ``auto``, ``reread`` or ``no-reread`` (module docstring)."""
    catalog: str | None = None
    """A fleet catalog root (a directory or ``s3://``) each uploaded segment is added to;
    ``None``: none (docs/CATALOG.md)."""
    mode: str = "all"
    """``all``: every finalized segment goes up (after clips and requested files);
    ``events``: clips, requested files and the catalog rows of every segment only."""
    requests: str | None = None
    """Where the depot writes requests for this vehicle (``s3://`` or a directory),
    polled by the service; ``None``: no requests."""
    requests_interval_s: float = 60.0
    """How often the requests are polled (jittered; backed off after failures; at once
    when ``when`` turns to go)."""
    requests_max_range_s: float | None = None
    """A longer requested range is refused (``None``: the default of
    :mod:`~hyperframes.recorder.upload.request_doc`)."""

    @property
    def is_s3(self) -> bool:
        """Whether the destination is an S3 URL (else a directory)."""
        return self.dest.startswith("s3://")

    @property
    def part_bytes(self) -> int:
        """Multipart part size in bytes."""
        return self.part_mb * 1024 * 1024

    @property
    def bandwidth_bytes_s(self) -> float | None:
        """The bandwidth cap in bytes per second, or ``None``."""
        return None if self.bandwidth_mb_s is None else self.bandwidth_mb_s * 1e6


def _dest(key: str, value: object) -> str:
    return v.store_root(key, value, absolute=False)


def _when(key: str, value: object) -> tuple[str, ...] | None:
    if value == "always":
        return None
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigError(key, f"cannot split the command: {exc}") from None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        argv = list(value)
    else:
        raise ConfigError(
            key,
            f"must be 'always' or a command (a string or a list of strings), got {v.kind(value)}",
        )
    if not argv or not argv[0]:
        raise ConfigError(key, "an empty command; use 'always' or name a program")
    return tuple(argv)


def _endpoint(key: str, value: object) -> str:
    text = v.string(key, value)
    if not text.startswith(("http://", "https://")):
        shown = redact_credentials(text)[:80]
        raise ConfigError(
            key, f"{shown!r} must start with https:// (or http:// to allow plain text)"
        )
    return text


def parse_upload(data: object) -> UploadConfig:
    """Validate the ``upload:`` mapping; raises :class:`ConfigError` naming the key."""
    s = Section(data, "upload", _KEYS)
    dest = s.need("dest", _dest)
    is_s3 = dest.startswith("s3://")
    for k in (
        "endpoint_url",
        "region",
        "profile",
        "access_key_id",
        "secret_access_key",
        "secret_access_key_file",
        "verify",
    ):
        if s.has(k) and not is_s3:
            raise ConfigError(s.key(k), "applies to s3:// destinations only")
    if s.has("secret_access_key") and not s.get("allow_inline_secret", v.boolean, False):
        # the value itself is never repeated in a message
        raise ConfigError(
            s.key("secret_access_key"),
            "a plain-text secret in the YAML is refused; use secret_access_key_file, the "
            "AWS_SECRET_ACCESS_KEY variable or a profile (or set allow_inline_secret: true)",
        )
    if s.has("secret_access_key") and s.has("secret_access_key_file"):
        raise ConfigError(
            s.key("secret_access_key_file"), "give secret_access_key or the file, not both"
        )
    has_secret = s.has("secret_access_key") or s.has("secret_access_key_file")
    if has_secret != s.has("access_key_id"):
        raise ConfigError(s.key("access_key_id"), "access_key_id and a secret key go together")
    secret = s.get("secret_access_key", v.secret, None)
    metrics_port, metrics_host = None, "127.0.0.1"
    if s.has("metrics"):
        m = Section(s.data["metrics"], "upload.metrics", ("enabled", "host", "port"))
        if m.get("enabled", v.boolean, False):
            metrics_port = m.get("port", v.int_in(1, 65535), 9109)
            metrics_host = m.get("host", v.string, "127.0.0.1")
    s3 = S3Settings(
        endpoint_url=s.get("endpoint_url", _endpoint, None),
        region=s.get("region", v.string, None),
        profile=s.get("profile", v.string, None),
        access_key_id=s.get("access_key_id", v.string, None),
        secret_access_key=secret,
        secret_access_key_file=s.get("secret_access_key_file", v.path, None),
    )
    when: Any = s.data.get("when", "always")
    for k in ("requests_interval_s", "requests_max_range_s"):
        if s.has(k) and not s.has("requests"):
            raise ConfigError(s.key(k), "applies only with upload.requests")
    mode = s.get("mode", v.choice(*UPLOAD_MODES), "all")
    if mode == "events" and not s.has("catalog"):
        raise ConfigError(
            s.key("mode"),
            "upload.mode events needs upload.catalog: the depot's only view of what stays "
            "on the vehicle",
        )
    return UploadConfig(
        dest=dest,
        s3=s3,
        part_mb=s.get("part_mb", v.int_in(5, 5120), 16),
        bandwidth_mb_s=s.get("bandwidth_mb_s", v.number(100_000), None),
        when=_when(s.key("when"), when),
        when_interval_s=s.get("when_interval_s", v.number(86_400), 60.0),
        priority_glob=s.get("priority_glob", v.string, None),
        delete_after_upload=s.get("delete_after_upload", v.boolean, False),
        scan_interval_s=s.get("scan_interval_s", v.number(86_400), 10.0),
        retry_max_s=s.get("retry_max_s", v.number(86_400), 300.0),
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        verify=s.get("verify", v.choice(*VERIFY_MODES), "auto"),
        catalog=s.get("catalog", v.catalog_root, None),
        mode=mode,
        requests=s.get("requests", v.store_root, None),
        requests_interval_s=s.get("requests_interval_s", v.number(86_400), 60.0),
        requests_max_range_s=s.get("requests_max_range_s", v.number(30 * 86_400), None),
    )
