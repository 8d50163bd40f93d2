"""The ``serve`` subcommand of ``hyperframes``: play a drive to Foxglove (docs/LIVE.md).

Registered through the ``hyperframes.commands`` entry point
(``hyperframes.cli.live:register``). foxglove-sdk (the ``live`` extra) is imported
only when the command runs; without it the command says how to install it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from hyperframes._install import install_hint
from hyperframes.cli.common import CommandError

__all__ = ["register"]


def _serve(args: argparse.Namespace) -> int:
    try:
        from hyperframes.live.serve import serve  # noqa: PLC0415
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "foxglove":
            raise
        hint = install_hint("live")
        raise CommandError(f"'serve' needs foxglove-sdk; install it with {hint}") from None
    if args.speed <= 0:
        raise CommandError("--speed must be > 0")
    player = serve(args.path, host=args.host, port=args.port, streams=args.streams,
                   speed=args.speed)  # fmt: skip
    try:
        span = (player.end_ns - player.start_ns) / 1e9
        print(
            f"serving {len(player.segments)} file(s), {len(player.streams)} streams, "
            f"{span:.1f} s on ws://{args.host}:{player.port} (Foxglove: open connection, "
            "Foxglove WebSocket); Ctrl-C stops",
            file=sys.stderr,
        )
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        player.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``hyperframes`` parser."""
    p = subparsers.add_parser(
        "serve", help="play a drive to Foxglove over its WebSocket protocol (play, pause, seek)"
    )
    p.add_argument(
        "path",
        metavar="PATH",
        help="a .hf file, a drive directory, a glob, or an s3:// prefix/glob",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others: no authentication, "
                        "prefer an SSH tunnel)")  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    p.add_argument("--streams", nargs="+", metavar="NAME", help="streams to serve (default all)")
    p.add_argument("--speed", type=float, default=1.0, help="initial playback speed (default 1)")
    p.set_defaults(handler=_serve)
