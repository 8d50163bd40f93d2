"""The ``plot`` and ``show`` subcommands of ``hyperframes`` (pictures of a recording).

Registered through the ``hyperframes.commands`` entry point
(``hyperframes.cli.viz:register``). matplotlib is imported only when a
command runs; without it the command says which extra to install.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hyperframes.cli.common import input_path

__all__ = ["register"]


def _plot(args: argparse.Namespace) -> int:
    from hyperframes.viz.plot import plot_files  # noqa: PLC0415

    result = plot_files(
        args.files,
        args.output,
        streams=args.streams,
        start=args.start,
        end=args.end,
        sync_ref=args.sync,
        overwrite=args.force,
    )
    print(result)
    return 0


def _show(args: argparse.Namespace) -> int:
    from hyperframes.viz.show import show_window  # noqa: PLC0415

    result = show_window(
        args.file,
        args.output,
        window=args.window,
        streams=args.streams,
        decoder=args.decoder,
        overwrite=args.force,
    )
    print(result)
    return 0


def register(subparsers: Any) -> None:
    """Add ``plot`` and ``show`` to the ``hyperframes`` parser."""
    p = subparsers.add_parser(
        "plot", help="timeline of a recording: frames, windows, gaps, late/quarantined frames"
    )
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE",
                   help="consecutive segments (files or s3:// URLs)")  # fmt: skip
    p.add_argument("-o", "--output", type=Path, default=Path("timeline.png"),
                   help="PNG to write (default timeline.png)")  # fmt: skip
    p.add_argument("--streams", nargs="+", metavar="NAME", help="streams to show (default all)")
    p.add_argument(
        "--from",
        dest="start",
        metavar="T",
        help="start: seconds from the recording start, ns since the epoch, or ISO 8601",
    )
    p.add_argument("--to", dest="end", metavar="T", help="end, same forms as --from")
    p.add_argument(
        "--sync",
        metavar="REF",
        help="add histograms of each stream's nearest-frame time error against REF",
    )
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_plot)

    p = subparsers.add_parser(
        "show", help="contact sheet of one window: cameras, lidar from above, IMU traces"
    )
    p.add_argument("file", type=input_path, metavar="FILE", help="a file or s3:// URL")
    p.add_argument(
        "--window",
        type=int,
        default=0,
        metavar="N",
        help="window position in the file, 0-based; negative counts from the end",
    )
    p.add_argument("-o", "--output", type=Path, default=Path("window.png"),
                   help="PNG to write (default window.png)")  # fmt: skip
    p.add_argument("--streams", nargs="+", metavar="NAME", help="streams to show (default all)")
    p.add_argument(
        "--decoder",
        default="cpu",
        help="H.265 decoder of the video layer: cpu (default), nvdec, auto",
    )
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_show)
