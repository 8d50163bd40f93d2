"""Contact sheets of one hyperframe: the panels' content and the PNG drawn from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hyperframes import SensorKind, StreamInfo
from hyperframes.cli.main import main
from hyperframes.reader import HyperframeReader
from hyperframes.synth import profile, write_synthetic
from hyperframes.viz.contact import (
    BevPanel,
    TextPanel,
    TracePanel,
    bev,
    build_sheet,
    decode_image,
)
from hyperframes.viz.errors import EmptyRangeError

import faulty_recording as fr

pytest.importorskip("matplotlib")

from hyperframes.viz.show import show_window, video_decoder


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.hf"
    write_synthetic(str(path), profile("demo"), 1.0)
    return path


def test_contact_sheet_of_a_demo_window(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.png"
    result = show_window(demo, out, window=3)
    sheet = result.sheet
    with HyperframeReader(demo) as r:
        hf = r.get_window(3)
        assert sheet.window_id == hf.window_id and sheet.missing == ()
        for row, name in zip(sheet.cameras, ("cam_front", "cam_rear"), strict=True):
            frames = hf[r.stream(name).id]
            assert len(row) == len(frames) in (3, 4)
            for panel, f in zip(row, frames, strict=True):
                assert panel.image is not None and panel.image.shape == (240, 320, 3)
                assert panel.caption.startswith(f"{name} #{f.stream_index}")
                assert f"t={f.timestamp_ns} ns" in panel.caption
                # the thumbnail is the JPEG, decoded (not a blank)
                assert panel.image.std() > 10
        kinds = [type(p) for p in sheet.others]
        assert kinds == [BevPanel, TracePanel, TracePanel]
        lidar, accel, gyro = sheet.others
        (sweep,) = hf[r.stream("lidar_top").id]
        n = len(sweep.array())
        assert isinstance(lidar, BevPanel) and lidar.points == n == len(lidar.x) > 9000
        assert f"#{sweep.stream_index}, {n} points" in lidar.caption
        assert isinstance(accel, TracePanel) and set(accel.series) == {"ax", "ay", "az"}
        assert isinstance(gyro, TracePanel) and gyro.unit == "rad/s"
        assert len(accel.t_ms) == 20 and accel.t_ms.min() > 0 and accel.t_ms.max() <= 100
        assert np.allclose(accel.series["az"], 9.81, atol=0.1)  # gravity, from the synth IMU
    with Image.open(out) as img:
        assert img.format == "PNG" and img.width > 600
    images = sum(len(row) for row in sheet.cameras)
    assert f"window 3 (id {sheet.window_id}), {images} camera frames, 3 other panels" in str(result)


def test_missing_streams_and_window_range(tmp_path: Path) -> None:
    hf = tmp_path / "faulty.hf"
    fr.write_faulty(hf)
    with HyperframeReader(hf) as r:
        pos = int(np.searchsorted(r.window_ids, fr.CAM_SILENT[0]))
    result = show_window(hf, tmp_path / "s.png", window=pos)
    assert result.sheet.missing == ("cam",) and result.sheet.cameras == ()
    text = [p for p in result.sheet.others if isinstance(p, TextPanel)]
    assert [p.stream for p in text] == ["cam"] and text[0].lines == ("no frame in this window",)
    # 'cam' of tests/conftest.py holds bytes that are not a real JPEG: a placeholder, no crash
    other = show_window(hf, tmp_path / "c.png", window=0, streams=["cam"])
    (row,) = other.sheet.cameras
    assert all(p.image is None and "JPEG" in p.placeholder for p in row)
    with pytest.raises(EmptyRangeError, match=r"faulty\.hf: no window 99"):
        show_window(hf, tmp_path / "x.png", window=99)
    assert not (tmp_path / "x.png").exists()


def test_h265_cameras_decode_through_the_video_layer(tmp_path: Path) -> None:
    pytest.importorskip("av", reason="the video extra decodes H.265 on the CPU")
    from hyperframes.video import EncoderSettings
    from hyperframes.video.testing import moving_scene, write_h265_stream

    path = tmp_path / "h.hf"
    write_h265_stream(path, moving_scene(160, 96, 9), EncoderSettings(width=160, height=96))
    result = show_window(path, tmp_path / "h.png", window=1)
    (row,) = result.sheet.cameras
    assert len(row) == 3 and all(p.image is not None and p.image.shape == (96, 160, 3) for p in row)
    # a decoder that cannot be had: every frame says so instead of failing
    with HyperframeReader(path) as r:
        hf = r.get_window(1)
        sheet = build_sheet(hf, list(r.streams.values()), video=video_decoder(r, "no-such"))
    assert all(p.image is None and "h265: decoder unavailable" in p.placeholder
               for p in sheet.cameras[0])  # fmt: skip
    # without any video decoder
    with HyperframeReader(path) as r:
        sheet = build_sheet(r.get_window(0), list(r.streams.values()))
    assert sheet.cameras[0][0].placeholder == "h265: decoder unavailable"


def test_image_and_point_helpers() -> None:
    gray = StreamInfo(0, "g", SensorKind.CAMERA, "raw-gray8", extra={"width": 4, "height": 2})
    rgb = decode_image(gray, bytes(range(8)))
    assert rgb.shape == (2, 4, 3) and rgb[1, 3].tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="width x height"):
        decode_image(gray, bytes(7))
    with pytest.raises(ValueError, match="not an image"):
        decode_image(StreamInfo(1, "x", encoding="bytes"), b"")
    pts = np.zeros((100_000, 4), np.float32)
    pts[:, 0] = np.linspace(-50, 50, len(pts))
    x, _y, value, name, extent = bev(StreamInfo(2, "l", SensorKind.LIDAR, "xyzi-f32"), pts, 1000)
    assert len(x) == 1000 and name == "intensity" and len(value) == 1000
    assert 45 < extent <= 50


def test_show_command_line(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.png"
    assert main(["show", str(demo), "--window", "-1", "-o", str(out), "--streams", "imu"]) == 0
    assert "window" in capsys.readouterr().out and out.exists()
    assert main(["show", str(demo), "--window", "0", "-o", str(out)]) == 2  # exists: usage
    assert main(["show", str(demo), "--window", "0", "-o", str(out), "-f"]) == 0
