"""``hyperframes upload``: finalized segments from the vehicle to a bucket or a directory.

A service beside the recorder (its own systemd unit) configured by the
``upload:`` section of the same vehicle YAML. Every finalized segment of the
output directory goes, once, to ``s3://BUCKET/PREFIX`` (any S3-compatible
endpoint) or a local/NFS directory under ``PREFIX/VEHICLE/YYYY-MM-DD/NAME.hf``;
each upload is resumable and proven end to end before the segment is marked
uploaded: by the store's ETag (an MD5 form of the file, computed here), AWS
S3's own SHA-256, or the object read back (:data:`~hyperframes.recorder.upload.dest.PROOFS`),
never by a checksum a store merely repeats. One segment's failure never blocks
the others (:mod:`~hyperframes.recorder.upload.service`).

Event clips go first (``PREFIX/VEHICLE/clips/NAME.hf``), then the files the
depot requested, then the segments; with ``upload.mode: events`` the segments
stay on the vehicle and only their catalog rows go up (docs/OPERATIONS.md, Upload).

Modules: :mod:`~hyperframes.recorder.upload.config` (the YAML section),
:mod:`~hyperframes.recorder.upload.plan` (pure: order, object keys, backoff, bandwidth),
:mod:`~hyperframes.recorder.upload.marks` (durable per-segment marks and resume state),
:mod:`~hyperframes.recorder.upload.local` and :mod:`~hyperframes.recorder.upload.s3` (destinations),
:mod:`~hyperframes.recorder.upload.service` (the loop), :mod:`~hyperframes.recorder.upload.stats`,
:mod:`~hyperframes.recorder.upload.clipper` (event clips),
:mod:`~hyperframes.recorder.upload.catalog_rows` (catalog rows, ``mode: events``),
the depot's requests: :mod:`~hyperframes.recorder.upload.request_doc` (pure: documents),
:mod:`~hyperframes.recorder.upload.request_store` (the store),
:mod:`~hyperframes.recorder.upload.request_stage` (staging, cutting),
:mod:`~hyperframes.recorder.upload.requests` (answering) and
:mod:`~hyperframes.recorder.upload.request_duty` (the service's poll).
"""
