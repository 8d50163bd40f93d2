"""Datasets over a drive: clips run on across segment boundaries, never across a gap."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from drive_files import WINDOW_NS, make_run, write_segments  # noqa: E402

from hyperframes.drive import open_drive  # noqa: E402
from hyperframes.torch import HyperframeDataset, SequenceDataset  # noqa: E402


def test_clips_cross_segments_but_not_gaps(tmp_path: Path) -> None:
    blocks = make_run(60, np.random.default_rng(21), streams=(2,))
    kept = blocks[:20] + blocks[40:]  # segments [0, 10), [10, 20); a 2 s gap; [40, 60)
    write_segments(tmp_path, kept, [10, 20])
    with open_drive(tmp_path) as drive:
        assert len(drive.gaps) == 1
        ds = SequenceDataset(drive, 4, streams=["imu"])
        plain = SequenceDataset(drive, 4, streams=["imu"], cross_files=False)
        steps = [[w for _, w in ds.windows_of(i)] for i in range(len(ds))]
        files = [{p for p, _ in ds.windows_of(i)} for i in range(len(ds))]
        gap_start = drive.gaps[0].start_ns // WINDOW_NS
        gap_end = drive.gaps[0].end_ns // WINDOW_NS
        assert any(len(f) == 2 for f in files)  # some clip crosses a segment boundary
        assert not any(c[0] < gap_start and c[-1] >= gap_end for c in steps)
        assert all(c == list(range(c[0], c[0] + 4)) for c in steps)  # no window skipped
        assert len(plain) < len(ds)
        assert all(len({p for p, _ in plain.windows_of(i)}) == 1 for i in range(len(plain)))
        windows = HyperframeDataset(drive, streams=["imu"])
        assert len(windows) == drive.window_count()
    clone = pickle.loads(pickle.dumps(ds))  # workers get paths, not the drive
    sample = clone[0]
    assert len(sample["steps"]) == 4 and sample["window_id"] == [w for _, w in ds.windows_of(0)]
