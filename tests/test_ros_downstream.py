"""A ROS bag downstream (issue 35): the raw cameras the importer writes are pictures everywhere.

One bag written by ``rosbags`` (helpers of tests/test_ros_import.py): a bgr8
Image camera with row padding and its CameraInfo, a CompressedImage (JPEG)
camera, mono8, mono16 and 32FC1 Image cameras, a PointCloud2 with a ``ring``
field (``points``) and one of x, y, z float32 (``points-f32``). Imported, then
read by ``Frame.image()``, converted by ``hyperframes convert`` (the bgr, JPEG
and mono8 cameras to H.265, PSNR measured against the bag's pixels), loaded by
the torch dataset and drawn by ``hyperframes show``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from PIL import Image
from rosbags.rosbag2 import StoragePlugin, Writer
from test_ros_import import TS, T, _cloud, _header

from hyperframes.cli.main import main
from hyperframes.images import ImageLayoutError, point_columns, raw_image
from hyperframes.reader import HyperframeReader
from hyperframes.ros import import_bag
from hyperframes.video import VideoStream, decode_jpeg
from hyperframes.video.quality import psnr

T0 = 1_735_689_600_000_000_000
N = 12  # frames per camera (10 Hz: 1.2 s)
W, H = 96, 64
PAD = 16  # bytes of row padding in the bgr8 Image


def _scene(n: int) -> list[np.ndarray]:
    """Smooth moving colour gradients and a moving square brighter in all three channels
    (a luma edge: no sharp colour edge for 4:2:0 chroma to blur), mild noise."""
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    out = []
    for i in range(n):
        img = np.stack([120 + 70 * np.sin(xx / 23.0 + i * 0.2),
                        110 + 60 * np.cos(yy / 17.0 - i * 0.1),
                        100 + 50 * np.sin((xx + yy) / 31.0)], axis=-1)  # fmt: skip
        x0, y0 = (i * 5) % (W - 20), (i * 3) % (H - 20)
        img[y0 : y0 + 20, x0 : x0 + 20] += 45
        img += rng.normal(0, 1.0, img.shape)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


RGB = _scene(N)  # (H, W, 3) uint8, R, G, B
K = [400.0, 0.0, 48.0, 0.0, 400.0, 32.0, 0.0, 0.0, 1.0]
D = [-0.1, 0.01, 0.0, 0.0, 0.0]


def _jpeg(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def _gray16(i: int) -> np.ndarray:
    return (RGB[i][:, :, 1].astype(np.uint16) * 200 + i).astype(np.uint16)


def _depth(i: int) -> np.ndarray:
    return RGB[i][:, :, 2].astype(np.float32) / 10.0 + np.float32(0.5)


def _image(stamp: int, enc: str, pixels: np.ndarray, pad: int = 0) -> object:
    rows = pixels.reshape(H, -1).view(np.uint8)
    step = rows.shape[1] + pad
    data = np.zeros((H, step), np.uint8)
    data[:, : rows.shape[1]] = rows
    return T["sensor_msgs/msg/Image"](header=_header(stamp, "cam"), height=H, width=W,
                                      encoding=enc, is_bigendian=0, step=step,
                                      data=data.reshape(-1))  # fmt: skip


def _messages(i: int) -> list[tuple[str, str, object]]:
    stamp = T0 + i * 100_000_000
    img = "sensor_msgs/msg/Image"
    f32 = T["sensor_msgs/msg/PointField"]
    xyz = np.random.default_rng(i).standard_normal((40, 3)).astype("<f4")
    cloud = T["sensor_msgs/msg/PointCloud2"](
        header=_header(stamp, "lidar"), height=1, width=40,
        fields=[f32(name=n, offset=4 * k, datatype=7, count=1) for k, n in enumerate("xyz")],
        is_bigendian=False, point_step=12, row_step=480, data=xyz.view(np.uint8).reshape(-1),
        is_dense=True)  # fmt: skip
    info = T["sensor_msgs/msg/CameraInfo"](
        header=_header(stamp, "cam_front"), height=H, width=W, distortion_model="plumb_bob",
        d=np.array(D), k=np.array(K), r=np.eye(3).reshape(-1),
        p=np.array([400.0, 0, 48, 0, 0, 400, 32, 0, 0, 0, 1, 0]), binning_x=0, binning_y=0,
        roi=T["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0,
                                                  do_rectify=False))  # fmt: skip
    jpeg = T["sensor_msgs/msg/CompressedImage"](
        header=_header(stamp, "cam_back"), format="rgb8; jpeg compressed bgr8",
        data=np.frombuffer(_jpeg(RGB[i]), np.uint8))  # fmt: skip
    return [
        ("/cam/front/image_raw", img, _image(stamp, "bgr8", RGB[i][:, :, ::-1].copy(), PAD)),
        ("/cam/front/camera_info", "sensor_msgs/msg/CameraInfo", info),
        ("/cam/back/image_raw/compressed", "sensor_msgs/msg/CompressedImage", jpeg),
        ("/cam/mono", img, _image(stamp, "mono8", RGB[i][:, :, 0].copy())),
        ("/cam/depth16", img, _image(stamp, "16UC1", _gray16(i))),
        ("/cam/depth", img, _image(stamp, "32FC1", _depth(i))),
        ("/points_ring", "sensor_msgs/msg/PointCloud2", _cloud(stamp, i, True)[0]),
        ("/points_xyz", "sensor_msgs/msg/PointCloud2", cloud),
    ]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ros_down")
    with Writer(tmp / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {t: w.add_connection(t, typ, typestore=TS) for t, typ, _ in _messages(0)}
        for i in range(N):
            for k, (topic, typ, msg) in enumerate(_messages(i)):
                log = T0 + i * 100_000_000 + 5_000_000 + k  # 5 ms after the header stamp
                w.write(conns[topic], log, TS.serialize_cdr(msg, typ))
    out = tmp / "drive.hf"
    report = import_bag(tmp / "bag", out, window_ns=100_000_000)
    assert not report.problems, report.problems
    summary = report.summary()
    assert "in extra['intrinsics'] of cam/front/image_raw" in summary, summary
    return out


def _by_encoding(r: HyperframeReader) -> dict[str, str]:
    return {s.encoding: s.name for s in r.streams.values()}


def test_frame_image_for_every_raw_encoding(imported: Path) -> None:
    with HyperframeReader(imported) as r:
        enc = _by_encoding(r)
        want = {"raw-bgr", "jpeg", "raw-gray8", "raw-gray16", "raw-f32", "points", "points-f32"}
        assert want <= set(enc)
        for i, f in enumerate(r.frames(enc["raw-bgr"])):
            img = f.image()
            assert img.shape == (H, W, 3) and img.dtype == np.uint8
            np.testing.assert_array_equal(img, RGB[i])  # swapped to R, G, B: not mislabelled
            assert img.flags.c_contiguous
        jpeg = next(iter(r.frames(enc["jpeg"]))).image()
        assert jpeg.shape == (H, W, 3) and psnr(jpeg, RGB[0]) > 35
        for i, f in enumerate(r.frames(enc["raw-gray8"])):
            assert f.image().dtype == np.uint8 and f.image().shape == (H, W)
            np.testing.assert_array_equal(f.image(), RGB[i][:, :, 0])
        g16 = [f.image() for f in r.frames(enc["raw-gray16"])]
        assert g16[3].dtype == np.uint16 and np.array_equal(g16[3], _gray16(3))
        depth = [f.image() for f in r.frames(enc["raw-f32"])]
        assert depth[2].dtype == np.float32 and np.array_equal(depth[2], _depth(2))
        with pytest.raises(ValueError, match="not an image"):
            next(iter(r.frames(enc["points"]))).image()
    with pytest.raises(ImageLayoutError, match=r"11 bytes .* 2x2 of a raw-bgr image \(12 bytes\)"):
        raw_image(np.zeros(11, np.uint8), "raw-bgr", 2, 2)
    with pytest.raises(ValueError, match="not a raw image encoding"):
        raw_image(np.zeros(12, np.uint8), "raw-yuyv", 2, 2)


def test_camera_info_is_the_cameras_intrinsics(imported: Path) -> None:
    with HyperframeReader(imported) as r:
        cam = r.stream("cam/front/image_raw")
        intr = cam.extra["intrinsics"]
        assert intr["width"] == W and intr["height"] == H
        assert intr["distortion_model"] == "plumb_bob" and intr["d"] == D and intr["k"] == K
        assert intr["r"] == np.eye(3).reshape(-1).tolist() and len(intr["p"]) == 12
        assert intr["topic"] == "/cam/front/camera_info"
        info = r.stream("cam/front/camera_info")  # stays CDR, every message
        assert info.encoding == "ros2-cdr" and len(list(r.frames(info.name))) == N
        assert "intrinsics" not in r.stream("cam/back/image_raw/compressed").extra
    # a CameraInfo topic left out by --map still gives its camera the intrinsics
    only = imported.parent / "front.hf"
    rep = import_bag(imported.parent / "bag", only, window_ns=100_000_000,
                     mapping={"/cam/front/image_raw": "front"})  # fmt: skip
    assert "/cam/front/camera_info" in rep.left_out
    with HyperframeReader(only) as r:
        assert [s.name for s in r.streams.values()] == ["front"]
        assert r.stream("front").extra["intrinsics"]["k"] == K


def test_convert_makes_h265_of_bgr_and_jpeg_cameras(imported: Path, tmp_path: Path) -> None:
    assert main(["convert", str(imported), "--out", str(tmp_path), "--encoder", "x265", "-q"]) == 0
    (out,) = tmp_path.glob("*.hf")
    with HyperframeReader(imported) as src, HyperframeReader(out) as o:
        enc = _by_encoding(src)
        plans = o.metadata.extra["conversion"]["streams"]
        for name in (enc["raw-bgr"], enc["jpeg"], enc["raw-gray8"]):
            assert o.stream(name).encoding == "h265", name
            assert plans[name]["treatment"] == "h265" and plans[name]["quality"], name
        for name in (enc["raw-gray16"], enc["raw-f32"]):
            assert o.stream(name).encoding == src.stream(name).encoding
            assert plans[name]["treatment"] == "zstd"
            assert "do not fit 8-bit H.265" in plans[name]["reason"]
            a = [f.tobytes() for f in src.frames(name)]
            assert a == [f.tobytes() for f in o.frames(name)]
        refs = {
            enc["raw-bgr"]: RGB,
            enc["jpeg"]: [decode_jpeg(f.data) for f in src.frames(enc["jpeg"])],
            enc["raw-gray8"]: [np.repeat(p[:, :, :1], 3, axis=2) for p in RGB],
        }
        worst = {}
        for name, ref in refs.items():
            with VideoStream(o, name, decoder="cpu") as vs:
                pics = [np.asarray(f.image) for f in vs.frames()]
            assert len(pics) == N
            worst[name] = min(psnr(p, q) for p, q in zip(pics, ref, strict=True))
        print("PSNR min dB:", worst)
        assert all(db > 35 for db in worst.values()), worst


def test_torch_yields_images_and_points(imported: Path) -> None:
    torch = pytest.importorskip("torch")
    from hyperframes.torch import HyperframeDataset

    ds = HyperframeDataset(imported)
    with HyperframeReader(imported) as r:
        enc = _by_encoding(r)
        s = ds[3]
        cams, lidar = s["camera"], s["lidar"]
        (bgr,) = cams[enc["raw-bgr"]]["data"]
        i = (int(cams[enc["raw-bgr"]]["timestamp_ns"][0]) - T0) // 100_000_000
        assert bgr.dtype == torch.uint8 and tuple(bgr.shape) == (H, W, 3)
        assert np.array_equal(bgr.numpy(), RGB[i])
        (gray,) = cams[enc["raw-gray8"]]["data"]
        assert tuple(gray.shape) == (H, W) and gray.dtype == torch.uint8
        (g16,) = cams[enc["raw-gray16"]]["data"]
        assert tuple(g16.shape) == (H, W) and np.array_equal(g16.numpy(), _gray16(i))
        (depth,) = cams[enc["raw-f32"]]["data"]
        assert depth.dtype == torch.float32 and np.array_equal(depth.numpy(), _depth(i))
        (jpeg,) = cams[enc["jpeg"]]["data"]
        assert tuple(jpeg.shape) == (H, W, 3)
        (ring,) = lidar[enc["points"]]["data"]
        stored = next(f for f in r.frames(enc["points"]) if f.stream_index == i).array()
        assert ring.dtype == torch.float32 and tuple(ring.shape) == (len(stored), 5)
        for k in range(4):
            np.testing.assert_array_equal(ring[:, k].numpy(), stored[f"f{k}"])
        np.testing.assert_array_equal(ring[:, 4].numpy(), stored["f4"].astype(np.float32))
        (xyz,) = lidar[enc["points-f32"]]["data"]
        assert xyz.dtype == torch.float32 and tuple(xyz.shape) == (40, 3)
    # x, y, z first whatever the stored order
    arr = np.zeros(2, np.dtype("<u2,<f4,<f4,<f4"))
    arr["f1"], arr["f2"], arr["f3"], arr["f0"] = 1, 2, 3, 7
    assert point_columns(arr, ["ring", "x", "y", "z"]).tolist() == [[1, 2, 3, 7]] * 2


def test_show_draws_raw_cameras_as_pictures(imported: Path, tmp_path: Path) -> None:
    from hyperframes.viz.contact import BevPanel
    from hyperframes.viz.show import show_window

    result = show_window(imported, tmp_path / "w.png", window=4)
    with HyperframeReader(imported) as r:
        enc = _by_encoding(r)
        rows = {row[0].stream: row for row in result.sheet.cameras if row}
        for e in ("raw-bgr", "jpeg", "raw-gray8", "raw-gray16", "raw-f32"):
            (panel,) = rows[enc[e]]
            assert panel.image is not None and panel.image.ndim == 3, (e, panel.placeholder)
            assert panel.image.std() > 5, e
        (bgr,) = rows[enc["raw-bgr"]]
        (f,) = r.get_window(4)[enc["raw-bgr"]]
        assert bgr.image is not None
        if bgr.image.shape == (H, W, 3):  # not scaled: the bag's R, G, B exactly
            assert np.array_equal(bgr.image, RGB[f.stream_index])
        else:
            assert psnr(np.asarray(Image.fromarray(RGB[f.stream_index]).resize(
                bgr.image.shape[1::-1])), bgr.image) > 25  # fmt: skip
    bev = [p for p in result.sheet.others if isinstance(p, BevPanel)]
    assert {p.stream for p in bev} == {enc["points"], enc["points-f32"]}
    assert Image.open(tmp_path / "w.png").format == "PNG"
