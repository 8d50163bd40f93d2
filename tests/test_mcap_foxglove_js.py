"""The export read the way Foxglove Studio reads it, with the real JavaScript packages.

``tests/js/check_mcap.cjs`` opens the file with ``@mcap/core`` (indexed and streaming
readers, zstd/lz4 through Foxglove's wasm decompressors), decodes every protobuf message
with ``protobufjs`` from the schema the file embeds, compares the ``foxglove.*`` schemas
with ``@foxglove/schemas`` and checks every JSON schema with the rules of Studio's JSON
Schema parser. The packages (pinned in ``tests/js/package-lock.json``) are installed on
first use into ``~/.cache/hyperframes-npm/<hash of the lock>`` (``XDG_CACHE_HOME``
respected); without node and npm the tests skip (``scripts/setup.sh dev`` installs them).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hyperframes.mcap import export_mcap

import faulty_recording as fr
import mcap_kinds
import npm_packages

JS = npm_packages.JS


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The npm packages of tests/js, installed once per lock file into the user's cache."""
    return npm_packages.node_modules()


def _node(node_modules: Path, *args: str) -> dict[str, Any]:
    r = subprocess.run(
        ["node", str(JS / "check_mcap.cjs"), *args],
        env={**os.environ, "NODE_PATH": str(node_modules)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def test_studios_json_schema_rules_accept_the_official_schemas_and_refuse_type_lists(
    node_modules: Path, tmp_path: Path
) -> None:
    """The check itself can fail: the old IMU schema (``"type": ["number", "string"]``) is
    refused as Studio refused it; the 50 official Foxglove JSON schemas pass."""
    official = _node(node_modules, "--official-jsonschemas")
    assert official["count"] >= 40 and official["problems"] == []
    old = {"type": "object", "properties": {"linear_acceleration": {"type": "object",
           "properties": {"x": {"type": ["number", "string"]}}}}}  # fmt: skip
    (tmp_path / "old.json").write_text(json.dumps(old))
    refused = _node(node_modules, "--rules", str(tmp_path / "old.json"))["problems"]
    assert refused == ['Unsupported type ["number","string"] for linear_acceleration.x']


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_every_topic_of_an_export_decodes_as_studio_decodes_it(
    node_modules: Path, tmp_path: Path, compression: str
) -> None:
    hf, out = tmp_path / "kinds.hf", tmp_path / "kinds.mcap"
    mcap_kinds.write_every_kind(hf)
    report = export_mcap([hf], out, compression=compression, chunk_size=4096)  # type: ignore[arg-type]
    got = _node(node_modules, str(out))
    assert got["problems"] == []
    topics = got["topics"]
    assert {t: v["schema"] for t, v in topics.items()} == mcap_kinds.SCHEMAS
    for name, stats in report.topics.items():
        assert topics[stats.topic]["indexed"] == stats.messages, name
    assert topics["/hyperframes/blocks"]["indexed"] == report.blocks == 6
    imu = topics["/imu"]["first"]
    assert imu["linear_acceleration"] == {"x": "NaN", "y": "Infinity", "z": "-Infinity"}
    assert imu["angular_velocity"]["z"] == 9.80665
    rgb, gray, nv12 = (topics[t]["first"] for t in ("/rgb", "/gray", "/nv12"))
    W, H = mcap_kinds.W, mcap_kinds.H
    assert (rgb["encoding"], rgb["width"], rgb["height"], rgb["step"], rgb["data"]) == (
        "rgb8",
        W,
        H,
        3 * W,
        {"bytes": 3 * W * H},
    )
    assert (gray["encoding"], gray["step"], gray["data"]) == ("mono8", W, {"bytes": W * H})
    assert (nv12["encoding"], nv12["step"], nv12["data"]) == ("uyvy", 2 * W, {"bytes": 2 * W * H})
    assert topics["/video"]["first"]["format"] == "h265"
    block = topics["/hyperframes/blocks"]["first"]
    assert [f["topic"] for f in block["frames"]] == [f"/{s.name}" for s in mcap_kinds.STREAMS]


def test_late_and_quarantined_frames_decode_as_studio_decodes_them(
    node_modules: Path, tmp_path: Path
) -> None:
    hf, out = tmp_path / "f.hf", tmp_path / "f.mcap"
    fr.write_faulty(hf)
    report = export_mcap([hf], out)
    got = _node(node_modules, str(out))
    assert got["problems"] == []
    q = got["topics"]["/hyperframes/quarantined/cam"]
    assert q["schema"] == "foxglove.CompressedImage" and q["indexed"] == q["streamed"] == 1
    assert q["first"]["timestamp"] == {"seconds": "0", "nanos": fr.QUARANTINED_TS}
    assert sum(t["indexed"] for t in got["topics"].values()) == (
        report.messages + report.events + report.blocks
    )
