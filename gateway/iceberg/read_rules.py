"""What a read of a table's files (server-side scan planning; issue 42) hands out, once the
route's rules judged it as a load (:mod:`gateway.iceberg.access`: ``select``, the denied-columns
rule and the row-filter and column-mask rule of :mod:`gateway.iceberg.trusted`, the storage
identity): the table read with the caller's read restrictions (:func:`readable`), and a plan's
scope bound by them (:func:`bound`, issue 49): no column denied to the caller named, no
statistics of a masked or denied column, the required row filter ANDed into the plan's filter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyiceberg.conversions import from_json
from pyiceberg.expressions import (
    AlwaysFalse, AlwaysTrue, And, BooleanExpression, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNaN, IsNull,
    LessThan, LessThanOrEqual, Not, NotEqualTo, NotIn, NotNaN, NotNull, NotStartsWith, Or, StartsWith,
)
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table.metadata import TableMetadata

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.planning import Scope


@dataclass(frozen=True)
class Readable:
    """A table the caller may read: its metadata file and metadata, the top-level columns the
    caller may select (None: every column), and the caller's ``read-restrictions`` over the
    current schema (None: none; :func:`gateway.iceberg.trusted.required`)."""

    location: str
    metadata: TableMetadata
    columns: frozenset[str] | None
    restrictions: dict | None = None


async def readable(catalog: Catalog, db: str, name: str) -> Readable:
    """``db.name``, judged as a load is by the route's rules before (:mod:`gateway.iceberg.access`:
    ``select``, denied columns and row filter and masks for trusted engines only, storage
    identity), read. Raises ``NoSuchTable``/``NoSuchNamespace`` (404), ``ServiceFailure`` (the
    metadata file cannot be read), ``Forbidden`` (restrictions that cannot be stated: as the
    load)."""
    hive = await catalog.judged(db, name)
    location, metadata = await catalog.metadata(hive)
    columns = None
    if not catalog.view.all_columns(db, name):
        names = [f.name for f in metadata.schema().fields]
        columns = frozenset(catalog.view.columns(db, name, names))
    return Readable(location, metadata, columns, trusted.required(catalog, db, name, metadata.schema(), hive))


def require_columns(catalog: Catalog, db: str, name: str, readable: Readable, wanted: set[str]) -> None:
    """Raise :class:`~errors.Forbidden` when ``wanted`` (top-level column names a request
    selects, filters or asks statistics of) holds one denied to the caller."""
    if readable.columns is None:
        return
    denied = sorted(c for c in wanted if c not in readable.columns)
    if denied:
        raise errors.Forbidden(f"{catalog.user} may not read the column {denied[0][:100]} of {db}.{name}")


def bound(catalog: Catalog, db: str, name: str, table: Readable, found: Scope) -> Scope:
    """``found`` (a plan's scope on ``table``) bound by the caller's read restrictions: the
    required row filter ANDed into its filter and kept as :attr:`Scope.required`. Raises
    :class:`~errors.Forbidden` (403) for a column denied to the caller that the request names,
    for ``stats-fields`` naming a masked or denied column (its bounds would show its values),
    and for a required filter over a column the scope's schema (a snapshot's) lacks."""
    require_columns(catalog, db, name, table, set(found.columns))
    restrictions = table.restrictions
    if not restrictions:
        return found
    current = table.metadata.schema()
    hidden: dict[int, str] = {}
    for projection in restrictions.get("required-column-projections") or ():
        top = current.find_field(projection["field-id"])
        hidden[top.field_id] = top.name
        if not top.field_type.is_primitive:
            hidden.update(dict.fromkeys(index_by_id(top.field_type), top.name))
    shown = sorted({hidden[i] for i in found.stats_ids if i in hidden})
    if shown:
        raise errors.Forbidden(f"stats-fields names {shown[0][:100]} of {db}.{name}, which is masked or denied for "
                               f"{catalog.user}: its bounds would show its values")
    if "required-row-filter" not in restrictions:
        return found
    required = expression(restrictions["required-row-filter"], found.metadata.schema(), f"{db}.{name}")
    return replace(found, filter=And(found.filter, required), required=required)


_UNARY = {"is-null": IsNull, "not-null": NotNull, "is-nan": IsNaN, "not-nan": NotNaN}
_BINARY = {"eq": EqualTo, "not-eq": NotEqualTo, "lt": LessThan, "lt-eq": LessThanOrEqual, "gt": GreaterThan,
           "gt-eq": GreaterThanOrEqual, "starts-with": StartsWith, "not-starts-with": NotStartsWith}
_SETS = {"in": In, "not-in": NotIn}


def expression(predicate, schema: Schema, table: str) -> BooleanExpression:
    """The spec's ``Predicate`` JSON ``predicate`` (columns by field id, as
    :mod:`gateway.policy.row_filter_expression` states them) as PyIceberg's expression over
    ``schema``, columns by name. Raises :class:`~errors.Forbidden` for a field id ``schema``
    lacks (a snapshot's schema before the column was added: not planned, fail closed)."""
    if predicate is True or predicate is False:
        return AlwaysTrue() if predicate else AlwaysFalse()
    kind = predicate["type"]
    if kind in ("and", "or"):
        join = And if kind == "and" else Or
        return join(expression(predicate["left"], schema, table), expression(predicate["right"], schema, table))
    if kind == "not":
        return Not(expression(predicate["child"], schema, table))
    if kind in _UNARY:
        return _UNARY[kind](_name(predicate["child"], schema, table))
    if kind in _SETS:
        column = _field(predicate["child"], schema, table)
        return _SETS[kind](column.name, [from_json(column.field_type, v["value"]) for v in predicate["values"]])
    column = _field(predicate["left"], schema, table)
    return _BINARY[kind](column.name, from_json(column.field_type, predicate["right"]["value"]))


def _field(reference: dict, schema: Schema, table: str):
    try:
        return schema.find_field(reference["id"])
    except ValueError:
        raise errors.Forbidden(f"the required row filter of {table} names field {reference['id']}, which the "
                               "schema of this scan lacks") from None


def _name(reference: dict, schema: Schema, table: str) -> str:
    return _field(reference, schema, table).name
