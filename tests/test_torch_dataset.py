"""HyperframeDataset in one process: sample layout, decoding, masks, alignment, errors."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import simplejpeg  # noqa: E402
from PIL import Image  # noqa: E402

from hyperframes import SensorKind, StreamInfo  # noqa: E402
from hyperframes.format.windows import window_of  # noqa: E402
from hyperframes.reader import HyperframeReader  # noqa: E402
from hyperframes.sync import ClockMismatchError, NoMatchError  # noqa: E402
from hyperframes.torch import (  # noqa: E402
    Align,
    HyperframeDataset,
    SampleError,
    StreamSelectionError,
    collate,
)
from hyperframes.torch import decode as decode_module  # noqa: E402
from hyperframes.writer import HyperframeWriter  # noqa: E402

from torch_files import (  # noqa: E402
    CAM_GONE,
    DROPOUT_STREAMS,
    GAP,
    LIDAR_GONE,
    MS,
    T0,
    WINDOW_NS,
    dropout_frames,
    write_demo,
    write_dropout,
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("demo") / "demo.hf", seconds=1.0)


@pytest.fixture(scope="module")
def dropout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dropout(tmp_path_factory.mktemp("dropout") / "dropout.hf")


def test_sample_layout_and_decoded_pixels(demo: Path) -> None:
    ds = HyperframeDataset(demo)
    assert len(ds) == 10 and [s.name for s in ds.streams] == [
        "cam_front",
        "cam_rear",
        "lidar_top",
        "imu",
    ]
    s = ds[4]
    assert set(s) == {
        "file",
        "window",
        "window_id",
        "start_ns",
        "end_ns",
        "index",
        "camera",
        "lidar",
        "imu",
    }
    with HyperframeReader(demo) as r:
        frames = r.get_window(4)
        for name, group in (("cam_front", "camera"), ("lidar_top", "lidar"), ("imu", "imu")):
            sid = r.stream(name).id
            entry = s[group][name]
            want = frames[sid]
            assert entry["timestamp_ns"].tolist() == [f.timestamp_ns for f in want]
            assert entry["is_pad"].tolist() == [False] * len(want) and not entry["missing"]
            for got, f in zip(entry["data"], want, strict=True):
                if group == "camera":  # a direct decode of the stored JPEG
                    direct = simplejpeg.decode_jpeg(f.tobytes(), colorspace="RGB")
                    assert got.dtype == torch.uint8 and got.shape == (240, 320, 3)
                else:  # the array, bit for bit, no copy from the aligned payload
                    direct = f.array()
                    assert got.data_ptr() % 64 == 0 and not got.numpy().flags.owndata
                assert np.array_equal(got.numpy(), direct)
    assert ds.locate(4) == (str(demo), s["window_id"])


def test_pillow_fallback_decodes_like_pillow(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hyperframes.images

    monkeypatch.setattr(hyperframes.images, "_simplejpeg", None)
    assert decode_module.jpeg_backend() == "pillow"
    s = HyperframeDataset(demo, streams=["cam_rear"])[2]
    with HyperframeReader(demo) as r:
        f = r.get_window(2)[r.stream("cam_rear").id][0]
    direct = np.asarray(Image.open(io.BytesIO(f.tobytes())).convert("RGB"))
    assert np.array_equal(s["camera"]["cam_rear"]["data"][0].numpy(), direct)


def expected_counts() -> dict[int, Counter[int]]:
    """Frames per (relative) window per stream, from what was written."""
    counts: dict[int, Counter[int]] = {}
    for sid, t, _ in dropout_frames():
        counts.setdefault(sid, Counter())[window_of(t, WINDOW_NS) - T0 // WINDOW_NS] += 1
    return counts


def test_missing_streams_and_variable_counts_are_masked(dropout: Path) -> None:
    ds = HyperframeDataset(dropout)
    counts = expected_counts()
    batch = collate([ds[i] for i in range(len(ds))])
    rel = (batch["window_id"] - T0 // WINDOW_NS).tolist()
    assert rel == [w for w in range(16) if w not in GAP]  # the gap has no windows at all
    cam, lidar, imu = batch["camera"]["cam"], batch["lidar"]["lidar"], batch["imu"]["imu"]
    assert cam["data"].shape == (14, 4, 32, 48, 3)  # 31 Hz: 3 or 4 frames per window
    for b, w in enumerate(rel):
        for entry, sid in ((cam, 0), (lidar, 1), (imu, 2)):
            n = counts[sid][w]
            assert (~entry["is_pad"][b]).sum() == n, (w, sid)
            assert entry["is_pad"][b, :n].logical_not().all()  # frames first, pads after
            assert bool(entry["missing"][b]) == (n == 0)
            assert (entry["timestamp_ns"][b, n:] == 0).all()
        if w in CAM_GONE:
            assert not cam["data"][b].any()
    assert [rel[b] for b in np.flatnonzero(cam["missing"].numpy())] == list(CAM_GONE)
    assert [rel[b] for b in np.flatnonzero(lidar["missing"].numpy())] == list(LIDAR_GONE)
    # lidar sweeps vary in size: padded to the longest, real lengths kept
    assert lidar["data"].shape[2] == 80 and set(lidar["lengths"][~lidar["is_pad"]].tolist()) == {
        50,
        60,
        70,
        80,
    }
    b = 0
    n0 = int(lidar["lengths"][b, 0])
    assert (lidar["data"][b, 0, :n0] == lidar["data"][b, 0, 0, 0]).all()
    assert not lidar["data"][b, 0, n0:].any()


def test_aligned_queries_pad_beyond_tolerance(dropout: Path) -> None:
    align = Align(ref="lidar", tolerance_ns=3 * MS)
    ds = HyperframeDataset(dropout, align=align)
    frames = dropout_frames()
    stamps = {sid: np.array([t for s, t, _ in frames if s == sid]) for sid in (0, 1, 2)}
    for i in range(len(ds)):
        s = ds[i]
        ref = s["lidar"]["lidar"]
        assert ref["is_pad"].tolist() == [False] * len(ref["data"])
        for group, name, sid in (("camera", "cam", 0), ("imu", "imu", 2)):
            e = s[group][name]
            assert len(e["data"]) == len(ref["data"])  # one row per reference frame
            for t_ref, t, pad, data in zip(
                ref["timestamp_ns"].tolist(),
                e["timestamp_ns"].tolist(),
                e["is_pad"].tolist(),
                e["data"],
                strict=True,
            ):
                err = np.abs(stamps[sid] - t_ref)
                j = int(np.argmin(err))
                if err[j] > 3 * MS:
                    assert pad and t == 0 and data is None
                else:
                    assert not pad and t == stamps[sid][j] and data is not None
    # lidar 7 ms + 100k; imu 1 ms + 5j: always 1 ms off; the 31 Hz camera drifts in and out
    batch = collate([ds[i] for i in range(len(ds))])
    assert not batch["imu"]["imu"]["is_pad"][~batch["lidar"]["lidar"]["is_pad"]].any()
    cam_pad = batch["camera"]["cam"]["is_pad"][~batch["lidar"]["lidar"]["is_pad"]]
    assert 0 < int(cam_pad.sum()) < len(cam_pad)
    strict = HyperframeDataset(dropout, align=Align(ref="lidar", tolerance_ns=3 * MS, strict=True))
    with pytest.raises(NoMatchError, match=r"dropout.hf: stream 'cam': no frame within 3000000"):
        for i in range(len(strict)):
            strict[i]


def test_host_and_hardware_clocks_need_an_opt_in(tmp_path: Path) -> None:
    streams = [
        StreamInfo(0, "cam", SensorKind.CAMERA, "bytes"),
        StreamInfo(1, "gnss", SensorKind.GNSS, "bytes", timestamp_source="host"),
    ]
    path = tmp_path / "clocks.hf"
    with HyperframeWriter(path, streams, WINDOW_NS) as w:
        for i in range(10):
            w.append(0, T0 + 1 + i * 50 * MS, b"c")
            w.append(1, T0 + 2 + i * 50 * MS, b"g")
    with pytest.raises(
        ClockMismatchError, match=r"clocks.hf: stream 'gnss' is stamped by the host"
    ):
        HyperframeDataset(path, align=Align(ref="cam", tolerance_ns=MS))
    ds = HyperframeDataset(path, align=Align(ref="cam", tolerance_ns=MS, allow_mixed_clocks=True))
    assert [(c.other, c.other_clock, c.allowed) for c in ds.clock_checks] == [
        ("gnss", "host", True)
    ]
    assert ds[0]["gnss"]["gnss"]["is_pad"].tolist() == [False, False]
    # without alignment nothing is matched across streams: no check needed
    assert len(HyperframeDataset(path)) == 5


def test_streams_files_and_errors(demo: Path, dropout: Path, tmp_path: Path) -> None:
    with pytest.raises(StreamSelectionError, match=r"demo.hf: stream 'lidar': not in this file"):
        HyperframeDataset(demo, streams=["lidar"])
    with pytest.raises(StreamSelectionError, match=r"dropout.hf: stream 'cam_front': not in"):
        HyperframeDataset([demo, dropout], streams=["cam_front"])
    other = tmp_path / "other.hf"
    with HyperframeWriter(other, [StreamInfo(0, "imu", SensorKind.IMU, "bytes")], WINDOW_NS) as w:
        w.append(0, T0 + 1, b"x")
    with pytest.raises(StreamSelectionError, match=r"other.hf: stream 'imu': encoding is 'bytes'"):
        HyperframeDataset([demo, other], streams=["imu"])
    with pytest.raises(FileNotFoundError, match="no file matches"):
        HyperframeDataset(str(tmp_path / "*.nothing"))
    both = HyperframeDataset(str(demo.parent / "*.hf"), streams=["imu"])
    assert len(both) == 10
    two = HyperframeDataset([demo, demo], streams=["imu"])
    assert len(two) == 20 and two.locate(15) == (str(demo), two.locate(5)[1])
    with pytest.raises(IndexError):
        two[20]
    with pytest.raises(ValueError, match="decode must be one of"):
        HyperframeDataset(demo, decode="fast")  # type: ignore[arg-type]


def test_a_broken_jpeg_names_file_stream_and_time(tmp_path: Path) -> None:
    path = tmp_path / "broken.hf"
    with HyperframeWriter(path, DROPOUT_STREAMS[:1], WINDOW_NS) as w:
        w.append(0, T0 + 5 * MS, b"\xff\xd8 not really a jpeg")
    with pytest.raises(
        SampleError,
        match=rf"broken.hf: stream 'cam', frame at {T0 + 5 * MS} ns"
        rf" \(window {T0 // WINDOW_NS}\): not a decodable jpeg",
    ):
        HyperframeDataset(path)[0]


def test_raw_mode_returns_the_stored_bytes(demo: Path) -> None:
    s = HyperframeDataset(demo, decode="raw", streams=["cam_front", "lidar_top"])[1]
    with HyperframeReader(demo) as r:
        w = r.get_window(1)
        assert s["camera"]["cam_front"]["data"][0].numpy().tobytes() == w[0][0].tobytes()
        assert s["lidar"]["lidar_top"]["data"][0].numpy().tobytes() == w[2][0].tobytes()


def test_cache_hits_return_equal_private_copies(demo: Path) -> None:
    ds = HyperframeDataset(demo, streams=["cam_front"], cache_mb=50)
    first = ds[3]["camera"]["cam_front"]["data"]
    stats = ds.cache_stats()
    assert stats is not None and (stats.hits, stats.misses) == (0, len(first))
    first[0].fill_(7)  # a caller scribbling on its sample must not poison the cache
    again = ds[3]["camera"]["cam_front"]["data"]
    stats = ds.cache_stats()
    assert stats is not None and stats.hits == len(first) and stats.hit_rate == 0.5
    fresh = HyperframeDataset(demo, streams=["cam_front"])[3]["camera"]["cam_front"]["data"]
    assert all(torch.equal(a, b) for a, b in zip(again, fresh, strict=True))
    tiny = HyperframeDataset(demo, streams=["cam_front"], cache_mb=0.3)  # room for one image
    tiny[0], tiny[1]
    stats = tiny.cache_stats()
    assert stats is not None and stats.entries == 1 and stats.nbytes == 240 * 320 * 3


def test_dataset_pickles_without_its_readers(demo: Path) -> None:
    ds = HyperframeDataset(demo, cache_mb=10)
    before = ds[0]
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000  # paths, window tables and options only
    copy = pickle.loads(blob)
    assert copy._state is None and ds._state is not None
    after = copy[0]
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            before["camera"]["cam_front"]["data"], after["camera"]["cam_front"]["data"], strict=True
        )
    )
    ds.close()


def test_core_imports_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import hyperframes, hyperframes.sync, hyperframes.cli.main, hyperframes.reader\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n    import hyperframes.torch\nexcept ImportError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'hyperframes-sensors[torch]'" in r.stdout
