"""``read-restrictions.required-row-filter`` evaluated over an Arrow table of raw values, as the
Iceberg REST spec defines it: the spec's ``Predicate`` JSON (bare ``true``/``false``, ``and``,
``or``, ``not``, ``is-null``/``not-null``/``is-nan``/``not-nan``, the comparisons ``lt`` ...
``not-eq``, ``starts-with``/``not-starts-with``, ``in``/``not-in``), columns as field-id
references (``{"type": "reference", "id": 3}``), literals as the spec's JSON single values read
by PyIceberg (``pyiceberg.conversions.from_json``) for the column's type.

Iceberg predicates are two-valued ("never produce NULL"): as Iceberg Java's ``Evaluator``
decides, a null orders first (so ``lt``, ``lt-eq``, ``not-eq``, ``not-in``, ``not-starts-with``
and ``not-nan`` hold for a null, the others do not) and a float NaN last (``gt``, ``gt-eq``,
``not-eq`` hold for it). Each test is computed with pyarrow compute and these cases filled in,
so a row is kept exactly where the predicate is TRUE. Floats compare as IEEE does otherwise
(``-0.0`` equals ``0.0``).

A reference by name, to a nested field, a function application, or any type of node not listed
raises :class:`~hms_gateway_client.iceberg.errors.ReadRestrictionError`: the read fails.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_json
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, FloatType, NestedField, StringType

from hms_gateway_client.iceberg.errors import ReadRestrictionError

__all__ = ["rows_kept"]

_COMPARE = {"lt": pc.less, "lt-eq": pc.less_equal, "gt": pc.greater, "gt-eq": pc.greater_equal,
            "eq": pc.equal, "not-eq": pc.not_equal}
_SWAPPED = {"lt": "gt", "gt": "lt", "lt-eq": "gt-eq", "gt-eq": "lt-eq", "eq": "eq", "not-eq": "not-eq"}
#: What a test gives for a null value (Java's comparators put null first).
_FOR_NULL = {"lt": True, "lt-eq": True, "gt": False, "gt-eq": False, "eq": False, "not-eq": True,
             "starts-with": False, "not-starts-with": True, "in": False, "not-in": True}
#: What a comparison gives for a float NaN (Java's ``Double.compare``: NaN above everything).
_FOR_NAN = {"lt": False, "lt-eq": False, "gt": True, "gt-eq": True, "eq": False, "not-eq": True}


def rows_kept(predicate: object, schema: Schema, table: pa.Table) -> pa.ChunkedArray:
    """A boolean per row of ``table`` (raw values; top-level columns named as ``schema``'s
    fields): True where ``predicate`` (the spec's ``Predicate`` JSON) holds, never null.
    Raises :class:`ReadRestrictionError` naming the part it cannot evaluate."""
    return _Rows(schema, table).evaluate(predicate)


class _Rows:
    def __init__(self, schema: Schema, table: pa.Table):
        self.schema, self.table = schema, table
        self.top = {f.field_id: f for f in schema.fields}

    def constant(self, value: bool) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array([value] * self.table.num_rows, pa.bool_())], pa.bool_())

    def evaluate(self, node: object) -> pa.ChunkedArray:
        if isinstance(node, bool):
            return self.constant(node)
        kind = node.get("type") if isinstance(node, dict) else None
        if kind in ("true", "false"):  # the spec's deprecated object forms of true and false
            return self.constant(kind == "true")
        if kind in ("and", "or"):
            left, right = self.evaluate(node.get("left")), self.evaluate(node.get("right"))
            return pc.and_(left, right) if kind == "and" else pc.or_(left, right)
        if kind == "not":
            return pc.invert(self.evaluate(node.get("child")))
        if kind in ("is-null", "not-null", "is-nan", "not-nan"):
            return self.unary(kind, node)
        if kind in _COMPARE or kind in ("starts-with", "not-starts-with"):
            return self.comparison(kind, node)
        if kind in ("in", "not-in"):
            return self.set_test(kind, node)
        raise _fail(node, "not an expression of the spec this reader evaluates")

    def field(self, reference: object, node: object) -> NestedField:
        if not (isinstance(reference, dict) and reference.get("type") == "reference" and "id" in reference):
            raise _fail(node, "a column not referenced by field id (the spec requires {\"type\": \"reference\", "
                              "\"id\": ...} here)")
        field = self.top.get(reference["id"])
        if field is None:
            raise _fail(node, f"field id {reference['id']} is no top-level column of the table's schema")
        return field

    def column(self, field: NestedField) -> pa.ChunkedArray:
        column = self.table.column(field.name)
        if isinstance(column.type, pa.ExtensionType):  # UUIDs: compared as their 16 bytes
            column = pa.chunked_array([c.storage for c in column.chunks], column.type.storage_type)
        return column

    def value(self, field: NestedField, written: object, node: object, column: pa.ChunkedArray) -> pa.Scalar:
        value = written.get("value") if isinstance(written, dict) and written.get("type") == "literal" else written
        if isinstance(value, (dict, list)):
            raise _fail(node, "a value that is no literal")
        try:
            python = from_json(field.field_type, value)
            return pa.scalar(getattr(python, "bytes", python), type=column.type)
        except (TypeError, ValueError, ArithmeticError, pa.ArrowException) as exc:
            raise _fail(node, f"{value!r} is not a value of {field.name}'s type {field.field_type} ({exc})") from None

    def unary(self, kind: str, node: dict) -> pa.ChunkedArray:
        field = self.field(node.get("child", node.get("term")), node)
        column = self.column(field)
        if kind in ("is-null", "not-null"):
            return pc.is_null(column) if kind == "is-null" else pc.is_valid(column)
        if not isinstance(field.field_type, (FloatType, DoubleType)):
            raise _fail(node, f"{kind} on {field.name}, a {field.field_type} column")
        nan = pc.fill_null(pc.is_nan(column), False)
        return nan if kind == "is-nan" else pc.invert(nan)

    def comparison(self, kind: str, node: dict) -> pa.ChunkedArray:
        left, right = node.get("left", node.get("term")), node.get("right", node.get("value"))
        if isinstance(right, dict) and right.get("type") == "reference" and kind in _SWAPPED:
            left, right, kind = right, left, _SWAPPED[kind]
        field = self.field(left, node)
        column = self.column(field)
        literal = self.value(field, right, node, column)
        if kind in ("starts-with", "not-starts-with"):
            if not isinstance(field.field_type, StringType):
                raise _fail(node, f"{kind} on {field.name}, a {field.field_type} column")
            result = pc.starts_with(column, pattern=literal.as_py())
            result = result if kind == "starts-with" else pc.invert(result)
        else:
            result = _COMPARE[kind](column, literal)
            if isinstance(field.field_type, (FloatType, DoubleType)):
                result = pc.if_else(pc.fill_null(pc.is_nan(column), False), _FOR_NAN[kind], result)
        return pc.fill_null(result, _FOR_NULL[kind])

    def set_test(self, kind: str, node: dict) -> pa.ChunkedArray:
        field = self.field(node.get("child", node.get("term")), node)
        column = self.column(field)
        written = node.get("values")
        if isinstance(written, dict) and written.get("type") == "literals":
            written = written.get("values")
        if not isinstance(written, list):
            raise _fail(node, "values that are no list of literals")
        values = pa.array([self.value(field, v, node, column) for v in written], type=column.type)
        result = pc.is_in(column, value_set=values, skip_nulls=True)
        result = result if kind == "in" else pc.invert(result)
        return pc.fill_null(result, _FOR_NULL[kind])


def _fail(node: object, reason: str) -> ReadRestrictionError:
    return ReadRestrictionError(f"cannot apply the required row filter {json.dumps(node)[:300]}: {reason}")
