"""Record -> upload -> convert on upload -> train, end to end against an S3 endpoint.

Every part is the real one: the recorder daemon (``hyperframes record``, its
ZeroMQ socket fed by ``hyperframes sim``), ``hyperframes upload --once`` to
moto's standalone server on loopback (tests/s3_server.py), ``hyperframes
convert --inbox s3://B/raw --out s3://B/conv`` (the local pool, then Ray
tasks on a local Ray with 2 CPUs), and a ``HyperframeDataset`` over a glob of
the converted objects feeding a DataLoader with 2 forked workers. Every step
is checked against the step before it: segment counts, object checksums,
the converted objects verified as read from the bucket, samples equal to
those of the same files read locally.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from s3_server import S3Unavailable, s3_client, s3_endpoint

from hyperframes.reader import HyperframeReader
from hyperframes.recorder.segments import list_segments, parse_segment_name
from hyperframes.recorder.upload.marks import MarkStore
from hyperframes.recorder.upload.plan import object_key
from hyperframes.storage.objects import list_urls
from hyperframes.verify import verify_file

from mqtt_broker import free_port
from torch_files import same_sample

pytest.importorskip("av")
pytest.importorskip("obstore")
pytest.importorskip("boto3")

pytestmark = pytest.mark.network

VEHICLE = "e2e-car"
BUCKET = "fleet"
CONVERT = {"video": {"x265_preset": "ultrafast"},
           "batch": {"workers": 2, "ray_num_cpus": 1, "lease_s": 30}}  # fmt: skip


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "hyperframes.cli", *args]


def _vehicle_yaml(tmp: Path, s3_url: str) -> Path:
    doc = {
        "vehicle_id": VEHICLE,
        "output_dir": str(tmp / "out"),
        "window_ms": 100,
        "segment_seconds": 1,
        "fsync_interval_s": 0.2,
        "events": {"control_socket": str(tmp / "control.sock")},
        "upload": {"dest": f"s3://{BUCKET}/raw", "endpoint_url": s3_url, "part_mb": 5},
        "zmq": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "socket": "pull", "bind": True},
        "streams": [
            {"id": 0, "name": "cam", "kind": "camera", "encoding": "jpeg", "topic": "cam",
             "rate_hz": 30, "width": 64, "height": 48},
            {"id": 1, "name": "lidar", "kind": "lidar", "encoding": "xyzi-f32",
             "topic": "lidar", "rate_hz": 10, "points": 500},
            {"id": 2, "name": "imu", "kind": "imu", "encoding": "imu-f64", "topic": "imu",
             "rate_hz": 200},
        ],
    }  # fmt: skip
    path = tmp / "vehicle.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _record(conf: Path, env: dict[str, str], tmp: Path) -> int:
    """The recorder daemon, fed by the simulator; returns the frames the simulator sent."""
    notify = tmp / "notify.sock"
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(str(notify))
    ns.settimeout(30)
    rec = subprocess.Popen(_cli("record", "--config", str(conf)),
                           env={**env, "NOTIFY_SOCKET": str(notify)},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        while "READY=1" not in ns.recv(4096).decode():
            pass
        sim = subprocess.run(_cli("sim", "--config", str(conf), "--seconds", "2.5",
                                  "--rate-scale", "2"), env=env,
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert sim.returncode == 0, sim.stdout + sim.stderr
        rec.send_signal(signal.SIGTERM)
        out = rec.communicate(timeout=60)[0].decode()
        assert rec.returncode == 0, out
    finally:
        ns.close()
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    sent = int(sim.stdout.split(" frames,")[0].rsplit(" ", 1)[1])
    assert f"stopped: {sent} frames received" in out, out
    return sent


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A recording made by the daemon and uploaded with ``hyperframes upload --once``."""
    tmp = tmp_path_factory.mktemp("e2e")
    try:
        endpoint = s3_endpoint()
        url = endpoint.__enter__()
    except S3Unavailable as exc:
        pytest.skip(str(exc))
    aws = {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp / "aws-config"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "aws-creds")}  # fmt: skip
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[k]
    os.environ.update(aws)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        client = s3_client(url)
        client.create_bucket(Bucket=BUCKET)
        conf = _vehicle_yaml(tmp, url)
        sent = _record(conf, env, tmp)
        out = tmp / "out"
        segments = list_segments(out, VEHICLE)
        assert len(segments) >= 2 and not list(out.glob("*.tmp"))
        frames = 0
        for seg in segments:
            assert verify_file(seg).ok
            with HyperframeReader(seg) as r:
                frames += len(r.index)
        assert frames == sent  # every frame the simulator sent is in a finalized segment

        up = subprocess.run(_cli("upload", "--config", str(conf), "--once"), env=env,
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert up.returncode == 0, up.stderr
        raw: dict[str, Path] = {}
        for seg in segments:
            name = parse_segment_name(seg.name)
            assert name is not None
            key = object_key("raw", VEHICLE, name.start, seg.name)
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            assert hashlib.sha256(body).hexdigest() == hashlib.sha256(seg.read_bytes()).hexdigest()
            mark = MarkStore(out).uploaded(seg.name)
            assert mark and mark["url"] == f"s3://{BUCKET}/{key}"
            raw[key] = seg
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix="raw/")["Contents"]
        assert sorted(o["Key"] for o in listed) == sorted(raw)  # no .tmp, no part, no extra
        yield {"url": url, "env": env, "client": client, "raw": raw, "tmp": tmp}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        endpoint.__exit__(None, None, None)


def _keys(client: Any, prefix: str) -> list[str]:
    got = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in got.get("Contents", []))


def _check_converted(
    chain: dict[str, Any], out: str, engine: str
) -> tuple[dict[str, Path], list[dict[str, Any]]]:
    """The outputs under ``out/`` mirror the inbox, verify from the bucket, and are in the
    ledger and the markers; returns their keys with local copies, and the ledger."""
    client, raw = chain["client"], chain["raw"]
    want = {out + k.removeprefix("raw") for k in raw}
    keys = _keys(client, out + "/")
    finals = {k for k in keys if not k.split("/")[1].startswith((".", "ledger"))}
    assert finals == want
    assert not [k for k in keys if "/.staging/" in k or "/.leases/" in k]
    assert len([k for k in keys if k.startswith(f"{out}/.markers/")]) == 2 * len(raw)
    show = subprocess.run(_cli("convert", "--out", f"s3://{BUCKET}/{out}", "--show-ledger"),
                          env=chain["env"], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert show.returncode == 0, show.stderr
    records = [json.loads(line) for line in show.stdout.splitlines()]
    assert sorted((r["input"], r["status"], r["engine"]) for r in records) == sorted(
        (f"s3://{BUCKET}/{k}", "converted", engine) for k in raw
    )
    local: dict[str, Path] = {}
    for key in sorted(finals):
        url = f"s3://{BUCKET}/{key}"
        assert verify_file(url).ok, url  # verified as read from the bucket
        path = chain["tmp"] / out / key
        path.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(BUCKET, key, str(path))
        src = raw["raw" + key.removeprefix(out)]
        with HyperframeReader(path) as conv, HyperframeReader(src) as rec:
            assert len(conv.index) == len(rec.index)  # every recorded frame converted
            assert {s.name: s.kind for s in conv.streams.values()} == {
                s.name: s.kind for s in rec.streams.values()
            }
        local[key] = path
    return local, records


def _train_one_epoch(out: str, local: dict[str, Path]) -> None:
    """A DataLoader (2 forked workers) over the bucket glob: one epoch, equal to local."""
    torch = pytest.importorskip("torch")
    from hyperframes.torch import HyperframeDataset

    day = sorted({k.rsplit("/", 1)[0] for k in local})
    assert len(day) == 1  # one vehicle, one day (a recording across midnight would be two)
    pattern = f"s3://{BUCKET}/{day[0]}/*.hf"
    assert list_urls(pattern) == [f"s3://{BUCKET}/{k}" for k in sorted(local)]
    streams = ["cam", "lidar", "imu"]
    remote = HyperframeDataset(pattern, streams=streams)
    here = HyperframeDataset([local[k] for k in sorted(local)], streams=streams)
    assert len(remote) == len(here) > 0
    loader = torch.utils.data.DataLoader(remote, batch_size=1, num_workers=2, collate_fn=list)
    seen = 0
    for i, batch in enumerate(loader):
        (sample,) = batch
        assert sample["file"].startswith(f"s3://{BUCKET}/{out}/")
        assert same_sample(sample, here[i]), i
        seen += 1
    assert seen == len(here)


def test_record_upload_convert_train(chain: dict[str, Any]) -> None:
    cfg = chain["tmp"] / "convert.yaml"
    cfg.write_text(yaml.safe_dump(CONVERT))
    proc = subprocess.run(
        _cli("convert", "--inbox", f"s3://{BUCKET}/raw", "--out", f"s3://{BUCKET}/conv",
             "--config", str(cfg), "-q"),
        env=chain["env"], capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    local, _ = _check_converted(chain, "conv", "local")
    _train_one_epoch("conv", local)


@pytest.mark.ray
def test_record_upload_convert_on_ray_workers_train(chain: dict[str, Any]) -> None:
    ray = pytest.importorskip("ray")
    from hyperframes.cli.main import main

    cfg = chain["tmp"] / "convert-ray.yaml"
    cfg.write_text(yaml.safe_dump(CONVERT))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # workers get the env
    try:
        status = main(["convert", "--inbox", f"s3://{BUCKET}/raw",
                       "--out", f"s3://{BUCKET}/conv-ray", "--ray", "auto",
                       "--config", str(cfg), "-q"])  # fmt: skip
    finally:
        ray.shutdown()
    assert status == 0
    local, records = _check_converted(chain, "conv-ray", "auto")
    assert all(r["pid"] != os.getpid() for r in records)  # converted in Ray's workers
    _train_one_epoch("conv-ray", local)
