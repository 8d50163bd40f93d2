#!/usr/bin/env python3
"""``hyperframes import`` over the inputs of MCAP's conformance suite (run by hand).

The suite's ``.mcap`` inputs are generated (the repository keeps their ``.json``
record listings and Git LFS pointers); in a checkout of the mcap repository::

    cd tests/conformance && npm install tsx @mcap/core @foxglove/crc commander
    npx tsx scripts/generate-inputs.ts --data-dir /tmp/conformance

then::

    python bench/mcap_conformance.py /tmp/conformance --json path/to/mcap/tests/conformance/data

Each file is imported (100 ns windows: the suite's times are small integers) and
its frames compared with the ``Message`` records its ``.json`` lists; the
result is one line per outcome: complete, left out but reported, messages
lost, no message to import, refused (the error class), traceback.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

from hyperframes.mcap import import_mcap
from hyperframes.mcap.errors import EmptyRangeError, McapToolError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("inputs", type=Path, help="generated conformance .mcap files (searched)")
    ap.add_argument("--json", type=Path, required=True, help="the suite's data dir (.json)")
    ap.add_argument("-v", "--verbose", action="store_true", help="name every file not complete")
    args = ap.parse_args()
    tally: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(args.inputs.rglob("*.mcap")):
            listing = (args.json / f.relative_to(args.inputs)).with_suffix(".json")
            records = json.loads(listing.read_text())["records"]
            want = sum(1 for r in records if r["type"] == "Message")
            out = Path(tmp) / "out.hf"
            out.unlink(missing_ok=True)
            try:
                report = import_mcap(f, out, window_ns=100)
            except EmptyRangeError:
                outcome = "no message to import" if want == 0 else "messages lost (empty)"
            except McapToolError as exc:
                outcome = f"refused: {type(exc).__name__}: {exc.what}"[:120]
            except Exception as exc:  # counted: the point is to see them
                outcome = f"traceback: {type(exc).__name__}"
            else:
                left = sum(sum(r.values()) for r in getattr(report, "left_out", {}).values())
                if report.frames == want and not getattr(report, "problems", []):
                    outcome = "complete"
                elif report.frames + left == want:
                    outcome = "left out, reported"
                else:
                    outcome = "messages lost"
            tally[outcome.split(":")[0] if not args.verbose else outcome] += 1
            if args.verbose and outcome != "complete":
                print(f"{outcome}  {f.name}")
    for outcome, n in tally.most_common():
        print(f"{n:5d}  {outcome}")
    print(f"{sum(tally.values()):5d}  files")


if __name__ == "__main__":
    main()
