"""``hyperframes ls``, ``slice``, ``cat`` and ``du`` on real segment files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from drive_files import T0, make_run, write_segments

from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader
from hyperframes.writer import HyperframeWriter


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    blocks = make_run(70, np.random.default_rng(11), late_windows=[9, 19, 29])
    write_segments(d, blocks[:30], [10, 20], vehicle="car-7")
    write_segments(d, blocks[50:], [10], vehicle="car-7", first_seq=5)  # 2 s outage, 2 lost
    write_segments(d, make_run(10, np.random.default_rng(12)), [], vehicle="car-9")
    segs = sorted(d.glob("car-7_*.hf"))
    tmp = segs[-1].with_name(segs[-1].name.replace("_000006", "_000007") + ".tmp")
    HyperframeWriter(tmp.with_suffix(""), [], 100_000_000).abort()
    (d / "damaged").mkdir()
    (d / "damaged" / "car-7_x.hf.tmp.reason.txt").write_text("no intact window\n")
    return d


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_ls(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _json(capsys, ["ls", str(run), "--json"])
    assert isinstance(docs, list)
    car7, car9 = docs
    assert (car7["vehicle"], car7["segments"], car9["segments"]) == ("car-7", 5, 1)
    (gap,) = car7["gaps"]
    assert gap["missing_segments"] == 2 and gap["duration_s"] == pytest.approx(2.0, abs=0.2)
    assert car7["late_windows"] >= 1 and car7["unfinished"][0].endswith("_000007.hf.tmp")
    assert car7["damaged_dir"][0].endswith("reason.txt") and car9["unfinished"] == []
    assert car7["duration_s"] == pytest.approx(7.0, abs=0.2)
    assert main(["ls", str(run), "-l"]) == 0
    text = capsys.readouterr().out
    assert "unfinished (not read)" in text and "2 segments missing" in text
    assert "car-7_20250101T000000Z_000000.hf" in text


def test_slice_times_in_every_form(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forms = [
        ("1.2", "2.4"),
        ("1735689601.2", "1735689602.4"),
        ("2025-01-01T00:00:01.2Z", "2025-01-01T00:00:02.4Z"),
        (str(T0 + 1_200_000_000), str(T0 + 2_400_000_000)),
    ]
    got = []
    for k, (a, b) in enumerate(forms):
        out = run.parent / f"s{k}.hf"
        argv = ["slice", str(run), "--vehicle", "car-7", "--start", a, "--end", b,
                "--stream", "imu", "-o", str(out), "--json"]  # fmt: skip
        doc = _json(capsys, argv)
        assert isinstance(doc, dict) and doc["verified"]
        with HyperframeReader(out) as r:
            got.append(r.timestamps("imu").tolist())
            assert list(r.streams) == [2]
    assert got[0] and all(g == got[0] for g in got)
    assert got[0][0] >= T0 + 1_200_000_000 and got[0][-1] <= T0 + 2_400_000_000


def test_errors_are_one_line_and_leave_no_output(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run.parent / "x.hf"
    assert main(["slice", str(run), "--start", "1", "--end", "2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "2 vehicles" in err and "--vehicle" in err and len(err.splitlines()) == 1
    argv = ["slice", str(run), "--vehicle", "car-7", "--start", "1", "--end", "2",
            "--stream", "nope", "-o", str(out)]  # fmt: skip
    assert main(argv) != 0
    assert "no stream named 'nope'" in capsys.readouterr().err
    mixed = [str(sorted(run.glob("car-7_*.hf"))[0]), str(next(run.glob("car-9_*.hf")))]
    assert main(["cat", *mixed, "-o", str(out)]) == 2
    assert "several vehicles" in capsys.readouterr().err
    assert not out.exists() and not list(run.parent.glob(".x.hf*"))


def test_cat_and_du(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run.parent / "all.hf"
    doc = _json(capsys, ["cat", str(run), "--vehicle", "car-7", "-o", str(out), "--json"])
    assert isinstance(doc, dict) and doc["segments"] == 5
    usage = _json(capsys, ["du", str(out), "--json"])
    assert isinstance(usage, dict)
    with HyperframeReader(out) as r:
        raw = {r.streams[s].name: sum(len(r.frame_at(i).data) for i in range(*r.stream_slice(s)))
               for s in r.streams}  # fmt: skip
        stored = int(r.index["size"].sum())
    assert {row["name"]: row["raw_bytes"] for row in usage["streams"]} == raw
    assert usage["stored_bytes"] == stored
    assert sum(row["share"] for row in usage["streams"]) == pytest.approx(1.0)
    assert {row["name"] for row in usage["codecs"]} == {"none", "lz4+shuffle", "zstd", "blosc2"}
    whole = _json(capsys, ["du", str(run), "--json"])
    assert isinstance(whole, dict) and whole["files"] == 6
    assert any("unfinished" in s for s in whole["skipped"])
