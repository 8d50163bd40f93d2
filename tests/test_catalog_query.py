"""The catalog's read side: views, questions, pruning, snapshots, the coverage plot, the CLI.

Catalogs here are Parquet parts written in the documented layout from synthetic rows
(tests/catalog_rows.py), except the end-to-end test, which builds one from real segments.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

import pyarrow.parquet as pq
from catalog_rows import (
    T0,
    S,
    event,
    problem,
    segment,
    stream,
    upload_tree,
    write_catalog,
    write_marker,
)
from s3_stores import store_params

from hyperframes.catalog import views
from hyperframes.catalog.errors import CatalogError, ManifestError
from hyperframes.catalog.location import locate
from hyperframes.catalog.manifest import (
    KEY_QUERY,
    KEY_ROOT,
    ManifestEntry,
    check_entry,
    manifest_metadata,
    open_entry,
    read_manifest,
    snapshot,
)
from hyperframes.catalog.query import (
    EventsQuery,
    QueryError,
    files_opened,
    find_events,
    run_sql,
)
from hyperframes.catalog.schema import (
    MANIFEST,
    PARQUET_VERSION_KEY,
    SCHEMAS,
    VERSION,
    fingerprint,
)
from hyperframes.catalog.sql import events_sql
from hyperframes.catalog.views import open_catalog
from hyperframes.catalog.when import date_range, parse_when, to_ns
from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader

NOW = T0 + 30 * 86400 * S  # 2025-01-31T00:00:00Z


def col(table: Any, name: str) -> list[Any]:
    return list(table.column(name).to_pylist())


# --- a small fleet with known gaps ---------------------------------------------------------


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """v1: a drive 0-180 s (seq 0, 1 (+ a converted copy), 2 starting 1 s late), a gap, then
    a recorder restart at 400 s (seq 0, 1) and a jump in sequence at 520 s (seq 5); v2: one
    segment two days later. Streams: cam and lidar in v1's first segment, cam alone in its
    second, lidar in the third with its last frame at 125 s."""
    s0 = segment("v1", 0, 0, 60)
    s1 = segment("v1", 1, 60, 120)
    s1c = segment("v1", 1, 60, 120, converted=True)
    s2_old = segment("v1", 2, 121, 180, frames=1, cataloged_ns=1)
    s2 = segment("v1", 2, 121, 180, frames=50, cataloged_ns=9)
    r0 = segment("v1", 0, 400, 460, name="v1_restart_0.hf")
    r1 = segment("v1", 1, 460, 520, name="v1_restart_1.hf")
    r5 = segment("v1", 5, 520, 580, name="v1_restart_5.hf")
    w = segment("v2", 3, 2 * 86400, 2 * 86400 + 60)
    streams = [
        stream(s0, 0, "cam"),
        stream(s0, 1, "lidar"),
        stream(s1, 0, "cam"),
        stream(s1, 1, "lidar", frames=0),
        stream(s1c, 0, "cam"),
        stream(s2, 1, "lidar", last_s=125),
        stream(s2_old, 1, "lidar", frames=0, cataloged_ns=1),
        stream(w, 0, "cam"),
    ]
    events = [
        event("v1", 30, "hard_brake"),  # in s0: cam and lidar
        event("v1", 90, "hard_brake"),  # in s1: cam only (lidar has no frame)
        event("v1", 119.5, "swerve", post_s=2),  # s1 and s2: cam in s1, lidar in s2 (up to 125 s)
        event("v1", 170, "hard_brake"),  # in s2 after lidar's last frame
        event("v1", 300, "hard_brake"),  # in the gap: no segment
        event("v2", 2 * 86400 + 10, "hard_brake", note="v2's"),
        event("v1", 30, "hard_brake", cataloged_ns=0, note="older row"),
    ]
    probs = [
        problem("v1", "bad.hf", "truncated", cataloged_ns=1),
        problem("v1", "bad.hf", "truncated again", cataloged_ns=2),
    ]
    root = tmp_path / "cat"
    segs = [s0, s1, s1c, s2_old, s2, r0, r1, r5, w]
    return write_catalog(root, segments=segs, streams=streams, events=events, problems=probs)


def test_views_keep_the_newest_row_per_key(fleet: Path) -> None:
    with open_catalog(fleet) as con:
        segs = run_sql(
            con,
            "SELECT name, frames, vehicle, date, start_time FROM segments "
            "WHERE name = 'v1_00002.hf'",
        )
        assert col(segs, "frames") == [50]  # the row cataloged last, of two
        assert col(segs, "vehicle") == ["v1"] and col(segs, "date") == [dt.date(2025, 1, 1)]
        assert col(segs, "start_time") == [dt.datetime(2025, 1, 1, 0, 2, 1)]
        assert run_sql(con, "SELECT count(*) AS n FROM segments_all").column("n")[0].as_py() == 9
        assert run_sql(con, "SELECT count(*) AS n FROM segments").column("n")[0].as_py() == 8
        lidar = run_sql(
            con, "SELECT frames FROM streams WHERE name = 'lidar' AND uri LIKE '%v1_00002.hf'"
        )
        assert col(lidar, "frames") == [10]
        ev = run_sql(con, "SELECT note, time FROM events WHERE t_ns = ?", [T0 + 30 * S])
        assert col(ev, "note") == [None]  # the newer row, not the "older row"
        assert col(ev, "time") == [dt.datetime(2025, 1, 1, 0, 0, 30)]
        assert col(run_sql(con, "SELECT problem FROM problems"), "problem") == ["truncated again"]


def test_an_empty_catalog_has_empty_views_with_their_columns(tmp_path: Path) -> None:
    write_marker(tmp_path / "empty")
    with open_catalog(tmp_path / "empty") as con:
        for table, schema in SCHEMAS.items():
            got = run_sql(con, f"SELECT * FROM {table}")
            assert got.num_rows == 0
            assert got.column_names[: len(schema)] == schema.names
            assert {"vehicle", "date"} <= set(got.column_names)
        for view in ("coverage", "drives", "event_segments"):
            assert run_sql(con, f"SELECT * FROM {view}").num_rows == 0
        assert find_events(con, with_streams=["cam"]).num_rows == 0
        assert run_sql(con, "SELECT * FROM drives").column_names == [
            "vehicle",
            "drive",
            "start_ns",
            "end_ns",
            "start_time",
            "end_time",
            "segments",
            "frames",
            "bytes",
        ]


def test_coverage_and_drives_follow_gaps_sequence_and_copies(fleet: Path) -> None:
    with open_catalog(fleet) as con:
        cov = run_sql(con, "SELECT * FROM coverage WHERE vehicle = 'v1'").to_pylist()
        spans = [
            (c["kind"], (c["start_ns"] - T0) / S, (c["end_ns"] - T0) / S, c["segments"])
            for c in cov
        ]
        # the 1 s between seq 1 and 2 is within the tolerance (2 s); the converted copy
        # of seq 1 is the same span
        assert spans == [("data", 0, 180, 3), ("gap", 180, 400, 0), ("data", 400, 580, 3)]
        assert [c["seconds"] for c in cov] == [180.0, 220.0, 180.0]
        drives = run_sql(con, "SELECT * FROM drives").to_pylist()
        got = [
            (
                d["vehicle"],
                d["drive"],
                (d["start_ns"] - T0) / S,
                (d["end_ns"] - T0) / S,
                d["segments"],
                d["frames"],
            )
            for d in drives
        ]
        assert got == [
            ("v1", "v1_00000.hf", 0, 180, 3, 250),  # 100 + 100 + 50 (newest row), no copy
            ("v1", "v1_restart_0.hf", 400, 520, 2, 200),  # seq restarts at 0: a new drive
            ("v1", "v1_restart_5.hf", 520, 580, 1, 100),  # seq 1 -> 5: another
            ("v2", "v2_00003.hf", 2 * 86400, 2 * 86400 + 60, 1, 100),
        ]
    with open_catalog(fleet, tolerance_s=0.5) as con:  # now the 1 s late start splits
        kinds = col(run_sql(con, "SELECT kind FROM coverage WHERE vehicle = 'v1'"), "kind")
        assert kinds == ["data", "gap", "data", "gap", "data"]
        assert run_sql(con, "SELECT count(*) AS n FROM drives").column("n")[0].as_py() == 5


def test_event_segments_pairs_each_event_with_the_segments_it_overlaps(fleet: Path) -> None:
    with open_catalog(fleet) as con:
        rows = run_sql(
            con, "SELECT name, t_ns, segment, converted FROM event_segments ORDER BY t_ns, segment"
        ).to_pylist()
    at = {}
    for r in rows:
        at.setdefault((r["t_ns"] - T0) / S, []).append(r["segment"])
    assert at == {
        30: ["v1_00000.hf"],
        90: ["v1_00001.conv.hf", "v1_00001.hf"],
        119.5: ["v1_00001.conv.hf", "v1_00001.hf", "v1_00002.hf"],
        170: ["v1_00002.hf"],
        2 * 86400 + 10: ["v2_00003.hf"],
    }  # the event at 300 s falls in the gap: no pair


def test_find_events_with_streams_filters_exactly(fleet: Path) -> None:
    with open_catalog(fleet) as con:

        def times(**kw: Any) -> list[float]:
            return [(t - T0) / S for t in col(find_events(con, now_ns=NOW, **kw), "t_ns")]

        assert times(vehicle="v1") == [30, 90, 119.5, 170, 300]
        assert times(vehicle="v1", name="hard_brake") == [30, 90, 170, 300]
        assert times(with_streams=["cam"]) == [30, 90, 119.5, 2 * 86400 + 10]
        # lidar: frames in s0, none in s1, in s2 only up to 125 s
        assert times(with_streams=["lidar"]) == [30, 119.5]
        assert times(with_streams=["cam", "lidar"]) == [30, 119.5]
        assert times(with_streams=["cam", "lidar", "radar"]) == []
        assert times(with_streams=["cam"], vehicle="v2") == [2 * 86400 + 10]
        assert times(vehicle="v1", limit=2) == [30, 90]
        assert times(since="2025-01-02") == [2 * 86400 + 10]
        assert times(until="2025-01-01") == [30, 90, 119.5, 170, 300]  # the day included
        assert times(since="2025-01-01T00:01:00Z", until="2025-01-01T00:02:50") == [90, 119.5]
        assert times(since="30d") == times()  # NOW is 30 days after T0
        assert times(since="29d") == [2 * 86400 + 10]
        assert times(since="27d") == []
        assert times(vehicle="nobody") == []


def test_times_people_type() -> None:
    now = T0 + 10 * 86400 * S
    assert parse_when("7d", now) == now - 7 * 86400 * S
    assert parse_when("36h", now) == now - 36 * 3600 * S
    assert parse_when("90m", now) == now - 90 * 60 * S
    assert parse_when("1.5h", now) == now - 5400 * S
    assert parse_when("2w", now) == now - 14 * 86400 * S
    assert parse_when(" 45S ", now) == now - 45 * S
    assert parse_when("now", now) == now
    assert parse_when("2025-01-01", now) == T0
    assert parse_when("2025-01-01", now, end=True) == T0 + 86400 * S
    assert parse_when("2025-01-01T01:00:00Z", now) == T0 + 3600 * S
    assert parse_when("2025-01-01T01:00", now) == T0 + 3600 * S  # no zone: UTC
    assert parse_when("2025-01-01T03:00:00+02:00", now) == T0 + 3600 * S
    assert parse_when("2025-01-01 00:00:00.5", now) == T0 + S // 2
    assert parse_when(str(T0 + 7), now) == T0 + 7
    for bad in ("7x", "yesterday", "2025-13-01", "", "d7"):
        with pytest.raises(ValueError):
            parse_when(bad, now)
    assert to_ns(dt.date(2025, 1, 1), end=True) == T0 + 86400 * S
    assert to_ns(dt.datetime(2025, 1, 1, 0, 0, 1)) == T0 + S
    assert to_ns(T0) == T0
    with pytest.raises(ValueError, match="now_ns"):
        to_ns("7d")
    assert date_range(T0, T0 + 86400 * S) == (dt.date(2025, 1, 1), dt.date(2025, 1, 1))
    assert date_range(T0 + 1, T0 + 86400 * S + 1, slack_days=1) == (
        dt.date(2024, 12, 31),
        dt.date(2025, 1, 2),
    )
    assert date_range(None, None) == (None, None)
    with pytest.raises(ValueError, match="not after"):
        EventsQuery(since="2025-01-02", until="2025-01-01").resolve(now)


def test_the_events_sql_names_the_partitions_it_needs() -> None:
    f = EventsQuery("v1", "hard_brake", "2025-01-06", "2025-01-12", ("cam", "lidar")).resolve(NOW)
    sql, params = events_sql(f)
    assert sql.count("?") == len(params)
    dates = [p for p in params if isinstance(p, dt.date)]
    # events: the week; segments and streams: from the day before (a segment may start then)
    assert dates == [
        dt.date(2025, 1, 6),
        dt.date(2025, 1, 12),
        dt.date(2025, 1, 5),
        dt.date(2025, 1, 12),
        dt.date(2025, 1, 5),
        dt.date(2025, 1, 12),
    ]
    assert params.count("v1") == 3 and params[-2:] == ["cam", "lidar"]


# --- pruning ------------------------------------------------------------------------------


def three_weeks(root: Path, vehicles: tuple[str, ...] = ("v1", "v2", "v3"), days: int = 21) -> Path:
    """Each vehicle a segment (cam) and an event each day: one part per partition."""
    segs, streams, events = [], [], []
    for v in vehicles:
        for day in range(days):
            s = segment(v, day, day * 86400 + 100, day * 86400 + 160)
            segs.append(s)
            streams.append(stream(s, 0, "cam"))
            events.append(event(v, day * 86400 + 130, "hard_brake"))
    return write_catalog(root, segments=segs, streams=streams, events=events)


def test_a_query_for_one_vehicle_and_week_opens_only_its_partitions(tmp_path: Path) -> None:
    root = three_weeks(tmp_path / "cat")
    q = EventsQuery("v2", "hard_brake", "2025-01-06", "2025-01-12", ("cam",))
    sql, params = events_sql(q.resolve(NOW))
    with open_catalog(root) as con:
        got = run_sql(con, sql, params)
        assert col(got, "vehicle") == ["v2"] * 7
        assert [d.day for d in col(got, "date")] == list(range(6, 13))
        # 7 event parts; 8 segment and 8 stream parts (the day before the week too)
        assert files_opened(con, sql, params) == 7 + 8 + 8
        assert files_opened(con, "SELECT * FROM events") == 63
        assert files_opened(con, "SELECT * FROM events WHERE vehicle = 'v3'") == 21
        plain = EventsQuery("v2", since="2025-01-06", until="2025-01-12").resolve(NOW)
        assert files_opened(con, *events_sql(plain)) == 7


# --- refusals and the command line --------------------------------------------------------


def test_a_newer_or_missing_catalog_is_refused(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(CatalogError, match=r"_catalog\.json is missing") as e:
        open_catalog(tmp_path / "nothing")
    assert e.value.root == str(tmp_path / "nothing")
    write_marker(tmp_path / "new", version=VERSION + 1)
    with pytest.raises(CatalogError, match=f"version {VERSION + 1}, newer"):
        open_catalog(tmp_path / "new")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "_catalog.json").write_text('{"format": "something else"}')
    with pytest.raises(CatalogError, match="does not describe"):
        open_catalog(tmp_path / "odd")
    capsys.readouterr()
    assert main(["catalog", "query", str(tmp_path / "new"), "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "version 2, newer than this hyperframes" in err


def test_the_command_line_answers_and_sql_errors_are_one_line(fleet: Path, capsys: Any) -> None:
    assert main(["catalog", "query", str(fleet), "SELECT nope FROM segments"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("error: ") and 'column "nope"' in out.err
    assert "Traceback" not in out.err
    with open_catalog(fleet) as con, pytest.raises(QueryError) as e:
        run_sql(con, "SELEC 1")
    assert "syntax error" in e.value.problem and "\n" not in str(e.value)

    assert (
        main(
            [
                "catalog",
                "events",
                str(fleet),
                "--vehicle",
                "v1",
                "--name",
                "hard_brake",
                "--since",
                "2025-01-01",
                "--with",
                "cam,lidar",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "time",
        "vehicle",
        "name",
        "pre_s",
        "post_s",
        "source",
        "note",
        "event_id",
    ]
    assert lines[2].startswith("2025-01-01 00:00:30  v1  ") and lines[-1] == "(1 row)"

    assert main(["catalog", "events", str(fleet), "--with", "cam", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["time"] for d in doc] == [
        "2025-01-01T00:00:30",
        "2025-01-01T00:01:30",
        "2025-01-01T00:01:59.500000",
        "2025-01-03T00:00:10",
    ]
    assert doc[0]["tags"] == {"who": "test"} and doc[0]["date"] == "2025-01-01"

    assert (
        main(
            [
                "catalog",
                "query",
                str(fleet),
                "SELECT vehicle, drive, segments FROM drives ORDER BY vehicle, start_ns",
                "--csv",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[:2] == [
        "vehicle,drive,segments",
        "v1,v1_00000.hf,3",
    ]
    assert main(["catalog", "events", str(fleet), "--since", "3 days"]) == 2
    assert "cannot read the time '3 days'" in capsys.readouterr().err
    assert (
        main(
            [
                "catalog",
                "snapshot",
                str(fleet),
                "--sql",
                "SELECT 1",
                "--name",
                "x",
                "-o",
                str(fleet.parent / "m.parquet"),
            ]
        )
        == 2
    )
    assert "not both (--name)" in capsys.readouterr().err


# --- snapshots ------------------------------------------------------------------------------


def test_snapshot_then_read_manifest_round_trip(fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "set.parquet"
    q = EventsQuery("v1", with_streams=("cam",))
    n = snapshot(fleet, q, out, pre_s=3, post_s=2, streams=["cam", "lidar"])
    entries = read_manifest(out)
    assert n == len(entries) == 4
    got = [
        (e.event_name, Path(e.uri).name, (e.start_ns - T0) / S, (e.end_ns - T0) / S)
        for e in entries
    ]
    assert got == [
        ("hard_brake", "v1_00000.hf", 27, 32),
        ("hard_brake", "v1_00001.conv.hf", 87, 92),  # the converted copy by default
        ("swerve", "v1_00001.conv.hf", 116.5, 120),  # clipped to each segment
        ("swerve", "v1_00002.hf", 121, 121.5),
    ]
    assert entries[2].event_id == entries[3].event_id != entries[1].event_id
    assert all(e.streams == ("cam", "lidar") and e.vehicle == "v1" for e in entries)
    assert (
        entries[0].fingerprint == "100000-00000000-00000000" and entries[0].bytes_stored == 100000
    )
    meta = manifest_metadata(out)
    assert meta[PARQUET_VERSION_KEY.decode()] == str(VERSION)
    assert meta[KEY_ROOT.decode()] == str(fleet)
    assert json.loads(meta[KEY_QUERY.decode()])["with_streams"] == ["cam"]
    assert dt.datetime.fromisoformat(meta["hyperframes.catalog.created"]).year >= 2025
    assert pq.read_schema(out).remove_metadata() == MANIFEST

    with pytest.raises(FileExistsError):
        snapshot(fleet, q, out)
    with open_catalog(fleet) as con:  # the events' own pre/post (1 s), raw copies, SQL
        sql = "SELECT * FROM events WHERE t_ns = " + str(T0 + 90 * S)
        assert snapshot(con, sql, out, copies="raw", overwrite=True) == 1
        (e,) = read_manifest(out)
        assert (Path(e.uri).name, (e.start_ns - T0) / S, (e.end_ns - T0) / S, e.streams) == (
            "v1_00001.hf",
            89,
            91,
            (),
        )
        assert snapshot(con, sql, out, copies="all", overwrite=True) == 2
        assert (
            snapshot(con, "SELECT uri FROM segments WHERE vehicle = 'v2'", out, overwrite=True) == 1
        )
        (e,) = read_manifest(out)
        assert e.event_id is None and (e.end_ns - e.start_ns) == 60 * S
        with pytest.raises(ValueError, match="must return events"):
            snapshot(con, "SELECT 1 AS x", out, overwrite=True)


def test_a_manifest_of_a_newer_version_or_no_manifest_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa

    t = pa.Table.from_pylist([], schema=MANIFEST)
    pq.write_table(
        t.replace_schema_metadata({PARQUET_VERSION_KEY: str(VERSION + 1).encode()}),
        tmp_path / "new.parquet",
    )
    with pytest.raises(ManifestError, match="newer"):
        read_manifest(tmp_path / "new.parquet")
    pq.write_table(t, tmp_path / "bare.parquet")
    with pytest.raises(ManifestError, match="not a manifest"):
        read_manifest(tmp_path / "bare.parquet")


def pinned(uri: str, **changes: Any) -> ManifestEntry:
    with HyperframeReader(uri, verify=False) as r:
        h = r.header
        e = ManifestEntry(
            uri,
            fingerprint(r.file_size, h.index_crc, h.meta_crc),
            r.remote.etag if r.remote else None,
            None,
            r.file_size,
            "veh-7",
            r.start_ns,
            r.end_ns,
            (),
            None,
            None,
        )
    return ManifestEntry(**{**{f: getattr(e, f) for f in e.__slots__}, **changes})


def test_check_entry_refuses_a_changed_or_missing_file(tmp_path: Path) -> None:
    from catalog_files import segment as real_segment

    path = real_segment(tmp_path / "a", 1)
    entry = pinned(str(path))
    with open_entry(entry) as r:  # unchanged: fine
        assert r.name == str(path)
    other = real_segment(tmp_path / "b", 1, seconds=1.5)
    shutil.copyfile(other, path)  # the same name, other bytes
    with HyperframeReader(path) as r, pytest.raises(ManifestError) as e:
        check_entry(entry, r)
    assert e.value.root == str(path) and "file changed since the snapshot" in str(e.value)
    assert entry.fingerprint in str(e.value)
    path.unlink()
    with pytest.raises(ManifestError, match="gone since the snapshot") as e:
        open_entry(entry)
    assert e.value.root == str(path)
    with HyperframeReader(other) as r, pytest.raises(ManifestError, match="pins no bytes"):
        check_entry(pinned(str(other), fingerprint=None), r)


@pytest.mark.parametrize("s3_store", store_params("moto", "rclone"), indirect=True)
def test_check_entry_refuses_a_changed_or_missing_object(
    s3_store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from catalog_files import segment as real_segment

    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    c = s3_store.client()
    first = real_segment(tmp_path / "a", 1).read_bytes()
    c.put_object(Bucket=s3_store.bucket, Key="raw/seg.hf", Body=first)
    url = s3_store.url("raw/seg.hf")
    entry = pinned(url)
    assert entry.etag
    with open_entry(entry) as r:
        assert r.remote is not None and r.remote.stats.requests <= 2  # the open's reads only
    c.put_object(
        Bucket=s3_store.bucket,
        Key="raw/seg.hf",
        Body=real_segment(tmp_path / "b", 1, seconds=1.5).read_bytes(),
    )
    with HyperframeReader(url) as r, pytest.raises(ManifestError) as e:
        check_entry(entry, r)
    assert e.value.root == url and "object changed since the snapshot: ETag" in str(e.value)
    # an entry without ETag: the header's fingerprint
    with HyperframeReader(url) as r, pytest.raises(ManifestError, match="fingerprint"):
        check_entry(pinned(url, etag=None, fingerprint=entry.fingerprint), r)
    c.delete_object(Bucket=s3_store.bucket, Key="raw/seg.hf")
    with pytest.raises(ManifestError, match="no such object") as e:
        open_entry(entry)
    assert e.value.root == url


# --- a catalog in a bucket ----------------------------------------------------------------


@pytest.mark.parametrize("s3_store", store_params("moto", "rclone", "ceph"), indirect=True)
def test_a_catalog_in_a_bucket_is_read_through_pyarrow_and_pruned(
    s3_store: Any, fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    c = s3_store.client()
    upload_tree(fleet, c, s3_store.bucket, "catalog")
    week = three_weeks(tmp_path / "weeks", ("v1", "v2"), 14)
    upload_tree(week, c, s3_store.bucket, "weeks")
    root = s3_store.url("catalog")
    with open_catalog(fleet) as local, open_catalog(root) as remote:
        for kw in ({"with_streams": ["cam", "lidar"]}, {"vehicle": "v2"}, {}):
            assert find_events(remote, **kw).to_pylist() == find_events(local, **kw).to_pylist()
        assert (
            run_sql(remote, "SELECT * FROM coverage").to_pylist()
            == run_sql(local, "SELECT * FROM coverage").to_pylist()
        )
        assert col(run_sql(remote, "SELECT root, s3 FROM catalog_info"), "s3") == [True]
    q = EventsQuery("v2", "hard_brake", "2025-01-06", "2025-01-12", ("cam",))
    sql, params = events_sql(q.resolve(NOW))
    with open_catalog(s3_store.url("weeks")) as con:
        assert col(run_sql(con, sql, params), "vehicle") == ["v2"] * 7
        assert files_opened(con, sql, params) == 7 + 8 + 8
        assert files_opened(con, "SELECT * FROM events") == 28
    with pytest.raises(CatalogError, match="missing"):
        open_catalog(s3_store.url("nothing"))
    write_marker(tmp_path / "newer", version=VERSION + 1)
    upload_tree(tmp_path / "newer", c, s3_store.bucket, "newer")
    with pytest.raises(CatalogError, match="newer"):
        open_catalog(s3_store.url("newer"))


# --- the picture ----------------------------------------------------------------------------


def test_plot_writes_a_png_of_each_vehicles_coverage(fleet: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from hyperframes.catalog.plot import coverage_lanes, plot_coverage

    with open_catalog(fleet) as con:
        lanes = coverage_lanes(con)
        assert [la.vehicle for la in lanes] == ["v1", "v2"]
        v1 = lanes[0]
        assert len(v1.raw) == 6 and len(v1.converted) == 1 and len(v1.events) == 5
        assert [((s - T0) / S, (e - T0) / S) for s, e in v1.gaps] == [(180, 400)]
        assert (
            coverage_lanes(con, vehicles=["v2"], since="2025-01-02", now_ns=NOW)[0].vehicle == "v2"
        )
        assert coverage_lanes(con, since="2025-01-04", now_ns=NOW) == ()
        result = plot_coverage(con, tmp_path / "coverage.png")
    assert result.output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 vehicles, 8 segments, 1 gaps, 6 events" in str(result)
    assert main(["catalog", "plot", str(fleet), "-o", str(tmp_path / "coverage.png")]) == 2


# --- end to end: real segments -> build -> questions -> snapshot -> checked reads -------


def test_build_then_ask_then_snapshot_real_segments(tmp_path: Path, capsys: Any) -> None:
    build_mod = pytest.importorskip("hyperframes.catalog.build")
    from catalog_files import MS
    from catalog_files import T0 as DAY0
    from catalog_files import segment as real_segment

    from hyperframes.events import Event

    brake = Event(DAY0 + 1500 * MS, "hard_brake", pre_s=0.2, post_s=0.2, source="mark")
    src = tmp_path / "fleet"
    paths = [real_segment(src, seq, events=[brake] if seq == 1 else []) for seq in range(3)]
    (src / "veh-7_broken.hf").write_bytes(paths[0].read_bytes()[:300])
    root = tmp_path / "cat"
    assert main(["catalog", "build", str(src), "--catalog", str(root), "--workers", "2"]) == 0
    assert "3 read" in capsys.readouterr().out
    report = build_mod.build([str(src)], str(root))
    assert report.skipped == 4 and report.read == 0
    with open_catalog(root) as con:
        assert col(run_sql(con, "SELECT segments FROM drives"), "segments") == [3]
        assert run_sql(con, "SELECT count(*) AS n FROM problems").column("n")[0].as_py() == 1
        found = find_events(con, vehicle="veh-7", with_streams=["imu", "lidar_top"])
        assert col(found, "name") == ["hard_brake"] and col(found, "t_ns") == [brake.t_ns]
        assert find_events(con, with_streams=["cam_front"]).num_rows == 0
        out = tmp_path / "set.parquet"
        assert snapshot(con, EventsQuery(name="hard_brake"), out, pre_s=0.7, post_s=0.1) == 2
    entries = read_manifest(out)
    assert [Path(e.uri).name for e in entries] == [paths[0].name, paths[1].name]
    assert entries[0].end_ns == entries[1].start_ns == DAY0 + 1000 * MS  # the boundary
    for e in entries:
        with open_entry(e) as r:
            assert r.name == e.uri
    os.utime(paths[1])  # a touch changes no byte: still the same segment
    with open_entry(entries[1]):
        pass


def test_tables_for_people_and_programs() -> None:
    import pyarrow as pa

    from hyperframes.cli.tabular import MAX_CELL, to_csv, to_json, to_text

    t = pa.table({
        "name": ["a", "long" * 30, None],
        "n": pa.array([1, 200, None], pa.int64()),
        "tags": pa.array([[("k", "v")], [], None], pa.map_(pa.string(), pa.string())),
        "at": pa.array([dt.datetime(2025, 1, 1, 0, 0, 1), None, None], pa.timestamp("us")),
    })  # fmt: skip
    lines = to_text(t).splitlines()
    assert lines[0].split() == ["name", "n", "tags", "at"] and lines[-1] == "(3 rows)"
    assert len(lines[3].split("  ")[0]) == MAX_CELL and lines[3].split("  ")[0].endswith("…")
    assert lines[2].startswith("a ") and "    1  k=v   2025-01-01 00:00:01" in lines[2]
    assert lines[3].split()[1] == "200"  # numbers right-aligned under their header
    assert to_csv(t, ["n", "name"]).splitlines() == ["n,name", "1,a", f"200,{'long' * 30}", ","]
    doc = json.loads(to_json(t))
    assert doc[0] == {"name": "a", "n": 1, "tags": {"k": "v"}, "at": "2025-01-01T00:00:01"}
    assert doc[1]["tags"] == {} and doc[2]["tags"] is None


# --- reading only the partitions a question names ------------------------------------------


def test_a_question_naming_its_vehicle_reads_only_its_partition_folders(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """find_events for a vehicle lists and reads just its date folders (no glob of the
    table) and answers exactly what the views answer, newest row per key included."""
    root = three_weeks(tmp_path / "weeks")
    questions: list[dict[str, Any]] = [
        {"vehicle": "v2", "since": "2025-01-06", "until": "2025-01-12", "with_streams": ["cam"]},
        {"vehicle": "v2", "name": "hard_brake", "since": "2025-01-06", "until": "2025-01-12"},
        {"vehicle": "v3", "with_streams": ["cam"]},
        {"vehicle": "v1", "since": "2025-01-20"},
        {"vehicle": "v9", "since": "2025-01-02", "until": "2025-01-04", "with_streams": ["cam"]},
        {"vehicle": "v1", "since": "2025-01-03T12:00:00Z", "until": "2025-01-05", "limit": 2},
    ]
    for cat, asks in ((root, questions), (fleet, [
        {"vehicle": "v1", "with_streams": ["cam", "lidar"]},
        {"vehicle": "v1", "since": "2025-01-01", "until": "2025-01-01"},
        {"vehicle": "v2", "with_streams": ["cam"]},
    ])):  # fmt: skip
        with open_catalog(cat) as con:
            for kw in asks:
                q = EventsQuery(**{**kw, "with_streams": tuple(kw.get("with_streams", ()))})
                via_views = run_sql(con, *events_sql(q.resolve(NOW)))
                got = find_events(con, **kw, now_ns=NOW)
                assert got.to_pylist() == via_views.to_pylist(), kw
    week = EventsQuery("v2", "hard_brake", "2025-01-06", "2025-01-12", ("cam",))
    parts = views.partition_parts(
        locate(root), {"events": (dt.date(2025, 1, 6), dt.date(2025, 1, 12))}, ["v2"]
    )
    assert len(parts["events"]) == 7
    assert all("/events/vehicle=v2/date=2025-01-" in p for p in parts["events"])
    # the whole table is neither globbed nor listed: no scan names a pattern
    scanned: list[str] = []
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        scanned.append(os.fspath(path))
        return real_scandir(path)

    with open_catalog(root) as con:
        monkeypatch.setattr(views.os, "scandir", scandir)
        assert files_opened(con, week, now_ns=NOW) == 7 + 8 + 8
        assert all("vehicle=v2" in p for p in scanned), scanned
        assert files_opened(con, "SELECT * FROM events") == 63
        assert find_events(con, vehicle="v2", since="2025-01-06", until="2025-01-12",
                           with_streams=["cam"], now_ns=NOW).num_rows == 7  # fmt: skip
        # the views are still there for SQL, and unchanged
        assert run_sql(con, "SELECT count(*) AS n FROM events").column("n").to_pylist() == [63]
        assert not [r for r in run_sql(con, "SHOW TABLES").column("name").to_pylist()
                    if r.startswith("_parts_")]  # fmt: skip
