"""``hyperframes sync-report FILE --ref STREAM``, registered through ``hyperframes.commands``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hyperframes.reader import HyperframeReader
from hyperframes.sync.report import sync_report

__all__ = ["register"]


def _sync_report(args: argparse.Namespace) -> int:
    tolerance = None if args.tolerance_ms is None else round(args.tolerance_ms * 1e6)
    with HyperframeReader(args.file, verify=False) as r:
        try:
            report = sync_report(
                r,
                args.ref,
                method=args.method,
                tolerance_ns=tolerance,
                anchor=args.anchor,
                allow_mixed_clocks=args.allow_mixed_clocks,
            )
        except KeyError as exc:  # an unknown stream: the message lists the streams
            print(f"error: {exc.args[0]}", file=sys.stderr)
            return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format_text())
    return 0


def register(subparsers: Any) -> None:
    """Add ``sync-report`` to the ``hyperframes`` parser."""
    p = subparsers.add_parser(
        "sync-report",
        help="alignment error tails per stream pair, drops, gaps and missing windows",
        description="Match every frame of the reference stream against each other stream and "
        "report the error max/p99/p50 and histogram, plus per-stream counter gaps, late and "
        "quarantined frames and windows where a stream is missing.",
    )
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--ref", required=True, metavar="STREAM", help="reference stream (name)")
    p.add_argument(
        "--method",
        choices=["nearest", "interval"],
        default="nearest",
        help="match instants (default) or exposure/scan intervals",
    )
    p.add_argument(
        "--tolerance-ms",
        type=float,
        default=None,
        help="matches further apart count as unmatched (default: none)",
    )
    p.add_argument(
        "--anchor",
        choices=["start", "center", "end"],
        default="start",
        help="what a timestamp marks in its exposure/scan (interval method)",
    )
    p.add_argument(
        "--allow-mixed-clocks",
        action="store_true",
        help="also match host-stamped against hardware-stamped streams (flagged)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_sync_report)
