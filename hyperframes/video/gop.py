"""Where IDR pictures go: a pure decision per camera frame.

An IDR goes on the first frame of every k-th window of the global window grid
(windows ``w`` with a new value of ``w // k``), so a dropped or late camera
frame cannot shift the GOP grid: the next group of windows starts a new GOP
whatever happened before. ``max_gop`` caps the distance between IDRs (in
frames) for streams with long gaps or high rates. docs/VIDEO.md explains the
choice of k.

No GOP is ever one frame long (unless ``max_gop`` is 1 or the stream has one
frame): when the frame after an IDR already starts a new group (a stream whose
first frame falls in the last frame interval of a group, a frame stamped
exactly on a group boundary, a lone frame after a gap), that frame continues
the GOP instead, and the grid resumes at the next group. Back-to-back IDRs
make x265 code the second one far below the stream's quality (a whole GOP
under the PSNR floor, issue 18); a GOP of one frame also costs an IDR's bytes
for no random-access gain. A caller that knows which frame is the stream's
last says so (``last=True``), so that a lone final frame continues its GOP
too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hyperframes.format.windows import window_of

__all__ = ["DEFAULT_K", "DEFAULT_MAX_GOP", "IdrPlanner", "plan_idrs"]

DEFAULT_K = 3  # IDR every 3rd window: 300 ms at the usual 100 ms window (docs/VIDEO.md)
DEFAULT_MAX_GOP = 30  # frames


@dataclass(slots=True)
class IdrPlanner:
    """Decides, frame by frame in timestamp order, whether a frame is an IDR.

    ``k=1`` puts an IDR in every window; ``max_gop=1`` makes every frame an IDR.
    """

    window_ns: int
    k: int = DEFAULT_K
    max_gop: int = DEFAULT_MAX_GOP
    _group: int | None = field(default=None, init=False)
    _since_idr: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.window_ns <= 0:
            raise ValueError(f"window_ns must be > 0, got {self.window_ns}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.max_gop < 1:
            raise ValueError(f"max_gop must be >= 1, got {self.max_gop}")

    def is_idr(self, timestamp_ns: int, *, last: bool = False) -> bool:
        """True when the frame stamped ``timestamp_ns`` must be an IDR (advances the state).

        ``last=True`` for the stream's final frame: it starts no GOP of its own.
        """
        group = window_of(timestamp_ns, self.window_ns) // self.k
        if self._group is not None and group < self._group:
            raise ValueError(
                f"timestamp {timestamp_ns} belongs to window group {group}, before group "
                f"{self._group} already planned: frames must come in timestamp order"
            )
        if self._group is None or self._since_idr >= self.max_gop:
            idr = True
        elif group != self._group:
            # a new group starts a GOP, unless the current one would stay a single frame
            # (or this, the last frame, would be one)
            idr = self._since_idr > 1 and not last
        else:
            idr = False
        self._group = group
        self._since_idr = 1 if idr else self._since_idr + 1
        return idr

    def reset(self) -> None:
        """Forget the past: the next frame is an IDR (a new file, an encoder restart)."""
        self._group = None
        self._since_idr = 0


def plan_idrs(
    timestamps: Sequence[int], window_ns: int, k: int = DEFAULT_K, max_gop: int = DEFAULT_MAX_GOP
) -> list[bool]:
    """The IDR decision of every frame of a whole stream (timestamps in order)."""
    planner = IdrPlanner(window_ns, k=k, max_gop=max_gop)
    n = len(timestamps)
    return [planner.is_idr(int(t), last=i == n - 1) for i, t in enumerate(timestamps)]
