"""Where the bytes of a file live: a local file or an object in an S3-compatible store.

The reader asks storage for bytes through one small interface
(:mod:`hyperframes.storage.source`): a :data:`~hyperframes.storage.source.Source`
is a file descriptor or a :class:`~hyperframes.storage.source.RangeSource` (an
object read with ranged GETs, :mod:`hyperframes.storage.objects`), and
:func:`~hyperframes.storage.source.pread_exact`,
:func:`~hyperframes.storage.source.pread_into` and
:func:`~hyperframes.storage.source.source_size` serve both alike.
:mod:`hyperframes.storage.local` also writes: positional writes, ``fsync``,
files that appear whole or not at all, and the safe primitives every writer of
the project creates files with (no symbolic link followed, nothing replaced).

Storage knows nothing of the format: it imports only :mod:`hyperframes.errors`
and the install hints.
"""
