"""A bucket inbox and output (``s3://``): the bucket's side of the batch, its task, its store.

- :mod:`hyperframes.converter.bucket.inbox`: ``run_bucket_batch``, the bucket's inbox rules
- :mod:`hyperframes.converter.bucket.task`: one input downloaded, converted, uploaded, published
- :mod:`hyperframes.converter.bucket.store`: one bucket's I/O (obstore), conditional writes
- :mod:`hyperframes.converter.bucket.keys`: the object layout and pure decisions
- :mod:`hyperframes.converter.bucket.leases`: one converter at a time per output name
- :mod:`hyperframes.converter.bucket.probe`: what the store does, found before converting
- :mod:`hyperframes.converter.bucket.ledger`: one ledger object per result
- :mod:`hyperframes.converter.bucket.cli`: ``hyperframes convert`` with ``s3://`` URLs
"""
