"""One segment's rows, now: what the upload service and the converter call when they finish.

:func:`append_segment` reads a local segment (header, tables, events) and
writes its rows to the catalog as the object it was uploaded or converted to
(``uri``, with the ETag the store answered), one small part per table and
partition; a later :func:`~hyperframes.catalog.build.build` skips it (same
size and ETag) and ``compact`` merges the small parts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hyperframes.catalog.build import read_rows, write_rows
from hyperframes.catalog.listing import Listed, quoted_etag
from hyperframes.catalog.store import CatalogRoot
from hyperframes.storage.objects import is_url

__all__ = ["append_segment"]


def append_segment(
    root: str,
    path_or_uri: str,
    *,
    uri: str | None = None,
    etag: str | None = None,
    sha256: str | None = None,
) -> None:
    """Catalog one segment now, in the catalog at ``root`` (made if missing).

    ``path_or_uri`` is read (a local file, or an ``s3://`` object); its rows
    are recorded under ``uri`` (default: the object's URL, or the file's
    absolute path), with ``etag`` and ``sha256`` when given. A segment that
    cannot be read is recorded as a ``problems`` row. Raises
    :class:`~hyperframes.catalog.errors.CatalogError` for a root that is no
    catalog of this version, ``OSError`` or
    :class:`~hyperframes.storage.objects.RemoteError` when the segment's store
    failed or the rows could not be written.
    """
    catalog = CatalogRoot.open(root, create=True)
    source = os.fspath(path_or_uri)
    if is_url(source):
        size, modified = 0, time.time_ns()
    else:
        path = Path(source).absolute()
        st = path.stat()
        size, modified = st.st_size, st.st_mtime_ns if uri is None else time.time_ns()
        source = str(path)
    key = uri or source
    got = read_rows(Listed(key, size, modified, quoted_etag(etag)), source, sha256)
    if got.failure is not None:
        raise OSError(got.failure)
    write_rows(catalog, got.rows, workers=4)
