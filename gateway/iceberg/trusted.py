"""Loading a table with columns denied to the caller (issue 22 item 6): an Iceberg load result
carries the whole schema and the data files, so the gateway cannot remove columns from it; such
a table loads only for a **trusted engine**, one that enforces the authorized columns itself, as
AWS Glue's ``GetUnfilteredTableMetadata`` answers whole tables with ``AuthorizedColumns`` to the
engines Lake Formation trusts (the ``glue`` kind's ``trusted_engines``, same concept and shape).

The engine is the principal that asked: a ``doAs`` impersonator (Trino or Spark acting for a
user), else the effective user. The columns are judged for the effective user by the one
:class:`~gateway.policy.view.CatalogView` (``select`` on each column, Ranger's column-level Hive
check). A trusted engine gets :data:`AUTHORIZED_COLUMNS` in the load result's ``config``; anyone
else gets 403 saying why.
"""

from __future__ import annotations

from pyiceberg.table.metadata import TableMetadata

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog

#: The load result's ``config`` key: the top-level columns the user may select, comma-separated
#: in schema order (Hive column names hold no comma).
AUTHORIZED_COLUMNS = "authorized-columns"


def engine(catalog: Catalog) -> str:
    """The principal that asked: the ``doAs`` impersonator, else the effective user."""
    identity = getattr(catalog.client, "identity", None)
    return (identity.impersonator if identity is not None and identity.impersonator else None) or catalog.user


def restricted(catalog: Catalog, db: str, name: str) -> bool:
    """Whether some column of ``db.name`` is denied to the caller. Raises
    :class:`~errors.Forbidden` when so and the caller is no trusted engine."""
    if catalog.view.all_columns(db, name):
        return False
    asker = engine(catalog)
    if asker not in catalog.service.trusted_engines:
        raise errors.Forbidden(
            f"{catalog.user} may not read every column of {db}.{name}: a table with denied columns "
            f"loads only for a trusted engine of this catalog, which enforces the authorized columns "
            f"itself, and {asker} is not one")
    return True


def authorized_columns(catalog: Catalog, db: str, name: str, metadata: TableMetadata) -> dict[str, str]:
    """The ``config`` entry naming the current schema's top-level columns the user may select."""
    names = [field.name for field in metadata.schema().fields]
    return {AUTHORIZED_COLUMNS: ",".join(catalog.view.columns(db, name, names))}
