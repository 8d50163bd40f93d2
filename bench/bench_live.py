"""The live view's costs (run by hand, not in CI): ``--only recorder`` and ``--only serve``.

    python bench/bench_live.py --only recorder --seconds 10 --repeats 3
    python bench/bench_live.py --only serve

``recorder``: the recorder's CPU (utime + stime of the ``hyperframes record``
process, as bench/bench_ingest.py measures it) at 1x real time on the vehicle
profile (``configs/vehicle-example.yaml`` rewritten for loopback ZMQ: 6 cameras
1600x900 JPEG at 30 Hz, a 120k-point lidar at 10 Hz, an IMU at 200 Hz), in three
modes run in turn within each repeat (a slow phase of a noisy box hits all):

- ``off``: no ``live:`` section (foxglove never imported);
- ``no-client``: ``live:`` on, nobody connected (goal: no measurable cost);
- ``one-client``: one client of the Foxglove WebSocket protocol
  (tests/foxglove_client.py) subscribed to every channel and reading (goal:
  <= 10% more CPU than ``off``), with ``live.max_hz`` as given (default 10, the
  config's default; ``--max-hz 0`` sends every frame).

Medians over ``--repeats``, the ratios to ``off``, the CPU of foxglove-sdk's server
threads (OS name ``tokio-rt-worker``: framing and sending to the client; included in the
one-client total), and the frames per second the client received against the frames
per second recorded, per stream.

``serve``: ``hyperframes serve`` time to first message after a seek (helper A's).
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

MODES = ("off", "no-client", "one-client")
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
        if client is not None:
            client.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
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


async def bench_recorder(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="hf-bench-live-") as tmp:
        workdir = Path(tmp)
        base = bench_config("zmq", workdir, None)
        warm_payloads(base)
        paths = {m: recorder_config(base, m, workdir, args.max_hz) for m in MODES}
        print(f"== recorder: vehicle profile over ZMQ, 1x real time, {args.seconds:g} s per run, "
              f"live.max_hz {args.max_hz:g}, {args.repeats} repeats")  # fmt: skip
        await run_mode(paths["off"], "off", min(args.seconds, 3.0), workdir)  # untimed warm-up
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        sdk: list[float] = []
        rx: dict[str, list[float]] = collections.defaultdict(list)
        rec: dict[str, list[float]] = collections.defaultdict(list)
        for r in range(args.repeats):
            for mode in MODES:
                run = await run_mode(paths[mode], mode, args.seconds, workdir)
                cpu[mode].append(run["cpu_pct"])
                extra = ""
                if mode == "one-client":
                    sdk.append(run["sdk_pct"])
                    for name in run["sent"]:  # sensor streams (not the event stream)
                        rec[name].append(run["found"].get(name, 0) / run["elapsed"])
                        got = run["received"].get(f"/{name}", 0)
                        rx[f"/{name}"].append(got / run["counted_s"])
                    for topic in ("/events", "/hyperframes/status"):
                        rx[topic].append(run["received"].get(topic, 0) / run["counted_s"])
                    extra = (f", client got {sum(run['received'].values())} messages, SDK "
                             f"threads {run['sdk_pct']:.1f}%")  # fmt: skip
                print(f"  [{r + 1}] {mode:<10} cpu {run['cpu_pct']:6.1f}% of a core, missing "
                      f"{run['missing']} of {sum(run['sent'].values())}{extra}",
                      flush=True)  # fmt: skip
        base_cpu = statistics.median(cpu["off"])
        print(f"\n{'mode':<11} {'cpu % median':>13} {'runs':>24} {'ratio to off':>13}")
        for mode in MODES:
            med = statistics.median(cpu[mode])
            runs = " ".join(f"{c:.1f}" for c in cpu[mode])
            print(f"{mode:<11} {med:>13.1f} {runs:>24} {med / base_cpu:>13.3f}")
        if sdk:
            print(
                f"one-client: foxglove-sdk's server threads ({SDK_THREAD}) "
                f"{statistics.median(sdk):.1f}% of a core (median; part of the one-client total)"
            )
        print(f"\n{'stream':<12} {'recorded fps':>13} {'client fps':>11}  (one-client, medians)")
        for name in sorted(rec):
            print(f"{name:<12} {statistics.median(rec[name]):>13.1f} "
                  f"{statistics.median(rx[f'/{name}']):>11.1f}")  # fmt: skip
        for topic in ("/events", "/hyperframes/status"):
            if rx[topic]:
                print(f"{topic:<12} {'':>13} {statistics.median(rx[topic]):>11.1f}")


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
