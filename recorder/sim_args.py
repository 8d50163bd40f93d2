"""The options of ``hyperframes sim``, in a module of their own.

Both the recorder's CLI (:mod:`hyperframes.recorder.cli`, which must stay light:
it is imported on every ``hyperframes`` command) and the simulator's own
``python -m hyperframes.recorder.sim`` build their parser from here, so neither
imports the other.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_sim_arguments"]


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``hyperframes sim`` options (for a CLI that builds its own parser)."""
    parser.add_argument("--config", required=True, help="vehicle config (YAML)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="sensor seconds to send (default 10; 0 = until Ctrl-C)",
    )
    parser.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        help="send X times faster than real time (inf = as fast as possible)",
    )
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="STREAM",
        help="silence STREAM for the middle third of the run (repeatable)",
    )
    parser.add_argument(
        "--jitter-ms", type=float, default=0.0, help="gaussian timestamp jitter, sigma in ms"
    )
    parser.add_argument(
        "--reorder", action="store_true", help="occasionally swap two adjacent frames of a stream"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (payloads, faults)")
    parser.add_argument(
        "--curve-key",
        type=Path,
        metavar="FILE",
        help="a client's NAME.key_secret, for zmq sockets with curve (hyperframes keygen)",
    )
    parser.add_argument(
        "--curve-server-key",
        type=Path,
        metavar="FILE",
        help="the recorder's public NAME.key (default: beside the config's curve.secret_key)",
    )
