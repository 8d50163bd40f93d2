"""Is a file a ROS 2 bag? Without ``rosbags``, so that ``hyperframes import`` can choose."""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_ros2_mcap"]


def is_ros2_mcap(path: Path) -> bool:
    """An MCAP file whose header profile is ``ros2`` (a rosbag2 storage file)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if not head.startswith(b"\x89MCAP0\r\n") or len(head) < 22 or head[8] != 0x01:
        return False
    n = int.from_bytes(head[17:21], "little")
    return head[21 : 21 + n] == b"ros2"
