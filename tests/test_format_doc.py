"""docs/FORMAT.md names every codec the library writes (issue 16, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

from hyperframes.format.codecs import CODEC_NAMES

FORMAT = Path(__file__).resolve().parents[1] / "docs" / "FORMAT.md"


def _row(prefix: str) -> str:
    (line,) = [x for x in FORMAT.read_text().splitlines() if x.startswith(prefix)]
    return line


def test_frame_flags_table_lists_every_codec_id() -> None:
    cell = _row("| 4-7 | CODEC |").split("|")[3].split(";")[0]
    listed = {int(n) for n in re.findall(r"\b(\d+) [a-zA-Z]", cell)}
    assert listed == set(CODEC_NAMES), cell


def test_payload_table_lists_every_codec_id() -> None:
    text = FORMAT.read_text()
    table = text[text.index("## Stored payloads and codecs") :].split("\n\n")[1]
    ids = {int(line.split("|")[2]) for line in table.splitlines()[2:]}
    assert ids == set(CODEC_NAMES), table
