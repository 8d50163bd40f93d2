"""hyperframes catalog build: rows from headers, tables and events; problems; incremental
runs; two builders; parts whole or not at all; catalog roots and sources in buckets (issue 37).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from catalog_files import MS, T0, VEHICLE, S, segment
from s3_stores import S3Store, store_params

from hyperframes.catalog import listing, schema
from hyperframes.catalog import scan as scan_module
from hyperframes.catalog.append import append_segment
from hyperframes.catalog.build import build
from hyperframes.catalog.errors import CatalogError
from hyperframes.catalog.rows import SegmentFacts, segment_rows
from hyperframes.catalog.store import CatalogRoot
from hyperframes.events import Event, read_file_events
from hyperframes.format.layout import CODEC_SHIFT, INDEX_DTYPE, WINDOW_DTYPE, Header
from hyperframes.format.streams import FileMetadata, StreamInfo
from hyperframes.reader import HyperframeReader

BRAKE = Event(T0 + 1500 * MS, "hard_brake", 3.0, 2.0, {"road": "wet"}, {"note": "ouch"},
              source="rule")  # fmt: skip
MARK = Event(T0 + 2200 * MS, "bookmark", 0.5, 0.5, {"note": "pothole"}, source="mark")


def rows(root: str | Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` in every part (no dedupe), with its partition."""
    cat = CatalogRoot.open(str(root))
    out = []
    for part in cat.list_parts(table):
        vehicle = part.split("/vehicle=")[1].split("/")[0]
        date = part.split("/date=")[1].split("/")[0]
        out += [{**r, "vehicle": vehicle, "date": date} for r in cat.read_part(part).to_pylist()]
    return out


def newest(root: str | Path, table: str) -> dict[Any, dict[str, Any]]:
    """The views' rule: the newest row per key (``cataloged_ns``)."""
    keep: dict[Any, dict[str, Any]] = {}
    for r in rows(root, table):
        key = tuple(r[k] for k in schema.KEYS[table])
        if key not in keep or r["cataloged_ns"] > keep[key]["cataloged_ns"]:
            keep[key] = r
    return keep


@pytest.fixture
def fleet(tmp_path: Path) -> dict[str, Path]:
    """Two good segments (events in both), a truncated one, garbage, one still being written."""
    src = tmp_path / "raw" / VEHICLE / "2025-12-01"
    a = segment(src, 1, events=[BRAKE])
    b = segment(src, 2, events=[MARK])
    whole = segment(tmp_path / "spare", 3).read_bytes()
    cut = src / (a.name.replace("_000001", "_000003"))
    cut.write_bytes(whole[: len(whole) // 2])  # a half-uploaded segment
    junk = src / "junk.hf"
    junk.write_bytes(b"this is no hyperframe file" * 10)
    (src / (a.name.replace("_000001", "_000004") + ".tmp")).write_bytes(b"being written")
    return {"a": a, "b": b, "cut": cut, "junk": junk, "src": tmp_path / "raw"}


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every segment the build opens (the scanner's reader, counted)."""
    opened: list[str] = []

    class Counting(HyperframeReader):
        def __init__(self, path: Any, **kw: Any) -> None:
            opened.append(os.fspath(path))
            super().__init__(path, **kw)

    monkeypatch.setattr(scan_module, "HyperframeReader", Counting)
    return opened


def test_rows_say_what_the_reader_says_and_bad_segments_are_problems(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "catalog"
    report = build([str(fleet["src"])], str(root), workers=4)
    assert (report.listed, report.read, report.problems, report.failed) == (4, 2, 2, 0)
    assert report.requests == 0 and report.events == 2
    marker = json.loads((root / schema.MARKER).read_text())
    assert marker["format"] == schema.FORMAT and marker["version"] == schema.VERSION
    segs = {r["uri"]: r for r in rows(root, "segments")}
    assert set(segs) == {str(fleet["a"]), str(fleet["b"])}
    for path in (fleet["a"], fleet["b"]):
        r = segs[str(path)]
        with HyperframeReader(path) as hf:
            h = hf.header
            assert (r["start_ns"], r["end_ns"], r["frames"], r["windows"]) == (
                hf.start_ns, hf.end_ns, hf.frame_count, hf.window_count())  # fmt: skip
            assert r["fingerprint"] == schema.fingerprint(hf.file_size, h.index_crc, h.meta_crc)
            assert r["bytes_stored"] == path.stat().st_size and r["etag"] is None
            assert r["bytes_payload"] == int(hf.index["size"].sum())
            assert r["seq"] == hf.metadata.segment_seq and r["streams"] == len(hf.streams)
            assert r["modified_ns"] == path.stat().st_mtime_ns and r["converted"] is False
            assert (r["vehicle"], r["date"]) == (VEHICLE, "2025-12-01")
            streams = {s["name"]: s for s in rows(root, "streams") if s["uri"] == str(path)}
            assert set(streams) == {"imu", "lidar_top", "events"}
            for name, s in streams.items():
                ts = hf.timestamps(name)
                assert (s["frames"], s["first_ns"], s["last_ns"]) == (
                    len(ts), int(ts[0]), int(ts[-1]))  # fmt: skip
            assert streams["imu"]["codec"] == "zstd" and streams["lidar_top"]["codec"] == "none"
            assert streams["imu"]["rate_hz"] == 100.0 and streams["events"]["kind"] == "event"
    events = {r["name"]: r for r in rows(root, "events")}
    assert set(events) == {"hard_brake", "bookmark"}
    brake = events["hard_brake"]
    (stored,) = read_file_events(fleet["a"])
    assert brake["t_ns"] == stored.t_ns and brake["uri"] == str(fleet["a"])
    assert brake["event_id"] == schema.event_id(VEHICLE, BRAKE.t_ns, "hard_brake")
    assert (brake["start_ns"], brake["end_ns"]) == (BRAKE.t_ns - 3 * S, BRAKE.t_ns + 2 * S)
    assert dict(brake["tags"]) == {"road": "wet"} and brake["note"] == "ouch"
    assert json.loads(brake["payload"]) == {"note": "ouch"} and brake["source"] == "rule"
    # `hyperframes mark --note` writes the note as a tag: the column shows it too
    assert events["bookmark"]["note"] == "pothole" and events["bookmark"]["payload"] is None
    problems = {Path(r["uri"]).name: r for r in rows(root, "problems")}
    assert set(problems) == {fleet["cut"].name, "junk.hf"}
    assert problems["junk.hf"]["error"] == "CorruptFileError"
    assert problems["junk.hf"]["vehicle"] == schema.UNKNOWN_VEHICLE
    cut = problems[fleet["cut"].name]
    assert cut["error"] and "\n" not in cut["problem"] and cut["vehicle"] == VEHICLE
    assert cut["bytes_stored"] == fleet["cut"].stat().st_size
    # every table reads in DuckDB straight from the files, partitions from the path
    con = duckdb.connect()
    got = con.sql(
        f"SELECT vehicle, count(*) FROM read_parquet('{root}/segments/**/*.parquet', "
        "hive_partitioning=true) GROUP BY vehicle"
    ).fetchall()
    assert got == [(VEHICLE, 2)]


def test_a_rerun_reads_only_new_and_changed_segments(
    fleet: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "catalog")
    build([str(fleet["src"])], root)
    opened = count_opens(monkeypatch)
    again = build([str(fleet["src"])], root)
    assert opened == [] and (again.read, again.problems, again.skipped) == (0, 0, 4)
    assert again.parts == 0
    new = segment(fleet["a"].parent, 5, events=[Event(T0 + 5500 * MS, "swerve")])
    third = build([str(fleet["src"])], root)
    assert opened == [str(new)] and (third.read, third.skipped) == (1, 4)
    # a segment rewritten (same name, other bytes): read again, the newer row wins
    before = newest(root, "segments")[(str(fleet["b"]),)]
    shorter = segment(tmp_path / "other", 2, seconds=0.5, start=T0 + 2 * S)
    fleet["b"].write_bytes(shorter.read_bytes())
    os.utime(fleet["b"], ns=(before["modified_ns"] + 10**9,) * 2)
    opened.clear()
    fourth = build([str(fleet["src"])], root)
    assert opened == [str(fleet["b"])] and fourth.read == 1
    after = newest(root, "segments")[(str(fleet["b"]),)]
    assert after["cataloged_ns"] > before["cataloged_ns"] and after["windows"] == 5
    assert after["fingerprint"] != before["fingerprint"]
    opened.clear()
    full = build([str(fleet["src"])], root, full=True)
    assert len(opened) == 5 and (full.read, full.problems, full.skipped) == (3, 2, 0)


def test_two_builders_at_once_add_rows_the_views_read_once(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    root = str(tmp_path / "catalog")
    CatalogRoot.open(root, create=True)
    reports: list[Any] = []
    go = threading.Barrier(2)

    def run() -> None:
        go.wait()
        reports.append(build([str(fleet["src"])], root, workers=2, full=True))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.read for r in reports] == [2, 2]
    all_segs = rows(root, "segments")
    assert len(all_segs) == 4  # each builder's rows
    views = newest(root, "segments")
    assert len(views) == 2
    for key, r in views.items():
        twins = [x for x in all_segs if x["uri"] == key[0]]
        assert {x["fingerprint"] for x in twins} == {r["fingerprint"]}
    assert len(newest(root, "events")) == 2 and len(newest(root, "problems")) == 2
    # the same with DuckDB: the newest row per key
    n = (
        duckdb.connect()
        .execute(
            f"SELECT count(*) FROM (SELECT uri, arg_max(fingerprint, cataloged_ns) FROM "
            f"read_parquet('{root}/segments/**/*.parquet') GROUP BY uri)"
        )
        .fetchone()
    )
    assert n == (2,)


def test_a_part_appears_whole_or_not_at_all(
    fleet: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "catalog")
    cat = CatalogRoot.open(root, create=True)
    import hyperframes.storage.local as local

    real = local.write_all

    def dies_half_way(fd: int, buffers: Any) -> int:
        data = b"".join(bytes(b) for b in buffers)
        real(fd, [data[: len(data) // 2]])
        raise OSError(28, "No space left on device (a kill, half way)")

    monkeypatch.setattr(local, "write_all", dies_half_way)
    table = pa.Table.from_pylist([{"uri": "x", "name": "x"}], schema=schema.PROBLEMS)
    with pytest.raises(OSError, match="half way"):
        cat.write_part("problems", VEHICLE, "2025-12-01", table)
    monkeypatch.setattr(local, "write_all", real)
    assert cat.list_parts("problems") == []
    folder = Path(root, "problems", f"vehicle={VEHICLE}", "date=2025-12-01")
    assert not [p for p in folder.iterdir() if not p.name.startswith(".")]
    # what a kill -9 in the middle leaves: a hidden temporary; never listed, never read
    (folder / ".part-20251201T000000000000Z-deadbeef0000.parquet.4242.tmp").write_bytes(b"PAR1")
    build([str(fleet["src"])], root)
    parts = cat.list_parts("problems")
    assert parts and all(p.endswith(".parquet") and "/part-" in p for p in parts)
    for table_name in schema.TABLES:
        for part in cat.list_parts(table_name):
            meta = pq.read_metadata(part).metadata
            assert meta[schema.PARQUET_VERSION_KEY] == str(schema.VERSION).encode()
    got = (
        duckdb.connect()
        .execute(f"SELECT count(*) FROM read_parquet('{root}/problems/**/*.parquet')")
        .fetchone()
    )
    assert got == (2,)


def test_compact_merges_each_partition_into_one_part(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    root = str(tmp_path / "catalog")
    for _ in range(3):
        build([str(fleet["src"])], root, full=True)
    cat = CatalogRoot.open(root)
    assert len(cat.list_parts("segments")) == 3
    views = newest(root, "segments")
    assert cat.compact("segments") == 3
    assert len(cat.list_parts("segments")) == 1
    assert newest(root, "segments") == views and len(rows(root, "segments")) == 2
    assert cat.compact("segments") == 0


def test_a_newer_catalog_and_a_missing_marker_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"no catalog here \(_catalog.json is missing\).*build"):
        CatalogRoot.open(str(tmp_path))
    (tmp_path / schema.MARKER).write_text(
        json.dumps({"format": schema.FORMAT, "version": 99, "created_by": "hyperframes 9.0"})
    )
    with pytest.raises(CatalogError) as err:
        build([str(tmp_path)], str(tmp_path))
    text = str(err.value)
    assert str(tmp_path) in text and "version 99" in text and "version 1" in text
    assert isinstance(err.value, schema_error_base())
    assert not Path(tmp_path, "segments").exists()


def schema_error_base() -> type:
    from hyperframes.errors import HyperframesError

    return HyperframesError


def test_rows_are_a_pure_function_of_the_open(tmp_path: Path) -> None:
    """Fed directly: the codec is the index flags' (the truth), not the stream table's; a
    conversion record and a drop counter reach their columns."""
    index = np.zeros(3, INDEX_DTYPE)
    index["stream_id"] = [0, 0, 1]
    index["flags"] = [2 << CODEC_SHIFT, 2 << CODEC_SHIFT, 0]
    index["timestamp_ns"] = [T0 + 5, T0 + 7, T0 + 6]
    index["size"] = [10, 20, 30]
    windows = np.zeros(2, WINDOW_DTYPE)
    windows["flags"] = [0, 2]
    header = Header(0, T0, T0 + S, 3, 2, 0, 0, 100 * MS, 0, 0, 0, 0, 0, 0, 0, 10, 0xAB, 0xCD,
                    0, 0, quarantine_count=4)  # fmt: skip
    extra = {"dropped": 12, "conversion": {"source": {"name": "x.hf", "sha256": "00"}}}
    facts = SegmentFacts(
        uri="s3://b/raw/v9_20251201T000000Z_000042.hf",
        header=header,
        metadata=FileMetadata("v9", "r", 42, 0, extra),
        streams=[
            StreamInfo(0, "imu", "imu", "imu-f64", codec="lz4"),
            StreamInfo(1, "cam", "camera", "h265"),
        ],
        index=index,
        windows=windows,
        missing={7: (1,), 8: (1,)},
        events=[BRAKE],
        size=999,
        etag='"e"',
    )
    out = segment_rows(facts, 5)
    seg = next(r for r in out if r.table == "segments")
    assert (seg.vehicle, seg.date) == ("v9", "2025-12-01")
    assert seg.row["converted"] and seg.row["converted_from"] == "x.hf"
    assert (seg.row["dropped"], seg.row["late"], seg.row["quarantined"]) == (12, 1, 4)
    assert seg.row["bytes_payload"] == 60 and seg.row["fingerprint"] == "999-000000ab-000000cd"
    streams = {r.row["name"]: r.row for r in out if r.table == "streams"}
    assert streams["imu"]["codec"] == "zstd" and streams["cam"]["codec"] == "h265"
    assert (streams["imu"]["first_ns"], streams["imu"]["last_ns"]) == (T0 + 5, T0 + 7)
    assert streams["cam"]["missing_windows"] == 2 and streams["imu"]["missing_windows"] == 0
    (ev,) = [r for r in out if r.table == "events"]
    assert ev.row["event_id"] == schema.event_id("v9", BRAKE.t_ns, "hard_brake")


def test_append_records_the_uploaded_object(fleet: dict[str, Path], tmp_path: Path) -> None:
    root = str(tmp_path / "catalog")
    append_segment(root, str(fleet["a"]), uri="s3://fleet/raw/a.hf", etag="abc", sha256="f" * 64)
    (seg,) = rows(root, "segments")
    assert (seg["uri"], seg["etag"], seg["sha256"]) == ("s3://fleet/raw/a.hf", '"abc"', "f" * 64)
    assert seg["bytes_stored"] == fleet["a"].stat().st_size and seg["vehicle"] == VEHICLE
    assert [e["uri"] for e in rows(root, "events")] == ["s3://fleet/raw/a.hf"]
    append_segment(root, str(fleet["junk"]))
    assert [p["uri"] for p in rows(root, "problems")] == [str(fleet["junk"])]


# --- in buckets -----------------------------------------------------------------------------


@pytest.fixture
def bucket_env(s3_store: S3Store, monkeypatch: pytest.MonkeyPatch) -> S3Store:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    return s3_store


@pytest.mark.network
def test_build_over_a_bucket_into_a_bucket_catalog(
    bucket_env: S3Store, fleet: dict[str, Path]
) -> None:
    store = bucket_env
    client = store.client()
    for name in ("a", "b", "cut", "junk"):
        client.upload_file(str(fleet[name]), store.bucket, f"raw/{VEHICLE}/{fleet[name].name}")
    client.put_object(Bucket=store.bucket, Key="raw/notes.txt", Body=b"not a segment")
    root = store.url("catalog")
    report = build([store.url("raw/")], root, workers=4)
    assert (report.listed, report.read, report.problems, report.failed) == (4, 2, 2, 0)
    small = report.requests_per_segment
    # a segment of 3 MB, events at its start and end: the tail, the header, the events
    big = segment(
        fleet["src"] / "big",
        9,
        seconds=3.0,
        lidar_bytes=100_000,
        events=[Event(T0 + 27 * S + 5 * MS, "early"), Event(T0 + 30 * S - 50 * MS, "late")],
    )
    assert big.stat().st_size > 2 << 20
    client.upload_file(str(big), store.bucket, f"big/{big.name}")
    large = build([store.url("big/")], root)
    print(f"\n{store.name}: requests per segment: {small:.2f} under 1 MiB, "
          f"{large.requests_per_segment:.2f} for 3 MB")  # fmt: skip
    assert small == 1 and large.requests_per_segment <= 3 and large.events == 2
    cat = CatalogRoot.open(root)
    assert cat.is_remote and cat.url == root
    segs = {r["name"]: r for r in rows(root, "segments")}
    for name in ("a", "b"):
        head = client.head_object(Bucket=store.bucket, Key=f"raw/{VEHICLE}/{fleet[name].name}")
        r = segs[fleet[name].name]
        assert r["etag"] == head["ETag"] and r["bytes_stored"] == head["ContentLength"]
        assert r["uri"] == store.url(f"raw/{VEHICLE}/{fleet[name].name}")
    assert {e["name"] for e in rows(root, "events")} == {"hard_brake", "bookmark", "early", "late"}
    assert len(rows(root, "problems")) == 2
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=store.bucket,
                                                     Prefix="catalog/")["Contents"]]  # fmt: skip
    assert "catalog/_catalog.json" in keys
    assert all(k.endswith(".parquet") for k in keys if k != "catalog/_catalog.json")
    again = build([store.url("raw/"), store.url("big/")], root)
    assert (again.read, again.skipped, again.requests) == (0, 5, 0)
    # an object replaced under the same key: read again
    client.upload_file(str(fleet["b"]), store.bucket, f"raw/{VEHICLE}/{fleet['a'].name}")
    third = build([store.url("raw/")], root)
    assert (third.read, third.skipped) == (1, 3)
    assert CatalogRoot.open(root).compact("segments") >= 2


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_a_bucket_source_glob_and_a_single_object(
    bucket_env: S3Store, fleet: dict[str, Path], tmp_path: Path
) -> None:
    store = bucket_env
    client = store.client()
    for name in ("a", "b"):
        client.upload_file(str(fleet[name]), store.bucket, f"raw/{VEHICLE}/d/{fleet[name].name}")
    root = str(tmp_path / "catalog")
    one = build([store.url(f"raw/{VEHICLE}/d/{fleet['a'].name}")], root)
    assert (one.listed, one.read) == (1, 1)
    globbed = build([store.url("raw/*/d/*_000002.hf")], root)
    assert (globbed.listed, globbed.read) == (1, 1)


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto"), indirect=True)
def test_a_bucket_is_listed_by_prefix_on_threads_and_misses_no_key(bucket_env: S3Store) -> None:
    store = bucket_env
    client = store.client()
    keys = [f"raw/veh-{v}/2026-01-0{d}/veh-{v}_{d:06d}.hf" for v in "abc" for d in (2, 3)]
    keys += ["raw/top.hf", "raw/notes.txt", "raw/veh-c/x/y/deep.hf", "other/veh-a/z.hf"]
    keys += [f"lone/one/two/veh-{i}.hf" for i in range(3)]
    for k in keys:
        client.put_object(Bucket=store.bucket, Key=k, Body=b"x" * len(k))

    def flat(prefix: str) -> list[str]:
        return sorted(f"s3://{store.bucket}/{k}" for k in keys if k.startswith(prefix)
                      and k.endswith(".hf"))  # fmt: skip

    def uris(src: str) -> list[str]:
        return [x.uri for x in listing.list_sources([store.url(src)])]

    assert uris("raw/") == flat("raw/")  # by key, as one listing gives them
    assert uris("") == flat("")
    assert uris("lone/") == flat("lone/")  # lone prefixes descended into
    assert uris("raw/veh-*/2026-01-03/*.hf") == flat("raw/veh-")[1::2][:3]
    got = {x.uri: x for x in listing.list_sources([store.url("raw/")])}
    assert got[f"s3://{store.bucket}/raw/top.hf"].size == len("raw/top.hf")
    # an older key uploaded after newer ones (event-protected segments go first) is listed
    late = "raw/veh-a/2026-01-01/veh-a_000001.hf"
    client.put_object(Bucket=store.bucket, Key=late, Body=b"late")
    keys.append(late)
    assert uris("raw/") == flat("raw/")
