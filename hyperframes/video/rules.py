"""The H.265 bitstream convention as rules checked on a sequence of access units.

Pure logic over :mod:`hyperframes.video.nal`: :class:`StreamChecker` is fed
one access unit (one index entry) at a time, with the KEYFRAME flag the index
holds for it, and returns every :class:`Violation` it finds, each naming the
rule and the 0-based frame. :data:`RULES` lists the rules; docs/VIDEO.md says
why each exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

# not `from hyperframes.video import nal`: the package imports this module (a cycle)
import hyperframes.video.nal as nal  # noqa: PLR0402
from hyperframes.video.errors import BitstreamError

__all__ = [
    "RULES",
    "Violation",
    "StreamChecker",
    "check_access_units",
    "validate_access_units",
    "au_is_idr",
]

RULES: Final = {
    "annexb": "the access unit is Annex-B: start codes, well-formed NAL unit headers and syntax",
    "single_layer": "every NAL unit has nuh_layer_id 0",
    "one_picture": "the access unit holds exactly one coded picture",
    "starts_with_idr": "the first access unit is an IDR picture",
    "closed_gop": "no CRA, BLA or RASL pictures (every random access point is an IDR)",
    "idr_parameter_sets": "every IDR access unit carries VPS, SPS and PPS before its slices",
    "profile_main": "the SPS says HEVC Main (general_profile_idc 1)",
    "chroma_420": "the SPS says 4:2:0 (chroma_format_idc 1)",
    "bit_depth_8": "the SPS says 8-bit luma and chroma",
    "even_dimensions": "the picture (after the conformance window) has even width and height",
    "no_b_slices": "no B slices and no picture reordering (sps_max_num_reorder_pics 0)",
    "no_encoder_info_sei": "no user-data-unregistered SEI (encoder version and options)",
    "vui_bt709_limited": "the VUI signals limited range and BT.709 primaries, transfer, matrix",
    "same_format": "every SPS has the dimensions and format of the first one",
    "keyframe_flag": "the index KEYFRAME flag is set exactly on IDR access units",
    "gop_length": "at most max_gop access units from one IDR to the next",
}

_Reporter = Callable[[str, str], None]  # bad(rule, detail)
_OPEN_GOP_TYPES = {nal.RASL_N, nal.RASL_R, nal.BLA_W_LP, nal.BLA_W_RADL, nal.BLA_N_LP, nal.CRA_NUT}


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: which (a key of :data:`RULES`), on which frame, and what was seen."""

    frame: int
    rule: str
    detail: str

    def error(self) -> BitstreamError:
        """This violation as an exception."""
        return BitstreamError(self.rule, self.frame, self.detail)

    def __str__(self) -> str:
        return f"frame {self.frame}: {self.rule}: {self.detail}"


def au_is_idr(au: bytes | bytearray | memoryview) -> bool:
    """True when the access unit holds an IDR slice (cheap: NAL headers only)."""
    return any(nal.is_idr(u.type) for u in nal.split_nal_units(au))


class StreamChecker:
    """Checks access units one after another against the convention (see :data:`RULES`).

    ``max_gop`` enables the ``gop_length`` rule. Feed with :meth:`check`; the
    checker keeps the parameter sets seen so far and the first SPS's format.
    """

    def __init__(self, max_gop: int | None = None) -> None:
        if max_gop is not None and max_gop < 1:
            raise ValueError(f"max_gop must be >= 1, got {max_gop}")
        self.max_gop = max_gop
        self.frame = 0
        self._sps: dict[int, nal.Sps] = {}
        self._pps: dict[int, nal.Pps] = {}
        self._first_sps: nal.Sps | None = None
        self._since_idr: int | None = None

    def check(
        self, au: bytes | bytearray | memoryview, keyframe: bool | None = None
    ) -> list[Violation]:
        """Violations of access unit number :attr:`frame` (then advances to the next frame).

        ``keyframe`` is the index flag stored with the access unit; ``None``
        skips the ``keyframe_flag`` rule (for encoder output not yet indexed).
        """
        found: list[Violation] = []
        frame = self.frame
        self.frame += 1

        def bad(rule: str, detail: str) -> None:
            found.append(Violation(frame, rule, detail))

        try:
            units = nal.split_nal_units(au)
        except nal.NalSyntaxError as exc:
            bad("annexb", str(exc))
            return found
        idr = any(nal.is_idr(u.type) for u in units)
        self._check_picture(units, idr, bad)
        if keyframe is not None and keyframe != idr:
            bad(
                "keyframe_flag",
                f"index KEYFRAME flag is {int(keyframe)} on a{'n IDR' if idr else ' non-IDR'} "
                "access unit",
            )
        if frame == 0 and not idr:
            bad("starts_with_idr", "the first access unit is not an IDR picture")
        self._since_idr = 1 if idr else (self._since_idr or 0) + 1
        if self.max_gop is not None and self._since_idr > self.max_gop:
            bad("gop_length", f"{self._since_idr} frames since the last IDR (max {self.max_gop})")
        return found

    def _check_picture(self, units: list[nal.NalUnit], idr: bool, bad: _Reporter) -> None:
        seen_before_slice: set[int] = set()
        pictures = 0
        vcl = False
        for u in units:
            if u.layer_id != 0:
                bad("single_layer", f"{u.name} at byte {u.offset} has nuh_layer_id {u.layer_id}")
                continue
            if u.type in _OPEN_GOP_TYPES:
                bad("closed_gop", f"{u.name} picture (open-GOP random access)")
            try:
                if u.type == nal.SPS_NUT:
                    self._add_sps(nal.parse_sps(u.data), bad)
                elif u.type == nal.PPS_NUT:
                    p = nal.parse_pps(u.data)
                    self._pps[p.pps_id] = p
                elif u.type in (nal.PREFIX_SEI_NUT, nal.SUFFIX_SEI_NUT):
                    if nal.SEI_USER_DATA_UNREGISTERED in nal.sei_payload_types(u.data):
                        bad("no_encoder_info_sei", f"{u.name} with user-data-unregistered payload")
                elif nal.is_vcl(u.type):
                    vcl = True
                    header = nal.parse_slice_header(u, self._pps, self._sps)
                    pictures += header.first_slice_segment_in_pic
                    if header.slice_type == nal.SLICE_B:
                        bad("no_b_slices", f"{u.name} slice at byte {u.offset} is a B slice")
            except nal.NalSyntaxError as exc:
                bad("annexb", f"{u.name} at byte {u.offset}: {exc}")
            if not vcl:
                seen_before_slice.add(u.type)
        if not vcl or pictures != 1:
            bad("one_picture", f"{pictures} coded pictures (first_slice_segment_in_pic_flag)")
        if idr:
            missing = [
                name
                for t, name in ((nal.VPS_NUT, "VPS"), (nal.SPS_NUT, "SPS"), (nal.PPS_NUT, "PPS"))
                if t not in seen_before_slice
            ]
            if missing:
                bad("idr_parameter_sets", f"IDR access unit without {', '.join(missing)}")

    def _add_sps(self, s: nal.Sps, bad: _Reporter) -> None:
        self._sps[s.sps_id] = s
        if s.profile_idc != 1:
            bad("profile_main", f"general_profile_idc {s.profile_idc}, expected 1 (Main)")
        if s.chroma_format_idc != 1:
            bad("chroma_420", f"chroma_format_idc {s.chroma_format_idc}, expected 1 (4:2:0)")
        if (s.bit_depth_luma, s.bit_depth_chroma) != (8, 8):
            bad("bit_depth_8", f"bit depths {s.bit_depth_luma}/{s.bit_depth_chroma}, expected 8/8")
        if s.width % 2 or s.height % 2:
            bad("even_dimensions", f"picture is {s.width}x{s.height}")
        if s.max_num_reorder_pics != 0:
            bad("no_b_slices", f"sps_max_num_reorder_pics is {s.max_num_reorder_pics}, expected 0")
        v = s.vui
        colour = (
            None
            if v is None
            else (v.full_range, v.colour_primaries, v.transfer_characteristics, v.matrix_coeffs)
        )
        if colour != (False, 1, 1, 1):
            bad(
                "vui_bt709_limited",
                "VUI colour (full_range, primaries, transfer, matrix) is "
                f"{colour}, expected (False, 1, 1, 1)",
            )
        first = self._first_sps
        if first is None:
            self._first_sps = s
        elif (s.width, s.height, s.chroma_format_idc, s.bit_depth_luma) != (
            first.width,
            first.height,
            first.chroma_format_idc,
            first.bit_depth_luma,
        ):
            bad(
                "same_format",
                f"SPS says {s.width}x{s.height}, the stream began at {first.width}x{first.height}",
            )


def check_access_units(
    aus: Iterable[bytes | tuple[bytes, bool]], max_gop: int | None = None
) -> list[Violation]:
    """Every violation in a sequence of access units, each optionally with its KEYFRAME flag."""
    checker = StreamChecker(max_gop)
    found: list[Violation] = []
    for item in aus:
        if isinstance(item, tuple):
            found += checker.check(item[0], item[1])
        else:
            found += checker.check(item)
    return found


def validate_access_units(
    aus: Iterable[bytes | tuple[bytes, bool]], max_gop: int | None = None
) -> None:
    """Raise :class:`BitstreamError` for the first violation, naming the rule and the frame."""
    checker = StreamChecker(max_gop)
    for item in aus:
        au, flag = item if isinstance(item, tuple) else (item, None)
        found = checker.check(au, flag)
        if found:
            raise found[0].error()
