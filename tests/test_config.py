"""Vehicle config loading and validation (hyperframes.recorder.config)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hyperframes.format.codecs import CodecSpec
from hyperframes.format.streams import SensorKind, TimestampSource
from hyperframes.recorder.config import (
    ConfigError,
    VehicleConfig,
    check_config_main,
    load_config,
    parse_config,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"

BASE: dict[str, Any] = {
    "vehicle_id": "t1",
    "output_dir": "out",
    "zmq": {"endpoint": "tcp://127.0.0.1:5555"},
    "streams": [
        {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam"},
        {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "xyzi-f32", "topic": "lidar"},
    ],
}


def cfg(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d.update(changes)
    return d


def stream(i: int, **changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d["streams"][i].update(changes)
    return d


def error_of(data: object) -> ConfigError:
    with pytest.raises(ConfigError) as excinfo:
        parse_config(data)
    return excinfo.value


# --- shipped configs ----------------------------------------------------------------


def test_demo_config() -> None:
    c = load_config(CONFIGS / "demo.yaml")
    assert c.vehicle_id == "demo-car"
    assert (c.window_ns, c.segment_ns, c.grace_ns) == (100_000_000, 10_000_000_000, 500_000_000)
    assert [s.name for s in c.streams] == ["cam_left", "cam_right", "lidar_top", "imu"]
    assert {s.transport for s in c.streams} == {"zmq"}
    assert c.mqtt is None
    assert [(z.name, z.endpoint, z.socket, z.bind) for z in c.zmq] == [
        ("default", "tcp://127.0.0.1:5555", "pull", True)
    ]
    assert c.codec_for(0) == CodecSpec("none")
    assert c.codec_for(2) == CodecSpec("blosc2-lz4", None, shuffle=True)
    assert c.codec_for(3) == CodecSpec("blosc2-lz4", None, shuffle=True)
    infos = c.stream_infos()
    assert infos[0].extra == {"width": 320, "height": 240}
    assert infos[2].dtype == "<f4" and infos[2].shape == (-1, 4)
    assert infos[2].extra == {"points": 10000}
    assert infos[3].rate_hz == 200.0 and infos[3].kind is SensorKind.IMU
    assert (infos[2].codec, infos[2].level, infos[2].shuffle) == ("blosc2-lz4", 5, True)


def test_vehicle_example_config() -> None:
    c = load_config(CONFIGS / "vehicle-example.yaml")
    cams = [s for s in c.streams if s.info.kind is SensorKind.CAMERA]
    assert len(cams) == 6
    assert all(s.info.extra["width"] == 1600 and s.info.extra["height"] == 900 for s in cams)
    assert all(s.info.rate_hz == 30 and s.codec.name == "none" for s in cams)
    assert [s.name for s in c.streams_for("mqtt")] == ["imu"]
    assert c.stream(20).qos == 1
    assert c.stream(10).info.extra["points"] == 120000
    assert c.mqtt is not None and c.mqtt.port == 8883 and c.mqtt.tls is not None
    assert c.mqtt.password_file == Path("/etc/hyperframes/mqtt-password")
    assert c.segment_max_bytes == 4096 * 1024 * 1024
    assert c.max_payload_bytes == 16 * 1024 * 1024
    assert c.disk.on_full == "stop" and c.metrics.enabled


def test_check_config_main(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert check_config_main([str(CONFIGS / "demo.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK ")
    assert "[2] lidar_top: lidar xyzi-f32 10 Hz" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("vehicle_id: x\nwindw_ms: 100\n")
    assert check_config_main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: windw_ms: unknown key; did you mean 'window_ms'?")


# --- defaults and resolution ----------------------------------------------------------


def test_defaults() -> None:
    c = parse_config(cfg())
    assert isinstance(c, VehicleConfig)
    assert (c.window_ms, c.segment_seconds, c.segment_max_mb) == (100.0, 60.0, None)
    assert (c.fsync_interval_s, c.grace_ms, c.max_payload_mb) == (1.0, 500.0, 64.0)
    assert c.streams[0].transport == "zmq"  # the only transport configured
    assert c.streams[0].zmq_socket == "default"
    assert c.streams[0].info.timestamp_source is TimestampSource.HARDWARE
    assert c.zmq[0].rcvhwm == 10000
    assert c.disk.min_free_mb == 1024 and not c.metrics.enabled
    assert c.block_kib == 256
    assert c.clock_max_jump_ns == 10_000_000_000
    assert parse_config(cfg(clock_max_jump_s=2.5)).clock_max_jump_ns == 2_500_000_000
    assert parse_config(cfg(block_kib=0)).block_kib == 0  # frames stored whole


def test_codec_choices() -> None:
    c = parse_config(stream(1, codec="zstd:5", shuffle=False))
    assert c.codec_for(1) == CodecSpec("zstd", 5, shuffle=False)
    c = parse_config(stream(0, codec="lz4"))
    assert c.codec_for(0) == CodecSpec("lz4")
    c = parse_config(stream(1, codec="none"))
    assert c.codec_for(1) == CodecSpec("none", shuffle=False)


def test_segment_by_size_only() -> None:
    c = parse_config(cfg(segment_seconds=None, segment_max_mb=100))
    assert c.segment_ns is None and c.segment_max_bytes == 100 * 1024 * 1024


def test_several_zmq_sockets() -> None:
    d = cfg(
        zmq=[
            {"name": "main", "endpoint": "tcp://127.0.0.1:5555"},
            {"name": "lidar", "endpoint": "tcp://10.0.0.2:7000", "socket": "sub", "bind": False},
        ]
    )
    d["streams"][0]["zmq_socket"] = "main"
    d["streams"][1]["zmq_socket"] = "lidar"
    c = parse_config(d)
    assert [s.zmq_socket for s in c.streams] == ["main", "lidar"]
    del d["streams"][0]["zmq_socket"]
    assert str(error_of(d)).startswith("streams[0].zmq_socket: required with several zmq sockets")


def test_zmq_max_connections() -> None:
    assert parse_config(cfg()).zmq[0].max_connections == 256
    c = parse_config(cfg(zmq={"endpoint": "tcp://127.0.0.1:5555", "max_connections": 8}))
    assert c.zmq[0].max_connections == 8
    for bad, why in (
        (0, "must be 1..65536, got 0"),
        (65537, "must be 1..65536, got 65537"),
        (True, "must be an integer 1..65536, got a boolean"),
        ("64", "must be an integer 1..65536, got a string"),
    ):
        second = {"name": "b", "endpoint": "tcp://127.0.0.1:5555", "max_connections": bad}
        d = cfg(zmq=[{"name": "main", "endpoint": "ipc:///tmp/x.sock"}, second])
        for s in d["streams"]:
            s["zmq_socket"] = "main"
        assert str(error_of(d)).startswith(f"zmq[1].max_connections: {why}"), error_of(d)


def test_mqtt_stream_and_qos() -> None:
    d = cfg(mqtt={"host": "localhost"})
    d["streams"][0].update(transport="mqtt", qos=2)
    d["streams"][1]["transport"] = "zmq"
    c = parse_config(d)
    assert c.streams[0].qos == 2 and c.streams[1].qos is None
    assert c.mqtt is not None and c.mqtt.port == 1883 and c.mqtt.client_id == "hyperframes-t1"
    assert c.mqtt.read_password() is None


def test_password_file_read_lazily(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    d = cfg(mqtt={"host": "h", "username": "u", "password_file": str(pw)}, zmq=None)
    c = parse_config(d)
    assert c.mqtt is not None and c.mqtt.read_password() == "s3cret"
    assert "s3cret" not in repr(c)


# --- bad configs: each message names the key --------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "the file is empty"),
        ([1, 2], "must be a mapping, got a list"),
        (cfg(windw_ms=100), "windw_ms: unknown key; did you mean 'window_ms'?"),
        (
            cfg(recover_on_star=True),
            "recover_on_star: unknown key; did you mean 'recover_on_start'?",
        ),
        (cfg(recover_on_start="yes"), "recover_on_start: must be true or false, got a string"),
        (cfg(clock_max_jump_s=0), "clock_max_jump_s: must be >= 0.001 and <= 86400, got 0"),
        (cfg(block_kib=2), "block_kib: must be 0 (never split frames) or 4..4194303, got 2"),
        (cfg(block_kib=-1), "block_kib: must be 0..4194303, got -1"),
        (cfg(block_kib=64.5), "block_kib: must be an integer 0..4194303, got float 64.5"),
        (stream(1, codex="lz4"), "streams[1].codex: unknown key; did you mean 'codec'?"),
        (cfg(disk={"min_free": 5}), "disk.min_free: unknown key; did you mean 'min_free_mb'?"),
        (
            stream(0, kind="camra"),
            "streams[0].kind: 'camra' is not allowed; did you mean 'camera'?",
        ),
        (
            stream(0, encoding="jpg"),
            "streams[0].encoding: 'jpg' is not allowed; did you mean 'jpeg'?",
        ),
        (stream(1, codec="lz5"), "streams[1].codec: unknown codec 'lz5'"),
        (stream(1, codec="zstd:99"), "streams[1].codec: codec 'zstd': level 99 out of range 1..22"),
        (stream(1, codec="zstd:x"), "streams[1].codec: codec 'zstd:x': level must be an integer"),
        (stream(1, shuffle="yes"), "streams[1].shuffle: must be auto, true or false"),
        (stream(0, shuffle=True), "streams[0].shuffle: byte shuffle needs a codec"),
        (stream(0, codec="lz4", shuffle=True), "streams[0].shuffle: byte shuffle needs a dtype"),
        (stream(1, id=0), "streams[1].id: 0 already used by streams[0]"),
        (stream(1, name="cam"), "streams[1].name: 'cam' already used by streams[0]"),
        (stream(1, topic="cam"), "streams[1].topic: ('zmq', 'cam') already used by streams[0]"),
        (stream(0, id=70000), "streams[0].id: must be 0..65535, got 70000"),
        (stream(0, id="0"), "streams[0].id: must be an integer 0..65535, got a string"),
        (stream(0, id=True), "streams[0].id: must be an integer 0..65535, got a boolean"),
        (stream(0, rate_hz=-1), "streams[0].rate_hz: must be > 0"),
        (stream(0, name="bad name"), "streams[0].name: name 'bad name' must be 1-128"),
        (stream(1, dtype="f9"), "streams[1].dtype: 'f9' is not a numpy dtype"),
        (stream(1, dtype="O"), "streams[1].dtype: 'O' is not a fixed-size dtype"),
        (stream(1, shape=[0, 4]), "streams[1].shape: [0, 4]: sizes must be > 0"),
        (stream(1, shape=[-1, "4"]), "streams[1].shape[1]: must be an integer"),
        (stream(1, shape=[-1, -1]), "streams[1].shape: [-1, -1]: sizes must be > 0, with at most"),
        (stream(1, shape="n,4"), "streams[1].shape: must be a list"),
        (stream(0, qos=1), "streams[0].qos: applies to mqtt streams only"),
        (stream(0, transport="mqtt"), "streams[0].transport: 'mqtt' has no top-level mqtt:"),
        (stream(0, topic=""), "streams[0].topic: must be a non-empty string"),
        (stream(0, width=0), "streams[0].width: must be >= 1, got 0"),
        (stream(0, extra=[1]), "streams[0].extra: must be a mapping with string keys"),
        (cfg(streams=[]), "streams: empty"),
        (cfg(streams={"id": 0}), "streams: must be a list"),
        (cfg(streams=None), "streams: required key is missing"),
        ({**cfg(), "vehicle_id": None}, "vehicle_id: required key is missing"),
        (cfg(vehicle_id="a/b"), "vehicle_id: 'a/b' must be 1-64 letters"),
        (cfg(output_dir=3), "output_dir: must be a non-empty string, got int 3"),
        (cfg(zmq=None), "no transport: add a zmq: or mqtt: section"),
        (cfg(window_ms=0), "window_ms: must be > 0"),
        (cfg(window_ms=0.5), "window_ms: must be at least 1 ms"),
        (cfg(window_ms="100ms"), "window_ms: must be a number, got a string"),
        (
            cfg(window_ms=2000, segment_seconds=1),
            "window_ms: 2000 ms is longer than a segment (segment_seconds: 1 = 1000 ms)",
        ),
        (cfg(segment_seconds=None), "segment_seconds: segment_seconds and segment_max_mb"),
        (cfg(grace_ms=-1), "grace_ms: must be >= 0"),
        (cfg(max_payload_mb=5000), "max_payload_mb: must be > 0 and <= 4095"),
        (cfg(disk={"on_full": "delete"}), "disk.on_full: 'delete' is not allowed; did you mean"),
        (cfg(metrics={"port": 0}), "metrics.port: must be 1..65535, got 0"),
        (cfg(metrics={"enabled": "yes"}), "metrics.enabled: must be true or false"),
        (cfg(zmq={"endpoint": "localhost:5555"}), "zmq.endpoint: 'localhost:5555' is not a ZMQ"),
        (cfg(zmq={"endpoint": "tcp://a:1", "socket": "push"}), "zmq.socket: 'push' is not"),
        (cfg(zmq={"endpont": "tcp://a:1"}), "zmq.endpont: unknown key; did you mean 'endpoint'?"),
        (
            cfg(zmq=[{"endpoint": "tcp://a:1"}, {"endpoint": "tcp://a:1"}]),
            "zmq[1].endpoint: 'tcp://a:1' already used by zmq[0]",
        ),
        (cfg(mqtt={"port": 1883}), "mqtt.host: required key is missing"),
        (cfg(mqtt={"host": "h", "password": "p"}), "mqtt.username: required when a password"),
        (
            cfg(mqtt={"host": "h", "tls": {"cert_file": "c.pem"}}),
            "mqtt.tls: cert_file and key_file go together",
        ),
        (cfg(mqtt={"host": "h", "tls": {"ca": "x"}}), "mqtt.tls.ca: unknown key; did you mean"),
    ],
)
def test_bad_config(data: object, message: str) -> None:
    err = error_of(data)
    assert str(err).startswith(message), str(err)


def test_mqtt_wildcard_topic_rejected() -> None:
    d = cfg(mqtt={"host": "h"})
    d["streams"][0].update(transport="mqtt", topic="cam/#")
    d["streams"][1]["transport"] = "zmq"
    err = error_of(d)
    assert err.key == "streams[0].topic"
    assert "wildcards" in err.problem


def test_transport_required_with_two_sections() -> None:
    d = cfg(mqtt={"host": "h"})
    err = error_of(d)
    assert str(err) == "streams[0].transport: required key is missing"


def test_same_topic_on_different_transports_is_fine() -> None:
    d = cfg(mqtt={"host": "h"})
    d["streams"][0].update(transport="mqtt", topic="x")
    d["streams"][1].update(transport="zmq", topic="x")
    assert [s.topic for s in parse_config(d).streams] == ["x", "x"]


def test_error_attributes() -> None:
    err = error_of(stream(1, codec="lz5"))
    assert isinstance(err, ValueError)
    assert err.key == "streams[1].codec"
    assert "allowed: auto, none, lz4, lz4hc[:1-12], zstd[:1-22]" in err.problem


# --- files ---------------------------------------------------------------------------


def test_duplicate_yaml_key_rejected(tmp_path: Path) -> None:
    p = tmp_path / "dup.yaml"
    p.write_text("vehicle_id: a\noutput_dir: x\nvehicle_id: b\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(p)
    assert str(excinfo.value) == f"{p}: line 3: key 'vehicle_id' appears twice in one mapping"


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read: No such file"):
        load_config(tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("streams: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(p)


def test_error_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "v.yaml"
    p.write_text("vehicle_id: v\noutput_dir: o\nzmq: {endpoint: 'tcp://a:1'}\nstreams: [7]\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(p)
    assert str(excinfo.value) == f"{p}: streams[0]: must be a mapping, got int 7"
    assert excinfo.value.source == str(p)
