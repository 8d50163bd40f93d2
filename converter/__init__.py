"""The offline converter: hyperframe archives to ZSTD and H.265, verified, in batch.

- :mod:`hyperframes.converter.config`: the conversion YAML, validated
- :mod:`hyperframes.converter.plan`: pure decisions (which stream gets which treatment, marker keys)
- :mod:`hyperframes.converter.convert`: one archive, window by window, published only once verified
- :mod:`hyperframes.converter.verify`: the output checks (frames, bytes, bitstream rules, PSNR)
- :mod:`hyperframes.converter.batch`: the one batch loop (scan, settle, claim, ledger,
  ``failed/``, ``--watch``) and its seam to an inbox
- :mod:`hyperframes.converter.directory`: a directory inbox and output (``run_batch``), its task
- :mod:`hyperframes.converter.bucket`: a bucket inbox and output (``s3://``): store, keys,
  leases, ledger objects, its task and its command line
- :mod:`hyperframes.converter.task`: the one task entry point, for either kind of input
- :mod:`hyperframes.converter.outcome`: outcomes, and how an error becomes a failed one
- :mod:`hyperframes.converter.engines`: a local spawn pool, or Ray tasks on a cluster
- :mod:`hyperframes.converter.progress`: progress bars and the summary
- :mod:`hyperframes.converter.cli`: ``hyperframes convert`` (registered as a plugin command)

docs/CONVERTER.md describes the whole.
"""

from hyperframes import __version__ as _hyperframes_version

#: Part of every marker key: a new converter version converts everything again.
__version__ = _hyperframes_version

__all__ = ["__version__"]
