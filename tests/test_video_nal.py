"""The pure H.265 NAL parser (hyperframes.video.nal) and the SPS colour rewrite (vui)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperframes.video import nal, vui
from hyperframes.video.testing import x265_access_units

BT709 = ":colorprim=bt709:transfer=bt709:colormatrix=bt709:range=limited"
GOOD = "keyint=10:min-keyint=10:scenecut=0:open-gop=0:bframes=0:repeat-headers=1:annexb=1:info=0"


def test_split_three_and_four_byte_start_codes() -> None:
    au = b"\x00\x00\x00\x01\x40\x01\xaa\x00\x00\x01\x42\x01\xbb\xcc\x00\x00"
    units = nal.split_nal_units(au)
    assert [(u.type, u.name, u.data, u.offset) for u in units] == [
        (32, "VPS", b"\x40\x01\xaa", 4),
        (33, "SPS", b"\x42\x01\xbb\xcc", 10),  # trailing zero bytes are not part of the NAL
    ]
    assert units[0].layer_id == 0 and units[0].temporal_id == 0


@pytest.mark.parametrize(
    ("au", "message"),
    [
        (b"\x40\x01\xaa", "start code"),
        (b"\x00\x00\x01\x40", "shorter than"),
        (b"\x00\x00\x01\xc0\x01", "forbidden_zero_bit"),
        (b"\x00\x00\x01\x40\x00\xaa", "temporal_id_plus1"),
    ],
)
def test_split_rejects_malformed(au: bytes, message: str) -> None:
    with pytest.raises(nal.NalSyntaxError, match=message):
        nal.split_nal_units(au)


@given(st.binary(max_size=64))
def test_escape_unescape_round_trip(payload: bytes) -> None:
    rbsp = payload + b"\x80"  # an RBSP ends with its stop bit
    escaped = nal.escape(rbsp)
    for bad in (b"\x00\x00\x00", b"\x00\x00\x01", b"\x00\x00\x02"):
        assert bad not in escaped
    assert nal.unescape(b"\x40\x01" + escaped) == rbsp


def test_exp_golomb_codes() -> None:
    # 1 | 010 | 011 | 00100 | 00101 | 0001000 -> ue 0, 1, 2, 3, 4, 7
    bits = "1" + "010" + "011" + "00100" + "00101" + "0001000"
    bits += "0" * (-len(bits) % 8)
    r = nal.BitReader(int(bits, 2).to_bytes(len(bits) // 8, "big"))
    assert [r.ue() for _ in range(6)] == [0, 1, 2, 3, 4, 7]
    r = nal.BitReader(bytes([0b01001100, 0b10000000]))  # se: 010 -> 1, 011 -> -1, 00100 -> 2
    assert [r.se(), r.se(), r.se()] == [1, -1, 2]
    with pytest.raises(nal.NalSyntaxError, match="past the end"):
        r.u(16)


def test_sei_payload_types_with_extended_type() -> None:
    # type 5 size 2, type 300 (0xFF + 45) size 1, then the stop bit
    sei = b"\x4e\x01" + b"\x05\x02ab" + b"\xff\x2d\x01c" + b"\x80"
    assert nal.sei_payload_types(sei) == [5, 300]
    with pytest.raises(nal.NalSyntaxError, match="runs past"):
        nal.sei_payload_types(b"\x4e\x01\x05\x09ab\x80")


def test_parse_x265_sps_pps_and_slices() -> None:
    aus = x265_access_units(96, 64, 3, GOOD + BT709)
    units = nal.split_nal_units(aus[0])
    assert [u.name for u in units] == ["VPS", "SPS", "PPS", "IDR_N_LP"]
    sps = nal.parse_sps(units[1].data)
    assert (sps.profile_idc, sps.chroma_format_idc, sps.width, sps.height) == (1, 1, 96, 64)
    assert (sps.bit_depth_luma, sps.bit_depth_chroma, sps.max_num_reorder_pics) == (8, 8, 0)
    assert sps.profile_compatibility & 0b10  # Main-compatible flag (flag index 1)
    assert sps.vui is not None
    assert (sps.vui.full_range, sps.vui.colour_primaries, sps.vui.matrix_coeffs) == (False, 1, 1)
    pps = nal.parse_pps(units[2].data)
    header = nal.parse_slice_header(units[3], {pps.pps_id: pps}, {sps.sps_id: sps})
    assert header.first_slice_segment_in_pic and header.slice_type == nal.SLICE_I
    p_slice = nal.split_nal_units(aus[1])[0]
    assert nal.parse_slice_header(p_slice, {0: pps}, {0: sps}).slice_type == nal.SLICE_P
    with pytest.raises(nal.NalSyntaxError, match="PPS 0"):
        nal.parse_slice_header(p_slice, {}, {0: sps})


def test_conformance_window_crops_to_the_picture_size() -> None:
    # x265 codes 100x60 in whole coding blocks; the conformance window takes it back
    sps_unit = nal.split_nal_units(x265_access_units(100, 60, 1, GOOD + BT709)[0])[1]
    sps = nal.parse_sps(sps_unit.data)
    assert sps.coded_width > 100 and sps.coded_height > 60
    assert (sps.width, sps.height) == (100, 60)


def _sps(params: str) -> tuple[bytes, list[bytes]]:
    aus = x265_access_units(64, 48, 4, GOOD + params)
    return next(u.data for u in nal.split_nal_units(aus[0]) if u.type == nal.SPS_NUT), aus


def _without_sps_fields(sps: nal.Sps) -> dict[str, object]:
    d = dataclasses.asdict(sps)
    d.pop("vui")
    return d


@pytest.mark.parametrize(
    "params",
    [
        "",  # no colour description
        ":range=full",
        ":range=full:colorprim=bt470bg:transfer=smpte170m:colormatrix=bt470bg",
        ":range=full:sar=2:overscan=show:chromaloc=1:vui-timing-info=1:vui-hrd-info=1"
        ":vbv-bufsize=1000:vbv-maxrate=1000",
        ":videoformat=ntsc",
    ],
)
def test_vui_rewrite_signals_bt709_limited_and_keeps_the_rest(params: str) -> None:
    original, _ = _sps(params)
    rewritten = vui.set_bt709_limited(original)
    before, after = nal.parse_sps(original), nal.parse_sps(rewritten)
    assert after.vui is not None
    assert (after.vui.full_range, after.vui.colour_primaries) == (False, 1)
    assert (after.vui.transfer_characteristics, after.vui.matrix_coeffs) == (1, 1)
    assert before.vui is not None and after.vui.video_format == before.vui.video_format
    assert _without_sps_fields(after) == _without_sps_fields(before)
    assert vui.set_bt709_limited(rewritten) == rewritten  # already conformant: unchanged


def test_vui_rewrite_adds_a_vui_to_an_sps_without_one() -> None:
    original, _ = _sps(":range=full:vui-timing-info=0")
    sps = nal.parse_sps(original)
    assert sps.vui is not None
    rbsp = nal.unescape(original)
    bits = f"{int.from_bytes(rbsp, 'big'):0{len(rbsp) * 8}b}"
    start, end = sps.vui_flag_bit, sps.vui.signal_type_bits[1]
    # x265's VUI here: no aspect/overscan, the signal type, then 7 zero flags
    assert bits[start : start + 3] == "100" and bits[end : end + 7] == "0000000"
    body = bits[: bits.rfind("1")]
    body = body[:start] + "0" + body[end + 7 :] + "1"
    body += "0" * (-len(body) % 8)
    no_vui = original[:2] + nal.escape(int(body, 2).to_bytes(len(body) // 8, "big"))
    assert nal.parse_sps(no_vui).vui is None
    fixed = nal.parse_sps(vui.set_bt709_limited(no_vui))
    assert fixed.vui is not None and fixed.vui.matrix_coeffs == 1 and not fixed.vui.full_range
    assert _without_sps_fields(fixed) == _without_sps_fields(sps)


def test_vui_rewrite_rejects_other_nal_units() -> None:
    with pytest.raises(nal.NalSyntaxError, match="not an SPS"):
        vui.set_bt709_limited(b"\x40\x01\x0c")


def _ffmpeg_yuv(stream: bytes, tmp: Path) -> np.ndarray:
    path = tmp / "in.hevc"
    path.write_bytes(stream)
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "hevc", "-i", str(path), "-f", "rawvideo", "-"],
        capture_output=True,
        check=True,
    ).stdout
    return np.frombuffer(raw, np.uint8)


def _ffprobe_colour(stream: bytes, tmp: Path) -> dict[str, str]:
    path = tmp / "probe.hevc"
    path.write_bytes(stream)
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=color_range,color_space,color_primaries,color_transfer", "-of", "json",
         str(path)],
        capture_output=True, check=True, text=True,
    ).stdout  # fmt: skip
    return dict(json.loads(out)["streams"][0])


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg CLI not installed")
def test_rewritten_stream_decodes_identically_and_says_bt709(tmp_path: Path) -> None:
    from hyperframes.video._nvenc import fix_parameter_sets

    _, aus = _sps(":range=full")
    fixed = [fix_parameter_sets(au) for au in aus]
    assert fixed[0] != aus[0] and fixed[1] == aus[1]
    assert np.array_equal(_ffmpeg_yuv(b"".join(aus), tmp_path),
                          _ffmpeg_yuv(b"".join(fixed), tmp_path))  # fmt: skip
    assert _ffprobe_colour(b"".join(aus), tmp_path)["color_range"] == "pc"
    assert _ffprobe_colour(b"".join(fixed), tmp_path) == {
        "color_range": "tv",
        "color_space": "bt709",
        "color_transfer": "bt709",
        "color_primaries": "bt709",
    }
