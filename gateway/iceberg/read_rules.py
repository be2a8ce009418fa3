"""The rules a read of a table's files passes, written once for every operation that hands out
what a load hands out (server-side scan planning; issue 42): ``select`` on the table, the
denied-columns rule of :mod:`gateway.iceberg.trusted` (403 unless a trusted engine asks), and
the row-filter and column-mask rule (:func:`gateway.iceberg.trusted.filtered`, issue 39: 403
unless a trusted engine asks, which gets the filter and masks from the load).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog


@dataclass(frozen=True)
class Readable:
    """A table the caller may read: its metadata file and metadata, and the top-level columns
    the caller may select (None: every column)."""

    location: str
    metadata: TableMetadata
    columns: frozenset[str] | None


async def readable(catalog: Catalog, db: str, name: str) -> Readable:
    """``db.name`` checked as a load checks it, then read. Raises ``NoSuchTable``/
    ``NoSuchNamespace`` (404), ``Forbidden`` (403: no ``select``; denied columns and no
    trusted engine; a row filter or mask and no trusted engine), ``ServiceFailure`` (the
    metadata file cannot be read)."""
    catalog.named(db, name)
    catalog.require("select", db, name)
    denied = trusted.restricted(catalog, db, name)
    hive = await catalog.lookup(db, name)
    trusted.filtered(catalog, db, name, hive)  # as a load: its files only for a trusted engine
    location, metadata = await catalog.metadata(hive)
    columns = None
    if denied:
        names = [f.name for f in metadata.schema().fields]
        columns = frozenset(catalog.view.columns(db, name, names))
    return Readable(location, metadata, columns)


def require_columns(catalog: Catalog, db: str, name: str, readable: Readable, wanted: set[str]) -> None:
    """Raise :class:`~errors.Forbidden` when ``wanted`` (top-level column names a request
    selects, filters or asks statistics of) holds one denied to the caller."""
    if readable.columns is None:
        return
    denied = sorted(c for c in wanted if c not in readable.columns)
    if denied:
        raise errors.Forbidden(f"{catalog.user} may not read the column {denied[0][:100]} of {db}.{name}")
