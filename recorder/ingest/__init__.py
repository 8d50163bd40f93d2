"""Sensor frames in: the wire protocol and its two transports.

- :mod:`~hyperframes.recorder.ingest.wire`: the message format (docs/INGEST.md),
  parsed and checked, with the reasons a message is refused;
- :mod:`~hyperframes.recorder.ingest.common`: what both transports share: the
  router from a message to a stream, per-stream sequence numbers
  (:mod:`~hyperframes.recorder.ingest.sequence`), the counts;
- :mod:`~hyperframes.recorder.ingest.zmq` (with CURVE keys,
  :mod:`~hyperframes.recorder.ingest.curve`) and
  :mod:`~hyperframes.recorder.ingest.mqtt`: the sockets;
- :mod:`~hyperframes.recorder.ingest.publisher`: the sending side, for sensor
  drivers and the simulator.
"""
