"""VideoStream: random access equals sequential decoding; streaming decodes forward."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameFlags, FrameNotFoundError, SensorKind, StreamInfo
from hyperframes.reader import HyperframeReader
from hyperframes.video import (
    BitstreamError,
    EncoderSettings,
    NotVideoStreamError,
    VideoStream,
    Yuv420,
    check_stored_stream,
    create_decoder,
)
from hyperframes.video.testing import (
    camera_timestamps,
    h265_stream_info,
    moving_scene,
    write_h265_stream,
)
from hyperframes.writer import HyperframeWriter

W, H, N = 128, 96, 45
NO_GROUPS = 10_000  # k so large that only the GOP cap places IDRs


@pytest.fixture(scope="module")
def scene() -> list[np.ndarray]:
    return moving_scene(W, H, N, seed=5)


@pytest.fixture(scope="module", params=[1, 10, 30])
def gop_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             scene: list[np.ndarray]) -> tuple[Path, int, list[Yuv420]]:  # fmt: skip
    gop = int(request.param)
    path = tmp_path_factory.mktemp("video") / f"gop{gop}.hf"
    settings = EncoderSettings(W, H, max_gop=gop, preset="ultrafast")
    written = write_h265_stream(path, scene, settings, k=NO_GROUPS)
    dec = create_decoder("cpu", "yuv420p")
    sequential = [dec.decode(f.data, i)[0].image for i, f in enumerate(written)]
    return path, gop, sequential


def same(a: Yuv420, b: Yuv420) -> bool:
    return all(np.array_equal(x, y) for x, y in ((a.y, b.y), (a.u, b.u), (a.v, b.v)))


def test_file_follows_the_convention(gop_file: tuple[Path, int, list[Yuv420]]) -> None:
    path, gop, _ = gop_file
    with HyperframeReader(path) as r:
        assert check_stored_stream(r, "cam", max_gop=gop) == []
        vs = VideoStream(r, "cam", decoder="cpu")
        assert vs.keyframes.tolist() == list(range(0, N, gop))
        assert len(vs) == N and vs.timestamps.tolist() == camera_timestamps(N)


def test_random_access_equals_sequential(gop_file: tuple[Path, int, list[Yuv420]]) -> None:
    path, _, sequential = gop_file
    order = list(range(N))
    random.Random(7).shuffle(order)
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="yuv420p") as vs:
        for i in order:
            frame = vs.frame_at(i)
            assert frame.index == i and same(frame.image, sequential[i]), i
            assert frame.timestamp_ns == camera_timestamps(N)[i]


def test_streaming_decodes_forward(gop_file: tuple[Path, int, list[Yuv420]]) -> None:
    path, _, sequential = gop_file
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="yuv420p") as vs:
        frames = list(vs.frames(5, 40))
        assert [f.index for f in frames] == list(range(5, 40))
        assert all(same(f.image, sequential[f.index]) for f in frames)
        # one seek to the IDR before frame 5, then one access unit per frame
        kf = int(vs.keyframes[vs.keyframes <= 5].max())
        assert (vs.stats.seeks, vs.stats.fed) == (1, 40 - kf)


def test_jump_pattern_seeks_only_when_it_must(scene: list[np.ndarray], tmp_path: Path) -> None:
    path = tmp_path / "gop10.hf"
    settings = EncoderSettings(W, H, max_gop=10, preset="ultrafast")
    written = write_h265_stream(path, scene, settings, k=NO_GROUPS)
    dec = create_decoder("cpu", "yuv420p")
    sequential = [dec.decode(f.data, i)[0].image for i, f in enumerate(written)]
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="yuv420p") as vs:
        steps = [  # (request, seeks so far, access units fed so far)
            (2, 1, 3),  # seek to IDR 0, feed 0..2
            (3, 1, 4),  # next frame: forward, one access unit
            (7, 1, 8),  # forward in the same GOP: 4..7
            (15, 2, 14),  # past the IDR at 10: seek there, feed 10..15
            (14, 3, 19),  # backward: seek to 10, feed 10..14
            (30, 4, 20),  # far forward onto an IDR: seek, feed it alone
            (31, 4, 21),
            (10, 5, 22),  # back to an IDR
        ]
        for i, seeks, fed in steps:
            assert same(vs.frame_at(i).image, sequential[i]), i
            assert (vs.stats.seeks, vs.stats.fed) == (seeks, fed), i
        assert vs.stats.requests == len(steps)


def test_lookup_by_timestamp(gop_file: tuple[Path, int, list[Yuv420]]) -> None:
    path, _, sequential = gop_file
    stamps = camera_timestamps(N)
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu", output="yuv420p") as vs:
        f = vs.frame_at(timestamp_ns=stamps[12])
        assert f.index == 12 and same(f.image, sequential[12])
        assert vs.frame_at(timestamp_ns=stamps[12] + 1000, mode="nearest").index == 12
        with pytest.raises(FrameNotFoundError, match="nearest frame at") as info:
            vs.frame_at(timestamp_ns=stamps[12] + 1000)
        assert info.value.found_ns == stamps[12]
        with pytest.raises(FrameNotFoundError):
            vs.frame_at(timestamp_ns=stamps[12] + 10_000, mode="nearest", tolerance_ns=1000)
        assert [x.index for x in vs.frames_between(stamps[3], stamps[6])] == [3, 4, 5, 6]
        assert vs.frame_at(-1).index == N - 1
        with pytest.raises(IndexError):
            vs.frame_at(N)
        with pytest.raises(TypeError):
            vs.frame_at()
        with pytest.raises(TypeError):
            vs.frame_at(1, timestamp_ns=stamps[1])


def test_rgb_output_and_keyframe_flag(gop_file: tuple[Path, int, list[Yuv420]]) -> None:
    path, gop, _ = gop_file
    with HyperframeReader(path) as r, VideoStream(r, "cam", decoder="cpu") as vs:
        f = vs.frame_at(min(gop, N - 1))
        assert f.image.shape == (H, W, 3) and f.keyframe == (gop < N)
        assert not vs.frame_at(1).keyframe or gop == 1


def _write_raw(path: Path, aus: list[bytes], flags: list[int], encoding: str = "h265") -> None:
    info = StreamInfo(0, "cam", SensorKind.CAMERA, encoding, rate_hz=30.0)
    with HyperframeWriter(path, [info], 100_000_000) as w:
        for t, au, flag in zip(camera_timestamps(len(aus)), aus, flags, strict=True):
            w.append(0, t, au, flags=flag)


def test_wrong_flags_and_wrong_streams(scene: list[np.ndarray], tmp_path: Path) -> None:
    good = tmp_path / "good.hf"
    written = write_h265_stream(good, scene[:12], EncoderSettings(W, H, max_gop=5), k=NO_GROUPS)
    aus = [f.data for f in written]
    no_keys = tmp_path / "nokeys.hf"
    _write_raw(no_keys, aus, [int(FrameFlags.HW_TIMESTAMP)] * len(aus))
    with HyperframeReader(no_keys) as r:
        assert [(v.frame, v.rule) for v in check_stored_stream(r, "cam")] == [
            (0, "keyframe_flag"), (5, "keyframe_flag"), (10, "keyframe_flag")
        ]  # fmt: skip
        with pytest.raises(BitstreamError, match="starts_with_idr"):
            VideoStream(r, "cam", decoder="cpu").frame_at(3)
    jpeg = tmp_path / "jpeg.hf"
    _write_raw(jpeg, [b"\xff\xd8\xff\xd9"], [int(FrameFlags.KEYFRAME)], encoding="jpeg")
    with HyperframeReader(jpeg) as r:
        with pytest.raises(NotVideoStreamError, match="not 'h265'"):
            VideoStream(r, "cam", decoder="cpu")
        with pytest.raises(NotVideoStreamError):
            check_stored_stream(r, 0)
    assert h265_stream_info().encoding == "h265"
