"""The recorder's subcommands of ``hyperframes``: record, upload, check-config, keygen, mark,
sim.

Registered through the ``hyperframes.commands`` entry point
(``hyperframes.recorder.cli:register``), so the core ``hyperframes`` package never imports
the recorder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hyperframes.recorder.sim_args import add_sim_arguments

__all__ = ["register"]


def _record(args: argparse.Namespace) -> int:
    from hyperframes.recorder.config import ConfigError, load_config  # noqa: PLC0415
    from hyperframes.recorder.daemon import record_main  # noqa: PLC0415
    from hyperframes.recorder.sdnotify import setup_logging  # noqa: PLC0415

    setup_logging(args.log_level, force=True)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return record_main(cfg, args.seconds)
    except ConfigError as exc:  # a file the config names (key, CA, password) is unusable
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _upload(args: argparse.Namespace) -> int:
    from hyperframes.recorder.config import ConfigError, load_config  # noqa: PLC0415
    from hyperframes.recorder.sdnotify import setup_logging  # noqa: PLC0415
    from hyperframes.recorder.upload.main import upload_main  # noqa: PLC0415

    setup_logging(args.log_level, force=True)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return upload_main(cfg, once=args.once)


def _check_config(args: argparse.Namespace) -> int:
    from hyperframes.recorder.config import check_config_main  # noqa: PLC0415

    return check_config_main([str(args.file)])


def _keygen(args: argparse.Namespace) -> int:
    from hyperframes.recorder.ingest.curve import keygen_main  # noqa: PLC0415

    return keygen_main(args)


def _sim(args: argparse.Namespace) -> int:
    from hyperframes.recorder.config import ConfigError, load_config  # noqa: PLC0415
    from hyperframes.recorder.sim import run_sim  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result: int = run_sim(cfg, args)
    return result


def _mark(args: argparse.Namespace) -> int:
    from hyperframes.events import EventError, check_event_name  # noqa: PLC0415
    from hyperframes.recorder.config import load_config  # noqa: PLC0415
    from hyperframes.recorder.events.control import request  # noqa: PLC0415

    check_event_name(args.name)
    tags: dict[str, str] = {}
    for item in args.tag:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EventError(f"--tag {item!r} must be KEY=VALUE")
        tags[key] = value
    cfg = load_config(args.config)
    body: dict[str, Any] = {"op": "mark", "name": args.name, "tags": tags}
    for key, value in (("pre_s", args.pre), ("post_s", args.post), ("note", args.note)):
        if value is not None:
            body[key] = value
    sock = args.socket or cfg.events.control_socket
    reply = request(sock, body)
    if not reply.get("ok"):
        raise EventError(f"the recorder refused the event: {reply.get('error', reply)}")
    print(f"marked {reply['name']} on {cfg.vehicle_id} at t={reply['t_ns']} ns: keeps "
          f"{reply['pre_s']:g} s before and {reply['post_s']:g} s after"
          + (" (QUARANTINED: its time is far from the sensors' clock)"
             if reply.get("quarantined") else ""))  # fmt: skip
    return 0


def register(subparsers: Any) -> None:
    """Add ``record``, ``check-config``, ``keygen``, ``mark`` and ``sim`` to ``hyperframes``."""
    p = subparsers.add_parser("record", help="run the recorder in the foreground")
    p.add_argument("--config", required=True, type=Path, help="vehicle YAML config")
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stop after N seconds (demos, tests); default: until SIGTERM",
    )
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])  # fmt: skip
    p.set_defaults(handler=_record)

    p = subparsers.add_parser(
        "upload", help="upload finalized segments to s3:// or a directory (the upload: section)"
    )
    p.add_argument("--config", required=True, type=Path, help="vehicle YAML config")
    p.add_argument("--once", action="store_true", help="one pass over what is there, then exit")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])  # fmt: skip
    p.set_defaults(handler=_upload)

    p = subparsers.add_parser("check-config", help="validate a vehicle config and summarise it")
    p.add_argument("file", type=Path, metavar="FILE")
    p.set_defaults(handler=_check_config)

    p = subparsers.add_parser("keygen", help="write a CURVE key pair for ZeroMQ (NAME.key, "
                              "NAME.key_secret)")  # fmt: skip
    p.add_argument("dir", type=Path, metavar="DIR", help="directory to write the two files in")
    p.add_argument("name", metavar="NAME", help="e.g. recorder, or the driver's name")
    p.set_defaults(handler=_keygen)

    p = subparsers.add_parser(
        "mark", help="mark an event on the running recorder: keep what surrounds this moment"
    )
    p.add_argument("name", help="event name (letters, digits, _ . : -), e.g. bookmark")
    p.add_argument("--config", required=True, type=Path, help="vehicle YAML config")
    p.add_argument("--pre", type=float, metavar="S", help="seconds to keep before (default: YAML)")
    p.add_argument("--post", type=float, metavar="S", help="seconds to keep after (default: YAML)")
    p.add_argument("--tag", action="append", default=[], metavar="K=V", help="a tag (repeatable)")
    p.add_argument("--note", metavar="TEXT", help="a free-text note (stored as the tag note)")
    p.add_argument("--socket", type=Path, help="control socket (default: events.control_socket)")
    p.set_defaults(handler=_mark)

    p = subparsers.add_parser("sim", help="publish synthetic sensor traffic for a vehicle config")
    add_sim_arguments(p)
    p.set_defaults(handler=_sim)

    from hyperframes.recorder.request_cli import register as register_request  # noqa: PLC0415

    register_request(subparsers)
