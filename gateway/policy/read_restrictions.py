"""The Iceberg REST spec's ``LoadTableResult.read-restrictions`` for one caller on one table:
the row filter (:mod:`gateway.policy.row_filter_expression`), each mask
(:mod:`gateway.policy.mask_actions`) and each column denied to the caller (``replace-with-null``)
over the table's current schema, or None when nothing restricts the read.

A column both masked and denied is denied (one projection per field id, as the spec requires).
A mask on a column the current schema lacks restricts nothing: there is no such column to read.
Raises :class:`~gateway.policy.hive_sql.Unstatable` for anything the spec cannot state
exactly; the load then fails closed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from gateway.policy.hive_sql import Unstatable
from gateway.policy.mask_actions import column_projection, denied_projection
from gateway.policy.restrictions import TableRestrictions
from gateway.policy.row_filter_expression import required_row_filter

__all__ = ["caller_restrictions", "denied_columns", "read_restrictions"]


def read_restrictions(found: TableRestrictions, schema: Schema, denied: Iterable[str] = ()) -> dict | None:
    """``{"required-row-filter": Predicate, "required-column-projections": [{"field-id",
    "action"}...]}`` (each key only when it restricts) for ``found`` (the caller's row filter
    and masks, :func:`gateway.policy.restrictions.table_restrictions` given the table's
    columns) and the ``denied`` column names, over ``schema``; None when nothing restricts."""
    if not found.complete:
        raise Unstatable(None, "a mask on columns named by exclusion", "the table's columns were not given")
    restrictions: dict = {}
    if found.row_filter is not None:
        predicate = required_row_filter(found.row_filter, found.row_filter_policy, schema)
        if predicate is not True:
            restrictions["required-row-filter"] = predicate
    projections: dict[int, dict] = {}
    for column, mask in found.masks.items():
        field = _field(schema, column)
        projection = column_projection(mask, field) if field is not None else None
        if projection is not None:
            projections[field.field_id] = projection
    for column in denied:
        field = _field(schema, column)
        if field is not None:
            projections[field.field_id] = denied_projection(field)
    if projections:
        restrictions["required-column-projections"] = [projections[i] for i in sorted(projections)]
    return restrictions or None


def denied_columns(view, database: str, table: str, names: Sequence[str]) -> list[str]:
    """The ``names`` (in order) the caller of ``view`` (a :class:`~gateway.policy.view.CatalogView`)
    may not select on ``database.table``."""
    if view.all_columns(database, table):
        return []
    kept = set(view.columns(database, table, names))
    return [n for n in names if n not in kept]


def caller_restrictions(view, database: str, table: str, schema: Schema,
                        column_types: Mapping[str, str] | None = None) -> dict | None:
    """The ``read-restrictions`` binding the caller of ``view`` (a
    :class:`~gateway.policy.view.CatalogView`: its row filter, masks and denied columns) on
    ``database.table`` over ``schema``; ``column_types`` the Hive types of a mask's
    ``{colType}``. None when nothing restricts. Raises :class:`Unstatable`. What an Iceberg load
    of a trusted engine states (:func:`gateway.iceberg.trusted.required`) and ``hms-gateway
    policy check --schema`` prints."""
    names = [f.name for f in schema.fields]
    found = view.restrictions(database, table, names, column_types)
    denied = denied_columns(view, database, table, names)
    if not found.applies and not denied:
        return None
    return read_restrictions(found, schema, denied)


def _field(schema: Schema, column: str) -> NestedField | None:
    """The top-level field named ``column`` as Hive names it (any case)."""
    found = [f for f in schema.fields if f.name.lower() == column.lower()]
    if len(found) > 1:
        raise Unstatable(None, column, "several columns of the current schema have this name")
    return found[0] if found else None
