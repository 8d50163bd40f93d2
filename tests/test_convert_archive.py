"""Converting one archive: real files, real libx265, verified output, no output on failure."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hyperframes import CodecSpec, FrameFlags, SensorKind, StreamInfo
from hyperframes.converter._layout import source_blocks
from hyperframes.converter.config import ConvertConfig, VerifyConfig, VideoConfig
from hyperframes.converter.convert import convert_archive, sweep_staging
from hyperframes.converter.errors import (
    ConfigError,
    InputError,
    OutputExistsError,
    VerificationError,
)
from hyperframes.converter.plan import plan_streams
from hyperframes.converter.verify import psnr, verify_conversion
from hyperframes.reader import HyperframeReader
from hyperframes.video import VideoStream, check_stored_stream, create_decoder, decode_jpeg
from hyperframes.video.testing import moving_scene
from hyperframes.writer import HyperframeWriter, WriteFrame

from convert_fixtures import T0, WINDOW_NS, write_archive

pytest.importorskip("av")

FAST = ConvertConfig(video=VideoConfig(x265_preset="ultrafast"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*"))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """One archive with two cameras, late and quarantined frames, a dropped lidar window."""
    d = tmp_path_factory.mktemp("conv")
    src = write_archive(d / "seg.hf", 1.2, cameras=2, drop_windows=[5])
    before = (digest(src), src.stat().st_mtime_ns)
    result = convert_archive(src, d / "out", FAST)
    assert (digest(src), src.stat().st_mtime_ns) == before  # the input is never modified
    return src, d / "out" / "seg.hf", result


def test_output_is_published_verified_and_alone(converted: tuple[Path, Path, object]) -> None:
    src, out, _ = converted
    assert leftovers(out.parent) == ["seg.hf"]  # no staging directory, no .tmp
    r = subprocess.run(
        [sys.executable, "-m", "hyperframes.cli", "verify", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    with HyperframeReader(out) as o, HyperframeReader(src) as s:
        assert o.window_ids.tolist() == s.window_ids.tolist()
        assert o.missing == s.missing and len(o.missing) == 1
        assert {sid: st.encoding for sid, st in o.streams.items()} == {
            0: "h265",
            1: "h265",
            10: "xyzi-f32",
            11: "imu-f64",
            12: "bytes",
        }
        assert o.stream("lidar").codec == "zstd" and o.stream("lidar").shuffle
        assert o.stream("can").codec == "zstd" and not o.stream("can").shuffle
        cam = o.stream("cam0")
        assert cam.extra["gop"] == {"k": 3, "max_gop": 30}
        assert (cam.extra["width"], cam.extra["height"]) == (96, 64)


def test_every_non_camera_stream_round_trips_byte_for_byte(
    converted: tuple[Path, Path, object],
) -> None:
    src, out, _ = converted
    with HyperframeReader(src) as s, HyperframeReader(out) as o:
        for name in ("lidar", "imu", "can"):
            a, b = list(s.frames(name)), list(o.frames(name))
            assert len(a) == len(b) > 0
            for fa, fb in zip(a, b, strict=True):
                assert (fa.timestamp_ns, fa.stream_index, fa.flags & 0xF) == (
                    fb.timestamp_ns,
                    fb.stream_index,
                    fb.flags & 0xF,
                )
                assert fa.tobytes() == fb.tobytes()
        # timestamps, stream indices and receive times of every stream, cameras included
        assert np.array_equal(
            s.index[["stream_id", "stream_index", "timestamp_ns"]],
            o.index[["stream_id", "stream_index", "timestamp_ns"]],
        )
        assert np.array_equal(s.aux(), o.aux())


def test_late_and_quarantined_frames_keep_their_block_and_flags(
    converted: tuple[Path, Path, object],
) -> None:
    src, out, _ = converted
    with HyperframeReader(src) as s, HyperframeReader(out) as o:
        late = int(FrameFlags.LATE)
        assert int((s.index["flags"] & late != 0).sum()) == 2
        assert np.array_equal(s.index["flags"] & late, o.index["flags"] & late)
        qs, qo = s.quarantine(), o.quarantine()
        assert len(qs) == len(qo) == 3
        for name in ("stream_id", "stream_index", "timestamp_ns", "receive_ns", "duration_ns"):
            assert np.array_equal(qs[name], qo[name])
        assert o.quarantined_frame(2).tobytes() == s.quarantined_frame(2).tobytes()  # CAN
        # a quarantined camera frame is a stand-alone IDR, close to its JPEG
        frame = o.quarantined_frame(0)
        assert frame.keyframe and frame.quarantined
        image = create_decoder("cpu", "rgb").decode(frame.data, 0)[0].image
        assert psnr(image, decode_jpeg(s.quarantined_frame(0).data)) > 35


def test_h265_streams_follow_every_rule_and_idr_grid(converted: tuple[Path, Path, object]) -> None:
    _, out, result = converted
    with HyperframeReader(out) as o:
        for cam in ("cam0", "cam1"):
            assert check_stored_stream(o, cam, max_gop=30) == []
            vs = VideoStream(o, cam, decoder="cpu")
            ts = vs.timestamps.astype(np.int64)
            groups = (ts // WINDOW_NS) // 3
            first_of_group = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
            assert vs.keyframes.tolist() == first_of_group.tolist()
        record = o.metadata.extra["conversion"]
        assert record["source"]["name"] == "seg.hf"
        assert record["streams"]["cam0"]["encoder"] == "x265"
        assert record["settings"]["video"]["x265_preset"] == "ultrafast"
        assert o.metadata.extra["route"] == "depot" and o.metadata.segment_seq == 4
    cams = {s.name: s.quality for s in result.streams if s.quality}  # type: ignore[attr-defined]
    assert set(cams) == {"cam0", "cam1"}
    assert all(q["psnr_min_db"] >= 35.0 and q["samples"] >= 6 for q in cams.values())


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg CLI not installed")
def test_a_second_decoder_reads_the_stream(
    converted: tuple[Path, Path, object], tmp_path: Path
) -> None:
    """FFmpeg's own CLI decodes the concatenated access units to the same pictures."""
    _, out, _ = converted
    with HyperframeReader(out) as o:
        aus = [f.tobytes() for f in o.frames("cam0")]
        with VideoStream(o, "cam0", decoder="cpu", output="yuv420p") as vs:
            ours = [f.image for f in vs.frames()]
    (tmp_path / "cam0.h265").write_bytes(b"".join(aus))
    r = subprocess.run(["ffmpeg", "-v", "error", "-f", "hevc", "-i", str(tmp_path / "cam0.h265"),
                        "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"],
                       capture_output=True, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr.decode()
    size = 96 * 64 * 3 // 2
    assert len(r.stdout) == size * len(aus)
    for i, pic in enumerate(ours):
        assert r.stdout[i * size : i * size + 96 * 64] == pic.y.tobytes()


def test_absurd_psnr_floor_fails_cleanly_and_leaves_nothing(tmp_path: Path) -> None:
    src = write_archive(tmp_path / "a.hf", 0.5, late=False, quarantined=False)
    before = digest(src)
    cfg = ConvertConfig(
        video=VideoConfig(x265_preset="ultrafast"), verify=VerifyConfig(psnr_floor_db=99.0)
    )
    with pytest.raises(VerificationError) as e:
        convert_archive(src, tmp_path / "out", cfg)
    err = e.value
    assert (err.rule, err.stream, err.path) == ("psnr_floor", "cam0", str(src))
    assert err.frame is not None and "below the floor of 99 dB" in str(err)
    assert leftovers(tmp_path / "out") == []
    assert digest(src) == before


def test_keep_leaves_a_stream_exactly_as_it_was(tmp_path: Path) -> None:
    src = write_archive(tmp_path / "k.hf", 0.5, late=False)
    out = convert_archive(src, tmp_path / "out", FAST.with_overrides(keep=["cam0", "11"]))
    with HyperframeReader(src) as s, HyperframeReader(out.output) as o:
        assert o.stream("cam0").encoding == "jpeg"
        assert [f.tobytes() for f in s.frames("cam0")] == [f.tobytes() for f in o.frames("cam0")]
        kept = np.isin(s.index["stream_id"], [0, 11])
        assert np.array_equal(s.index["flags"][kept], o.index["flags"][kept])  # codec bits too
        assert o.stream("imu").codec == "lz4hc" and o.stream("imu").level == 3
    with pytest.raises(ConfigError, match=r"keep\[0\].*'lidr'.*did you mean 'lidar'"):
        convert_archive(src, tmp_path / "out2", FAST.with_overrides(keep=["lidr"]))


def test_raw_rgb_camera_is_encoded_too(tmp_path: Path) -> None:
    streams = [
        StreamInfo(
            0, "cam", SensorKind.CAMERA, "raw-rgb", rate_hz=30.0, extra={"width": 64, "height": 48}
        )
    ]
    pics = moving_scene(64, 48, 9, seed=3)
    with HyperframeWriter(tmp_path / "raw.hf", streams, WINDOW_NS) as w:
        for i, p in enumerate(pics):
            w.append(0, T0 + 1 + i * 33_333_333, p)
    # R'G'B' PSNR includes the 4:2:0 chroma loss at the square's sharp red edges
    result = convert_archive(
        tmp_path / "raw.hf", tmp_path / "out", FAST.with_overrides(psnr_floor_db=30.0)
    )
    assert result.streams[0].treatment == "h265"
    assert result.streams[0].quality is not None and result.streams[0].quality["psnr_min_db"] > 30


def test_a_corrupt_frame_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    src = write_archive(tmp_path / "c.hf", 0.5, late=False, quarantined=False)
    with HyperframeReader(src) as r:
        i = int(np.flatnonzero(r.index["stream_id"] == 10)[2])
        offset = int(r.index["offset"][i])
    data = bytearray(src.read_bytes())
    data[offset + 10] ^= 0xFF
    src.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"c\.hf.*CRC32C mismatch"):
        convert_archive(src, tmp_path / "out", FAST)
    assert leftovers(tmp_path / "out") == []


def test_an_unfinalized_input_is_refused(tmp_path: Path) -> None:
    src = write_archive(tmp_path / "t.hf", 0.3, late=False, quarantined=False)
    tmp = src.rename(tmp_path / "t.hf.tmp")
    with pytest.raises(InputError, match="not finalized") as e:
        convert_archive(tmp, tmp_path / "out", FAST)
    assert e.value.rule == "finalized"


def test_an_existing_output_is_never_replaced(tmp_path: Path) -> None:
    src = write_archive(tmp_path / "e.hf", 0.3, late=False, quarantined=False)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "e.hf").write_bytes(b"someone else's")
    with pytest.raises(OutputExistsError):
        convert_archive(src, tmp_path / "out", FAST)
    assert (tmp_path / "out" / "e.hf").read_bytes() == b"someone else's"


def test_sweep_removes_only_abandoned_staging(tmp_path: Path) -> None:
    staging = tmp_path / ".staging"
    (staging / "dead").mkdir(parents=True)
    (staging / "dead" / "x.hf.tmp").write_bytes(b"half")
    (staging / "dead" / ".lock").touch()
    (staging / "alive").mkdir()
    fd = os.open(staging / "alive" / ".lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = sweep_staging(tmp_path)
    finally:
        os.close(fd)
    assert [p.name for p in removed] == ["dead"]
    assert (staging / "alive").exists() and not (staging / "dead").exists()


def rewrite(
    src: Path, dst: Path, mutate: Callable[[str, int | None, WriteFrame], WriteFrame | None]
) -> None:
    """Copy ``src`` block by block through the writer, ``mutate(stream, position, frame)``
    may return a changed WriteFrame (position: the frame's index within its stream)."""
    with HyperframeReader(src) as r:
        aux, q = r.aux(), r.quarantine()
        firsts = {sid: int(np.flatnonzero(r.index["stream_id"] == sid)[0]) for sid in r.streams}
        streams = list(r.streams.values())
        codecs = {s.id: CodecSpec(s.codec or "none", s.level, s.shuffle) for s in streams}
        with HyperframeWriter(dst, streams, r.window_ns, r.metadata, codecs=codecs) as w:
            for block in source_blocks(r):
                frames = []
                for e in block.entries.tolist():
                    f = r.frame_at(e) if e >= 0 else r.quarantined_frame(-e - 1)
                    extra = aux[e] if e >= 0 else q[-e - 1]
                    wf = WriteFrame(
                        f.stream_id,
                        f.timestamp_ns,
                        f.data,
                        f.flags & 0xF,
                        f.stream_index,
                        int(extra["receive_ns"]),
                        int(extra["duration_ns"]),
                    )
                    pos = e - firsts[f.stream_id] if e >= 0 else None
                    frames.append(mutate(r.streams[f.stream_id].name, pos, wf) or wf)
                w.write_window(block.window_id, frames, missing=block.missing)


@pytest.mark.parametrize(
    ("rule", "mutate"),
    [
        (
            "keyframe_flag",
            lambda s, i, f: f._replace(flags=f.flags | 1) if s == "cam0" and i == 1 else None,
        ),
        (
            "lossless_bytes",
            lambda s, i, f: (
                f._replace(payload=np.zeros(6, "<f8")) if s == "imu" and i == 5 else None
            ),
        ),
        ("aux", lambda s, i, f: f._replace(receive_ns=1) if s == "lidar" and i == 2 else None),
        ("flags", lambda s, i, f: f._replace(flags=f.flags ^ 2) if s == "can" and i == 3 else None),
    ],
)
def test_verification_catches_a_doctored_output(
    converted: tuple[Path, Path, object],
    tmp_path: Path,
    rule: str,
    mutate: Callable[..., WriteFrame | None],
) -> None:
    src, out, _ = converted
    bad = tmp_path / "bad.hf"
    rewrite(out, bad, mutate)
    with HyperframeReader(src) as s, HyperframeReader(out) as o:
        plans = tuple(
            p.__class__(p.source, p.treatment, o.streams[p.source.id], p.codec, p.reason)
            for p in plan_streams(s.streams.values(), FAST)
        )
        verify_conversion(out, s, plans, FAST)  # the real output passes
        with pytest.raises(VerificationError) as e:
            verify_conversion(bad, s, plans, FAST)
    assert e.value.rule == rule, e.value
    assert e.value.stream is not None and str(src) in str(e.value)
