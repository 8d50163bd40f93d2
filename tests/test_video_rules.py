"""The bitstream convention checker: accepts encoder output, names rule and frame otherwise."""

from __future__ import annotations

import pytest

from hyperframes.video import nal
from hyperframes.video.encode import EncoderSettings, create_encoder
from hyperframes.video.errors import BitstreamError
from hyperframes.video.pictures import to_yuv420
from hyperframes.video.rules import (
    RULES,
    StreamChecker,
    Violation,
    au_is_idr,
    check_access_units,
    validate_access_units,
)
from hyperframes.video.testing import moving_scene, x265_access_units

BT709 = ":colorprim=bt709:transfer=bt709:colormatrix=bt709:range=limited"
CLOSED = "scenecut=0:open-gop=0:repeat-headers=1:annexb=1:info=0"
GOOD = "keyint=5:min-keyint=5:bframes=0:" + CLOSED + BT709


@pytest.fixture(scope="module")
def good() -> list[bytes]:
    """12 access units of a conformant stream, IDRs at 0, 5, 10."""
    return x265_access_units(64, 48, 12, GOOD)


def found(violations: list[Violation]) -> list[tuple[int, str]]:
    return [(v.frame, v.rule) for v in violations]


def test_x265_encoder_output_is_accepted() -> None:
    enc = create_encoder("x265", EncoderSettings(64, 48, max_gop=4, preset="ultrafast"))
    out = []
    for i, rgb in enumerate(moving_scene(64, 48, 10)):
        out += enc.encode(to_yuv420(rgb), i, idr=i == 3)
    out += enc.flush()
    assert [au.keyframe for au in out] == [i in (0, 3, 7) for i in range(10)]
    assert check_access_units([(au.data, au.keyframe) for au in out], max_gop=4) == []


def test_good_stream_with_flags(good: list[bytes]) -> None:
    flags = [i in (0, 5, 10) for i in range(12)]
    assert [au_is_idr(au) for au in good] == flags
    assert check_access_units(list(zip(good, flags, strict=True)), max_gop=5) == []
    validate_access_units(zip(good, flags, strict=True))  # no exception


def test_wrong_keyframe_flags(good: list[bytes]) -> None:
    flags = [i in (0, 3, 10) for i in range(12)]  # 3 is a P frame, 5 is an IDR
    v = check_access_units(list(zip(good, flags, strict=True)))
    assert found(v) == [(3, "keyframe_flag"), (5, "keyframe_flag")]
    assert "flag is 1 on a non-IDR" in v[0].detail and "flag is 0 on an IDR" in v[1].detail
    with pytest.raises(BitstreamError, match="frame 3: rule 'keyframe_flag'") as info:
        validate_access_units(zip(good, flags, strict=True))
    assert (info.value.frame, info.value.rule) == (3, "keyframe_flag")


def test_b_frames_are_rejected() -> None:
    aus = x265_access_units(64, 48, 8, "keyint=30:bframes=2:b-adapt=0:" + CLOSED + BT709,
                            zerolatency=False)  # fmt: skip
    v = found(check_access_units(aus))
    assert v[0] == (0, "no_b_slices")  # sps_max_num_reorder_pics 2
    b_frames = [f for f, rule in v[1:] if rule == "no_b_slices"]
    assert b_frames and all(
        nal.split_nal_units(aus[f])[0].type in (0, 1) for f in b_frames
    )  # trailing pictures coded as B
    assert {rule for _, rule in v} == {"no_b_slices"}


def test_open_gop_is_rejected() -> None:
    aus = x265_access_units(64, 48, 12, "keyint=5:min-keyint=5:bframes=0:scenecut=0:open-gop=1:"
                            "repeat-headers=1:annexb=1:info=0" + BT709)  # fmt: skip
    assert found(check_access_units(aus)) == [(5, "closed_gop"), (10, "closed_gop")]


def test_idr_without_sps_is_rejected(good: list[bytes]) -> None:
    units = nal.split_nal_units(good[5])
    stripped = b"".join(b"\x00\x00\x01" + u.data for u in units if u.type != nal.SPS_NUT)
    aus = [*good[:5], stripped, *good[6:]]
    v = check_access_units(aus)
    assert found(v) == [(5, "idr_parameter_sets")]
    assert v[0].detail == "IDR access unit without SPS"


def test_encoder_info_sei_and_missing_colour_are_rejected() -> None:
    aus = x265_access_units(64, 48, 3, "keyint=5:min-keyint=5:bframes=0:scenecut=0:open-gop=0:"
                            "repeat-headers=1:annexb=1:info=1:range=full")  # fmt: skip
    assert found(check_access_units(aus)) == [(0, "vui_bt709_limited"), (0, "no_encoder_info_sei")]


def test_not_main_420_8bit_is_rejected() -> None:
    v444 = x265_access_units(64, 48, 2, GOOD, pix_fmt="yuv444p")
    assert found(check_access_units(v444)) == [(0, "profile_main"), (0, "chroma_420")]
    v10 = x265_access_units(64, 48, 2, GOOD, pix_fmt="yuv420p10le")
    assert found(check_access_units(v10)) == [(0, "profile_main"), (0, "bit_depth_8")]


def test_stream_must_start_with_an_idr(good: list[bytes]) -> None:
    v = found(check_access_units(good[1:]))
    assert (0, "starts_with_idr") in v
    assert (0, "annexb") in v  # its slice names a PPS that was never sent


def test_gop_length_cap(good: list[bytes]) -> None:
    assert found(check_access_units(good, max_gop=3)) == [
        (3, "gop_length"), (4, "gop_length"), (8, "gop_length"), (9, "gop_length")
    ]  # fmt: skip


def test_two_pictures_in_one_access_unit(good: list[bytes]) -> None:
    assert found(check_access_units([good[0], good[1] + good[2]])) == [(1, "one_picture")]


def test_garbage_and_other_layers(good: list[bytes]) -> None:
    assert found(check_access_units([good[0], b"\xff\xd8\xff\xe0 a JPEG"])) == [(1, "annexb")]
    layered = bytearray(good[1])
    layered[4] |= 1  # nuh_layer_id high bit
    assert found(check_access_units([good[0], bytes(layered)])) == [
        (1, "single_layer"), (1, "one_picture")
    ]  # fmt: skip


def test_resolution_change_is_rejected(good: list[bytes]) -> None:
    other = x265_access_units(96, 48, 1, GOOD)
    assert found(check_access_units([good[0], good[1], other[0]])) == [(2, "same_format")]


def test_every_rule_has_a_description_and_checker_validates_max_gop() -> None:
    assert all(isinstance(text, str) and text for text in RULES.values())
    with pytest.raises(ValueError, match="max_gop"):
        StreamChecker(0)
