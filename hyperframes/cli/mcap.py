"""The ``export`` and ``import`` subcommands of ``hyperframes`` (MCAP, for Foxglove).

Registered through the ``hyperframes.commands`` entry point
(``hyperframes.cli.mcap:register``). The ``mcap`` library is imported only
when a command runs; without it the command says which extra to install.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hyperframes.cli.common import input_path, progress, progress_done
from hyperframes.mcap.errors import MissingExtraError

__all__ = ["register", "parse_mapping"]


def parse_mapping(items: list[str]) -> dict[str, str]:
    """``TOPIC=STREAM`` items as a dict (ValueError on a malformed item or a repeated topic)."""
    out: dict[str, str] = {}
    for item in items:
        topic, sep, stream = item.rpartition("=")
        if not sep or not topic or not stream:
            raise ValueError(f"--map {item!r}: expected TOPIC=STREAM")
        if topic in out:
            raise ValueError(f"--map: topic {topic!r} is mapped twice")
        out[topic] = stream
    return out


def _require_mcap() -> None:
    try:
        import mcap  # noqa: F401, PLC0415 - optional extra
    except ImportError:
        raise MissingExtraError("mcap", "mcap") from None


def _export(args: argparse.Namespace) -> int:
    if args.mcap is None and args.rosbag2 is None:
        raise ValueError("give the output: --mcap OUT.mcap (or --rosbag2 DIR)")
    _require_mcap()
    from hyperframes.format.times import parse_range  # noqa: PLC0415
    from hyperframes.mcap.export import export_mcap  # noqa: PLC0415
    from hyperframes.reader import HyperframeReader  # noqa: PLC0415

    start = end = None
    if args.start is not None or args.end is not None:
        first, last = [], []
        for path in args.files:
            with HyperframeReader(path, verify=False) as r:
                first.append(r.start_ns)
                last.append(r.end_ns)
        start, end = parse_range(args.start, args.end, min(first), max(last))

    def on_progress(done: float) -> None:
        if not args.quiet:
            progress(f"{done * 100:.0f}%")

    if args.profile == "ros2" or args.rosbag2 is not None:
        return _export_ros2(args, start, end, on_progress)
    report = export_mcap(
        args.files,
        args.mcap,
        streams=args.streams,
        start_ns=start,
        end_ns=end,
        compression=args.compression,
        chunk_size=int(args.chunk_mb * (1 << 20)),
        events=not args.no_events,
        overwrite=args.force,
        progress=on_progress,
    )
    if not args.quiet:
        progress_done()
    print(report.summary())
    return 0


def _export_ros2(
    args: argparse.Namespace, start: int | None, end: int | None, on_progress: Any
) -> int:
    """``export --profile ros2``: sensor_msgs in CDR (docs/ROS2.md, "ROS 2 out")."""
    from hyperframes.ros.export import export_ros2  # noqa: PLC0415 - MissingExtraError

    options = {
        "streams": args.streams,
        "start_ns": start,
        "end_ns": end,
        "events": not args.no_events,
        "overwrite": args.force,
        "progress": on_progress,
    }
    reports = []
    if args.mcap is not None:
        reports.append(
            export_ros2(
                args.files,
                args.mcap,
                compression=args.compression,
                chunk_size=int(args.chunk_mb * (1 << 20)),
                **options,
            )
        )
    if args.rosbag2 is not None:
        reports.append(export_ros2(args.files, args.rosbag2, rosbag2=True, **options))
    if not args.quiet:
        progress_done()
    print("\n".join(r.summary() for r in reports))
    return 0


def _import_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options ``import`` passes to both importers (MCAP and ROS 2 bags)."""
    return {
        "window_ns": round(args.window_ms * 1e6) if args.window_ms is not None else None,
        "mapping": parse_mapping(args.map),
        "include_all": args.all_topics,
        "time_source": args.time,
        "max_delay_ns": round(args.max_delay_ms * 1e6),
        "overwrite": args.force,
    }


def _is_rosbag(path: Path) -> bool:
    """A rosbag2 directory, a ``.db3`` file, or an MCAP file whose profile is ``ros2``."""
    if path.is_dir() or path.suffix == ".db3":
        return True
    from hyperframes.ros.probe import is_ros2_mcap  # noqa: PLC0415

    return path.is_file() and is_ros2_mcap(path)


def _import_bag(args: argparse.Namespace) -> int:
    from hyperframes.ros import import_bag  # noqa: PLC0415 - MissingExtraError without rosbags

    if args.window_ms is None:
        raise ValueError("a rosbag2 needs a window length: pass --window-ms")
    print(import_bag(args.input, args.output, **_import_options(args)).summary())
    return 0


def _import(args: argparse.Namespace) -> int:
    if _is_rosbag(args.input):
        return _import_bag(args)
    _require_mcap()
    from hyperframes.mcap.ingest import import_mcap  # noqa: PLC0415

    print(import_mcap(args.input, args.output, **_import_options(args)).summary())
    return 0


def register(subparsers: Any) -> None:
    """Add ``export`` and ``import`` to the ``hyperframes`` parser."""
    p = subparsers.add_parser(
        "export", help="write hyperframe files as one MCAP file (opens in Foxglove)"
    )
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE",
                   help="consecutive segments (files or s3:// URLs)")  # fmt: skip
    p.add_argument("--mcap", type=Path, metavar="OUT.mcap", help="output file")
    p.add_argument(
        "--profile", choices=["foxglove", "ros2"], default="foxglove",
        help="foxglove (default: protobuf/JSON for Foxglove) or ros2 (sensor_msgs in CDR, "
        "for rosbags and ros2 bag; needs the ros extra)",
    )  # fmt: skip
    p.add_argument(
        "--rosbag2", type=Path, metavar="DIR",
        help="write a rosbag2 directory (mcap storage, metadata.yaml); implies --profile ros2",
    )  # fmt: skip
    p.add_argument("--streams", nargs="+", metavar="NAME", help="streams to export (default all)")
    p.add_argument(
        "--from", dest="start", metavar="T",
        help="start: seconds from the recording start, ns since the epoch, or ISO 8601",
    )  # fmt: skip
    p.add_argument("--to", dest="end", metavar="T", help="end (inclusive), same forms as --from")
    p.add_argument(
        "--compression", choices=["zstd", "lz4", "none"], default="zstd",
        help="chunk compression (default zstd; lz4 is ~4x faster, JPEG gains little either way)",
    )  # fmt: skip
    p.add_argument("--chunk-mb", type=float, default=4.0, help="chunk size in MiB (default 4)")
    p.add_argument("--no-events", action="store_true", help="leave out /hyperframes/events")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=_export)

    p = subparsers.add_parser(
        "import",
        help="write an MCAP file or a ROS 2 bag (directory, .mcap, .db3) as a hyperframe file",
    )
    p.add_argument("input", type=Path, metavar="IN.mcap|BAG")
    p.add_argument("output", type=Path, metavar="OUT.hf")
    p.add_argument(
        "--window-ms", type=float,
        help="window length (default: the window of a file hyperframes exported)",
    )  # fmt: skip
    p.add_argument(
        "--map", action="append", default=[], metavar="TOPIC=STREAM",
        help="import TOPIC as stream STREAM (repeatable); with --map only mapped topics "
        "are imported unless --all-topics",
    )  # fmt: skip
    p.add_argument("--all-topics", action="store_true", help="also import unmapped topics")
    p.add_argument(
        "--time", choices=["header", "log"], default="header",
        help="frame time: the capture time in the message (header, default) or the log time",
    )  # fmt: skip
    p.add_argument(
        "--max-delay-ms", type=float, default=500.0,
        help="how far (log time) a frame may trail its window before it is written LATE "
        "(default 500)",
    )  # fmt: skip
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_import)
