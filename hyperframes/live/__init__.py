"""Live view and playback in Foxglove, over its WebSocket protocol (docs/LIVE.md)."""
