"""``hyperframes upload``: finalized segments from the vehicle to a bucket or a directory.

A service beside the recorder (its own systemd unit) configured by the
``upload:`` section of the same vehicle YAML. Every finalized segment of the
output directory goes, once, to ``s3://BUCKET/PREFIX`` (any S3-compatible
endpoint) or a local/NFS directory under ``PREFIX/VEHICLE/YYYY-MM-DD/NAME.hf``;
each upload is resumable and verified end to end (SHA-256 computed here,
compared with what the store reports) before the segment is marked uploaded.

Modules: :mod:`~recorder.upload.config` (the YAML section),
:mod:`~recorder.upload.plan` (pure: order, object keys, backoff, bandwidth),
:mod:`~recorder.upload.marks` (durable per-segment marks and resume state),
:mod:`~recorder.upload.local` and :mod:`~recorder.upload.s3` (destinations),
:mod:`~recorder.upload.service` (the loop), :mod:`~recorder.upload.stats`.
"""
