"""Is a file a ROS 2 bag? Without ``rosbags``, so that ``hyperframes import`` can choose."""

from __future__ import annotations

from pathlib import Path

import zstandard

__all__ = ["is_ros2_mcap", "is_zstd_split"]

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _is_ros2_head(head: bytes) -> bool:
    if not head.startswith(b"\x89MCAP0\r\n") or len(head) < 22 or head[8] != 0x01:
        return False
    n = int.from_bytes(head[17:21], "little")
    return head[21 : 21 + n] == b"ros2"


def is_zstd_split(path: Path) -> bool:
    """A zstd-compressed MCAP file whose profile is ``ros2``: a split of a rosbag2 written
    with file compression (``NAME_0.mcap.zstd``), readable only through its directory."""
    with open(path, "rb") as f:
        if f.read(4) != _ZSTD_MAGIC:
            return False
        f.seek(0)
        try:
            with zstandard.ZstdDecompressor().stream_reader(f) as z:
                head = z.read(64)
        except zstandard.ZstdError:
            return False
    return _is_ros2_head(head)


def is_ros2_mcap(path: Path) -> bool:
    """An MCAP file whose header profile is ``ros2`` (a rosbag2 storage file), or such a
    file zstd-compressed (:func:`is_zstd_split`: the importer names its directory)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(_ZSTD_MAGIC):
        return is_zstd_split(path)
    return _is_ros2_head(head)
