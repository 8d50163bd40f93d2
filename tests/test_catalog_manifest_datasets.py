"""From a manifest to training data: ``from_manifest`` datasets and ``slice --manifest``.

A manifest (``hyperframes.catalog.schema.MANIFEST``) pins byte-exact segments
and the clips to use in them; these tests write manifests with pyarrow over
segments written by the real writer, and check that the datasets serve
exactly the frames of those clips, restricted to their streams, from files
and from a real S3 server, and refuse a segment that changed or went away.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from drive_files import WINDOW_NS, make_run, write_segments  # noqa: E402
from s3_stores import store_params  # noqa: E402

from hyperframes.catalog.errors import ManifestError  # noqa: E402
from hyperframes.catalog.schema import MANIFEST, PARQUET_VERSION_KEY, VERSION  # noqa: E402
from hyperframes.catalog.schema import fingerprint as fingerprint_of  # noqa: E402
from hyperframes.cli.main import main  # noqa: E402
from hyperframes.reader import HyperframeReader  # noqa: E402
from hyperframes.torch import HyperframeDataset, SequenceDataset  # noqa: E402

Key = tuple[str, str, int, bytes]  # uri, stream, timestamp, payload


# --- helpers ------------------------------------------------------------------------------


def pin(uri: str, start_ns: int, end_ns: int, *, streams: Sequence[str] = (),
        event: tuple[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A manifest row pinning the bytes ``uri`` holds now (fingerprint; ETag of an object)."""
    with HyperframeReader(uri, verify=False) as r:
        h = r.header
        fp = fingerprint_of(r.file_size, h.index_crc, h.meta_crc)
        etag = r.remote.etag if r.remote is not None else None
        size, vehicle = r.file_size, r.metadata.vehicle_id
    return {"uri": uri, "fingerprint": fp, "etag": etag, "sha256": None, "bytes_stored": size,
            "vehicle": vehicle, "start_ns": start_ns, "end_ns": end_ns, "streams": list(streams),
            "event_id": event[0] if event else None,
            "event_name": event[1] if event else None}  # fmt: skip


def write_manifest(path: Path, rows: list[dict[str, Any]]) -> Path:
    table = pa.Table.from_pylist(rows, schema=MANIFEST)
    table = table.replace_schema_metadata({PARQUET_VERSION_KEY: str(VERSION).encode()})
    pq.write_table(table, path)
    return path


def expected(rows: list[dict[str, Any]], streams: Sequence[str]) -> Counter[Key]:
    """The frames of each row's clip, read with ``HyperframeReader.read_range``."""
    out: Counter[Key] = Counter()
    for row in rows:
        with HyperframeReader(row["uri"]) as r:
            for name in streams:
                for f in r.read_range(name, row["start_ns"], row["end_ns"]):
                    out[(row["uri"], name, f.timestamp_ns, f.tobytes())] += 1
    return out


def served(ds: HyperframeDataset) -> Counter[Key]:
    """Every frame the dataset's samples hold (decode="raw": payloads as stored)."""
    out: Counter[Key] = Counter()
    kinds = {s.name: s.kind.value for s in ds.streams}
    for i in range(len(ds)):
        s = ds[i]
        for name, kind in kinds.items():
            entry = s[kind][name]
            assert not entry["is_pad"].any()
            for t, data in zip(entry["timestamp_ns"].tolist(), entry["data"], strict=True):
                assert s["start_ns"] < t <= s["end_ns"]  # in its window
                out[(s["file"], name, t, data.numpy().tobytes())] += 1
    return out


def rewrite(path: Path, seed: int = 6) -> None:
    """``path`` recorded again: the same name and windows, other frames."""
    at = int(path.name.rsplit("_", 1)[1].split(".")[0])
    other = write_segments(path.parent / f"again-{seed}", make_run(60, np.random.default_rng(seed)),
                           [20, 40])  # fmt: skip
    path.write_bytes(other[at].read_bytes())


@pytest.fixture
def segments(tmp_path: Path) -> list[Path]:
    """Three segments of one drive, 2 s each (100 ms windows), streams cam, lidar, imu."""
    blocks = make_run(60, np.random.default_rng(5))
    return write_segments(tmp_path / "drive", blocks, [20, 40])


def clip_rows(paths: Sequence[str], streams: Sequence[str] = ()) -> list[dict[str, Any]]:
    """A clip not on window edges in the first segment, one of an event in the second, and an
    event that runs from the second segment into the third (two rows)."""
    with HyperframeReader(paths[0]) as r:
        t0 = r.window_ids[0] * WINDOW_NS
    ms = 1_000_000
    return [
        pin(paths[0], t0 + 350 * ms + 123, t0 + 950 * ms - 7, streams=streams),
        pin(paths[1], t0 + 2500 * ms, t0 + 2800 * ms, streams=streams, event=("e1", "hard_brake")),
        pin(paths[1], t0 + 3700 * ms + 1, t0 + 4000 * ms, streams=streams,
            event=("e2", "near_miss")),
        pin(paths[2], t0 + 4000 * ms + 1, t0 + 4450 * ms, streams=streams,
            event=("e2", "near_miss")),
    ]  # fmt: skip


# --- local files ----------------------------------------------------------------------------


def test_the_dataset_serves_exactly_the_frames_of_the_clips(
    segments: list[Path], tmp_path: Path
) -> None:
    rows = clip_rows([str(p) for p in segments])
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    ds = HyperframeDataset.from_manifest(manifest, decode="raw")
    names = [s.name for s in ds.streams]
    assert names == ["cam", "lidar", "imu"]
    got, want = served(ds), expected(rows, names)
    assert sum(want.values()) > 50 and got == want
    # windows: those that hold a time of a clip, clip by clip, in manifest order
    ids = [ds.locate(i)[1] for i in range(len(ds))]
    first = [w for p, w in (ds.locate(i) for i in range(len(ds))) if p == str(segments[0])]
    assert first == list(range((rows[0]["start_ns"] - 1) // WINDOW_NS,
                               (rows[0]["end_ns"] - 1) // WINDOW_NS + 1))  # fmt: skip
    assert len(ids) == sum(
        (r["end_ns"] - 1) // WINDOW_NS - (r["start_ns"] - 1) // WINDOW_NS + 1 for r in rows
    )
    # the whole files hold many more frames: the clips did select
    whole = HyperframeDataset([str(p) for p in segments], decode="raw")
    assert len(whole) > 2 * len(ds)


def test_streams_are_restricted_to_the_manifests(segments: list[Path], tmp_path: Path) -> None:
    rows = clip_rows([str(p) for p in segments], streams=["imu", "lidar"])
    rows[0]["streams"] = ["lidar", "imu", "cam"]  # more than the others: the common ones serve
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    ds = HyperframeDataset.from_manifest(manifest, decode="raw")
    assert [s.name for s in ds.streams] == ["lidar", "imu"]
    assert "camera" not in ds[0]
    assert served(ds) == expected(rows, ["lidar", "imu"])
    only = HyperframeDataset.from_manifest(manifest, decode="raw", streams=["imu"])
    assert served(only) == expected(rows, ["imu"])
    with pytest.raises(KeyError, match="cam"):  # not among an entry's streams
        HyperframeDataset.from_manifest(manifest, decode="raw", streams=["cam"])


def test_clips_of_one_event_run_across_segments(segments: list[Path], tmp_path: Path) -> None:
    rows = clip_rows([str(p) for p in segments])
    ds = SequenceDataset.from_manifest(write_manifest(tmp_path / "set.parquet", rows), 3,
                                       decode="raw", streams=["imu"])  # fmt: skip
    clips = [ds.windows_of(i) for i in range(len(ds))]
    assert all([w for _, w in c] == list(range(c[0][1], c[0][1] + 3)) for c in clips)
    assert any(len({p for p, _ in c}) == 2 for c in clips)  # event e2 crosses into segment 3
    # never from one clip of the manifest into another (e1 and e2 share a segment)
    e1_last = (rows[1]["end_ns"] - 1) // WINDOW_NS
    assert not any(c[0][1] <= e1_last < c[-1][1] for c in clips)
    # clips per row: the windows of e1 (3), of e2 across two segments (3 + 5), of the first (7)
    assert len(ds) == (7 - 2) + (4 - 2) + (8 - 2)
    sample = pickle.loads(pickle.dumps(ds))[len(ds) - 1]
    assert sample["window_id"] == [w for _, w in clips[-1]]


def test_a_changed_file_is_refused_naming_it(segments: list[Path], tmp_path: Path) -> None:
    rows = clip_rows([str(p) for p in segments])
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    ds = HyperframeDataset.from_manifest(manifest, decode="raw")
    worker = pickle.loads(pickle.dumps(ds))  # as a spawned DataLoader worker gets it
    rewrite(segments[1])
    with pytest.raises(ManifestError, match=str(segments[1])) as exc:
        HyperframeDataset.from_manifest(manifest, decode="raw")
    assert exc.value.root == str(segments[1])
    worker[0]  # the first segment is unchanged
    second = next(i for i in range(len(ds)) if ds.locate(i)[0] == str(segments[1]))
    with pytest.raises(ManifestError, match=str(segments[1])):
        worker[second]  # its reader of the second segment opens now: checked again


def test_a_missing_file_is_refused_naming_it(segments: list[Path], tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "set.parquet", clip_rows([str(p) for p in segments]))
    ds = HyperframeDataset.from_manifest(manifest, decode="raw")
    segments[2].unlink()
    with pytest.raises(ManifestError, match=f"{segments[2]}: no such file"):
        SequenceDataset.from_manifest(manifest, length=2, decode="raw")
    ds.close()
    with pytest.raises(ManifestError, match=str(segments[2])):
        ds[len(ds) - 1]


# --- slice --manifest -----------------------------------------------------------------------


def same_frames(clip: Path, rows: list[dict[str, Any]], streams: Sequence[str]) -> None:
    with HyperframeReader(clip) as r:
        got = Counter(
            (n, f.timestamp_ns, f.tobytes()) for n in streams for f in r.read_range(n, 0, 2**63 - 1)
        )
        assert sorted(s.name for s in r.streams.values()) == sorted(streams)
    want = Counter(
        (n, t, b) for (_, n, t, b), k in expected(rows, streams).items() for _ in range(k)
    )
    assert got == want


def test_slice_writes_every_clip_of_a_manifest(
    segments: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = clip_rows([str(p) for p in segments])
    rows[1]["streams"] = ["imu", "cam"]
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    out = tmp_path / "clips"
    assert main(["slice", "--manifest", str(manifest), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(Path(c["output"]).name for c in doc["clips"])
    assert len(names) == 3  # the event across two segments is one clip
    clip, brake, miss = (out / n for n in sorted(names, key=lambda n: n.rsplit("_", 1)[1]))
    assert clip.name.startswith("car-7_clip_") and brake.name.startswith("car-7_hard_brake_")
    same_frames(clip, rows[:1], ["cam", "lidar", "imu"])
    same_frames(brake, rows[1:2], ["imu", "cam"])
    same_frames(miss, rows[2:], ["cam", "lidar", "imu"])
    # a source that changed since the snapshot: refused, naming it, and no clip of it
    rewrite(segments[0])
    again = tmp_path / "again"
    assert main(["slice", "--manifest", str(manifest), "-o", str(again)]) == 2
    assert str(segments[0]) in capsys.readouterr().err
    assert not any(again.iterdir())


# --- a real S3 server -----------------------------------------------------------------------


@pytest.fixture
def bucket_segments(
    s3_store: Any, monkeypatch: pytest.MonkeyPatch, segments: list[Path]
) -> Iterator[tuple[Any, list[str]]]:
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    client = s3_store.client()
    urls = []
    for p in segments:
        client.put_object(Bucket=s3_store.bucket, Key=f"raw/car-7/{p.name}", Body=p.read_bytes())
        urls.append(f"s3://{s3_store.bucket}/raw/car-7/{p.name}")
    yield s3_store, urls


@pytest.mark.network
@pytest.mark.parametrize("s3_store", store_params("moto", "rclone"), indirect=True)
def test_from_the_bucket_and_an_overwritten_object_is_refused(
    bucket_segments: tuple[Any, list[str]], segments: list[Path], tmp_path: Path
) -> None:
    store, urls = bucket_segments
    rows = clip_rows(urls)
    assert all(r["etag"] for r in rows)
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    ds = HyperframeDataset.from_manifest(manifest, decode="raw", streams=["lidar", "imu"])
    local = [{**r, "uri": str(segments[urls.index(r["uri"])])} for r in rows]
    want = Counter({(urls[[str(p) for p in segments].index(u)], n, t, b): k
                    for (u, n, t, b), k in expected(local, ["lidar", "imu"]).items()})  # fmt: skip
    assert served(ds) == want
    assert main(["slice", "--manifest", str(manifest), "-o", str(tmp_path / "clips"), "-q"]) == 0
    assert len(list((tmp_path / "clips").glob("car-7_*.hf"))) == 3
    # the third segment overwritten after the snapshot (the bytes of the first)
    worker = pickle.loads(pickle.dumps(ds))
    key = urls[2].split("/", 3)[3]
    store.client().put_object(Bucket=store.bucket, Key=key, Body=segments[0].read_bytes())
    with pytest.raises(ManifestError, match=urls[2]):
        HyperframeDataset.from_manifest(manifest, decode="raw")
    with pytest.raises(ManifestError, match=urls[2]):
        worker[len(worker) - 1]
    assert main(["slice", "--manifest", str(manifest), "-o", str(tmp_path / "x"), "-q"]) == 2
    store.client().delete_object(Bucket=store.bucket, Key=key)
    with pytest.raises(ManifestError, match=f"{urls[2]}: no such object"):
        HyperframeDataset.from_manifest(manifest, decode="raw")


@pytest.mark.parametrize("threads", [1, 2])
def test_files_open_a_few_at_a_time_and_are_added_in_manifest_order(
    segments: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """The sliding window of opens (fewer threads than files) gives what one at a time
    would: the same windows in the same order."""
    from hyperframes.torch import catalog as torch_catalog

    rows = clip_rows([str(p) for p in segments])
    rows = rows + list(reversed(rows))  # files met again, out of order
    manifest = write_manifest(tmp_path / "set.parquet", rows)
    want = [HyperframeDataset.from_manifest(manifest, decode="raw").locate(i) for i in range(3)]
    monkeypatch.setattr(torch_catalog, "_OPEN_THREADS", threads)
    ds = HyperframeDataset.from_manifest(manifest, decode="raw")
    assert [ds.locate(i) for i in range(3)] == want
    assert served(ds) == expected(rows, [s.name for s in ds.streams])
