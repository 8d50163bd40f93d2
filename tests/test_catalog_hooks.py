"""``catalog:`` in the upload service's and the converter's configs: each segment uploaded or
converted is added to the fleet catalog; a catalog that fails never fails the upload or the
conversion (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from catalog_files import segment
from s3_stores import S3Store, store_params
from test_catalog_build import rows
from test_upload import VEHICLE, _cfg

from hyperframes.converter.config import parse_config as parse_convert
from hyperframes.converter.errors import ConfigError as ConvertConfigError
from hyperframes.errors import ConfigError
from hyperframes.recorder.upload.service import UploadService


def test_upload_to_a_directory_catalogs_each_segment(tmp_path: Path) -> None:
    out, dest, root = tmp_path / "out", tmp_path / "depot", tmp_path / "catalog"
    dest.mkdir()
    segs = [segment(out, i, vehicle=VEHICLE) for i in range(2)]
    svc = UploadService(cfg := _cfg(out, {"dest": str(dest), "catalog": str(root)}), cfg.upload)
    assert svc.run_once() == 0
    assert (svc.stats.uploaded_segments, svc.stats.cataloged_segments) == (2, 2)
    got = {r["name"]: r for r in rows(root, "segments")}
    for p in segs:
        copy = dest / VEHICLE / "2025-12-01" / p.name
        r = got[p.name]
        assert r["uri"] == str(copy) and r["bytes_stored"] == copy.stat().st_size
        assert r["sha256"] and r["vehicle"] == VEHICLE


def test_a_failing_catalog_never_fails_the_upload(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "depot"
    dest.mkdir()
    segment(out, 0, vehicle=VEHICLE)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    svc = UploadService(cfg := _cfg(out, {"dest": str(dest), "catalog": str(not_a_dir)}),
                        cfg.upload)  # fmt: skip
    assert svc.run_once() == 0
    assert svc.stats.uploaded_segments == 1 and svc.stats.catalog_failures == 1
    assert "1 not cataloged" in svc.stats.status_line()


@pytest.mark.parametrize(
    ("value", "words"),
    [("gs://b/cat", "unsupported scheme gs://"), ("s3://A_b/cat", "bucket name"), (7, "string")],
)
def test_upload_catalog_key_is_validated(tmp_path: Path, value: object, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        _cfg(tmp_path, {"dest": str(tmp_path), "catalog": value})
    assert err.value.key == "upload.catalog" and words in str(err.value)
    assert _cfg(tmp_path, {"dest": str(tmp_path)}).upload.catalog is None


def test_converter_catalog_key_is_validated_and_travels_to_the_task(tmp_path: Path) -> None:
    with pytest.raises(ConvertConfigError) as err:
        parse_convert({"catalog": "gs://b/cat"})
    assert err.value.key == "catalog" and "unsupported scheme" in str(err.value)
    cfg = parse_convert({"catalog": "s3://fleet/catalog"})
    assert parse_convert(cfg.to_dict()).catalog == "s3://fleet/catalog"
    assert "catalog" not in json.dumps(cfg.fingerprint())  # the outputs do not depend on it
    assert "catalog" not in parse_convert(None).to_dict()


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_upload_to_a_bucket_records_the_etag_the_store_answered(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "out"
    p = segment(out, 0, vehicle=VEHICLE)
    root = s3_store.url("catalog")
    conf = {"dest": s3_store.url("raw"), "endpoint_url": s3_store.endpoint_url, "catalog": root}
    svc = UploadService(cfg := _cfg(out, conf), cfg.upload)
    assert svc.run_once() == 0 and svc.stats.cataloged_segments == 1
    (r,) = rows(root, "segments")
    key = f"raw/{VEHICLE}/2025-12-01/{p.name}"
    head = s3_store.client().head_object(Bucket=s3_store.bucket, Key=key)
    assert r["uri"] == s3_store.url(key) and r["etag"] == head["ETag"]


def test_a_converted_output_is_cataloged_as_converted(tmp_path: Path) -> None:
    pytest.importorskip("av")
    from hyperframes.converter.directory.task import process_input

    from convert_fixtures import write_archive

    src = write_archive(tmp_path / "m.hf", 0.4, late=False, quarantined=False)
    root = tmp_path / "catalog"
    cfg = parse_convert({"video": {"x265_preset": "ultrafast"}, "catalog": str(root)})
    outcome = process_input(src, tmp_path / "out", cfg)
    assert outcome["status"] == "converted" and outcome.get("cataloged") is True, outcome
    (r,) = rows(root, "segments")
    assert r["uri"] == str(tmp_path / "out" / "m.hf")
    assert r["converted"] is True and r["converted_from"] == "m.hf"
    codecs = {s["name"]: s["codec"] for s in rows(root, "streams")}
    assert "h265" in codecs.values()
    # a catalog that cannot take it: the conversion stands, the outcome says why
    bad = parse_convert({"video": {"x265_preset": "ultrafast"}, "catalog": str(src)})
    other = write_archive(tmp_path / "n.hf", 0.4, seed=3, late=False, quarantined=False)
    second = process_input(other, tmp_path / "out", bad)
    assert second["status"] == "converted" and "catalog_error" in second


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_a_bucket_task_catalogs_its_published_output(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("av")
    pytest.importorskip("obstore")
    from hyperframes.converter.bucket.leases import acquire
    from hyperframes.converter.bucket.store import Bucket
    from hyperframes.converter.bucket.task import make_bucket_request, run_bucket_task

    from convert_fixtures import write_archive

    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    client: Any = s3_store.client()
    src = write_archive(tmp_path / "p.hf", 0.4, late=False, quarantined=False)
    client.upload_file(str(src), s3_store.bucket, "raw/p.hf")
    root = s3_store.url("catalog")
    cfg = parse_convert({"video": {"x265_preset": "ultrafast"}, "catalog": root})
    lease = acquire(
        Bucket(s3_store.bucket), "conv/.leases/p.hf.json", "t-1", "p.hf", "raw/p.hf", 30
    )
    assert lease is None
    req = make_bucket_request(s3_store.url("raw/p.hf"), s3_store.url("conv"), cfg,
                              owner="t-1", lease_s=30)  # fmt: skip
    outcome = json.loads(run_bucket_task(req))
    assert outcome["status"] == "converted" and outcome.get("cataloged") is True, outcome
    (r,) = rows(root, "segments")
    head = client.head_object(Bucket=s3_store.bucket, Key="conv/p.hf")
    assert r["uri"] == s3_store.url("conv/p.hf") and r["etag"] == head["ETag"]
    assert r["sha256"] == outcome["output_sha256"] and r["converted"] is True
