"""``hyperframes ls``, ``slice``, ``cat`` and ``du``: drives from the shell (docs/DRIVES.md).

Registered by :mod:`hyperframes.cli.main`. Handlers raise typed errors
(:class:`~hyperframes.errors.DriveError`, ``FileNotFoundError``,
``ValueError``...), which the main entry point turns into one-line messages.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperframes.drive import Drive, find_drives, open_drive
from hyperframes.drive.splice import CutResult, cat_files, slice_drive
from hyperframes.drive.usage import Usage, disk_usage
from hyperframes.errors import DriveError, HyperframesError
from hyperframes.format.times import format_utc as _iso
from hyperframes.format.times import parse_time

if TYPE_CHECKING:
    from hyperframes.catalog.manifest import ManifestEntry

__all__ = ["register"]


def _mb(n: int) -> str:
    if n < 10**6:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB" if n < 10**9 else f"{n / 1e9:.2f} GB"


def _progress(args: argparse.Namespace, what: str) -> Callable[[int, int], None] | None:
    """Progress on stderr for an interactive terminal (not with --quiet or --json)."""
    if getattr(args, "quiet", False) or getattr(args, "json", False) or not sys.stderr.isatty():
        return None
    t0 = time.monotonic()

    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(
            f"\r  {what} {done}/{total} ({time.monotonic() - t0:.1f} s)",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    return show


# --- ls ---------------------------------------------------------------------


def _drive_doc(d: Drive, segments: bool) -> dict[str, Any]:
    late = 0
    for i, s in enumerate(d.segments):
        if i in d._bad:
            continue
        try:
            late += s.late_windows()
        except HyperframesError as exc:
            d._mark_bad(i, exc)
    gaps = d.gaps
    doc: dict[str, Any] = {
        "vehicle": d.vehicle,
        "start_ns": d.start_ns,
        "end_ns": d.end_ns,
        "start": _iso(d.start_ns) if d.segments else None,
        "end": _iso(d.end_ns) if d.segments else None,
        "duration_s": (d.end_ns - d.start_ns) / 1e9,
        "segments": len(d.segments),
        "bytes": d.size,
        "frames": d.frame_count,
        "gaps": [
            {
                "start_ns": g.start_ns,
                "end_ns": g.end_ns,
                "duration_s": g.duration_ns / 1e9,
                "missing_segments": g.missing_segments,
            }
            for g in gaps
        ],
        "quarantined_frames": d.quarantined_count,
        "late_windows": late,
        "unfinished": [str(p) for p in d.unfinished],
        "damaged": [{"path": str(x.path), "what": x.what} for x in d.damaged],
        "damaged_dir": [str(p) for p in d.damaged_dir],
    }
    if segments:
        doc["segment_list"] = [
            {"path": str(s.path), "seq": s.name.seq if s.name else None, "start_ns": s.start_ns,
             "end_ns": s.end_ns, "bytes": s.size, "frames": s.header.frame_count}
            for s in d.segments
        ]  # fmt: skip
    return doc


def _ls(args: argparse.Namespace) -> int:
    docs = []
    for directory in args.dirs:
        for d in find_drives(directory):
            if args.vehicle is None or d.vehicle == args.vehicle:
                docs.append({"source": str(directory), **_drive_doc(d, args.segments)})
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    for doc in docs:
        _print_drive(doc)
    return 0


def _print_drive(doc: dict[str, Any]) -> None:
    gaps = doc["gaps"]
    gap_s = sum(g["duration_s"] for g in gaps)
    print(
        f"{doc['source']}: vehicle {doc['vehicle'] or '?'}, {doc['segments']} segments, "
        f"{_mb(doc['bytes'])}, {doc['frames']} frames"
    )
    if doc["segments"]:
        print(f"  {doc['start']} .. {doc['end']} ({doc['duration_s']:.1f} s)")
    print(
        f"  gaps: {len(gaps)}" + (f" ({gap_s:.1f} s)" if gaps else "")
        + f", quarantined frames: {doc['quarantined_frames']}, "
        f"windows with late frames: {doc['late_windows']}"
    )  # fmt: skip
    for g in gaps:
        lost = f", {g['missing_segments']} segments missing" if g["missing_segments"] else ""
        print(
            f"    gap {_iso(g['start_ns'])} .. {_iso(g['end_ns'])} ({g['duration_s']:.1f} s{lost})"
        )
    for p in doc["unfinished"]:
        print(f"  unfinished (not read): {p}  -> hyperframes recover {p}")
    for x in doc["damaged"]:
        print(f"  damaged (skipped): {x['path']}: {x['what']}")
    if doc["damaged_dir"]:
        print(f"  damaged/: {len(doc['damaged_dir'])} files")
        for p in doc["damaged_dir"]:
            print(f"    {p}")
    for s in doc.get("segment_list", []):
        print(
            f"  {Path(s['path']).name}  {_iso(s['start_ns'])} .. {_iso(s['end_ns'])}  "
            f"{_mb(s['bytes']):>9}  {s['frames']:>8} frames"
        )


# --- slice and cat ----------------------------------------------------------


def _report(args: argparse.Namespace, what: str, res: CutResult, t0: float) -> None:
    if args.json:
        print(
            json.dumps(
                {
                    "output": str(res.output),
                    "frames": res.frames,
                    "quarantined": res.quarantined,
                    "windows": res.windows,
                    "bytes": res.bytes,
                    "segments": res.segments,
                    "keyframe_starts": [
                        {
                            "stream": k.stream,
                            "keyframe_ns": k.keyframe_ns,
                            "before_start_s": k.before_ns / 1e9,
                        }
                        for k in res.keyframe_starts
                    ],
                    "verified": True,
                },
                indent=2,
            )
        )
        return
    for k in res.keyframe_starts:
        print(
            f"  {k.stream}: starts at the IDR at {_iso(k.keyframe_ns)}, "
            f"{k.before_ns / 1e9:.3f} s before --start (so its first frame decodes)"
        )
    print(
        f"{what} {res.output}: {res.frames} frames"
        + (f" (+{res.quarantined} quarantined)" if res.quarantined else "")
        + f", {res.windows} windows from {res.segments} segment{'' if res.segments == 1 else 's'}, "
        f"{_mb(res.bytes)} "
        f"in {time.monotonic() - t0:.1f} s; verified"
    )


def _slice(args: argparse.Namespace) -> int:
    if args.manifest is not None:
        if args.drive or args.start is not None or args.end is not None or args.stream:
            raise ValueError("--manifest takes no DRIVE, --start, --end or --stream")
        return _slice_manifest(args)
    if not args.drive or args.start is None or args.end is None:
        raise ValueError("slice needs DRIVE, --start and --end (or --manifest)")
    t0 = time.monotonic()
    with open_drive(_source(args.drive), vehicle=args.vehicle) as drive:
        start = parse_time(args.start, drive.start_ns)
        end = parse_time(args.end, drive.start_ns)
        if end < start:
            raise ValueError(f"--end {args.end} is before --start {args.start}")
        res = slice_drive(
            drive,
            start,
            end,
            args.output,
            streams=args.stream or None,
            overwrite=args.force,
            progress=_progress(args, "segments"),
        )
    _report(args, "wrote", res, t0)
    return 0


def _clips(entries: Sequence[ManifestEntry]) -> list[list[ManifestEntry]]:
    """The manifest's clips: an entry alone, or the consecutive entries of one event (an
    event whose range runs from one segment into the next is one clip)."""
    out: list[list[ManifestEntry]] = []
    for e in entries:
        if out and e.event_id is not None and out[-1][-1].event_id == e.event_id:
            out[-1].append(e)
        else:
            out.append([e])
    return out


def _clip_name(clip: Sequence[ManifestEntry], taken: set[str]) -> str:
    """``{vehicle}_{event name or 'clip'}_{start, UTC to the ms}.hf``, unique among ``taken``."""
    e = clip[0]
    start = min(x.start_ns for x in clip)
    stamp = _iso(start).replace("-", "").replace(":", "")
    parts = (e.vehicle or "vehicle", e.event_name or "clip", stamp)
    base = "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", x).strip("._-") or "x" for x in parts)
    name, n = f"{base}.hf", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.hf"
    taken.add(name)
    return name


def _checked_source(e: ManifestEntry, scratch: Path) -> str:
    """The entry's segment as a local path, checked against the manifest first (an object is
    downloaded into ``scratch``, only while its ETag is the manifest's)."""
    from hyperframes.catalog.errors import ManifestError  # noqa: PLC0415
    from hyperframes.catalog.manifest import open_entry  # noqa: PLC0415
    from hyperframes.storage.objects import (  # noqa: PLC0415
        classify_error,
        client_for,
        fail,
        is_url,
        split_s3_url,
    )

    open_entry(e, verify=False).close()
    if not is_url(e.uri):
        return e.uri
    bucket, key = split_s3_url(e.uri)
    local = scratch / f"{len(list(scratch.iterdir()))}" / key.rpartition("/")[2]
    local.parent.mkdir()
    cond = {"IfMatch": e.etag} if e.etag else {}
    try:
        body = client_for().get_object(Bucket=bucket, Key=key, **cond)["Body"]
        with local.open("wb") as out:
            while chunk := body.read(8 << 20):
                out.write(chunk)
    except Exception as exc:  # botocore raises many kinds
        why = classify_error(exc)
        if why.status == 412 or why.code == "PreconditionFailed":
            raise ManifestError(e.uri, "the object changed since the snapshot (ETag)") from None
        raise fail(e.uri, exc) from None
    return os.fspath(local)


def _slice_manifest(args: argparse.Namespace) -> int:
    """``slice --manifest SET.parquet -o OUTDIR``: every clip of a manifest as a file."""
    from hyperframes.catalog.manifest import read_manifest  # noqa: PLC0415

    t0 = time.monotonic()
    clips = _clips(read_manifest(args.manifest))
    out_dir: Path = args.output
    out_dir.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    done: list[dict[str, Any]] = []
    show = _progress(args, "clips")
    with tempfile.TemporaryDirectory(prefix="hf-slice-") as tmp:
        for i, clip in enumerate(clips):
            scratch = Path(tmp) / str(i)
            scratch.mkdir()
            sources = [_checked_source(e, scratch) for e in clip]
            streams = list(clip[0].streams) or None
            res = slice_drive(
                sources,
                min(e.start_ns for e in clip),
                max(e.end_ns for e in clip),
                out_dir / _clip_name(clip, taken),
                streams=streams,
                overwrite=args.force,
            )
            for s in sources:  # downloads go as soon as their clip is written
                if s.startswith(tmp):
                    with contextlib.suppress(OSError):
                        Path(s).unlink()
            done.append({"output": str(res.output), "uris": [e.uri for e in clip],
                         "event_id": clip[0].event_id, "frames": res.frames,
                         "bytes": res.bytes})  # fmt: skip
            if show is not None:
                show(i + 1, len(clips))
    if args.json:
        print(json.dumps({"clips": done, "verified": True}, indent=2))
    elif not args.quiet:
        frames = sum(d["frames"] for d in done)
        print(
            f"wrote {len(done)} clips into {out_dir}: {frames} frames, "
            f"{_mb(sum(d['bytes'] for d in done))} in {time.monotonic() - t0:.1f} s; verified"
        )
    return 0


def _source(items: list[str]) -> str | list[str]:
    return items[0] if len(items) == 1 else items


def _cat(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    files: list[Path] = []
    for f in args.files:
        if f.is_dir():  # a drive directory: its segments in drive order
            with open_drive(f, vehicle=args.vehicle) as d:
                if d.damaged:
                    x = d.damaged[0]
                    raise DriveError(x.path, f"damaged ({x.what}); cat the other segments by name")
                files += [s.path for s in d.segments]
        else:
            files.append(f)
    res = cat_files(files, args.output, overwrite=args.force, progress=_progress(args, "segments"))
    _report(args, "joined", res, t0)
    return 0


# --- du ---------------------------------------------------------------------


def _du(args: argparse.Namespace) -> int:
    files: list[Path] = []
    skipped: list[str] = []
    for p in args.paths:
        if Path(p).is_dir():
            for d in find_drives(p):
                files += [s.path for s in d.segments]
                skipped += [f"{x.path}: {x.what}" for x in d.damaged]
                skipped += [f"{u}: unfinished, not counted" for u in d.unfinished]
        else:
            files.append(Path(p))
    if not files:
        raise DriveError(" ".join(args.paths), "no finalized segment to count")
    show = _progress(args, "files")
    usage = disk_usage(files, None if show is None else lambda n: show(n, len(files)))
    if args.json:
        print(json.dumps({**usage.to_dict(), "skipped": skipped}, indent=2))
        return 0
    _print_usage(usage)
    for s in skipped:
        print(f"  skipped {s}", file=sys.stderr)
    return 0


def _print_usage(u: Usage) -> None:
    total = u.stored
    ratio = f"{u.raw / total:.2f}x" if total else "-"
    print(
        f"{u.files} files, {_mb(u.file_bytes)} on disk; payloads {_mb(total)} stored, "
        f"{_mb(u.raw)} raw ({ratio})"
    )
    for title, rows in (("stream", u.streams), ("kind", u.kinds), ("codec", u.codecs)):
        print(f"  {title:<20} {'frames':>9} {'stored':>11} {'raw':>11} {'share':>6} {'ratio':>6}")
        for r in sorted(rows.values(), key=lambda r: -r.stored):
            share = r.stored / total if total else 0.0
            rr = f"{r.raw / r.stored:.2f}x" if r.stored else "-"
            print(
                f"  {r.key:<20} {r.frames:>9} {_mb(r.stored):>11} {_mb(r.raw):>11} "
                f"{share:>6.1%} {rr:>6}"
            )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ls``, ``slice``, ``cat`` and ``du`` to the ``hyperframes`` command."""
    p = sub.add_parser("ls", help="list the drives in directories: span, segments, gaps, damage")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--vehicle", help="only this vehicle's drive")
    p.add_argument("-l", "--segments", action="store_true", help="list every segment too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_ls)

    times = (
        "times: seconds from the drive's start (90, +1.5), Unix seconds (1735689690.5), "
        "ns since the epoch, or ISO 8601 (2025-01-01T00:01:30Z)"
    )
    p = sub.add_parser(
        "slice",
        help="cut a time range out of a drive into one verified file (payloads copied as stored)",
        epilog=times,
    )
    p.add_argument("drive", nargs="*", metavar="DRIVE", help="a directory, a glob or files")
    p.add_argument("--start", metavar="T")
    p.add_argument("--end", metavar="T")
    p.add_argument(
        "--manifest", type=Path, metavar="SET.parquet",
        help="cut every clip of a catalog snapshot instead, each source checked against it; "
        "-o is then a directory",
    )  # fmt: skip
    p.add_argument("--stream", action="append", metavar="NAME", help="keep this stream (repeat)")
    p.add_argument(
        "--streams", dest="stream", action="extend", nargs="+", metavar="NAME",
        help="keep these streams",
    )  # fmt: skip
    p.add_argument("--vehicle", help="the vehicle, when DRIVE holds several")
    p.add_argument("-o", "--output", required=True, type=Path, metavar="OUT.hf|OUTDIR")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.set_defaults(handler=_slice)

    p = sub.add_parser("cat", help="join one vehicle's segments into one verified file")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="segments, or a directory")
    p.add_argument("--vehicle", help="the vehicle, when a directory holds several")
    p.add_argument("-o", "--output", required=True, type=Path, metavar="OUT.hf")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.set_defaults(handler=_cat)

    p = sub.add_parser("du", help="bytes per stream, kind and codec (stored and raw)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=_du)
