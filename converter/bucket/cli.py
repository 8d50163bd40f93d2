"""``hyperframes convert`` with ``s3://`` URLs, and ``--show-ledger``: arguments to
:func:`hyperframes.converter.bucket.inbox.run_bucket_batch`, errors as one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hyperframes.converter.batch.ledger import LEDGER_FILE, ledger_records
from hyperframes.converter.batch.loop import EXIT_FAILED, EXIT_OK
from hyperframes.converter.bucket.inbox import BucketOptions, run_bucket_batch
from hyperframes.converter.bucket.ledger import read_ledger
from hyperframes.converter.bucket.store import as_url
from hyperframes.converter.config import ConvertConfig
from hyperframes.converter.errors import ConfigError
from hyperframes.errors import HyperframesError

__all__ = ["main"]


def _show_ledger(args: Any) -> int:
    url = as_url(args.ledger) or as_url(args.out)
    if url is not None:
        records = read_ledger(url)
    else:
        path = Path(args.ledger or Path(args.out) / LEDGER_FILE)
        if not path.is_file():
            raise ConfigError("--out", f"{path}: no ledger there")
        records = ledger_records(path)
    for doc in records:
        sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    return EXIT_OK


def main(args: Any, config: ConvertConfig) -> int:
    """``hyperframes convert`` when ``--out``, ``--inbox`` or an input is an ``s3://`` URL,
    or with ``--show-ledger``; errors are one line, like the local batch's."""
    try:
        if args.show_ledger:
            return _show_ledger(args)
        out = as_url(args.out)
        inbox = as_url(args.inbox) if args.inbox is not None else None
        inputs = [as_url(p) for p in args.inputs]
        local = [
            what
            for what, url in (
                ("--out", out),
                ("--inbox", inbox if args.inbox else ""),
                *(("INPUT", u) for u in inputs),
            )
            if url is None
        ]
        if local:
            raise ConfigError(
                local[0],
                "mixes a local path with s3:// URLs: give --out, --inbox and every INPUT "
                "as s3:// URLs, or all as local paths",
            )
        opts = BucketOptions(
            out=str(out),
            config=config,
            inputs=tuple(str(u) for u in inputs),
            inbox=inbox,
            watch=args.watch,
            ledger=None if args.ledger is None else (as_url(args.ledger) or str(args.ledger)),
            ray=args.ray,
            quiet=args.quiet,
        )
        return run_bucket_batch(opts)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except HyperframesError as exc:  # the store failed or refused (converter errors included)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
