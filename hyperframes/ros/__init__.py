"""ROS 2 bags in: a rosbag2 (directory with splits, ``.mcap`` or ``.db3``) to a hyperframe file.

- :func:`import_bag` (``hyperframes import BAG OUT.hf``): the standard sensor
  types decoded into camera, lidar, IMU and GNSS streams on header-stamp time,
  everything else kept as CDR with its definition (docs/ROS2.md);
- :mod:`~hyperframes.ros.decode`: the pure message-to-payload decoders;
- :func:`export_ros2` (``hyperframes export --profile ros2``): hyperframe files to an
  MCAP of profile ``ros2`` or a rosbag2 directory, the streams as the standard
  ``sensor_msgs`` types in CDR (:mod:`~hyperframes.ros.export`);
- :func:`is_ros2_mcap`: whether an MCAP file is a ROS 2 bag (no extra needed).

Needs the ``ros`` extra (``pip install 'hyperframes-sensors[ros]'``, the
``rosbags`` library); without it, :func:`import_bag` raises
:class:`~hyperframes.mcap.errors.MissingExtraError` naming the extra.
"""

from __future__ import annotations

from typing import Any

from hyperframes.ros.probe import is_ros2_mcap

__all__ = [
    "import_bag",
    "is_ros2_mcap",
    "NotRosbagError",
    "RosImportReport",
    "export_ros2",
    "RosExportReport",
]
_EXPORT = ("export_ros2", "RosExportReport")


def __getattr__(name: str) -> Any:
    """The importer's and exporter's names, loaded on first use (they need ``rosbags``)."""
    if name in _EXPORT:
        from hyperframes.ros import export  # noqa: PLC0415 - the optional extra

        return getattr(export, name)
    if name not in ("import_bag", "NotRosbagError", "RosImportReport"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from hyperframes.ros import ingest  # noqa: PLC0415 - the optional extra

    return getattr(ingest, name)
