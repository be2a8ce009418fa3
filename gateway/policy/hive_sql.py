"""Ranger's Hive SQL (a row filter's ``filterExpr``, a mask's Hive expression) read with sqlglot
in its Hive dialect, and its literals typed by an Iceberg column, for stating a policy in the
Iceberg REST spec's ``read-restrictions`` (:mod:`gateway.policy.row_filter_expression`,
:mod:`gateway.policy.mask_actions`).

:func:`parse` gives one sqlglot expression; :func:`typed_literal` gives a literal's value as
PyIceberg holds it for the column's type (``pyiceberg.expressions.literals``: days for a
date, microseconds for a timestamp, ``Decimal``...), converted by PyIceberg and accepted only
where the conversion means what Hive's comparison means. Whatever cannot be stated raises
:class:`Unstatable`, which names the policy and the part: a load then fails closed (403).
"""

from __future__ import annotations

import struct
import uuid
from datetime import datetime
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import sqlglot
from pyiceberg.expressions.literals import AboveMax, BelowMin, literal
from pyiceberg.types import (
    BooleanType, DateType, DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType, NestedField,
    StringType, TimestampType, TimestamptzType, TimeType, UUIDType,
)
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["Unstatable", "parse", "typed_literal"]


class Unstatable(ValueError):
    """A policy the Iceberg REST spec's ``read-restrictions`` cannot state exactly. ``policy_id``
    the Ranger policy (None: a column denied by access policies), ``part`` the Hive SQL (or
    column) that cannot be stated, ``reason`` why; ``str()`` says all three."""

    def __init__(self, policy_id: int | None, part: str, reason: str):
        who = f"policy {policy_id}" if policy_id is not None else "a denied column"
        super().__init__(f"{who}: {part!r} cannot be stated as an Iceberg read restriction: {reason}")
        self.policy_id, self.part, self.reason = policy_id, part, reason


def parse(text: str, policy_id: int) -> exp.Expression:
    """``text`` (one Hive SQL expression) as sqlglot's tree. Raises :class:`Unstatable` when it
    does not parse or holds more than one statement."""
    try:
        statements = [s for s in sqlglot.parse(text, read="hive") if s is not None]
    except SqlglotError as exc:
        raise Unstatable(policy_id, text, f"not Hive SQL that parses ({str(exc).splitlines()[0]})") from None
    if len(statements) != 1:
        raise Unstatable(policy_id, text, "not one Hive SQL expression")
    return statements[0]


def sql(node: exp.Expression) -> str:
    """``node`` written back as Hive SQL, for messages."""
    return node.sql(dialect="hive")


@dataclass(frozen=True)
class _Source:
    """A Hive literal: its ``kind`` (``string``, ``number``, ``boolean``) and Python value."""

    kind: str
    value: object


#: Hive types a typed literal (``DATE '...'``, ``CAST(... AS T)``, ``5L``) may name for a
#: column of each Iceberg type: the cast then changes nothing the column's type would not.
_CASTS: dict[type, frozenset[exp.DataType.Type]] = {
    DateType: frozenset({exp.DataType.Type.DATE}),
    TimestampType: frozenset({exp.DataType.Type.TIMESTAMP}),
    IntegerType: frozenset({exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
                            exp.DataType.Type.BIGINT}),
    DecimalType: frozenset({exp.DataType.Type.DECIMAL}),
    DoubleType: frozenset({exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}),
    StringType: frozenset({exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}),
}
_CASTS[LongType] = _CASTS[IntegerType]
_CASTS[FloatType] = _CASTS[DoubleType]

#: Which Hive literals compare with a column of each Iceberg type as the typed value would:
#: Hive compares a string column with a number as doubles, a date with a number not at all.
_KINDS: dict[type, frozenset[str]] = {
    BooleanType: frozenset({"boolean"}),
    IntegerType: frozenset({"number", "string"}),
    LongType: frozenset({"number", "string"}),
    FloatType: frozenset({"number"}),
    DoubleType: frozenset({"number", "string"}),
    DecimalType: frozenset({"number", "string"}),
    StringType: frozenset({"string"}),
    DateType: frozenset({"string"}),
    TimeType: frozenset({"string"}),
    TimestampType: frozenset({"string"}),
    TimestamptzType: frozenset({"string"}),
    UUIDType: frozenset({"string"}),
}


def typed_literal(node: exp.Expression, field: NestedField, policy_id: int) -> object:
    """The value of literal ``node`` as PyIceberg holds it for ``field``'s type (PyIceberg's
    ``literal(value).to(type)``; a UUID as :class:`uuid.UUID`). Raises :class:`Unstatable`
    when ``node`` is no literal, when the column's type takes no such literal the way Hive
    compares it (a number for a string or date column, a fraction for an integer column, a
    double not exactly a float for a float column), or when PyIceberg cannot convert it."""
    column_type = field.field_type
    source = _source(node, column_type, policy_id)
    if source.kind not in _KINDS.get(type(column_type), frozenset()):
        raise Unstatable(policy_id, sql(node), f"a {source.kind} literal does not compare with {field.name} "
                                               f"({column_type}) as the column's type")
    value = source.value
    try:
        if isinstance(column_type, TimestampType) and source.kind == "string":
            value = _hive_timestamp(value)  # Hive writes '2024-01-01 10:00:00', PyIceberg reads ISO's 'T'
        if isinstance(column_type, DecimalType):
            value = _at_scale(value, column_type.scale)  # PyIceberg converts a decimal of the column's scale
        converted = literal(value).to(column_type)
    except InvalidOperation:
        raise Unstatable(policy_id, sql(node), f"not a number, as {field.name} ({column_type}) holds") from None
    except (TypeError, ValueError) as exc:
        raise Unstatable(policy_id, sql(node), f"not a value of {field.name}'s type {column_type} ({exc})") from None
    if isinstance(converted, (AboveMax, BelowMin)):
        raise Unstatable(policy_id, sql(node), f"outside the range of {field.name}'s type {column_type}")
    value = converted.value
    if isinstance(column_type, (IntegerType, LongType)) and _decimal(source.value) != value:
        raise Unstatable(policy_id, sql(node), f"not a whole number, as {field.name} ({column_type}) holds")
    if isinstance(column_type, FloatType) and struct.unpack("f", struct.pack("f", value))[0] != float(source.value):
        raise Unstatable(policy_id, sql(node), f"not exactly a float, as {field.name} ({column_type}) holds")
    if isinstance(column_type, UUIDType):
        value = uuid.UUID(bytes=value)
    return value


def _hive_timestamp(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is not None:
        raise ValueError("a zone offset for a timestamp without zone")
    return value


def _at_scale(value: object, scale: int) -> Decimal:
    exact = Decimal(str(value).strip())
    scaled = exact.quantize(Decimal(1).scaleb(-scale))
    if scaled != exact:
        raise ValueError(f"{value} has more than {scale} decimal places")
    return scaled


def _decimal(value: object) -> Decimal | None:
    try:
        return Decimal(str(value).strip())
    except InvalidOperation:
        return None


def _source(node: exp.Expression, column_type: IcebergType, policy_id: int) -> _Source:
    if isinstance(node, (exp.Cast, exp.TryCast)):
        if node.to.this not in _CASTS.get(type(column_type), frozenset()):
            raise Unstatable(policy_id, sql(node), f"a cast to {node.to.sql(dialect='hive')} of a {column_type} column")
        return _source(node.this, column_type, policy_id)
    negative = False
    while isinstance(node, exp.Neg):
        negative, node = not negative, node.this
    if isinstance(node, exp.Literal) and not (negative and node.is_string):
        if node.is_string:
            return _Source("string", node.this)
        text = ("-" if negative else "") + node.this
        number = int(text) if text.lstrip("-").isdigit() else Decimal(text)
        return _Source("number", number)
    if isinstance(node, exp.Boolean) and not negative:
        return _Source("boolean", bool(node.this))
    raise Unstatable(policy_id, sql(node), "not a literal")
