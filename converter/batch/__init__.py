"""One batch loop over either inbox: a directory, or a bucket prefix.

- :mod:`hyperframes.converter.batch.inbox`: the seam (``Inbox``, ``Item``, ``Entry``)
- :mod:`hyperframes.converter.batch.loop`: the loop (scan, settle, claim, run, record)
- :mod:`hyperframes.converter.batch.ledger`: the JSON Lines ledger file

The two sides of the seam are :mod:`hyperframes.converter.directory.inbox` and
:mod:`hyperframes.converter.bucket.inbox`.
"""
