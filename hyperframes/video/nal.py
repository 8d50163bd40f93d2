"""A small pure-Python H.265 (HEVC) Annex-B parser: NAL units, SPS, PPS, slice type, SEI types.

Only what the bitstream convention needs (docs/VIDEO.md) is parsed: the SPS up
to its VUI colour description, the PPS fields that precede ``slice_type`` in a
slice header, the slice type itself, and SEI payload types. References are to
ITU-T H.265 (section numbers of the 2016+ editions). No I/O; every function
takes bytes and returns plain dataclasses, raising :class:`NalSyntaxError` on
bytes it cannot parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hyperframes.video.errors import VideoError

__all__ = [
    "NalSyntaxError",
    "NalUnit",
    "Vui",
    "Sps",
    "Pps",
    "SliceHeader",
    "split_nal_units",
    "unescape",
    "escape",
    "BitReader",
    "parse_sps",
    "parse_pps",
    "parse_slice_header",
    "sei_payload_types",
    "is_vcl",
    "is_idr",
    "NAL_NAMES",
    "IDR_W_RADL",
    "IDR_N_LP",
    "CRA_NUT",
    "VPS_NUT",
    "SPS_NUT",
    "PPS_NUT",
    "AUD_NUT",
    "PREFIX_SEI_NUT",
    "SUFFIX_SEI_NUT",
    "SLICE_B",
    "SLICE_P",
    "SLICE_I",
    "SEI_USER_DATA_UNREGISTERED",
]

# NAL unit types (H.265 table 7-1)
RADL_N: Final = 6
RADL_R: Final = 7
RASL_N: Final = 8
RASL_R: Final = 9
BLA_W_LP: Final = 16
BLA_W_RADL: Final = 17
BLA_N_LP: Final = 18
IDR_W_RADL: Final = 19
IDR_N_LP: Final = 20
CRA_NUT: Final = 21
VPS_NUT: Final = 32
SPS_NUT: Final = 33
PPS_NUT: Final = 34
AUD_NUT: Final = 35
PREFIX_SEI_NUT: Final = 39
SUFFIX_SEI_NUT: Final = 40

NAL_NAMES: Final = {
    0: "TRAIL_N", 1: "TRAIL_R", 2: "TSA_N", 3: "TSA_R", 4: "STSA_N", 5: "STSA_R",
    6: "RADL_N", 7: "RADL_R", 8: "RASL_N", 9: "RASL_R", 16: "BLA_W_LP", 17: "BLA_W_RADL",
    18: "BLA_N_LP", 19: "IDR_W_RADL", 20: "IDR_N_LP", 21: "CRA_NUT", 32: "VPS", 33: "SPS",
    34: "PPS", 35: "AUD", 36: "EOS", 37: "EOB", 38: "FD", 39: "PREFIX_SEI", 40: "SUFFIX_SEI",
}  # fmt: skip

SLICE_B: Final = 0
SLICE_P: Final = 1
SLICE_I: Final = 2
SEI_USER_DATA_UNREGISTERED: Final = 5  # where x265 writes its version and options


class NalSyntaxError(VideoError, ValueError):
    """Bytes that are not a well-formed Annex-B access unit or NAL unit."""


@dataclass(frozen=True, slots=True)
class NalUnit:
    """One NAL unit of an access unit: its 2-byte header fields and its bytes (escaped)."""

    type: int
    layer_id: int
    temporal_id: int
    data: bytes  # the NAL unit without start code, header included, emulation prevention kept
    offset: int  # where ``data`` starts in the access unit

    @property
    def name(self) -> str:
        """The type's name from H.265 table 7-1 (``"RSV_<n>"`` for reserved types)."""
        return NAL_NAMES.get(self.type, f"RSV_{self.type}")


def is_vcl(nal_type: int) -> bool:
    """True for coded slice segment NAL units (types 0..31)."""
    return nal_type < 32


def is_idr(nal_type: int) -> bool:
    """True for IDR slice segments (IDR_W_RADL, IDR_N_LP)."""
    return nal_type in (IDR_W_RADL, IDR_N_LP)


def split_nal_units(au: bytes | bytearray | memoryview) -> list[NalUnit]:
    """Split an Annex-B access unit at its start codes (``00 00 01`` or ``00 00 00 01``)."""
    data = bytes(au)
    if not data.startswith((b"\x00\x00\x01", b"\x00\x00\x00\x01")):
        raise NalSyntaxError(f"does not start with an Annex-B start code: {data[:4].hex()}")
    starts: list[int] = []
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = data.find(b"\x00\x00\x01", i + 3)
    units: list[NalUnit] = []
    for k, begin in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(data)
        while end > begin and data[end - 1] == 0:  # trailing_zero_8bits / next 4-byte start code
            end -= 1
        if end - begin < 2:
            raise NalSyntaxError(f"NAL unit at byte {begin} is shorter than its 2-byte header")
        b0, b1 = data[begin], data[begin + 1]
        if b0 & 0x80:
            raise NalSyntaxError(f"NAL unit at byte {begin}: forbidden_zero_bit is 1")
        tid_plus1 = b1 & 0x07
        if tid_plus1 == 0:
            raise NalSyntaxError(f"NAL unit at byte {begin}: nuh_temporal_id_plus1 is 0")
        units.append(
            NalUnit(
                type=(b0 >> 1) & 0x3F,
                layer_id=((b0 & 1) << 5) | (b1 >> 3),
                temporal_id=tid_plus1 - 1,
                data=data[begin:end],
                offset=begin,
            )
        )
    return units


def unescape(nal: bytes, limit: int | None = None) -> bytes:
    """The RBSP of a NAL unit's payload: header dropped, emulation prevention bytes removed.

    ``limit`` unescapes only the first ``limit`` payload bytes (enough for a
    slice header, without touching the slice data). In valid NAL units
    ``00 00 03`` occurs only as an escape, and escapes do not overlap.
    """
    payload = nal[2:] if limit is None else nal[2 : 2 + limit]
    return payload.replace(b"\x00\x00\x03", b"\x00\x00")


def escape(rbsp: bytes) -> bytes:
    """Insert emulation prevention bytes: ``00 00 0x`` (x <= 3) becomes ``00 00 03 0x``."""
    out = bytearray()
    zeros = 0
    for byte in rbsp:
        if zeros >= 2 and byte <= 3:
            out.append(3)
            zeros = 0
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


class BitReader:
    """MSB-first bit reader over an RBSP with Exp-Golomb codes (H.265 9.2)."""

    def __init__(self, data: bytes) -> None:
        self._value = int.from_bytes(data, "big")
        self._size = len(data) * 8
        self.pos = 0

    @property
    def bits_left(self) -> int:
        """Bits not read yet."""
        return self._size - self.pos

    def u(self, n: int) -> int:
        """An ``n``-bit unsigned integer."""
        if n == 0:
            return 0
        if self.pos + n > self._size:
            raise NalSyntaxError(f"read past the end of the RBSP ({self._size} bits)")
        self.pos += n
        return (self._value >> (self._size - self.pos)) & ((1 << n) - 1)

    def flag(self) -> bool:
        """One bit as a bool."""
        return bool(self.u(1))

    def ue(self) -> int:
        """An unsigned Exp-Golomb code ``ue(v)``."""
        zeros = 0
        while not self.u(1):
            zeros += 1
            if zeros > 31:
                raise NalSyntaxError("Exp-Golomb code longer than 32 bits")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        """A signed Exp-Golomb code ``se(v)``."""
        k = self.ue()
        return (k + 1) // 2 if k & 1 else -(k // 2)


@dataclass(frozen=True, slots=True)
class Vui:
    """The colour signalling of an SPS's VUI (H.265 E.2.1); ``None`` fields were absent."""

    video_signal_type_present: bool
    full_range: bool | None
    colour_primaries: int | None
    transfer_characteristics: int | None
    matrix_coeffs: int | None
    video_format: int = 5  # 5: unspecified
    signal_type_bits: tuple[int, int] = (0, 0)  # RBSP bit span of the video signal type fields


@dataclass(frozen=True, slots=True)
class Sps:
    """The fields of a sequence parameter set the convention checks."""

    sps_id: int
    profile_idc: int
    profile_compatibility: int  # general_profile_compatibility_flag[0..31], bit j = flag j
    level_idc: int
    chroma_format_idc: int
    coded_width: int
    coded_height: int
    width: int  # after the conformance window
    height: int
    bit_depth_luma: int
    bit_depth_chroma: int
    max_num_reorder_pics: int  # of the highest sub-layer
    log2_ctb_size: int
    vui: Vui | None
    vui_flag_bit: int = 0  # RBSP bit position of vui_parameters_present_flag

    @property
    def pic_size_in_ctbs(self) -> int:
        """PicSizeInCtbsY: the number of coding tree blocks in a picture."""
        ctb = 1 << self.log2_ctb_size
        return (-(-self.coded_width // ctb)) * (-(-self.coded_height // ctb))


@dataclass(frozen=True, slots=True)
class Pps:
    """The fields of a picture parameter set that precede ``slice_type`` in slice headers."""

    pps_id: int
    sps_id: int
    dependent_slice_segments_enabled: bool
    num_extra_slice_header_bits: int


@dataclass(frozen=True, slots=True)
class SliceHeader:
    """The start of a slice segment header; ``slice_type`` is ``None`` for dependent segments."""

    first_slice_segment_in_pic: bool
    pps_id: int
    dependent: bool
    slice_type: int | None


def _profile_tier_level(r: BitReader, max_sub_layers_minus1: int) -> tuple[int, int, int]:
    r.u(2)  # general_profile_space
    r.u(1)  # general_tier_flag
    profile_idc = r.u(5)
    compat = r.u(32)
    r.u(4)  # progressive, interlaced, non_packed, frame_only
    r.u(43)  # constraint flags / reserved
    r.u(1)  # general_inbld_flag / reserved
    level_idc = r.u(8)
    present = [(r.flag(), r.flag()) for _ in range(max_sub_layers_minus1)]
    if max_sub_layers_minus1 > 0:
        for _ in range(max_sub_layers_minus1, 8):
            r.u(2)
    for profile_present, level_present in present:
        if profile_present:
            r.u(88)
        if level_present:
            r.u(8)
    # bit j of the u(32) is flag j counted from the most significant bit: re-index
    compat_by_index = int(f"{compat:032b}"[::-1], 2)
    return profile_idc, compat_by_index, level_idc


def _scaling_list_data(r: BitReader) -> None:
    for size_id in range(4):
        for _matrix_id in range(0, 6, 3 if size_id == 3 else 1):
            if not r.flag():  # scaling_list_pred_mode_flag
                r.ue()  # scaling_list_pred_matrix_id_delta
                continue
            coef_num = min(64, 1 << (4 + (size_id << 1)))
            if size_id > 1:
                r.se()  # scaling_list_dc_coef_minus8
            for _ in range(coef_num):
                r.se()


def _st_ref_pic_sets(r: BitReader, count: int) -> None:
    num_delta_pocs: list[int] = []
    for idx in range(count):
        inter = r.flag() if idx != 0 else False
        if inter:
            r.u(1)  # delta_rps_sign
            r.ue()  # abs_delta_rps_minus1
            ref = num_delta_pocs[idx - 1]  # delta_idx_minus1 is 0 inside an SPS
            n = 0
            for _ in range(ref + 1):
                used = r.flag()
                use_delta = True if used else r.flag()
                n += used or use_delta
            num_delta_pocs.append(n)
        else:
            neg, pos = r.ue(), r.ue()
            if neg > 16 or pos > 16:
                raise NalSyntaxError(f"st_ref_pic_set {idx}: {neg}+{pos} delta POCs (max 16)")
            for _ in range(neg + pos):
                r.ue()
                r.u(1)
            num_delta_pocs.append(neg + pos)


def _vui(r: BitReader) -> Vui:
    if r.flag() and r.u(8) == 255:  # aspect_ratio_info_present_flag, EXTENDED_SAR
        r.u(16)
        r.u(16)
    if r.flag():  # overscan_info_present_flag
        r.u(1)
    start = r.pos
    if not r.flag():  # video_signal_type_present_flag
        return Vui(False, None, None, None, None, signal_type_bits=(start, r.pos))
    video_format = r.u(3)
    full_range = r.flag()
    if not r.flag():  # colour_description_present_flag
        return Vui(True, full_range, None, None, None, video_format, (start, r.pos))
    prim, trc, matrix = r.u(8), r.u(8), r.u(8)
    return Vui(True, full_range, prim, trc, matrix, video_format, (start, r.pos))


def parse_sps(nal: bytes) -> Sps:
    """Parse a sequence parameter set NAL unit (H.265 7.3.2.2) up to its VUI colour fields."""
    r = BitReader(unescape(nal))
    r.u(4)  # sps_video_parameter_set_id
    max_sub_layers_minus1 = r.u(3)
    r.u(1)  # sps_temporal_id_nesting_flag
    profile_idc, compat, level_idc = _profile_tier_level(r, max_sub_layers_minus1)
    sps_id = r.ue()
    chroma_format_idc = r.ue()
    if chroma_format_idc == 3:
        r.u(1)  # separate_colour_plane_flag
    coded_w, coded_h = r.ue(), r.ue()
    width, height = coded_w, coded_h
    if r.flag():  # conformance_window_flag
        sub_w = 2 if chroma_format_idc in (1, 2) else 1
        sub_h = 2 if chroma_format_idc == 1 else 1
        left, right, top, bottom = r.ue(), r.ue(), r.ue(), r.ue()
        width -= sub_w * (left + right)
        height -= sub_h * (top + bottom)
    depth_luma, depth_chroma = r.ue() + 8, r.ue() + 8
    log2_max_poc_lsb = r.ue() + 4
    ordering_all = r.flag()
    reorder = 0
    for _ in range(0 if ordering_all else max_sub_layers_minus1, max_sub_layers_minus1 + 1):
        r.ue()  # sps_max_dec_pic_buffering_minus1
        reorder = r.ue()
        r.ue()  # sps_max_latency_increase_plus1
    log2_min_cb = r.ue() + 3
    log2_ctb = log2_min_cb + r.ue()
    for _ in range(4):  # min/diff transform block sizes, transform hierarchy depths
        r.ue()
    if r.flag() and r.flag():  # scaling_list_enabled_flag, sps_scaling_list_data_present_flag
        _scaling_list_data(r)
    r.u(1)  # amp_enabled_flag
    r.u(1)  # sample_adaptive_offset_enabled_flag
    if r.flag():  # pcm_enabled_flag
        r.u(8)
        r.ue()
        r.ue()
        r.u(1)
    _st_ref_pic_sets(r, r.ue())
    if r.flag():  # long_term_ref_pics_present_flag
        for _ in range(r.ue()):
            r.u(log2_max_poc_lsb)
            r.u(1)
    r.u(1)  # sps_temporal_mvp_enabled_flag
    r.u(1)  # strong_intra_smoothing_enabled_flag
    vui_flag_bit = r.pos
    vui = _vui(r) if r.flag() else None
    return Sps(
        sps_id=sps_id,
        profile_idc=profile_idc,
        profile_compatibility=compat,
        level_idc=level_idc,
        chroma_format_idc=chroma_format_idc,
        coded_width=coded_w,
        coded_height=coded_h,
        width=width,
        height=height,
        bit_depth_luma=depth_luma,
        bit_depth_chroma=depth_chroma,
        max_num_reorder_pics=reorder,
        log2_ctb_size=log2_ctb,
        vui=vui,
        vui_flag_bit=vui_flag_bit,
    )


def parse_pps(nal: bytes) -> Pps:
    """Parse the leading fields of a picture parameter set NAL unit (H.265 7.3.2.3)."""
    r = BitReader(unescape(nal))
    pps_id, sps_id = r.ue(), r.ue()
    dependent = r.flag()
    r.u(1)  # output_flag_present_flag
    return Pps(pps_id, sps_id, dependent, r.u(3))


def parse_slice_header(unit: NalUnit, pps: dict[int, Pps], sps: dict[int, Sps]) -> SliceHeader:
    """Parse a slice segment header up to ``slice_type`` (H.265 7.3.6.1).

    ``pps``/``sps`` map ids to the parameter sets in force; a header that names
    an unknown one raises :class:`NalSyntaxError`.
    """
    r = BitReader(unescape(unit.data, limit=64))  # a header up to slice_type is far shorter
    first = r.flag()
    if BLA_W_LP <= unit.type <= 23:
        r.u(1)  # no_output_of_prior_pics_flag
    pps_id = r.ue()
    p = pps.get(pps_id)
    if p is None:
        raise NalSyntaxError(f"slice refers to PPS {pps_id}, which was not sent")
    s = sps.get(p.sps_id)
    if s is None:
        raise NalSyntaxError(f"PPS {pps_id} refers to SPS {p.sps_id}, which was not sent")
    dependent = False
    if not first:
        if p.dependent_slice_segments_enabled:
            dependent = r.flag()
        r.u(max(0, (s.pic_size_in_ctbs - 1).bit_length()))  # slice_segment_address
    if dependent:
        return SliceHeader(first, pps_id, True, None)
    r.u(p.num_extra_slice_header_bits)
    return SliceHeader(first, pps_id, False, r.ue())


def sei_payload_types(nal: bytes) -> list[int]:
    """The payload types of the SEI messages in an SEI NAL unit (H.265 7.3.5)."""
    rbsp = unescape(nal)
    types: list[int] = []
    i = 0
    while i < len(rbsp) and not (rbsp[i] == 0x80 and i == len(rbsp) - 1):
        values = []
        for _ in range(2):  # payloadType, then payloadSize: runs of 0xFF plus a last byte
            v = 0
            while i < len(rbsp) and rbsp[i] == 0xFF:
                v += 255
                i += 1
            if i >= len(rbsp):
                raise NalSyntaxError("SEI message cut short")
            v += rbsp[i]
            i += 1
            values.append(v)
        types.append(values[0])
        i += values[1]
        if i > len(rbsp):
            raise NalSyntaxError(f"SEI payload of type {values[0]} runs past the NAL unit")
    return types
