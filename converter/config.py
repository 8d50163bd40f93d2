"""The conversion config: one YAML file, validated into a frozen :class:`ConvertConfig`.

Every problem raises :class:`~hyperframes.converter.errors.ConfigError` naming the key path
(``video.quality``), what was found and what is allowed; unknown keys get a
did-you-mean suggestion, and a key repeated in one mapping is an error (plain
``yaml.safe_load`` would keep the last one silently). Every key is optional;
``configs/convert-example.yaml`` documents them all with their defaults.

The *fingerprint* (:meth:`ConvertConfig.fingerprint`) holds the settings that
decide what an output contains (video, lossless, verify, keep); the batch
settings (workers, polling, Ray) are left out, so changing them never makes
finished archives look unconverted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from hyperframes import _yamlconf as v
from hyperframes.converter.errors import ConfigError

__all__ = [
    "ENCODERS",
    "X265_PRESETS",
    "NVENC_PRESETS",
    "VideoConfig",
    "LosslessConfig",
    "VerifyConfig",
    "BatchConfig",
    "ConvertConfig",
    "parse_config",
    "load_config",
]

ENCODERS: Final = ("auto", "nvenc", "x265")
X265_PRESETS: Final = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
)
NVENC_PRESETS: Final = ("P1", "P2", "P3", "P4", "P5", "P6", "P7")
DECODERS: Final = ("cpu", "auto")


@dataclass(frozen=True, slots=True)
class VideoConfig:
    """How camera streams become H.265 (see docs/VIDEO.md for k and the GOP cap)."""

    encoder: str = "auto"  # auto | nvenc | x265
    quality: int = 28  # x265 CRF / NVENC constant QP, 0..51, lower = better and bigger
    best_quality: int = 22  # a GOP under the PSNR floor is re-encoded, down to this CRF/QP
    quality_step: int = 2  # CRF/QP steps between re-encodings of a GOP
    x265_preset: str = "veryfast"  # measured: docs/CONVERTER.md, "Choosing the defaults"
    nvenc_preset: str = "P4"
    k: int = 3  # an IDR on the first frame of every k-th window
    max_gop: int = 30  # and at most this many frames from one IDR to the next
    threads: int | None = None  # camera streams encoded at once per archive; None = all


@dataclass(frozen=True, slots=True)
class LosslessConfig:
    """How array and other non-camera streams are recompressed."""

    zstd_level: int = 3


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """What the output must prove before it gets its final name."""

    psnr_floor_db: float = 35.0
    sample_gops: float = 0.05  # fraction of GOPs decoded again by random access (every frame is
    # checked at encode time; the sample checks the file and the estimate)
    decoder: str = "cpu"  # cpu | auto (NVDEC where usable)


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """How many archives run at once and how the inbox is watched."""

    workers: int | None = None  # None: sized to the machine (see hyperframes.converter.engines)
    settle_s: float = 10.0  # an inbox file must be unmodified this long before it is touched
    stale_tmp_s: float = 3600.0  # an inbox *.tmp older than this is moved to failed/
    poll_s: float = 5.0  # --watch: seconds between inbox scans
    ray_num_cpus: float = 4.0  # CPUs one Ray task asks for
    ray_max_retries: int = 3  # Ray retries of a task lost to a node or worker failure
    lease_s: float = 120.0  # bucket inboxes: a converter's claim on an input, renewed while it runs


@dataclass(frozen=True, slots=True)
class ConvertConfig:
    """A validated conversion config. Build it with :func:`load_config` or :func:`parse_config`."""

    video: VideoConfig = field(default_factory=VideoConfig)
    lossless: LosslessConfig = field(default_factory=LosslessConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    keep: tuple[str, ...] = ()  # stream names or ids left exactly as they are
    catalog: str | None = None  # a fleet catalog root each output is added to (None: none)
    source: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        """The output-deciding settings as a JSON-ready dict (stable key order)."""
        v, lo, ve = self.video, self.lossless, self.verify
        return {
            "video": {
                "encoder": v.encoder,
                "quality": v.quality,
                "best_quality": v.best_quality,
                "quality_step": v.quality_step,
                "x265_preset": v.x265_preset,
                "nvenc_preset": v.nvenc_preset,
                "k": v.k,
                "max_gop": v.max_gop,
            },
            "lossless": {"zstd_level": lo.zstd_level},
            "verify": {
                "psnr_floor_db": ve.psnr_floor_db,
                "sample_gops": ve.sample_gops,
                "decoder": ve.decoder,
            },
            "keep": sorted(self.keep),
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole config as a YAML/JSON document; :func:`parse_config` reads it back."""
        doc = self.fingerprint()
        doc["video"]["threads"] = self.video.threads or "auto"
        b = self.batch
        doc["batch"] = {
            "workers": b.workers or "auto",
            "settle_s": b.settle_s,
            "stale_tmp_s": b.stale_tmp_s,
            "poll_s": b.poll_s,
            "ray_num_cpus": b.ray_num_cpus,
            "ray_max_retries": b.ray_max_retries,
            "lease_s": b.lease_s,
        }
        doc["keep"] = list(self.keep)
        if self.catalog is not None:
            doc["catalog"] = self.catalog
        return doc

    def with_overrides(
        self,
        *,
        encoder: str | None = None,
        workers: int | None = None,
        keep: Sequence[str] = (),
        psnr_floor_db: float | None = None,
    ) -> ConvertConfig:
        """A copy with command-line overrides applied (validated like the YAML keys)."""
        try:
            cfg = self
            if encoder is not None:
                video = replace(cfg.video, encoder=v.choice(*ENCODERS)("--encoder", encoder))
                cfg = replace(cfg, video=video)
            if workers is not None:
                batch = replace(cfg.batch, workers=v.int_in(1, 4096)("--workers", workers))
                cfg = replace(cfg, batch=batch)
            if psnr_floor_db is not None:
                floor = v.number(200.0, zero_ok=True)("--psnr-floor", psnr_floor_db)
                cfg = replace(cfg, verify=replace(cfg.verify, psnr_floor_db=floor))
            if keep:
                names = tuple(dict.fromkeys([*cfg.keep, *(_name("--keep", k) for k in keep)]))
                cfg = replace(cfg, keep=names)
        except v.ConfigError as exc:
            raise ConfigError(exc.key, exc.problem) from None
        return cfg


def _name(key: str, value: object) -> str:
    """A stream name, or a stream id given as a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return v.string(key, value)


_TOP_KEYS = ("video", "lossless", "verify", "batch", "keep", "catalog")
_VIDEO_KEYS = (
    "encoder",
    "quality",
    "best_quality",
    "quality_step",
    "x265_preset",
    "nvenc_preset",
    "k",
    "max_gop",
    "threads",
)
_VERIFY_KEYS = ("psnr_floor_db", "sample_gops", "decoder")
_BATCH_KEYS = (
    "workers",
    "settle_s",
    "stale_tmp_s",
    "poll_s",
    "ray_num_cpus",
    "ray_max_retries",
    "lease_s",
)


def _video(data: object) -> VideoConfig:
    s = v.Section(data, "video", _VIDEO_KEYS)
    d = VideoConfig()
    quality = s.get("quality", v.int_in(0, 51), d.quality)
    best = s.get("best_quality", v.int_in(0, 51), min(d.best_quality, quality))
    if best > quality:
        raise v.ConfigError(
            "video.best_quality",
            f"must be <= video.quality ({quality}), got {best}: it is the best (lowest) "
            "CRF/QP a GOP under the PSNR floor is re-encoded at; equal to quality disables that",
        )
    return VideoConfig(
        encoder=s.get("encoder", v.choice(*ENCODERS), d.encoder),
        quality=quality,
        best_quality=best,
        quality_step=s.get("quality_step", v.int_in(1, 51), d.quality_step),
        x265_preset=s.get("x265_preset", v.choice(*X265_PRESETS), d.x265_preset),
        nvenc_preset=s.get("nvenc_preset", v.choice(*NVENC_PRESETS), d.nvenc_preset),
        k=s.get("k", v.int_in(1, 100_000), d.k),
        max_gop=s.get("max_gop", v.int_in(1, 100_000), d.max_gop),
        threads=s.get("threads", v.auto_or(v.int_in(1, 256)), d.threads),
    )


def _lossless(data: object) -> LosslessConfig:
    s = v.Section(data, "lossless", ("zstd_level",))
    return LosslessConfig(zstd_level=s.get("zstd_level", v.int_in(1, 22), 3))


def _verify(data: object) -> VerifyConfig:
    s = v.Section(data, "verify", _VERIFY_KEYS)
    d = VerifyConfig()
    return VerifyConfig(
        psnr_floor_db=s.get("psnr_floor_db", v.number(200.0, zero_ok=True), d.psnr_floor_db),
        sample_gops=s.get("sample_gops", v.number(1.0), d.sample_gops),
        decoder=s.get("decoder", v.choice(*DECODERS), d.decoder),
    )


def _batch(data: object) -> BatchConfig:
    s = v.Section(data, "batch", _BATCH_KEYS)
    d = BatchConfig()
    return BatchConfig(
        workers=s.get("workers", v.auto_or(v.int_in(1, 4096)), d.workers),
        settle_s=s.get("settle_s", v.number(86_400.0, zero_ok=True), d.settle_s),
        stale_tmp_s=s.get("stale_tmp_s", v.number(30 * 86_400.0, zero_ok=True), d.stale_tmp_s),
        poll_s=s.get("poll_s", v.number(3600.0), d.poll_s),
        ray_num_cpus=s.get("ray_num_cpus", v.number(1024.0), d.ray_num_cpus),
        ray_max_retries=s.get("ray_max_retries", v.int_in(0, 100), d.ray_max_retries),
        lease_s=s.get("lease_s", v.number(86_400.0), d.lease_s),
    )


def _keep(data: object) -> tuple[str, ...]:
    if not isinstance(data, list):
        raise ConfigError("keep", f"must be a list of stream names or ids, got {v.kind(data)}")
    names = [_name(f"keep[{i}]", v) for i, v in enumerate(data)]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigError(f"keep[{i}]", f"{name!r} already listed at keep[{names.index(name)}]")
    return tuple(names)


def parse_config(data: object, source: str | None = None) -> ConvertConfig:
    """Validate an already-parsed YAML document (a mapping, or None for all defaults)."""
    try:
        if data is None:
            return ConvertConfig(source=source)
        s = v.Section(data, "", _TOP_KEYS)
        keep = s.data.get("keep")
        return ConvertConfig(
            video=_video(s.section("video")),
            lossless=_lossless(s.section("lossless")),
            verify=_verify(s.section("verify")),
            batch=_batch(s.section("batch")),
            keep=() if keep is None else _keep(keep),
            catalog=s.get("catalog", v.catalog_root, None),
            source=source,
        )
    except v.ConfigError as exc:
        raise ConfigError(exc.key, exc.problem, exc.source or source) from None


def load_config(path: str | os.PathLike[str]) -> ConvertConfig:
    """Read and validate one conversion YAML file; raises :class:`ConfigError`."""
    try:
        data = v.load_yaml(path, "converter")
    except v.ConfigError as exc:
        raise ConfigError(exc.key, exc.problem, exc.source) from None
    return parse_config(data, os.fspath(path))
