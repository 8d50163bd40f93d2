"""``hyperframes convert``: registered through the ``hyperframes.commands`` entry point.

Nothing optional is imported here: the command's handler imports the
converter when it runs, so ``hyperframes --help`` works without the extras.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hyperframes.cli.common import run_handler

__all__ = ["register", "add_arguments", "main"]

EXIT_USAGE = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``convert`` options (for a CLI that builds its own parser)."""
    p.add_argument("inputs", nargs="*", type=Path, metavar="INPUT", help="finalized .hf files")
    p.add_argument("--out", type=Path, help="output directory (required unless --check-config)")
    p.add_argument("--inbox", type=Path, help="convert every finalized *.hf in this directory")
    p.add_argument(
        "--watch",
        action="store_true",
        help="keep converting new files arriving in --inbox (stop with Ctrl-C/SIGTERM)",
    )
    p.add_argument("--config", type=Path, help="conversion YAML (see configs/convert-example.yaml)")
    p.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="STREAM",
        help="leave STREAM (name or id) exactly as it is (repeatable)",
    )
    p.add_argument("--encoder", choices=["auto", "nvenc", "x265"], help="override video.encoder")
    p.add_argument("--workers", type=int, help="archives at once, local pool (batch.workers)")
    p.add_argument("--psnr-floor", type=float, metavar="DB", help="override verify.psnr_floor_db")
    p.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run as Ray tasks: auto (this machine's cluster, else a local instance) "
        "or a cluster address; needs hyperframes-sensors[cluster]",
    )
    p.add_argument(
        "--follow-links",
        action="store_true",
        help="convert inbox entries that are symbolic links (default: ignored, listed in the "
        "summary)",
    )
    p.add_argument("--ledger", type=Path, help="JSON Lines ledger (default OUT/ledger.jsonl)")
    p.add_argument(
        "--show-ledger",
        action="store_true",
        help="print the ledger of --out (a directory or s3://) as JSON Lines, in order, and exit",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="failures and the summary only")
    p.add_argument(
        "--check-config",
        action="store_true",
        help="validate the config, print it with defaults filled in, and exit",
    )


def _convert(args: argparse.Namespace) -> int:
    from hyperframes.converter.config import ConvertConfig, load_config  # noqa: PLC0415
    from hyperframes.converter.directory.inbox import BatchOptions, run_batch  # noqa: PLC0415
    from hyperframes.converter.errors import ConfigError, ConverterError  # noqa: PLC0415

    try:
        cfg = load_config(args.config) if args.config else ConvertConfig()
        cfg = cfg.with_overrides(
            encoder=args.encoder,
            workers=args.workers,
            keep=args.keep,
            psnr_floor_db=args.psnr_floor,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check_config:
        doc: dict[str, Any] = cfg.to_dict()
        print(json.dumps(doc, indent=2))
        return 0
    if args.out is None:
        print("error: --out DIR is required", file=sys.stderr)
        return EXIT_USAGE
    from hyperframes.converter.bucket.store import as_url  # noqa: PLC0415

    if args.show_ledger or any(as_url(p) for p in (args.out, args.inbox, *args.inputs)):
        from hyperframes.converter.bucket.cli import main as bucket_main  # noqa: PLC0415 - s3:// URLs

        return bucket_main(args, cfg)
    opts = BatchOptions(
        out=args.out,
        config=cfg,
        inputs=tuple(args.inputs),
        inbox=args.inbox,
        watch=args.watch,
        ledger=args.ledger,
        ray=args.ray,
        quiet=args.quiet,
        follow_links=args.follow_links,
    )
    try:
        return run_batch(opts)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConverterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def register(subparsers: Any) -> None:
    """Add ``convert`` to the ``hyperframes`` parser."""
    p = subparsers.add_parser(
        "convert",
        help="re-encode archives to ZSTD and H.265, verified (one host or a Ray cluster)",
        description="Convert finalized hyperframe archives: camera streams to H.265, other "
        "streams losslessly to ZSTD; each output verified before it gets its name.",
    )
    add_arguments(p)
    p.set_defaults(handler=_convert)


def main(argv: list[str] | None = None) -> int:
    """``python -m hyperframes.converter.cli`` (the same as ``hyperframes convert``)."""
    parser = argparse.ArgumentParser(prog="hyperframes convert")
    add_arguments(parser)
    return run_handler(_convert, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
