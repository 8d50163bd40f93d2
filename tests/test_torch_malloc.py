"""tune_malloc: glibc keeps freed batch buffers, so the next batch does not fault them in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from hyperframes.torch import tune_malloc
from hyperframes.torch.malloc import glibc_version

# Batches of four 2 MiB frames, written and dropped together, as a DataLoader worker's
# decode + collate does; prints the page faults of the last 20 batches.
_CHILD = """
import json, resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from hyperframes.torch import tune_malloc
    assert tune_malloc() is True
def batches(n):
    for _ in range(n):
        kept = [np.empty(2 << 20, np.uint8) for _ in range(4)]
        for a in kept:
            a.fill(1)
        del kept
batches(5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
batches(20)
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
"""

glibc = pytest.mark.skipif(glibc_version() is None, reason="glibc's mallopt only")


def faults(variant: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, variant], capture_output=True, text=True, check=True
    )
    return int(json.loads(out.stdout))


@glibc
def test_tuned_heap_keeps_freed_batches() -> None:
    default, tuned = faults("default"), faults("tuned")
    # glibc's defaults give part of the 8 MiB freed per batch back to the kernel and fault it
    # in again on the next (~2,500 faults in 20 batches here); tuned, the heap keeps it all
    assert default > 1000, default
    assert tuned < default // 20, (default, tuned)


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"mmap_threshold_mb": 0}, "mmap_threshold_mb must be an integer from 1 to 32, got 0"),
        ({"mmap_threshold_mb": 33}, "mmap_threshold_mb must be an integer from 1 to 32, got 33"),
        ({"trim_threshold_mb": 2048}, "trim_threshold_mb must be an integer from 1 to 2047"),
        ({"trim_threshold_mb": True}, "trim_threshold_mb must be an integer"),
        ({"trim_threshold_mb": 1.5}, "trim_threshold_mb must be an integer"),
    ],
)
def test_thresholds_out_of_range(kw: dict[str, object], what: str) -> None:
    with pytest.raises(ValueError, match=what):
        tune_malloc(**kw)  # type: ignore[arg-type]


def test_worker_init_fn_form_in_a_fresh_process() -> None:
    """As ``DataLoader(worker_init_fn=tune_malloc)`` calls it: with the worker id."""
    code = "from hyperframes.torch import tune_malloc; print(tune_malloc(3))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(glibc_version() is not None)


def test_as_worker_init_fn_of_spawn_workers() -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.arange(8))
    dl = DataLoader(
        ds, batch_size=4, num_workers=1, worker_init_fn=tune_malloc, multiprocessing_context="spawn"
    )
    assert sorted(int(x) for (batch,) in dl for x in batch) == list(range(8))
