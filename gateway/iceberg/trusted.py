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

Row filters and column masks (Ranger's row-filter and data-mask policies, issue 39) follow the
same rule (:func:`filtered`): a table with a filter or a mask for the caller loads only for a
trusted engine, which gets them in ``config`` under :data:`ROW_FILTER`,
:data:`ROW_FILTER_POLICY` and :data:`COLUMN_MASKS`; anyone else gets 403, and no path hands
them storage access to such a table. Both rules are named on the route rows that read or hand
out a table's storage (load, commits and transactions, scan planning, ``loadCredentials``, the
S3 signer, metrics reports; :mod:`gateway.iceberg.access`), which run :func:`restricted` and
:func:`filtered` before the handler.
"""

from __future__ import annotations

import json

from pyiceberg.table.metadata import TableMetadata

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog
from gateway.policy.restrictions import TableRestrictions

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
    _require_trusted(catalog, f"{catalog.user} may not read every column of {db}.{name}: a table with "
                              "denied columns", "the authorized columns")
    return True


def _require_trusted(catalog: Catalog, what: str, enforced: str) -> None:
    """Raises :class:`~errors.Forbidden` (``what`` ... ``enforced``) unless a trusted engine asks."""
    asker = engine(catalog)
    if asker not in catalog.service.trusted_engines:
        raise errors.Forbidden(f"{what} loads only for a trusted engine of this catalog, which enforces "
                               f"{enforced} itself, and {asker} is not one")


def authorized_columns(catalog: Catalog, db: str, name: str, metadata: TableMetadata) -> dict[str, str]:
    """The ``config`` entry naming the current schema's top-level columns the user may select."""
    names = [field.name for field in metadata.schema().fields]
    return {AUTHORIZED_COLUMNS: ",".join(catalog.view.columns(db, name, names))}


#: ``config`` keys of a trusted engine's load result when a row filter applies: the Hive SQL
#: filter expression as Ranger's policy states it, and the id of that policy.
ROW_FILTER = "row-filter"
ROW_FILTER_POLICY = "row-filter-policy-id"
#: ``config`` key when masks apply: a JSON object, column name -> ``{"mask-type", "expression"
#: (Hive SQL replacing the column, Ranger's transformer), "policy-id"}``.
COLUMN_MASKS = "column-masks"


def filtered(catalog: Catalog, db: str, name: str, hive=None) -> TableRestrictions:
    """The row filter and masks that apply to the caller on ``db.name`` (the columns of
    ``hive``, the HMS table, when given; else the columns the mask policies name). Raises
    :class:`~errors.Forbidden` when one applies and the caller is no trusted engine, or when a
    mask has no expression the gateway can state (a type without a transformer): fail closed."""
    fields = (hive.sd.cols if hive is not None and hive.sd else None) or ()
    found = catalog.view.restrictions(db, name, [f.name for f in fields] if fields else None,
                                      {f.name: f.type for f in fields if f.type})
    if not found.applies:
        return found
    _require_trusted(catalog, f"{catalog.user} reads {db}.{name} through a row filter or column mask "
                              f"({found.describe()}): such a table (and storage access to it)",
                     "them")
    unstated = [column for column, mask in found.masks.items() if mask.expression is None]
    if unstated:
        raise errors.Forbidden(
            f"the mask on {', '.join(unstated)} of {db}.{name} has no expression this catalog can "
            f"state for an engine ({found.describe()})")
    return found


def restrictions_config(found: TableRestrictions) -> dict[str, str]:
    """The ``config`` entries stating ``found`` for a trusted engine (none when nothing applies)."""
    out: dict[str, str] = {}
    if found.row_filter is not None:
        out[ROW_FILTER] = found.row_filter
        out[ROW_FILTER_POLICY] = str(found.row_filter_policy)
    if found.masks:
        out[COLUMN_MASKS] = json.dumps(
            {c: {"mask-type": m.mask_type, "expression": m.expression, "policy-id": m.policy_id}
             for c, m in found.masks.items()}, separators=(",", ":"), sort_keys=True)
    return out
