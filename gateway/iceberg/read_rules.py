"""The rules a read of a table's files passes, written once for every operation that hands out
what a load hands out (server-side scan planning; issue 42): ``select`` on the table, the
denied-columns rule of :mod:`gateway.iceberg.trusted` (403 unless a trusted engine asks), and
the row-filter and column-mask rule (:func:`row_rules`, the seam issue 39 fills).
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


def row_rules(catalog: Catalog, db: str, name: str) -> None:
    """SEAM (issue 39): the row-filter and column-mask rule of a load. Issue 39 exposes it as
    ``gateway.iceberg.trusted.filtered(catalog, db, name)`` (403 when a row filter or a mask
    applies and the caller is no trusted engine); until that lands, a load applies no such rule
    and neither does this."""


async def readable(catalog: Catalog, db: str, name: str) -> Readable:
    """``db.name`` checked as a load checks it, then read. Raises ``NoSuchTable``/
    ``NoSuchNamespace`` (404), ``Forbidden`` (403: no ``select``; denied columns and no
    trusted engine), ``ServiceFailure`` (the metadata file cannot be read)."""
    catalog.named(db, name)
    catalog.require("select", db, name)
    denied = trusted.restricted(catalog, db, name)
    row_rules(catalog, db, name)
    location, metadata = await catalog.metadata(await catalog.lookup(db, name))
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
