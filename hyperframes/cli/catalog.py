"""``hyperframes catalog``: build a fleet catalog, ask it questions, snapshot a training set.

Registered through the ``hyperframes.commands`` entry point
(``hyperframes.cli.catalog:register``). DuckDB and pyarrow (the ``catalog``
extra) are imported only when a subcommand runs; without them it says which
extra to install.

``catalog build`` exits 0 when every segment listed was cataloged, damaged
ones included (they are ``problems`` rows: the catalog is right about them;
the summary counts them), and 1 when some could not be cataloged now (the
store failed, an object changed while being read): the next run reads them
again. Every subcommand exits 2 for a question it cannot ask (bad SQL, a bad
time, a root that is no catalog or of a newer version), with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperframes.cli.common import EXIT_FAILED, EXIT_OK, CommandError, progress, progress_done

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["register", "EVENT_COLUMNS"]

EVENT_COLUMNS = ("time", "vehicle", "name", "pre_s", "post_s", "source", "note", "event_id")
"""The columns ``catalog events`` shows people (``--json``/``--csv`` give every column)."""


def _print_table(args: argparse.Namespace, table: pa.Table, columns: Any = None) -> None:
    from hyperframes.cli import tabular  # noqa: PLC0415

    if args.json:
        print(tabular.to_json(table))
    elif args.csv:
        sys.stdout.write(tabular.to_csv(table))
    else:
        print(tabular.to_text(table, columns))


def _streams(text: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in (text or "").split(",") if s.strip())


def _build(args: argparse.Namespace) -> int:
    from hyperframes.catalog.build import build  # noqa: PLC0415

    t0 = time.monotonic()

    def shown(done: int, total: int) -> None:
        progress(f"{done}/{total} segments read, {time.monotonic() - t0:.0f} s")

    report = build(args.sources, args.catalog, workers=args.workers, progress=shown, full=args.full)
    progress_done()
    if args.json:
        import json  # noqa: PLC0415

        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(
            f"cataloged {args.catalog}: {report.listed} segments listed, {report.read} read, "
            f"{report.skipped} unchanged, {report.problems} problems, {report.failed} failed; "
            f"{report.events} events, {report.parts} parts written in {report.seconds:.1f} s"
            + (
                f" ({report.requests_per_segment:.1f} requests per segment)"
                if report.requests
                else ""
            )
        )
        for line in report.errors:
            print(f"  not cataloged now: {line}", file=sys.stderr)
        if report.problems:
            print(
                f"  {report.problems} damaged segments are listed in the problems view: "
                f"hyperframes catalog query {args.catalog} "
                '"SELECT uri, problem FROM problems"',
                file=sys.stderr,
            )
    return EXIT_FAILED if report.failed else EXIT_OK


def _query(args: argparse.Namespace) -> int:
    from hyperframes.catalog.query import run_sql  # noqa: PLC0415
    from hyperframes.catalog.views import open_catalog  # noqa: PLC0415

    with open_catalog(args.root) as con:
        table = run_sql(con, args.sql)
    _print_table(args, table)
    return EXIT_OK


def _events_query(args: argparse.Namespace) -> Any:
    from hyperframes.catalog.query import EventsQuery  # noqa: PLC0415

    if args.limit is not None and args.limit < 0:
        raise ValueError(f"--limit must be >= 0, got {args.limit}")
    return EventsQuery(
        args.vehicle, args.name, args.since, args.until, _streams(args.with_streams), args.limit
    )


def _events(args: argparse.Namespace) -> int:
    from hyperframes.catalog.query import run_sql  # noqa: PLC0415
    from hyperframes.catalog.sql import events_sql  # noqa: PLC0415
    from hyperframes.catalog.views import open_catalog  # noqa: PLC0415

    sql, params = events_sql(_events_query(args).resolve())
    with open_catalog(args.root) as con:
        table = run_sql(con, sql, params)
    _print_table(args, table, EVENT_COLUMNS)
    return EXIT_OK


def _snapshot(args: argparse.Namespace) -> int:
    from hyperframes.catalog.manifest import snapshot  # noqa: PLC0415
    from hyperframes.catalog.views import open_catalog  # noqa: PLC0415

    flags = [
        f"--{f.replace('_streams', '')}"
        for f in ("vehicle", "name", "since", "until", "with_streams", "limit")
        if getattr(args, f) is not None
    ]
    if args.sql is not None and flags:
        raise CommandError(f"give --sql or the event flags, not both ({', '.join(flags)})")
    asked = args.sql if args.sql is not None else _events_query(args)
    with open_catalog(args.root) as con:
        n = snapshot(
            con,
            asked,
            args.output,
            pre_s=args.pre,
            post_s=args.post,
            streams=_streams(args.streams) or None,
            copies=args.copies,
            overwrite=args.force,
        )
    print(f"wrote {args.output}: {n} clips (one per event and segment)")
    return EXIT_OK


def _plot(args: argparse.Namespace) -> int:
    from hyperframes.catalog.plot import plot_coverage  # noqa: PLC0415
    from hyperframes.catalog.views import open_catalog  # noqa: PLC0415

    with open_catalog(args.root) as con:
        result = plot_coverage(
            con, args.output, vehicles=args.vehicle, since=args.since, overwrite=args.force
        )
    print(result)
    return EXIT_OK


def _compact(args: argparse.Namespace) -> int:
    from hyperframes.catalog.schema import TABLES  # noqa: PLC0415
    from hyperframes.catalog.store import CatalogRoot  # noqa: PLC0415

    root = CatalogRoot.open(args.root)
    done = {table: root.compact(table) for table in TABLES}
    print(f"compacted {root.url}: " + ", ".join(f"{t} {n} parts merged" for t, n in done.items()))
    return EXIT_OK


def _output_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="a JSON array of objects")
    g.add_argument("--csv", action="store_true", help="CSV with a header row")


def _event_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vehicle", metavar="V", help="only this vehicle's events")
    p.add_argument("--name", metavar="N", help="only events called N (hard_brake, ...)")
    p.add_argument(
        "--since",
        metavar="T",
        help="at or after T: 7d, 36h, 90m back from now, an ISO date or time",
    )
    p.add_argument(
        "--until", metavar="T", help="before T, same forms (a bare date includes that day)"
    )
    p.add_argument(
        "--with",
        dest="with_streams",
        metavar="A,B",
        help="only events whose segments recorded every one of these streams",
    )
    p.add_argument("--limit", type=int, metavar="N", help="at most N events")


def register(subparsers: Any) -> None:
    """Add ``catalog`` (build, query, events, snapshot, plot, compact) to ``hyperframes``."""
    top = subparsers.add_parser(
        "catalog", help="fleet catalog: Parquet tables of segments and events, DuckDB queries"
    )
    sub = top.add_subparsers(dest="catalog_command", metavar="COMMAND", required=True)

    p = sub.add_parser("build", help="catalog the segments of directories or s3:// prefixes")
    p.add_argument(
        "sources", nargs="+", metavar="SRC", help="directories, files, globs or s3://bucket/prefix/"
    )
    p.add_argument(
        "--catalog",
        required=True,
        metavar="ROOT",
        help="the catalog root: a directory or s3://bucket/prefix (made if missing)",
    )
    p.add_argument("--full", action="store_true", help="read every segment again")
    p.add_argument("--workers", type=int, default=8, metavar="N", help="segments read at once")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(handler=_build)

    p = sub.add_parser("query", help="run SQL over the views (segments, streams, events, ...)")
    p.add_argument("root", metavar="ROOT", help="the catalog root (directory or s3://)")
    p.add_argument("sql", metavar="SQL")
    _output_flags(p)
    p.set_defaults(handler=_query)

    p = sub.add_parser("events", help="events by vehicle, name, time and recorded streams")
    p.add_argument("root", metavar="ROOT", help="the catalog root (directory or s3://)")
    _event_flags(p)
    _output_flags(p)
    p.set_defaults(handler=_events)

    p = sub.add_parser("snapshot", help="a manifest pinning the clips of a question's events")
    p.add_argument("root", metavar="ROOT", help="the catalog root (directory or s3://)")
    p.add_argument(
        "--sql",
        metavar="SQL",
        help="events (vehicle, t_ns, ...) or segments (uri) to pin; else the event flags choose",
    )
    _event_flags(p)
    p.add_argument(
        "--pre",
        type=float,
        metavar="S",
        help="seconds before each event (default: the event's own)",
    )
    p.add_argument(
        "--post",
        type=float,
        metavar="S",
        help="seconds after each event (default: the event's own)",
    )
    p.add_argument("--streams", metavar="A,B", help="the streams to read (default: all)")
    p.add_argument(
        "--copies",
        choices=("converted", "raw", "all"),
        default="converted",
        help="a segment both raw and converted: which copy (default converted)",
    )
    p.add_argument("-o", "--output", type=Path, required=True, help="the manifest to write")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_snapshot)

    p = sub.add_parser("plot", help="coverage timeline: recorded time, gaps, events")
    p.add_argument("root", metavar="ROOT", help="the catalog root (directory or s3://)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("coverage.png"),
        help="PNG to write (default coverage.png)",
    )
    p.add_argument("--vehicle", action="append", metavar="V", help="only V (repeatable)")
    p.add_argument("--since", metavar="T", help="only from T on (7d, an ISO date, ...)")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_plot)

    p = sub.add_parser("compact", help="merge each partition's part files into one")
    p.add_argument("root", metavar="ROOT", help="the catalog root (directory or s3://)")
    p.set_defaults(handler=_compact)
