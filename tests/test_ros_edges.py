"""ROS 2 bags at the edges (docs/ROS2.md): a bag without stored message definitions
(an older rosbag2 sqlite3 schema: the built-in Humble typestore decodes it), and a
file-compressed split (``.mcap.zstd``) passed alone (a one-line error naming the bag
directory)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rosbags")

from rosbags.highlevel import AnyReader
from rosbags.interfaces import MessageDefinitionFormat
from rosbags.rosbag2 import CompressionMode, StoragePlugin
from test_ros_import import TOPICS, TS, _write_bag

from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader
from hyperframes.ros import is_ros2_mcap
from hyperframes.ros.ingest import NotRosbagError, import_bag


def _strip_definitions(bag: Path) -> None:
    """Make a rosbags sqlite3 bag look like a Humble one: schema 3, no
    ``message_definitions`` table, metadata version 5 without type hashes."""
    (db,) = bag.glob("*.db3")
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE message_definitions")
        con.execute("UPDATE schema SET schema_version = 3")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info["version"] = 5
    for t in info["topics_with_message_count"]:
        t["topic_metadata"].pop("type_description_hash", None)
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))


def test_a_bag_without_definitions_uses_the_builtin_typestore(tmp_path: Path) -> None:
    bag, ref = tmp_path / "bag", tmp_path / "ref"
    _write_bag(ref, range(8), StoragePlugin.SQLITE3)
    shutil.copytree(ref, bag)  # the same messages, then without their definitions
    _strip_definitions(bag)
    with AnyReader([bag], default_typestore=TS) as r:  # really without definitions
        assert r.connections
        assert {c.msgdef.format for c in r.connections} == {MessageDefinitionFormat.NONE}
    report = import_bag(bag, tmp_path / "out.hf", window_ns=100_000_000)
    assert not report.problems and set(report.topics) == set(TOPICS)
    assert all(t.time != "log time" for t in report.topics.values())  # header stamps
    import_bag(ref, tmp_path / "ref.hf", window_ns=100_000_000)  # checked in test_ros_import
    with HyperframeReader(tmp_path / "out.hf") as a, HyperframeReader(tmp_path / "ref.hf") as b:
        assert [s.to_dict() for s in a.streams.values()] == [
            s.to_dict() for s in b.streams.values()
        ]  # the same streams, the CDR topics' definitions (from the typestore) included
        tf = next(s for s in a.streams.values() if s.name == "tf_static")
        assert tf.extra["ros"]["definition"].startswith("geometry_msgs/TransformStamped[]")
        for s in a.streams.values():
            fa, fb = list(a.frames(s.name)), list(b.frames(s.name))
            assert [(f.timestamp_ns, f.data.tobytes()) for f in fa] == [
                (f.timestamp_ns, f.data.tobytes()) for f in fb
            ], s.name


def test_a_compressed_split_alone_names_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag, range(3), StoragePlugin.MCAP, CompressionMode.FILE)
    (split,) = bag.glob("*.mcap.zstd")
    assert is_ros2_mcap(split)  # so `import` takes it for a bag, not a plain MCAP file
    code = main(["import", str(split), str(tmp_path / "o.hf"), "--window-ms", "100"])
    err = capsys.readouterr().err
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert "file-compressed rosbag2" in err and f"pass the bag directory {bag}" in err
    assert not (tmp_path / "o.hf").exists()
    # moved away from its metadata.yaml: still says what to pass
    alone = tmp_path / "alone.mcap.zstd"
    split.rename(alone)
    with pytest.raises(NotRosbagError, match=r"metadata\.yaml"):
        import_bag(alone, tmp_path / "o.hf", window_ns=100_000_000)
    # what it names works
    split2 = tmp_path / "bag2"
    _write_bag(split2, range(3), StoragePlugin.MCAP, CompressionMode.FILE)
    assert main(["import", str(split2), str(tmp_path / "d.hf"), "--window-ms", "100"]) == 0


def test_the_probe_leaves_other_zstd_files_alone(tmp_path: Path) -> None:
    import zstandard

    f = tmp_path / "x.mcap.zstd"
    f.write_bytes(zstandard.ZstdCompressor().compress(b"\x89MCAP0\r\n" + b"\0" * 60))
    assert not is_ros2_mcap(f)
    f.write_bytes(b"\x28\xb5\x2f\xfd garbage")
    assert not is_ros2_mcap(f)
