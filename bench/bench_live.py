"""The live view's costs (run by hand, not in CI): ``--only recorder`` and ``--only serve``.

    python bench/bench_live.py --only recorder --seconds 10 --repeats 3
    python bench/bench_live.py --only serve

``recorder``: the recorder's CPU (utime + stime of the ``hyperframes record``
process, as bench/bench_ingest.py measures it) at 1x real time on the vehicle
profile (``configs/vehicle-example.yaml`` rewritten for loopback ZMQ: 6 cameras
1600x900 JPEG at 30 Hz, a 120k-point lidar at 10 Hz, an IMU at 200 Hz), in five
modes run in turn within each repeat (a slow phase of a noisy box hits all):

- ``off``: no ``live:`` section (foxglove never imported);
- ``no-client``: ``live:`` on, nobody connected (goal: no measurable cost);
- ``one-client``: one client of the Foxglove WebSocket protocol
  (tests/foxglove_client.py) subscribed to every channel and reading (goal:
  <= 10% more CPU than ``off``), with ``live.max_hz`` as given (default 10, the
  config's default; ``--max-hz 0`` sends every frame);
- ``floor``: not the recorder but a bare foxglove-sdk sender (``FLOOR_SENDER``, a
  ``python -c`` process): the live view's server (same channels, schemas, metadata,
  backlog), one message per stream encoded once (the live view's encoder, on the
  simulator's first payload: the same bytes), published at each stream's live rate
  (``min(rate_hz, max_hz)``: 10 Hz for every vehicle stream at ``--max-hz 10``)
  plus the status document at 1 Hz, with the same client subscribed to every
  channel; its CPU is read over ``--seconds`` of sending;
- ``floor-idle``: the same process and pacing loop with nobody connected and
  nothing logged (the live view logs nothing without a subscriber either), so
  ``floor - floor-idle`` is the floor's sending cost alone: the SDK's ``log``
  calls, its framing and sending threads, and the kernel's loopback copies.

Medians over ``--repeats``, the ratios to ``off``, the CPU of foxglove-sdk's server
threads (OS name ``tokio-rt-worker``: framing and sending to the client; included in the
one-client total), and the frames per second the client received against the frames
per second recorded, per stream (and received from the floor sender). Last, the
recorder's live extra (``one-client - off``) against the floor's sending cost
(``floor - floor-idle``) and their ratio: how much the live view costs over
sending the same messages with foxglove-sdk and nothing else.

``serve``: ``hyperframes serve`` time to first message after a seek, local and from moto
(bench/bench_live_serve.py, which also runs alone with its options).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_ingest import (  # noqa: E402
    CLK_TCK,
    NotifySocket,
    bench_config,
    count_frames,
    cpu_seconds,
    free_port,
    stop_process,
    wait_received,
    warm_payloads,
)

from hyperframes.recorder.config import load_config  # noqa: E402
from hyperframes.recorder.sim import simulate  # noqa: E402

RECORDER_MODES = ("off", "no-client", "one-client")
FLOOR_MODES = ("floor-idle", "floor")
MODES = (*RECORDER_MODES, *FLOOR_MODES)
SDK_THREAD = "tokio-rt-worker"  # the OS name of foxglove-sdk's server threads (Rust, tokio)


def thread_cpu(pid: int, name: str) -> float:
    """utime + stime, in seconds, of the threads of ``pid`` whose OS name is ``name``."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        comm, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1]
        if comm == name:
            f = fields.split()
            total += int(f[11]) + int(f[12])
    return total / CLK_TCK


# --- recorder -----------------------------------------------------------------------


class _Client:
    """A Foxglove client on a thread, subscribed to every channel, counting per topic."""

    def __init__(self, port: int) -> None:
        from foxglove_client import FoxgloveClient

        deadline = time.monotonic() + 20
        while True:
            try:
                self.client = FoxgloveClient(f"ws://127.0.0.1:{port}")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.client.wait_channels(1)
        time.sleep(0.3)  # every advertise in
        self.client.subscribe()
        self.counts: collections.Counter[str] = collections.Counter()
        self.counting = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from websockets.exceptions import ConnectionClosed

        while not self._stop.is_set():
            try:
                got = self.client.messages(timeout=0.2)
            except ConnectionClosed:  # the recorder stopped first
                return
            for m in got:
                if self.counting:
                    self.counts[m.topic] += 1

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.counting = True

    def stop(self) -> float:
        """Stop counting; returns the seconds counted."""
        self.counting = False
        return time.monotonic() - self.t0

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()


def recorder_config(base: Path, mode: str, workdir: Path, max_hz: float) -> Path:
    doc: dict[str, Any] = yaml.safe_load(base.read_text())
    doc.pop("live", None)
    if mode != "off":
        doc["live"] = {"port": free_port(), "max_hz": max_hz}
    path = workdir / f"vehicle-live-{mode}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


async def run_mode(config_path: Path, mode: str, seconds: float, workdir: Path) -> dict[str, Any]:
    config = load_config(config_path)
    shutil.rmtree(config.output_dir, ignore_errors=True)
    config.output_dir.mkdir(parents=True)
    notify = NotifySocket(workdir)
    log_path = workdir / f"recorder-{mode}.log"
    env = {**os.environ, "NOTIFY_SOCKET": str(notify.path)}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hyperframes.cli", "record", "--config", str(config_path),
             "--log-level", "WARNING"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
        )  # fmt: skip
    client: _Client | None = None
    try:
        if not notify.wait_ready(proc, 30):
            raise RuntimeError(f"recorder not ready: {log_path.read_text()[-2000:]}")
        if mode == "one-client":
            client = await asyncio.to_thread(_Client, config.live.port)
            await asyncio.sleep(0.5)  # the subscriptions reach the server
            client.start()
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        sdk0 = thread_cpu(proc.pid, SDK_THREAD)
        result = await simulate(config, seconds, 1.0)
        url = f"http://{config.metrics.host}:{config.metrics.port}/metrics"
        await wait_received(url, result.total_sent, max(30.0, 2 * seconds))
        sdk_pct = 100.0 * (thread_cpu(proc.pid, SDK_THREAD) - sdk0) / (time.monotonic() - t0)
        counted = 0.0
        if client is not None:
            await asyncio.sleep(0.3)
            counted = client.stop()
        t_exit, cpu_total = stop_process(proc)
    finally:
        _reap(client, proc)
        notify.close()
        notify.path.unlink(missing_ok=True)
    found, _ = count_frames(config)
    shutil.rmtree(config.output_dir, ignore_errors=True)
    wall = t_exit - t0
    return {
        "cpu_pct": 100.0 * (cpu_total - cpu0) / wall,
        "sdk_pct": sdk_pct,
        "sent": result.sent,
        "found": found,
        "missing": sum(result.sent.values()) - sum(found.get(k, 0) for k in result.sent),
        "received": dict(client.counts) if client is not None else {},
        "counted_s": counted,
        "elapsed": result.elapsed_s,
    }


def _reap(client: _Client | None, proc: subprocess.Popen[bytes]) -> None:
    """Close the bench's client and kill the process if it is still running."""
    if client is not None:
        client.close()
    if proc.poll() is None:
        proc.kill()
        proc.wait()


# The floor: the live view's sending with foxglove-sdk and nothing else. argv: the config
# (its ``live:`` section: streams served, rate caps, backlog), then ``send`` (log every
# message at its live rate) or ``idle`` (the same pacing loop, nothing logged). Prints
# ``READY <port>`` once listening with the messages encoded, and the count it logged
# when SIGTERM stops it.
FLOOR_SENDER = r"""
import heapq, signal, sys, time
import foxglove
from hyperframes.events import event_stream_info
from hyperframes.live.channels import STATUS_TOPIC, json_channel_schema, live_channel
from hyperframes.mcap.messages import encode_json
from hyperframes.recorder.config import load_config
from hyperframes.recorder.sim import payload_source

config = load_config(sys.argv[1])
send = sys.argv[2] == "send"
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
lc = config.live
served = lc.served(config.stream_infos())
context = foxglove.Context()

def channel(topic, schema, encoding, metadata=None):
    fs = None if schema is None else foxglove.Schema(
        name=schema.name, encoding=schema.encoding, data=schema.data)
    return foxglove.Channel(topic, schema=fs, message_encoding=encoding, context=context,
                            metadata=metadata)

# as LiveServer: one channel per served stream and the event stream, then the status
live = {i.id: live_channel(i) for i in [*served, event_stream_info()]}
fox = {sid: channel(ch.topic, ch.schema, ch.message_encoding, ch.metadata)
       for sid, ch in live.items()}
status = channel(STATUS_TOPIC, json_channel_schema(STATUS_TOPIC), "json")
server = foxglove.start_server(
    name=f"hyperframes recorder {config.vehicle_id}", host="127.0.0.1", port=0,
    capabilities=[], context=context, message_backlog_size=lc.backlog)
t0 = time.time_ns()
doc = {"vehicle_id": config.vehicle_id, "live": {"clients": 1, "sent": 0, "dropped": {}}}
# (period ns, channel, message): encoded once, as LiveServer.publish encodes each frame
plan = [(1_000_000_000, status, encode_json(doc))]
for info in served:
    rate = info.rate_hz or 10.0  # as the simulator
    cap = lc.cap_hz(info.id)
    hz = rate if cap is None else min(rate, cap)
    body = live[info.id].encode(t0, payload_source(info, 0)(0))
    plan.append((round(1e9 / hz), fox[info.id], body))
print("READY", server.port, flush=True)
start = time.monotonic_ns()
heap = [(start, k) for k in range(len(plan))]
logged = 0
while not stop:
    due, k = heap[0]
    wait = due - time.monotonic_ns()
    if wait > 0:
        time.sleep(wait / 1e9)
        continue
    period, ch, body = plan[k]
    heapq.heapreplace(heap, (due + period, k))
    if send:
        ch.log(body, log_time=time.time_ns())
        logged += 1
server.stop()
print(logged, flush=True)
"""


async def run_floor(config_path: Path, mode: str, seconds: float, workdir: Path) -> dict[str, Any]:
    """The floor sender (``floor``: with the client, ``floor-idle``: without) for ``seconds``."""
    send = mode == "floor"
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SENDER, str(config_path), "send" if send else "idle"],
        stdout=subprocess.PIPE, cwd=workdir,
    )  # fmt: skip
    assert proc.stdout is not None
    client: _Client | None = None
    try:
        ready = (await asyncio.to_thread(proc.stdout.readline)).split()
        if ready[:1] != [b"READY"]:
            raise RuntimeError("the floor sender did not start")
        if send:
            client = await asyncio.to_thread(_Client, int(ready[1]))
            await asyncio.sleep(0.5)  # the subscriptions reach the server
            client.start()
        else:
            await asyncio.sleep(1.0)  # as long as a client takes to connect
        cpu0, sdk0, t0 = cpu_seconds(proc.pid), thread_cpu(proc.pid, SDK_THREAD), time.monotonic()
        await asyncio.sleep(seconds)
        cpu1, sdk1, t1 = cpu_seconds(proc.pid), thread_cpu(proc.pid, SDK_THREAD), time.monotonic()
        counted = client.stop() if client is not None else 0.0
        stop_process(proc)
        logged = int(proc.stdout.read().strip() or 0)
    finally:
        _reap(client, proc)
    return {
        "cpu_pct": 100.0 * (cpu1 - cpu0) / (t1 - t0),
        "sdk_pct": 100.0 * (sdk1 - sdk0) / (t1 - t0),
        "logged": logged,
        "received": dict(client.counts) if client is not None else {},
        "counted_s": counted,
    }


async def bench_recorder(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="hf-bench-live-") as tmp:
        workdir = Path(tmp)
        base = bench_config("zmq", workdir, None)
        warm_payloads(base)
        paths = {m: recorder_config(base, m, workdir, args.max_hz) for m in RECORDER_MODES}
        print(f"== recorder: vehicle profile over ZMQ, 1x real time, {args.seconds:g} s per run, "
              f"live.max_hz {args.max_hz:g}, {args.repeats} repeats")  # fmt: skip
        await run_mode(paths["off"], "off", min(args.seconds, 3.0), workdir)  # untimed warm-up
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        sdk: dict[str, list[float]] = {"one-client": [], "floor": []}
        rx: dict[str, list[float]] = collections.defaultdict(list)
        floor_rx: dict[str, list[float]] = collections.defaultdict(list)
        rec: dict[str, list[float]] = collections.defaultdict(list)
        for r in range(args.repeats):
            for mode in MODES:
                if mode in FLOOR_MODES:  # the floor sender reads the one-client config's live:
                    run = await run_floor(paths["one-client"], mode, args.seconds, workdir)
                else:
                    run = await run_mode(paths[mode], mode, args.seconds, workdir)
                cpu[mode].append(run["cpu_pct"])
                extra = ""
                if mode == "one-client":
                    sdk[mode].append(run["sdk_pct"])
                    for name in run["sent"]:  # sensor streams (not the event stream)
                        rec[name].append(run["found"].get(name, 0) / run["elapsed"])
                        got = run["received"].get(f"/{name}", 0)
                        rx[f"/{name}"].append(got / run["counted_s"])
                    for topic in ("/events", "/hyperframes/status"):
                        rx[topic].append(run["received"].get(topic, 0) / run["counted_s"])
                    extra = (f", client got {sum(run['received'].values())} messages, SDK "
                             f"threads {run['sdk_pct']:.1f}%")  # fmt: skip
                elif mode == "floor":
                    sdk[mode].append(run["sdk_pct"])
                    for topic in rx:
                        floor_rx[topic].append(run["received"].get(topic, 0) / run["counted_s"])
                    extra = (f", logged {run['logged']}, client got "
                             f"{sum(run['received'].values())} messages, SDK threads "
                             f"{run['sdk_pct']:.1f}%")  # fmt: skip
                if "missing" in run:
                    extra = (f", missing {run['missing']} of {sum(run['sent'].values())}"
                             + extra)  # fmt: skip
                print(f"  [{r + 1}] {mode:<10} cpu {run['cpu_pct']:6.1f}% of a core{extra}",
                      flush=True)  # fmt: skip
        med = {m: statistics.median(cpu[m]) for m in MODES}
        print(f"\n{'mode':<11} {'cpu % median':>13} {'runs':>24} {'ratio to off':>13}")
        for mode in MODES:
            runs = " ".join(f"{c:.1f}" for c in cpu[mode])
            print(f"{mode:<11} {med[mode]:>13.1f} {runs:>24} {med[mode] / med['off']:>13.3f}")
        for mode in ("one-client", "floor"):
            if sdk[mode]:
                print(f"{mode}: foxglove-sdk's server threads ({SDK_THREAD}) "
                      f"{statistics.median(sdk[mode]):.1f}% of a core (median; part of the "
                      f"{mode} total)")  # fmt: skip
        print(f"\n{'stream':<19} {'recorded fps':>13} {'client fps':>11} {'floor fps':>10}"
              "  (one-client, floor: medians)")  # fmt: skip
        for name in sorted(rec):
            print(f"{name:<19} {statistics.median(rec[name]):>13.1f} "
                  f"{statistics.median(rx[f'/{name}']):>11.1f} "
                  f"{statistics.median(floor_rx[f'/{name}']):>10.1f}")  # fmt: skip
        for topic in ("/events", "/hyperframes/status"):
            if rx[topic]:
                print(f"{topic:<19} {'':>13} {statistics.median(rx[topic]):>11.1f} "
                      f"{statistics.median(floor_rx[topic]):>10.1f}")  # fmt: skip
        total = {k: sum(statistics.median(v) for v in d.values()) for k, d in
                 (("one-client", rx), ("floor", floor_rx))}  # fmt: skip
        print(f"{'all':<19} {'':>13} {total['one-client']:>11.1f} {total['floor']:>10.1f}")
        live_extra = med["one-client"] - med["off"]
        floor_cost = med["floor"] - med["floor-idle"]
        ratio = f"{live_extra / floor_cost:.2f}x" if floor_cost > 0 else "n/a"
        print(
            f"\nrecorder's live extra (one-client - off) {live_extra:.1f}% of a core "
            f"(one-client - no-client {med['one-client'] - med['no-client']:.1f}%)\n"
            f"bare SDK sender's sending cost (floor - floor-idle) {floor_cost:.1f}% of a core\n"
            f"-> the live view costs {ratio} the floor (medians of {args.repeats})"
        )


# --- serve --------------------------------------------------------------------------


async def bench_serve(args: argparse.Namespace) -> None:
    """``hyperframes serve``: time to first message after a seek on a 1-hour drive, local
    and from moto (bench/bench_live_serve.py, which also runs alone with its options)."""
    from bench_live_serve import bench_serve as run_serve

    await asyncio.to_thread(run_serve, args)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["recorder", "serve"], action="append",
                    help="run only this section (repeatable); default: all")  # fmt: skip
    ap.add_argument("--seconds", type=float, default=10.0, help="sensor seconds per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per mode (median)")
    ap.add_argument("--max-hz", type=float, default=10.0,
                    help="live.max_hz for the recorder runs (0: every frame)")  # fmt: skip
    args = ap.parse_args()
    sections = args.only or ["recorder", "serve"]
    if "recorder" in sections:
        asyncio.run(bench_recorder(args))
    if "serve" in sections:
        asyncio.run(bench_serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
