"""A Ranger row filter (Hive SQL ``filterExpr``) as the Iceberg REST spec's
``read-restrictions.required-row-filter``: a ``Predicate`` (the spec's expression JSON, schema
``Predicate`` of ``open-api/rest-catalog-open-api.yaml``) over a table's current schema, its
columns as field-id references (``{"type": "reference", "id": 3}``), as the spec requires.

Hive evaluates a filter in three-valued logic and keeps a row only where it is TRUE; the spec's
predicates are two-valued ("Iceberg predicates never produce NULL"; Java's ``Evaluator``
orders null first, so ``lt``/``not-eq``/``not-in`` hold for a null). So each part is stated
twice over, as the rows where it is TRUE and as the rows where it is FALSE (what ``NOT`` needs),
and every comparison carries ``not-null`` on its column (dropped for a required column): the
predicate holds exactly where Hive's filter is TRUE, whichever null order a reader uses.

Stated: ``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=`` between a column and a literal,
``IN (...)``, ``IS [NOT] NULL``, ``[NOT] BETWEEN``, ``[NOT] LIKE 'prefix%'`` (``starts-with``)
and ``LIKE 'text'`` (``eq``) on a string column, a boolean column alone, ``TRUE``/``FALSE``/
``NULL``, ``AND``, ``OR``, ``NOT``; literals typed by the column
(:func:`gateway.policy.hive_sql.typed_literal`). Anything else (a function, ``current_user()``,
a subquery, a column the schema lacks, two columns compared) raises
:class:`~gateway.policy.hive_sql.Unstatable` naming the policy and the part.
"""

from __future__ import annotations

from pyiceberg.conversions import to_json
from pyiceberg.schema import Schema
from pyiceberg.types import BooleanType, NestedField, StringType
from sqlglot import exp

from gateway.policy.hive_sql import Unstatable, parse, sql, typed_literal

__all__ = ["Predicate", "required_row_filter"]

#: The spec's ``Predicate`` JSON: a bare boolean or an expression object.
Predicate = bool | dict

#: Hive comparison -> the spec's expression type, with the column on the left.
_COMPARISONS: dict[type, str] = {exp.EQ: "eq", exp.NEQ: "not-eq", exp.LT: "lt", exp.LTE: "lt-eq",
                                 exp.GT: "gt", exp.GTE: "gt-eq"}
#: The type stating the opposite (for the rows where a comparison is FALSE).
_OPPOSITE = {"eq": "not-eq", "not-eq": "eq", "lt": "gt-eq", "gt-eq": "lt", "gt": "lt-eq", "lt-eq": "gt",
             "starts-with": "not-starts-with", "in": "not-in"}
#: The type with its sides swapped (a literal on the left: ``5 < x`` is ``x > 5``).
_SWAPPED = {"eq": "eq", "not-eq": "not-eq", "lt": "gt", "gt": "lt", "lt-eq": "gt-eq", "gt-eq": "lt-eq"}


def required_row_filter(filter_expr: str, policy_id: int, schema: Schema) -> Predicate:
    """``filter_expr`` (Ranger's Hive SQL, from row-filter policy ``policy_id``) as the spec's
    ``Predicate`` JSON over ``schema`` (the table's current schema): True when it is blank
    (Ranger's empty filter filters nothing). Raises :class:`Unstatable` for what the spec's
    expressions cannot state exactly."""
    if not filter_expr.strip():
        return True
    return _Filter(schema, policy_id).rows(parse(filter_expr, policy_id), True)


class _Filter:
    def __init__(self, schema: Schema, policy_id: int):
        self.schema, self.policy_id = schema, policy_id

    def fail(self, node: exp.Expression | str, reason: str) -> Unstatable:
        return Unstatable(self.policy_id, node if isinstance(node, str) else sql(node), reason)

    def rows(self, node: exp.Expression, truth: bool) -> Predicate:
        """The rows where ``node`` evaluates to ``truth`` (TRUE or FALSE, never NULL) in Hive."""
        if isinstance(node, exp.Paren):
            return self.rows(node.this, truth)
        if node.args.get("negate"):  # sqlglot's NOT LIKE
            plain = node.copy()
            plain.set("negate", None)
            return self.rows(plain, not truth)
        if isinstance(node, exp.Not):
            return self.rows(node.this, not truth)
        if isinstance(node, exp.And):
            left, right = self.rows(node.this, truth), self.rows(node.expression, truth)
            return _and(left, right) if truth else _or(left, right)
        if isinstance(node, exp.Or):
            left, right = self.rows(node.this, truth), self.rows(node.expression, truth)
            return _or(left, right) if truth else _and(left, right)
        if isinstance(node, exp.Boolean):
            return node.this is truth
        if isinstance(node, exp.Null):
            return False
        if isinstance(node, exp.Is):
            return self._is_null(node, truth)
        if type(node) in _COMPARISONS:
            return self._comparison(node, truth)
        if isinstance(node, exp.In):
            return self._in(node, truth)
        if isinstance(node, exp.Between):
            x = node.this
            both = exp.and_(exp.GTE(this=x.copy(), expression=node.args["low"].copy()),
                            exp.LTE(this=x.copy(), expression=node.args["high"].copy()))
            return self.rows(both, truth)
        if isinstance(node, exp.Like):
            return self._like(node, truth)
        if isinstance(node, exp.Column):
            field = self.column(node)
            if not isinstance(field.field_type, BooleanType):
                raise self.fail(node, f"a {field.field_type} column is no condition")
            return _and(_not_null(field), _compare("eq", field, truth))
        raise self.fail(node, _unsupported(node))

    def column(self, node: exp.Expression) -> NestedField:
        """The top-level field ``node`` (a column) names, matched as Hive does: ignoring case."""
        if not isinstance(node, exp.Column) or node.table:
            raise self.fail(node, "not a column of the table")
        found = [f for f in self.schema.fields if f.name.lower() == node.name.lower()]
        if len(found) != 1:
            raise self.fail(node.name, "the table's current schema has no such column" if not found
                            else "several columns of the current schema have this name")
        return found[0]

    def value(self, node: exp.Expression, field: NestedField) -> object:
        """Literal ``node`` typed by ``field``; a function or subquery named as such."""
        if not isinstance(node, _LITERALS):
            raise self.fail(node, _unsupported(node))
        return typed_literal(node, field, self.policy_id)

    def _is_null(self, node: exp.Is, truth: bool) -> Predicate:
        if not isinstance(node.expression, exp.Null):
            raise self.fail(node, "IS compares with NULL only here")
        field = self.column(node.this)
        return _is_null(field) if truth else _not_null(field)

    def _comparison(self, node: exp.Expression, truth: bool) -> Predicate:
        kind = _COMPARISONS[type(node)]
        column, value = node.this, node.expression
        if not isinstance(column, exp.Column):
            column, value, kind = value, column, _SWAPPED[kind]
        if isinstance(value, exp.Column):
            raise self.fail(node, "compares two columns, which a read restriction cannot state")
        if not isinstance(column, exp.Column):
            side = next((n for n in (column, value) if not isinstance(n, (*_LITERALS, exp.Null))), None)
            raise self.fail(node, "names no column") if side is None else self.fail(side, _unsupported(side))
        field = self.column(column)
        if isinstance(value, exp.Null):
            return False  # a comparison with NULL is NULL in every row
        typed = self.value(value, field)
        return _and(_not_null(field), _compare(kind if truth else _OPPOSITE[kind], field, typed))

    def _in(self, node: exp.In, truth: bool) -> Predicate:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.fail(node, "IN over a subquery, which a read restriction cannot state")
        field = self.column(node.this)
        items = node.expressions
        values = [self.value(v, field) for v in items if not isinstance(v, exp.Null)]
        if not truth and len(values) < len(items):
            return False  # x NOT IN (..., NULL) is never TRUE
        if not values:
            return False
        kind = "in" if truth else "not-in"
        return _and(_not_null(field), {"type": kind, "child": _reference(field),
                                       "values": [_literal(field, v) for v in dict.fromkeys(values)]})

    def _like(self, node: exp.Like, truth: bool) -> Predicate:
        field = self.column(node.this)
        pattern = node.expression
        if isinstance(pattern, exp.Null):
            return False
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise self.fail(node, "LIKE with a pattern that is no string literal")
        if not isinstance(field.field_type, StringType):
            raise self.fail(node, f"LIKE on a {field.field_type} column")
        prefix, whole = _like_prefix(pattern.this)
        if prefix is None:
            raise self.fail(node, "a LIKE pattern other than 'prefix%' or a text without wildcards")
        if not whole and not prefix:
            return _not_null(field) if truth else False  # LIKE '%': every string
        kind = "eq" if whole else "starts-with"
        return _and(_not_null(field), _compare(kind if truth else _OPPOSITE[kind], field, prefix))


#: What a literal can be written as: ``5``, ``-5``, ``TRUE``, ``DATE '...'``, ``CAST('...' AS T)``, ``5L``.
_LITERALS = (exp.Literal, exp.Neg, exp.Boolean, exp.Cast, exp.TryCast)


def _unsupported(node: exp.Expression) -> str:
    if isinstance(node, exp.CurrentUser) or node.find(exp.CurrentUser):
        return "current_user() depends on the reader, which a read restriction cannot state"
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)) or node.find(exp.Select):
        return "a subquery, which a read restriction cannot state"
    if isinstance(node, exp.Func):
        return "a function, which a read restriction cannot state"
    return "not a comparison, IN, IS [NOT] NULL, BETWEEN, LIKE 'prefix%', AND, OR or NOT"


def _like_prefix(pattern: str) -> tuple[str | None, bool]:
    """``(prefix, whole)`` of a Hive LIKE pattern (``\\`` escapes ``%`` and ``_``): ``whole``
    True when the pattern has no wildcard; ``(None, False)`` when it has others than trailing
    ``%``."""
    prefix, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            return ("".join(prefix), False) if set(pattern[i:]) == {"%"} else (None, False)
        if c == "_":
            return None, False
        prefix.append(c)
        i += 1
    return "".join(prefix), True


def _reference(field: NestedField) -> dict:
    return {"type": "reference", "id": field.field_id}


def _literal(field: NestedField, value: object) -> dict:
    return {"type": "literal", "value": to_json(field.field_type, value)}


def _compare(kind: str, field: NestedField, value: object) -> dict:
    return {"type": kind, "left": _reference(field), "right": _literal(field, value)}


def _not_null(field: NestedField) -> Predicate:
    return True if field.required else {"type": "not-null", "child": _reference(field)}


def _is_null(field: NestedField) -> Predicate:
    return False if field.required else {"type": "is-null", "child": _reference(field)}


def _and(left: Predicate, right: Predicate) -> Predicate:
    if left is False or right is False:
        return False
    if left is True:
        return right
    if right is True or left == right:
        return left
    return {"type": "and", "left": left, "right": right}


def _or(left: Predicate, right: Predicate) -> Predicate:
    if left is True or right is True:
        return True
    if left is False:
        return right
    if right is False or left == right:
        return left
    return {"type": "or", "left": left, "right": right}
