"""Rewrite the colour signalling of an H.265 SPS to BT.709 limited range.

For encoders that cannot be told what to write in the VUI (NVENC through
PyNvVideoCodec either omits the video signal type or, with its ``colorspace``
option, marks full range). Only the video signal type fields change; every
other bit of the SPS is copied, so decoding is unaffected. Pure: bytes in,
bytes out.
"""

from __future__ import annotations

from hyperframes.video.nal import SPS_NUT, NalSyntaxError, escape, parse_sps, unescape

__all__ = ["BT709_LIMITED_SIGNAL", "set_bt709_limited"]

# video_signal_type_present_flag=1, video_format (3 bits, kept), video_full_range_flag=0,
# colour_description_present_flag=1, colour_primaries=1, transfer_characteristics=1,
# matrix_coeffs=1 (BT.709)
BT709_LIMITED_SIGNAL = (False, 1, 1, 1)


def _signal_bits(video_format: int) -> str:
    return "1" + f"{video_format & 7:03b}" + "0" + "1" + "00000001" * 3


def set_bt709_limited(sps_nal: bytes) -> bytes:
    """The SPS NAL unit (no start code) with its VUI saying BT.709 limited range.

    Returns the input unchanged when it already says so. Raises
    :class:`~hyperframes.video.nal.NalSyntaxError` when it is not an SPS.
    """
    if len(sps_nal) < 3 or (sps_nal[0] >> 1) & 0x3F != SPS_NUT:
        raise NalSyntaxError("not an SPS NAL unit")
    sps = parse_sps(sps_nal)
    v = sps.vui
    if (
        v is not None
        and (
            v.full_range,
            v.colour_primaries,
            v.transfer_characteristics,
            v.matrix_coeffs,
        )
        == BT709_LIMITED_SIGNAL
    ):
        return sps_nal
    rbsp = unescape(sps_nal)
    bits = f"{int.from_bytes(rbsp, 'big'):0{len(rbsp) * 8}b}"
    stop = bits.rfind("1")  # rbsp_stop_one_bit
    if stop < 0:
        raise NalSyntaxError("SPS has no rbsp_stop_one_bit")
    body = bits[:stop]
    if v is not None:
        a, b = v.signal_type_bits
        body = body[:a] + _signal_bits(v.video_format) + body[b:]
    else:
        k = sps.vui_flag_bit
        # vui_parameters_present_flag=1; no aspect ratio, no overscan info; the signal type;
        # then chroma_loc, neutral_chroma, field_seq, frame_field_info, default_display_window,
        # vui_timing_info and bitstream_restriction flags all 0
        body = body[:k] + "1" + "00" + _signal_bits(5) + "0" * 7 + body[k + 1 :]
    body += "1"
    body += "0" * (-len(body) % 8)
    new_rbsp = int(body, 2).to_bytes(len(body) // 8, "big")
    return sps_nal[:2] + escape(new_rbsp)
