"""How much recorded data a power cut can take: the tail at risk (run by hand, not in CI).

    python bench/bench_durability.py                  # vehicle profile, 20 s at 1x, ZMQ
    python bench/bench_durability.py --seconds 30 --config configs/demo.yaml

A frame is *at risk* from the moment the recorder receives it until an fsync
that started after its window block was written has returned: before that a
power cut can lose it (still in memory while its window waits to close, or
written to the page cache but not yet on the disk). This runs the real daemon
in-process on the real simulator at real time, and instruments it without
changing what it does: it timestamps every ``os.fsync`` call (start, end,
file) and every window block the writer writes
(``HyperframeWriter._write_block``, with the receive time of each frame in
it). For every received frame (the daemon's event frames have no receive
time) it then reports

- ``memory``: receive -> its block written (windows close, one window of
  compression lag),
- ``disk``: block written -> the end of the first fsync of its file that
  started after,
- ``total``: the two together, the window of data a power cut can take,

as median, p99 and max in milliseconds, plus the fsync durations, for all
frames and again without the first ``--settle`` seconds (start-up: the
daemon and the simulator share one event loop, and the first frames wait
while the daemon starts and its clock settles). The result goes into
docs/OPERATIONS.md ("Power loss").
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperframes import writer as writer_mod  # noqa: E402
from hyperframes.recorder.config import parse_config  # noqa: E402
from hyperframes.recorder.daemon import Recorder  # noqa: E402
from hyperframes.recorder.sim import simulate  # noqa: E402

FSYNCS: list[tuple[int, float, float]] = []  # (inode, start, end), monotonic s
BLOCKS: list[tuple[int, float, list[int]]] = []  # (inode, written at, receive wall ns of frames)


def instrument() -> None:
    """Time every fsync and every block write; behaviour is unchanged."""
    real_fsync = os.fsync

    def fsync(fd: FileDescriptorLike) -> None:
        # by inode: only an fsync of the segment's own file makes its blocks durable
        # (the event log and the directories are fsynced too)
        inode = os.fstat(fd if isinstance(fd, int) else fd.fileno()).st_ino
        t = time.monotonic()
        real_fsync(fd)
        FSYNCS.append((inode, t, time.monotonic()))

    os.fsync = fsync  # the writer calls os.fsync through the module attribute
    real_write = writer_mod.HyperframeWriter._write_block

    def write_block(
        self: writer_mod.HyperframeWriter,
        window_id: int,
        pending: list[writer_mod._Pending],
        missing_ids: tuple[int, ...],
    ) -> None:
        real_write(self, window_id, pending, missing_ids)
        # receive_ns 0 = unknown (FORMAT.md): the daemon's event-stream frames; an event
        # goes to the durable event log on arrival, so only received frames are at risk
        received = [p.receive_ns for p in pending if p.receive_ns]
        BLOCKS.append((os.fstat(self._fd).st_ino, time.monotonic(), received))

    # on purpose: the private method is wrapped to timestamp each block
    writer_mod.HyperframeWriter._write_block = write_block  # type: ignore[method-assign]


def config(path: Path, out: Path) -> Any:
    doc = yaml.safe_load(path.read_text())
    doc["output_dir"] = str(out)
    doc["metrics"] = {"enabled": False}
    doc["disk"] = {"min_free_mb": 256, "on_full": "stop"}
    doc.pop("mqtt", None)
    doc["zmq"] = {"endpoint": "tcp://127.0.0.1:0", "socket": "pull", "bind": True}
    for s in doc["streams"]:
        s["transport"] = "zmq"
        s.pop("qos", None)
    return parse_config(doc, str(path))


async def run(cfg: Any, seconds: float) -> None:
    async with Recorder(cfg) as rec:
        await rec.ready.wait()
        await simulate(_sender(cfg, rec.endpoints["default"]), seconds)
        await asyncio.sleep(1.5)  # let the last windows close and one more fsync run


def _sender(cfg: Any, endpoint: str | None) -> Any:
    """The same config, pointed at the recorder's bound endpoint."""
    assert endpoint is not None
    return dataclasses.replace(cfg, zmq=(dataclasses.replace(cfg.zmq[0], endpoint=endpoint),))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(offset_ns: int, settle_s: float) -> None:
    syncs = {i: sorted((s, e) for j, s, e in FSYNCS if j == i) for i in {b[0] for b in BLOCKS}}
    starts = {i: [s for s, _ in v] for i, v in syncs.items()}
    rows: list[tuple[float, float, float, float]] = []  # received at, memory, disk, total
    for inode, written, receives in BLOCKS:
        k = bisect.bisect_left(starts[inode], written)
        if k == len(starts[inode]):
            continue  # written after the last fsync of the run (shutdown)
        durable = syncs[inode][k][1]
        for r in receives:
            received = (r - offset_ns) / 1e9
            rows.append(
                (received, (written - received) * 1e3, (durable - written) * 1e3,
                 (durable - received) * 1e3)
            )  # fmt: skip
    durations = [(e - s) * 1e3 for v in syncs.values() for s, e in v]
    print(f"{len(rows)} frames in {len(BLOCKS)} blocks, {len(durations)} fsyncs")
    first = min(r[0] for r in rows)
    for title, part in (
        ("all frames", rows),
        (f"frames received after the first {settle_s:g} s (start-up left out)",
         [r for r in rows if r[0] >= first + settle_s]),
    ):  # fmt: skip
        print(f"\n{title}: {len(part)}")
        if not part:
            continue  # a run no longer than --settle
        print(f"{'ms':<8}{'median':>9}{'p99':>9}{'max':>9}")
        columns = [[r[c] for r in part] for c in (1, 2, 3)]
        for name, values in (*zip(("memory", "disk", "total"), columns, strict=True),
                             ("fsync", durations)):  # fmt: skip
            print(f"{name:<8}{statistics.median(values):>9.0f}{pct(values, 0.99):>9.0f}"
                  f"{max(values):>9.0f}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "vehicle-example.yaml")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="also report frames received after this many seconds (default 3): start-up "
        "(imports, the clock settling, a burst the daemon catches up on) left out",
    )
    args = ap.parse_args()
    instrument()
    with tempfile.TemporaryDirectory(prefix="hf-durability-") as tmp:
        cfg = config(args.config, Path(tmp) / "out")
        offset_ns = time.time_ns() - round(time.monotonic() * 1e9)
        asyncio.run(run(cfg, args.seconds))
    print(f"config {args.config.name}: window {cfg.window_ms:g} ms, grace {cfg.grace_ms:g} ms, "
          f"fsync_interval_s {cfg.fsync_interval_s:g}, {args.seconds:g} s at 1x")  # fmt: skip
    report(offset_ns, args.settle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
