"""What a person sees: live progress (rich) and the summary table at the end.

On a terminal with rich installed the batch shows one bar for the files and
one per archive being converted (frames, MB/s of input read; from a bucket
also the download, upload and re-read, in MB); elsewhere (a log file,
systemd, rich missing) one plain line per finished file, and for a bucket
transfer still running a line every 30 s. The
summary — files converted, skipped, failed, deferred; bytes before and after;
the ratio per sensor kind; PSNR min/median per camera; time — is printed in
both cases. :class:`Tally` gathers it from outcomes and is pure.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from hyperframes.cli.common import TransferMeter

__all__ = ["Tally", "BatchDisplay"]


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def _ratio(before: int, after: int) -> str:
    return f"{after / before:.3f}x" if before else "-"


def _sizes(before: int, after: int) -> str:
    return f"{_mb(before)} -> {_mb(after)} ({_ratio(before, after)})"


@dataclass(slots=True)
class Tally:
    """Totals over the outcomes of a batch (pure bookkeeping)."""

    counts: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    kinds: dict[str, list[int]] = field(default_factory=dict)  # kind -> [bytes in, bytes out]
    psnr: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # camera -> (min, med)
    checked: dict[str, set[str]] = field(default_factory=dict)  # camera -> how (every frame...)
    quality: dict[str, int] = field(default_factory=dict)  # camera -> best CRF/QP GOPs needed
    failures: list[tuple[str, str]] = field(default_factory=list)  # (input, reason)
    waiting: list[tuple[str, str]] = field(default_factory=list)  # deferred (input, reason)
    notes: list[str] = field(default_factory=list)  # lines after the table
    started: float = field(default_factory=time.monotonic)

    def add(self, outcome: dict[str, Any]) -> None:
        """Count one outcome (converted, skipped, failed, deferred, interrupted, ignored)."""
        status = str(outcome.get("status", "failed"))
        self.counts[status] = self.counts.get(status, 0) + 1
        if status == "failed":
            self.failures.append((str(outcome.get("input")), _reason(outcome)))
        elif status == "deferred":
            self.waiting.append((str(outcome.get("input")), str(outcome.get("reason", ""))))
        result = outcome.get("result")
        if status != "converted" or not isinstance(result, dict):
            return
        self.bytes_in += int(result["bytes_in"])
        self.bytes_out += int(result["bytes_out"])
        for s in result["streams"]:
            k = self.kinds.setdefault(s["kind"], [0, 0])
            k[0] += int(s["bytes_in"])
            k[1] += int(s["bytes_out"])
            q = s.get("quality") or {}
            if q.get("psnr_min_db") is not None:
                self.psnr.setdefault(s["name"], []).append(
                    (float(q["psnr_min_db"]), float(q["psnr_median_db"]))
                )
                how = "every frame" if q.get("checked") == "every_frame" else "sampled frames"
                self.checked.setdefault(s["name"], set()).add(how)
                if q.get("gops_reencoded"):
                    best = int(q["quality_best"])
                    self.quality[s["name"]] = min(best, self.quality.get(s["name"], best))

    @property
    def failed(self) -> int:
        """Inputs that failed."""
        return self.counts.get("failed", 0)

    def rows(self) -> list[tuple[str, str]]:
        """The summary as (label, value) rows."""
        c = self.counts
        rows = [
            (
                "files",
                ", ".join(
                    f"{k} {c.get(k, 0)}" for k in ("converted", "skipped", "failed", "deferred")
                )
                + (f", interrupted {c['interrupted']}" if c.get("interrupted") else "")
                + (f", ignored {c['ignored']}" if c.get("ignored") else ""),
            ),
            ("bytes (converted files)", _sizes(self.bytes_in, self.bytes_out)),
        ]
        for kind, (a, b) in sorted(self.kinds.items()):
            rows.append((f"  {kind}", _sizes(a, b)))
        for cam, values in sorted(self.psnr.items()):
            low = min(v[0] for v in values)
            med = statistics.median(v[1] for v in values)
            how = " and ".join(sorted(self.checked.get(cam, set())))
            q = self.quality.get(cam)
            ended = f"; GOPs re-encoded down to quality {q}" if q is not None else ""
            rows.append((f"PSNR {cam}", f"min {low:.2f} dB, median {med:.2f} dB ({how}{ended})"))
        rows.append(("time", f"{time.monotonic() - self.started:.1f} s"))
        return rows


def _reason(outcome: dict[str, Any]) -> str:
    """A failure's reason and where the input went (``INBOX/failed/...``) or why it stayed."""
    reason = str(outcome.get("reason", "?"))
    if outcome.get("moved_to"):
        reason += f"; input moved to {outcome['moved_to']}"
    elif outcome.get("move_error"):
        reason += f"; input left in place: {outcome['move_error']}"
    return reason


def outcome_line(outcome: dict[str, Any]) -> str:
    """One plain line for a finished input."""
    name = Path(str(outcome.get("input", "?"))).name
    status = outcome.get("status", "?")
    if status == "converted":
        r = outcome["result"]
        cams = [
            f"{s['name']} PSNR {s['quality']['psnr_min_db']}/{s['quality']['psnr_median_db']} dB"
            f" ({'every frame' if s['quality'].get('checked') == 'every_frame' else 'sample'}"
            f"{_ended(s['quality'])})"
            for s in r["streams"]
            if s.get("quality") and s["quality"].get("psnr_min_db") is not None
        ]
        extra = f", {'; '.join(cams)}" if cams else ""
        return (
            f"converted {name}: {_mb(r['bytes_in'])} -> {_mb(r['bytes_out'])} "
            f"({_ratio(r['bytes_in'], r['bytes_out'])}){extra}, {r['seconds']:.1f} s"
        )
    if status == "failed":
        return f"failed {name}: {_reason(outcome)}"
    if status == "deferred":
        return f"waiting {name}: {outcome.get('reason', '')}"
    return f"{status} {name}: {outcome.get('reason', '')}"


def _ended(q: dict[str, Any]) -> str:
    start, best = q.get("quality_start"), q.get("quality_best")
    if best is None or best == start:
        return ""
    return f", {q.get('gops_reencoded', 0)} GOPs re-encoded down to quality {best}"


class BatchDisplay:
    """Live progress on a terminal (rich), plain lines otherwise. Use as a context manager."""

    def __init__(self, *, quiet: bool = False, stream: IO[str] | None = None) -> None:
        self.quiet = quiet
        self._stream = stream or sys.stderr
        self._rich: Any = None
        self._progress: Any = None
        self._files: Any = None
        self._tasks: dict[str, Any] = {}
        self._started: dict[str, float] = {}
        self._meters: dict[str, TransferMeter] = {}  # key -> the transfer running now
        self.log_every_s = 30.0
        """Off a terminal, how often a bucket transfer still running prints a line."""
        try:
            from rich.console import Console  # noqa: PLC0415 - optional extra
        except ImportError:
            return
        self._console = Console(file=self._stream)
        self._rich = Console

    @property
    def live(self) -> bool:
        """True when bars are drawn (a terminal and rich)."""
        return self._rich is not None and not self.quiet and self._console.is_terminal

    def __enter__(self) -> Self:
        if self.live:
            from rich.progress import (  # noqa: PLC0415
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=self._console,
            )
            self._progress.start()
            self._files = self._progress.add_task("files", total=0, rate="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def queued(self, n: int = 1) -> None:
        """``n`` more files will be processed."""
        if self._progress is not None:
            task = self._progress.tasks[self._files]
            self._progress.update(self._files, total=(task.total or 0) + n)

    def started(self, key: str) -> None:
        """A file started converting."""
        self._started[key] = time.monotonic()
        if self._progress is not None:
            self._tasks[key] = self._progress.add_task(f"  {Path(key).name}", total=None, rate="")

    def progress(
        self, key: str, frames: int, total: int, nbytes: int, phase: str = "convert"
    ) -> None:
        """Frames done of one file and stored bytes read so far; or, for another
        ``phase`` (``download``, ``upload``, ``re-read`` of a bucket task), bytes done
        of ``total``."""
        now = time.monotonic()
        if phase != "convert":
            self._transfer(key, frames, total, phase, now)
            return
        task = self._tasks.get(key)
        if self._progress is None or task is None:
            return
        dt = max(1e-6, now - self._started.get(key, now))
        self._progress.update(
            task,
            description=f"  {Path(key).name}",
            completed=frames,
            total=total,
            rate=f"{nbytes / dt / 1e6:.1f} MB/s",
        )

    def _transfer(self, key: str, done: int, total: int, phase: str, now: float) -> None:
        meter = self._meters.get(key)
        label = f"{phase} {Path(key).name}"
        if meter is None or meter.label != label:
            meter = self._meters[key] = TransferMeter(
                label, total, tty=False, now=now, log_every_s=self.log_every_s
            )
        line = meter.update(done, now)
        task = self._tasks.get(key)
        if self._progress is not None and task is not None:
            rate = done / max(now - meter.started, 1e-6) / 1e6
            self._progress.update(
                task,
                description=f"  {Path(key).name} {phase} (MB)",
                completed=done / 1e6,
                total=total / 1e6,
                rate=f"{rate:.1f} MB/s",
            )
        elif line is not None and not self.quiet:
            print(line, file=self._stream, flush=True)

    def finished(self, outcome: dict[str, Any]) -> None:
        """A file is done (any status)."""
        key = str(outcome.get("input"))
        self._meters.pop(key, None)
        task = self._tasks.pop(key, None)
        if self._progress is not None:
            if task is not None:
                self._progress.remove_task(task)
            if outcome.get("status") != "deferred":
                self._progress.advance(self._files)
            self._progress.console.print(outcome_line(outcome), highlight=False, markup=False)
        elif not self.quiet or outcome.get("status") == "failed":
            print(outcome_line(outcome), file=self._stream, flush=True)

    def summary(self, tally: Tally, out: IO[str] | None = None) -> None:
        """Print the summary table (rich when available)."""
        stream = out or self._stream
        if self._rich is not None:
            from rich.table import Table  # noqa: PLC0415

            table = Table(title="hyperframes convert", show_header=False, title_justify="left")
            table.add_column(style="bold")
            table.add_column()
            for label, value in tally.rows():
                table.add_row(label, value)
            for name, reason in tally.failures:
                table.add_row(f"FAILED {Path(name).name}", reason)
            for name, reason in tally.waiting:
                table.add_row(f"WAITING {Path(name).name}", reason)
            console = self._rich(file=stream)
            console.print(table)
            for note in tally.notes:
                console.print(note, highlight=False, markup=False)
            return
        for label, value in tally.rows():
            print(f"{label:<26} {value}", file=stream)
        for name, reason in tally.failures:
            print(f"FAILED {name}: {reason}", file=stream)
        for name, reason in tally.waiting:
            print(f"WAITING {name}: {reason}", file=stream)
        for note in tally.notes:
            print(note, file=stream)
