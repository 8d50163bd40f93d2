"""The ``hyperframes`` command line: info, verify, recover, synth (+ plugin commands).

Other packages add subcommands through the ``hyperframes.commands`` entry
point group (the recorder adds ``record``, ``check-config`` and ``sim``), so
this core package never imports them. Every command, plugin or not, runs
through :func:`hyperframes.cli.common.run_handler`: one-line errors, the exit
codes of docs/CLI.md, quiet exit on a closed pipe.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import numpy as np

from hyperframes import __version__
from hyperframes._install import install_hint
from hyperframes.cli import drive as drive_cli
from hyperframes.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    input_path,
    progress,
    progress_done,
    run_handler,
)
from hyperframes.errors import HyperframesError
from hyperframes.reader import HyperframeReader
from hyperframes.recover import recover
from hyperframes.synth import PROFILES, profile, write_synthetic
from hyperframes.verify import verify_file

__all__ = ["main", "build_parser"]

Handler = Callable[[argparse.Namespace], int]


def _info(args: argparse.Namespace) -> int:
    docs = [_info_doc(path) for path in args.files]
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for doc in docs:
        _print_info(doc)
    return 0


def _info_doc(path: str | os.PathLike[str]) -> dict[str, Any]:
    with HyperframeReader(path, verify=False) as r:
        idx = r.index
        quarantine = r.quarantine()
        # one pass per table, not one per stream: a file may hold thousands of streams
        stored = np.bincount(idx["stream_id"], weights=idx["size"], minlength=1 << 16)
        quarantined = np.bincount(quarantine["stream_id"], minlength=1 << 16)
        streams = []
        for sid, s in r.streams.items():
            ts = r.timestamps(sid)
            streams.append(
                {
                    **s.to_dict(),
                    "frames": len(ts),
                    "quarantined": int(quarantined[sid]),
                    "stored_bytes": int(stored[sid]),
                    "first_ns": int(ts[0]) if len(ts) else None,
                    "last_ns": int(ts[-1]) if len(ts) else None,
                }
            )
        doc: dict[str, Any] = {
            "path": str(path),
            "file_bytes": r.file_size,
            "metadata": r.metadata.to_dict(),
            "window_ns": r.window_ns,
            "windows": r.window_count(),
            "frames": r.frame_count,
            "start_ns": r.start_ns,
            "end_ns": r.end_ns,
            "incomplete_windows": len(r.missing),
            "quarantined_frames": len(quarantine),
            "streams": streams,
        }
    return doc


def _print_info(doc: dict[str, Any]) -> None:
    streams = doc["streams"]
    dur = (doc["end_ns"] - doc["start_ns"]) / 1e9
    m = doc["metadata"]
    print(
        f"{doc['path']}: {doc['file_bytes'] / 1e6:.1f} MB, vehicle {m['vehicle_id']}, "
        f"segment {m['segment_seq']}"
    )
    print(
        f"  {doc['windows']} windows of {doc['window_ns'] / 1e6:g} ms ({dur:.1f} s), "
        f"{doc['frames']} frames, {_plural(doc['incomplete_windows'], 'incomplete window')}"
        + (f", {doc['quarantined_frames']} quarantined" if doc["quarantined_frames"] else "")
    )
    print(
        f"  {'id':>5} {'name':<20} {'kind':<7} {'encoding':<9} {'codec':<21} "
        f"{'frames':>7} {'MB':>9}"
    )
    for row in streams:
        codec = row["codec"] or "none"
        if row["codec"] in ("lz4hc", "zstd"):
            codec += f":{row['level']}"
        if row["shuffle"]:
            codec += "+shuffle"
        print(
            f"  {row['id']:>5} {row['name']:<20} {row['kind']:<7} {row['encoding']:<9} "
            f"{codec:<21} {row['frames']:>7} {row['stored_bytes'] / 1e6:>9.2f}"
        )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _verify(args: argparse.Namespace) -> int:
    bad = missing = 0
    for path in args.files:
        if not isinstance(path, str) and not path.is_file():
            missing += 1
            what = "is not a file" if path.exists() else "does not exist"
            print(f"error: {path}: {what} (check the path)", file=sys.stderr)
            continue
        result = verify_file(path)
        if result.ok:
            if not args.quiet:
                print(
                    f"OK {path}: {result.windows} windows, {result.frames} frames, "
                    f"{result.payload_bytes / 1e6:.1f} MB of payload checked"
                )
        else:
            bad += 1
            for problem in result.problems:
                print(f"FAIL {problem}", file=sys.stderr)
    return EXIT_FAILED if bad else EXIT_USAGE if missing else 0


def _recover(args: argparse.Namespace) -> int:
    if _is_finalized(args.file):
        print(
            f"{args.file} is finalized: nothing to recover, nothing written "
            f"(hyperframes verify {args.file} checks every checksum)"
        )
        return 0
    report = recover(args.file, args.output, overwrite=args.force)  # verifies before renaming
    print(report.summary())
    print(f"verified {report.output}: {report.frames} frames, checksums match")
    return 0


def _is_finalized(path: Path) -> bool:
    """True when ``path`` opens as a finalized file (header, index and tables agree)."""
    try:
        with HyperframeReader(path, verify=False):
            return True
    except HyperframesError:
        return False


def _synth(args: argparse.Namespace) -> int:
    prof = profile(args.profile)
    out = Path(args.output)
    if out.exists():
        if not args.force:
            raise CommandError(f"{out}: already exists (use --force to replace it)")
        out.unlink()
    t0 = time.monotonic()

    def on_progress(done_s: float) -> None:
        if not args.quiet:
            progress(f"{done_s:.0f}/{args.seconds:g} s")

    n = write_synthetic(str(out), prof, args.seconds, seed=args.seed, progress=on_progress)
    if not args.quiet:
        progress_done()
    print(
        f"wrote {out}: profile {prof.name}, {args.seconds:g} s, {n} frames, "
        f"{out.stat().st_size / 1e6:.1f} MB in {time.monotonic() - t0:.1f} s"
    )
    return 0


def _events(args: argparse.Namespace) -> int:
    from hyperframes.events import list_events  # noqa: PLC0415 - only this command needs it

    rows = list_events(args.path, args.name)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        print(f"{args.path}: no events")
        return 0
    for r in rows:
        e = r.event
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(e.t_ns // 1_000_000_000))
        tags = " ".join(f"{k}={v}" for k, v in e.tags.items())
        kept = f"{len(r.existing)}/{len(r.segments)} segments on disk"
        flag = " QUARANTINED" if e.quarantined else ""
        print(f"{stamp}.{e.t_ns % 1_000_000_000 // 1_000_000:03d}Z  {e.name:<16} {e.source:<5} "
              f"-{e.pre_s:g}s/+{e.post_s:g}s  {kept}{flag}  {tags}".rstrip())  # fmt: skip
        if args.verbose_segments:
            for seg in r.segments:
                print(f"    {seg}{'' if seg in r.existing else '  (deleted)'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with plugin commands added."""
    parser = argparse.ArgumentParser(
        prog="hyperframes", description="Record, inspect and repair hyperframe files."
    )
    parser.add_argument("--version", action="version", version=f"hyperframes {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("info", help="summarise files: streams, windows, frames, sizes")
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE", help="a file or s3:// URL")
    p.add_argument(
        "--json",
        action="store_true",
        help="machine-readable output (an object; a list of them for several files)",
    )
    p.set_defaults(handler=_info)

    p = sub.add_parser("verify", help="check structure and every checksum; exit 1 on a problem")
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE", help="a file or s3:// URL")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.set_defaults(handler=_verify)

    p = sub.add_parser(
        "recover",
        help="salvage the complete windows of an unfinalized .tmp (a finalized file: "
        "says so, writes nothing)",
    )
    p.add_argument("file", type=Path, metavar="FILE.tmp")
    p.add_argument("-o", "--output", type=Path, help="output path (default: FILE without .tmp)")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_recover)

    p = sub.add_parser("synth", help="write a deterministic synthetic multi-sensor recording")
    p.add_argument("output", type=Path, metavar="OUT")
    p.add_argument("--seconds", type=float, default=10.0, help="duration (default 10)")
    p.add_argument(
        "--profile", default="demo", choices=sorted(PROFILES), help="stream set (default demo)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=_synth)

    drive_cli.register(sub)  # ls, slice, cat, du

    p = sub.add_parser("events", help="list the events of a recording directory or file")
    p.add_argument("path", type=Path, metavar="DIR", help="recorder output directory, or a file")
    p.add_argument("--name", help="only events of this name")
    p.add_argument("--segments", dest="verbose_segments", action="store_true",
                   help="list the segments each event protects")  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_events)

    seen: set[str] = set()
    for ep in entry_points(group="hyperframes.commands"):
        # the same plugin twice: two installs of this project (say, the old distribution
        # name hyperframes beside hyperframes-sensors); the first one found wins
        if ep.name in seen:
            continue
        seen.add(ep.name)
        try:
            register = ep.load()
        except ImportError as exc:  # an optional extra is missing: say how to get it
            missing = exc.name or str(exc)
            p = sub.add_parser(ep.name, help=f"(unavailable: {missing} is not installed)")
            p.set_defaults(handler=_unavailable(ep.name, missing))
            continue
        register(sub)
    return parser


# entry-point name -> the extra that brings what its commands need
_EXTRA_OF = {"recorder": "recorder", "convert": "converter", "mcap": "mcap", "viz": "viz",
             "live": "live"}  # fmt: skip


def _unavailable(name: str, missing: str) -> Handler:
    extra = _EXTRA_OF.get(name)
    how = install_hint(extra) if extra else f"pip install {missing}"

    def handler(_args: argparse.Namespace) -> int:
        print(f"error: '{name}' needs {missing}; install it with {how}", file=sys.stderr)
        return EXIT_USAGE

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hyperframes`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    return run_handler(handler, args, verbose=args.verbose)


def console() -> None:
    """The ``hyperframes`` console script (and ``python -m hyperframes.cli``): :func:`main`,
    then an exit without the interpreter's last garbage collections.

    Those traverse every object of every module imported; blosc2 alone
    imports ~440 (httpx, rich, pygments, ...), and a recorder that loaded it
    took ~140-180 ms from its "stopped" line to its exit, against ~13 ms with
    the heap frozen first. Every command has finished its work, closed its
    files and flushed its output by then; logging and the other exit
    handlers still run, and only objects kept alive by reference cycles are
    left for the operating system to reclaim.
    """
    code = main()
    gc.freeze()
    sys.exit(code)
