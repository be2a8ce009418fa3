"""What a read of a table's files (server-side scan planning; issue 42) hands out, once the
route's rules judged it as a load (:mod:`gateway.iceberg.access`: ``select``, the denied-columns
rule and the row-filter and column-mask rule of :mod:`gateway.iceberg.trusted`, the storage
identity): the table read, and the columns a trusted engine may name (:func:`require_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog


@dataclass(frozen=True)
class Readable:
    """A table the caller may read: its metadata file and metadata, and the top-level columns
    the caller may select (None: every column)."""

    location: str
    metadata: TableMetadata
    columns: frozenset[str] | None


async def readable(catalog: Catalog, db: str, name: str) -> Readable:
    """``db.name``, judged as a load is by the route's rules before (:mod:`gateway.iceberg.access`:
    ``select``, denied columns and row filter and masks for trusted engines only, storage
    identity), read. Raises ``NoSuchTable``/``NoSuchNamespace`` (404), ``ServiceFailure`` (the
    metadata file cannot be read)."""
    location, metadata = await catalog.metadata(await catalog.judged(db, name))
    columns = None
    if not catalog.view.all_columns(db, name):
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
