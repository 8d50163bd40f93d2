"""The Foxglove channel of a stream, for the live server: the MCAP export's mapping.

One source of schemas: :func:`live_channel` is :func:`hyperframes.mcap.schemas.channel_for`
(the function the MCAP export registers its channels with) and
:meth:`LiveChannel.encode` is the export's :meth:`ChannelSpec.encode`, so a frame
becomes the same message bytes live as in an exported MCAP file: JPEG/PNG cameras
``foxglove.CompressedImage``, H.264/H.265/AV1 ``foxglove.CompressedVideo`` (one
access unit per message), raw cameras ``foxglove.RawImage``, lidar/radar point
arrays ``foxglove.PointCloud``, ``imu-f64`` the protobuf ``hyperframes.Imu``,
``json`` payloads schemaless JSON, anything else the JSON ``hyperframes.Raw``.

The status and event channels of the live server (:data:`STATUS_TOPIC`,
:data:`EVENTS_TOPIC`) carry JSON documents with a JSON schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hyperframes.format.streams import StreamInfo
from hyperframes.mcap.schemas import (
    EVENT_SCHEMA,
    EVENTS_TOPIC,
    ChannelSpec,
    Codec,
    Schema,
    channel_for,
)

__all__ = [
    "EVENTS_TOPIC",
    "STATUS_TOPIC",
    "LiveChannel",
    "live_channel",
    "json_channel_schema",
]

STATUS_TOPIC = "/hyperframes/status"


@dataclass(frozen=True, slots=True)
class LiveChannel:
    """What a Foxglove channel needs for one stream: topic, encoding, schema, encoder."""

    stream: StreamInfo
    spec: ChannelSpec

    @property
    def topic(self) -> str:
        """The channel's topic (``/`` + the stream name, as in the MCAP export)."""
        return self.spec.topic

    @property
    def message_encoding(self) -> str:
        """``protobuf`` or ``json`` (or a foreign encoding kept from an MCAP import)."""
        return self.spec.message_encoding

    @property
    def schema(self) -> Schema | None:
        """The schema (name, encoding, data); None for schemaless JSON."""
        return self.spec.schema

    @property
    def codec(self) -> Codec:
        """How frames are carried (image, video, point cloud, IMU...)."""
        return self.spec.codec

    @property
    def metadata(self) -> dict[str, str]:
        """Channel metadata: the stream's :class:`StreamInfo` as JSON."""
        return self.spec.metadata

    def encode(self, timestamp_ns: int, payload: bytes | memoryview) -> bytes:
        """The message body for one frame, byte for byte what the MCAP export writes."""
        return self.spec.encode(timestamp_ns, payload)


def live_channel(stream: StreamInfo, topic: str | None = None) -> LiveChannel:
    """The Foxglove channel of ``stream`` (``topic``: another topic than ``/<name>``)."""
    return LiveChannel(stream, channel_for(stream, topic))


def json_channel_schema(topic: str, doc_schema: dict[str, Any] | None = None) -> Schema:
    """A JSON schema for a JSON channel: the export's event schema on
    :data:`EVENTS_TOPIC`, ``doc_schema`` (or an open object) elsewhere."""
    if topic == EVENTS_TOPIC and doc_schema is None:
        return EVENT_SCHEMA
    title = "hyperframes." + topic.strip("/").replace("/", ".")
    doc = doc_schema or {"title": title, "type": "object"}
    return Schema(str(doc.get("title", title)), "jsonschema", json.dumps(doc).encode())
