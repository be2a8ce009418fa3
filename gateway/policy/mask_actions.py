"""A Ranger Hive mask on one column as the Iceberg REST spec's
``read-restrictions.required-column-projections`` entry (``{"field-id": 4, "action":
"show-last-4"}``), where an action of the spec means what Hive's masking expression does on the
column's type; and a column denied to the caller as ``replace-with-null``.

The mask is matched by its Hive expression (Ranger's ``transformer`` or a ``CUSTOM``
``valueExpr``, :attr:`gateway.policy.restrictions.ColumnMask.expression`), parsed with sqlglot
and compared as a tree, not by the mask type's name: a service definition may give a name
another transformer. What each Hive expression does, per type (Hive's ``GenericUDFMask*``;
masks of any other type give NULL), against the spec's actions (``open-api/rest-catalog-open-api.yaml``,
``MaskAlphanum`` ... ``Sha256QueryLocal``):

* ``NULL`` (``MASK_NULL``) -> ``replace-with-null``, any optional column;
* ``mask_show_last_n({col}, 4, 'x', 'x', 'x', -1, '1')`` (``MASK_SHOW_LAST_4``) ->
  ``show-last-4``, string;
* ``mask_show_first_n({col}, 4, 'x', 'x', 'x', -1, '1')`` (``MASK_SHOW_FIRST_4``) ->
  ``show-first-4``, string;
* ``mask_hash({col})`` (``MASK_HASH``: SHA-256 of the UTF-8 string, lowercase hex, Hive 3 and
  4 by default) -> ``sha-256-global``, string (Hive gives NULL for a number; the spec a hash);
* ``mask({col}, 'x', 'x', 'x', -1, '1', 1, 0, -1)`` (``MASK_DATE_SHOW_YEAR``: January 1st of
  the year) -> ``truncate-to-year``, date (Hive gives NULL for a timestamp);
* a constant equal to the spec's fixed value of the column's type (``CUSTOM``: ``'XXXXXXXX'``,
  ``0``, ``FALSE``, ``DATE '1970-01-01'``...) -> ``mask-to-fixed-value`` (both replace NULL too);
* the column itself (``CUSTOM`` ``{col}``) -> no action.

Anything else fails closed with :class:`~gateway.policy.hive_sql.Unstatable` naming the policy,
the column and its type: ``mask({col})`` (``MASK``: Hive keeps case and every punctuation mark,
``mask-alphanum`` writes ``x`` for both cases and keeps six marks), any other ``CUSTOM``
expression (the spec removed ``apply-expression`` before it was merged), an action the spec does
not apply to the column's type.
"""

from __future__ import annotations

import math
import uuid
from decimal import Decimal

from pyiceberg.types import (
    BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType, IcebergType, IntegerType,
    ListType, LongType, MapType, NestedField, StringType, StructType, TimestampNanoType, TimestampType,
    TimestamptzNanoType, TimestamptzType, TimeType, UUIDType,
)
from sqlglot import exp

from gateway.policy.hive_sql import Unstatable, parse, typed_literal
from gateway.policy.model import COLUMN_TOKEN, HIVE_MASK_TYPES
from gateway.policy.restrictions import ColumnMask

__all__ = ["ACTION_TYPES", "column_projection", "denied_projection"]

REPLACE_WITH_NULL, MASK_TO_FIXED_VALUE = "replace-with-null", "mask-to-fixed-value"
_TEMPORAL = (DateType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_HASHED = (StringType, IntegerType, LongType, BinaryType)
#: Each action of the spec and the types its "Applicable to" names (``replace-with-null``: every
#: optional column; ``mask-to-fixed-value``: the types with a fixed value, a struct when each of
#: its fields has one; variant, which PyIceberg 0.12 lacks, is left out).
ACTION_TYPES: dict[str, tuple[type, ...]] = {
    "mask-alphanum": (StringType,),
    MASK_TO_FIXED_VALUE: (BooleanType, IntegerType, LongType, FloatType, DoubleType, DecimalType, StringType,
                          *_TEMPORAL, TimeType, UUIDType, FixedType, BinaryType, ListType, MapType, StructType),
    REPLACE_WITH_NULL: (IcebergType,),
    "show-first-4": (StringType,),
    "show-last-4": (StringType,),
    "truncate-to-year": _TEMPORAL,
    "truncate-to-month": _TEMPORAL,
    "sha-256-global": _HASHED,
    "sha-256-query-local": _HASHED,
}

#: Ranger's Hive transformers (``HIVE_MASK_TYPES``) whose result is an action of the spec on
#: the column types listed; on other types Hive's result differs (NULL, masked digits...).
_SAME_MEANING: tuple[tuple[str, str, tuple[type, ...]], ...] = (
    (HIVE_MASK_TYPES["MASK_SHOW_LAST_4"].transformer, "show-last-4", (StringType,)),
    (HIVE_MASK_TYPES["MASK_SHOW_FIRST_4"].transformer, "show-first-4", (StringType,)),
    (HIVE_MASK_TYPES["MASK_HASH"].transformer, "sha-256-global", (StringType,)),
    (HIVE_MASK_TYPES["MASK_DATE_SHOW_YEAR"].transformer, "truncate-to-year", (DateType,)),
)

#: The spec's ``MaskToFixedValue`` values of the types a Hive literal can hold, as PyIceberg
#: holds them (days, microseconds).
_FIXED_VALUES: dict[type, object] = {
    BooleanType: False, IntegerType: 0, LongType: 0, FloatType: 0.0, DoubleType: 0.0, DecimalType: Decimal(0),
    StringType: "XXXXXXXX", DateType: 0, TimeType: 0, TimestampType: 0, TimestamptzType: 0,
    UUIDType: uuid.UUID(int=0),
}


def column_projection(mask: ColumnMask, field: NestedField) -> dict | None:
    """The spec's ``{"field-id", "action"}`` for ``mask`` on ``field`` (a top-level field of the
    table's current schema), None when the mask leaves the column as it is. Raises
    :class:`Unstatable` (policy, column, type) when no action of the spec means what the mask
    does on this type, or the action does not apply to it."""
    if mask.expression is None:
        raise _unstatable(mask, field, f"the mask type {mask.mask_type} has no Hive expression to compare")
    node = _canonical(parse(mask.expression, mask.policy_id))
    if isinstance(node, exp.Null):
        return _projection(REPLACE_WITH_NULL, mask, field)
    if node == _canonical(exp.column(field.name)):
        return None
    for template, action, types in _SAME_MEANING:
        if node == _canonical(parse(template.replace(COLUMN_TOKEN, field.name), mask.policy_id)):
            if not isinstance(field.field_type, types):
                raise _unstatable(mask, field, f"Hive's {template} means the spec's {action} only on "
                                               f"{_names(types)} columns")
            return _projection(action, mask, field)
    if _is_fixed_value(node, field, mask.policy_id):
        return _projection(MASK_TO_FIXED_VALUE, mask, field)
    raise _unstatable(mask, field, "no action of the Iceberg REST spec means what this expression does")


def denied_projection(field: NestedField) -> dict:
    """``replace-with-null`` for a column denied to the caller; raises :class:`Unstatable` for a
    required column, which the spec's ``replace-with-null`` may not name."""
    if field.required:
        raise Unstatable(None, field.name, f"{field.name} ({field.field_type}) is denied and required: the "
                                           "spec's replace-with-null is for optional columns only")
    return {"field-id": field.field_id, "action": REPLACE_WITH_NULL}


def _projection(action: str, mask: ColumnMask, field: NestedField) -> dict:
    if not isinstance(field.field_type, ACTION_TYPES[action]) or not _has_fixed_value(action, field.field_type):
        raise _unstatable(mask, field, f"the spec's {action} does not apply to a {field.field_type} column")
    if action == REPLACE_WITH_NULL and field.required:
        raise _unstatable(mask, field, "the spec's replace-with-null is for optional columns only")
    return {"field-id": field.field_id, "action": action}


def _has_fixed_value(action: str, field_type: IcebergType) -> bool:
    if action != MASK_TO_FIXED_VALUE:
        return True
    if isinstance(field_type, StructType):
        return all(isinstance(f.field_type, ACTION_TYPES[action]) and _has_fixed_value(action, f.field_type)
                   for f in field_type.fields)
    return isinstance(field_type, ACTION_TYPES[action])


def _is_fixed_value(node: exp.Expression, field: NestedField, policy_id: int) -> bool:
    """Whether ``node`` is a literal equal to the spec's fixed value of ``field``'s type."""
    fixed = _FIXED_VALUES.get(type(field.field_type))
    if fixed is None or node.find(exp.Column):
        return False
    try:
        value = typed_literal(node, field, policy_id)
    except Unstatable:
        return False
    if isinstance(value, float) and math.copysign(1.0, value) < 0:
        return False  # -0.0 is not the spec's 0.0
    return value == fixed and type(value) is type(fixed)


def _canonical(node: exp.Expression) -> exp.Expression:
    """``node`` with Hive's case-insensitive names (functions, columns) in lower case."""
    node = node.copy()
    for n in list(node.walk()):
        if isinstance(n, exp.Identifier):
            n.set("this", n.name.lower())
            n.set("quoted", False)
        elif isinstance(n, exp.Anonymous):
            n.set("this", n.name.lower())
    return node


def _names(types: tuple[type, ...]) -> str:
    return ", ".join(t.__name__.removesuffix("Type").lower() for t in types)


def _unstatable(mask: ColumnMask, field: NestedField, reason: str) -> Unstatable:
    return Unstatable(mask.policy_id, f"{mask.mask_type} on {field.name} ({field.field_type})", reason)
