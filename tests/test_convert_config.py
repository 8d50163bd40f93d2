"""The conversion config and the pure plan: messages name the key, the problem, the choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperframes import SensorKind, StreamInfo
from hyperframes.converter.config import ConvertConfig, load_config, parse_config
from hyperframes.converter.errors import ConfigError
from hyperframes.converter.plan import Treatment, config_key, marker_name, plan_stream, plan_streams

ROOT = Path(__file__).resolve().parents[1]


def test_the_example_config_is_valid_and_documents_the_defaults() -> None:
    cfg = load_config(ROOT / "configs" / "convert-example.yaml")
    assert cfg.fingerprint() == ConvertConfig().fingerprint()
    assert cfg.batch == ConvertConfig().batch


def test_empty_or_missing_sections_mean_defaults() -> None:
    assert parse_config(None) == ConvertConfig()
    assert parse_config({"video": None, "keep": None}) == ConvertConfig()


def test_round_trip_through_a_document() -> None:
    cfg = parse_config(
        {
            "video": {"encoder": "x265", "quality": 23, "k": 1, "threads": 2},
            "batch": {"workers": 3},
            "keep": ["cam_front", 7],
        }
    )
    assert cfg.keep == ("cam_front", "7")
    assert parse_config(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"vidoe": {}}, "vidoe: unknown key; did you mean 'video'? (allowed here: video, "),
        ({"video": {"encodr": "x265"}}, "video.encodr: unknown key; did you mean 'encoder'?"),
        (
            {"video": {"encoder": "nvec"}},
            "video.encoder: 'nvec' is not allowed; did you mean 'nvenc'? "
            "(allowed: auto, nvenc, x265)",
        ),
        ({"video": {"quality": 60}}, "video.quality: must be 0..51, got 60"),
        ({"video": {"quality": "high"}}, "video.quality: must be an integer 0..51, got a string"),
        (
            {"video": {"x265_preset": "P4"}},
            "video.x265_preset: 'P4' is not allowed (allowed: ultrafast, superfast",
        ),
        (
            {"video": {"nvenc_preset": "p4"}},
            "video.nvenc_preset: 'p4' is not allowed; did you mean 'P4'?",
        ),
        ({"video": {"k": 0}}, "video.k: must be 1..100000, got 0"),
        ({"lossless": {"zstd_level": 23}}, "lossless.zstd_level: must be 1..22, got 23"),
        ({"verify": {"psnr_floor_db": -1}}, "verify.psnr_floor_db: must be >= 0 and <= 200"),
        ({"verify": {"sample_gops": 0}}, "verify.sample_gops: must be > 0 and <= 1, got 0"),
        ({"batch": {"workers": 0}}, "batch.workers: must be 1..4096, got 0"),
        ({"batch": {"poll_s": True}}, "batch.poll_s: must be a number, got a boolean"),
        ({"keep": "cam"}, "keep: must be a list of stream names or ids, got a string"),
        ({"keep": ["a", "a"]}, "keep[1]: 'a' already listed at keep[0]"),
        (["video"], ": must be a mapping, got a list"),
    ],
)
def test_bad_values_are_named_with_what_is_allowed(doc: object, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(doc, "c.yaml")
    assert str(e.value).startswith(f"c.yaml: {message}" if message[0] != ":" else "c.yaml"), e.value
    assert message.lstrip(": ") in str(e.value)


def test_yaml_problems_name_the_line(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("video:\n  quality: 20\n  quality: 30\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: line 3: key 'quality' appears twice"):
        load_config(p)
    p.write_text("video: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(p)
    p.write_text("!!python/object:os.system {}\n")
    with pytest.raises(ConfigError, match="invalid YAML"):  # safe loading only
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_overrides_are_validated_like_keys() -> None:
    cfg = ConvertConfig().with_overrides(encoder="x265", workers=2, keep=["b"], psnr_floor_db=30)
    assert (cfg.video.encoder, cfg.batch.workers, cfg.keep, cfg.verify.psnr_floor_db) == (
        "x265",
        2,
        ("b",),
        30.0,
    )
    with pytest.raises(ConfigError, match=r"--workers: must be 1\.\.4096, got 0"):
        ConvertConfig().with_overrides(workers=0)


def test_plan_per_stream() -> None:
    cfg = ConvertConfig()
    cam = StreamInfo(0, "cam", SensorKind.CAMERA, "jpeg", rate_hz=30)
    p = plan_stream(cam, cfg)
    assert p.treatment is Treatment.H265 and p.output.encoding == "h265"
    assert p.output.extra["gop"] == {"k": 3, "max_gop": 30} and p.codec.name == "none"
    lidar = StreamInfo(1, "lidar", SensorKind.LIDAR, "xyzi-f32", codec="lz4", shuffle=True)
    p = plan_stream(lidar, cfg)
    assert (p.treatment, str(p.codec)) == (Treatment.ZSTD, "zstd:3+shuffle")
    blob = StreamInfo(2, "can", SensorKind.CAN, "bytes")
    assert str(plan_stream(blob, cfg).codec) == "zstd:3"  # no records: no shuffle
    png = StreamInfo(3, "cam_png", SensorKind.CAMERA, "png")
    assert plan_stream(png, cfg).treatment is Treatment.KEEP
    jpeg_other = StreamInfo(4, "thumb", SensorKind.OTHER, "jpeg")
    assert str(plan_stream(jpeg_other, cfg).codec) == "none"  # pre-compressed: never again
    kept = plan_stream(lidar, cfg, keep=True)
    assert (kept.treatment, str(kept.codec)) == (Treatment.KEEP, "lz4+shuffle")
    plans = plan_streams([cam, lidar], cfg.with_overrides(keep=["1"]))
    assert [p.treatment for p in plans] == [Treatment.H265, Treatment.KEEP]


def test_marker_keys_depend_on_output_settings_only() -> None:
    base = ConvertConfig()
    assert config_key(base) == config_key(base.with_overrides(workers=7))
    assert config_key(base) != config_key(base.with_overrides(encoder="x265"))
    assert config_key(base) != config_key(base.with_overrides(keep=["cam"]))
    sha = "ab" * 32
    assert marker_name(sha, config_key(base)) == f"{sha}.{config_key(base)}.json"
    with pytest.raises(ValueError, match="SHA-256"):
        marker_name("../x", "k")


def test_cli_reports_config_errors_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hyperframes.converter.cli import main

    bad = tmp_path / "c.yaml"
    bad.write_text("video:\n  presett: fast\n")
    assert main(["--config", str(bad), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "c.yaml: video.presett: unknown key" in err and "x265_preset" in err
    assert (
        main(
            [
                "--config",
                str(ROOT / "configs" / "convert-example.yaml"),
                "--check-config",
                "--workers",
                "2",
            ]
        )
        == 0
    )
    assert '"workers": 2' in capsys.readouterr().out
    assert main([str(tmp_path)]) == 2  # no --out
    assert "--out DIR is required" in capsys.readouterr().err


def test_ray_missing_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from hyperframes.converter.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # as if hyperframes-sensors[cluster] were absent
    src = tmp_path / "x.hf"
    src.write_bytes(b"x")
    assert main([str(src), "--out", str(tmp_path / "out"), "--ray", "auto"]) == 1
    assert "pip install 'hyperframes-sensors[cluster]'" in capsys.readouterr().err
