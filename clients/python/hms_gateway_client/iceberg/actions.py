"""The actions of ``read-restrictions.required-column-projections``, each as the Iceberg REST spec
defines it (``open-api/rest-catalog-open-api.yaml``, schemas ``MaskAlphanum`` ...
``Sha256QueryLocal``), over one Arrow column of the rows the row filter kept. Every action keeps
the column's type; all but ``mask-to-fixed-value`` keep a null a null.

* ``mask-alphanum``: each code point a digit 0-9 becomes ``n``, each of ``( ) , . - @`` stays,
  every other becomes ``x`` (string);
* ``show-first-4`` / ``show-last-4``: the first / last 4 code points stay, the rest as
  ``mask-alphanum``; 4 or fewer code points stay as they are (string);
* ``replace-with-null``: null (any optional column);
* ``mask-to-fixed-value``: the type's fixed value, for nulls too (``false``, ``0``, ``0.0``,
  ``"XXXXXXXX"``, 1970-01-01, midnight, the zero UUID, zero bytes, empty binary, list and map;
  a struct field by field);
* ``truncate-to-year`` / ``truncate-to-month``: the first instant of the year / month, in UTC
  for a timestamp with zone (date and the timestamps);
* ``sha-256-global``: SHA-256 (hashlib) of the UTF-8 string, of an int's 4 or a long's 8
  little-endian bytes, of the bytes of a binary; a string gets the 64-character lowercase hex
  digest, an int/long the digest's first 4/8 bytes read as a little-endian signed number, a
  binary the 32-byte digest;
* ``sha-256-query-local``: the same over the query's random salt (32 bytes of ``secrets``)
  followed by the value's bytes.

Text actions use pyarrow compute (regular expressions, code-point slices), dates and times its
``floor_temporal``. An unknown action, or an action on a type its "Applicable to" does not name,
raises :class:`~hms_gateway_client.iceberg.errors.ReadRestrictionError`.
"""

from __future__ import annotations

import datetime
import hashlib
import uuid
from collections.abc import Callable
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType, IcebergType, IntegerType,
    ListType, LongType, MapType, NestedField, StringType, StructType, TimestampNanoType, TimestampType,
    TimestamptzNanoType, TimestamptzType, TimeType, UUIDType,
)

from hms_gateway_client.iceberg.errors import ReadRestrictionError

__all__ = ["ACTIONS", "apply_action"]

_EPOCH = datetime.datetime(1970, 1, 1)
#: ``mask-to-fixed-value``'s value of each type that has one (struct: per field, list and map: empty).
_FIXED: dict[type, object] = {
    BooleanType: False, IntegerType: 0, LongType: 0, FloatType: 0.0, DoubleType: 0.0, DecimalType: Decimal(0),
    StringType: "XXXXXXXX", DateType: _EPOCH.date(), TimeType: datetime.time(0), TimestampType: _EPOCH,
    TimestamptzType: _EPOCH.replace(tzinfo=datetime.timezone.utc), TimestampNanoType: _EPOCH,
    TimestamptzNanoType: _EPOCH.replace(tzinfo=datetime.timezone.utc), UUIDType: uuid.UUID(int=0).bytes,
    BinaryType: b"", ListType: [], MapType: [],
}
_TEMPORAL = (DateType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_HASHED = (StringType, IntegerType, LongType, BinaryType)


def _mask_alphanum(column: pa.ChunkedArray) -> pa.ChunkedArray:
    # first every code point but a digit and the six kept marks to 'x' (so no letter 'n' is
    # left), then the digits to 'n'
    masked = pc.replace_substring_regex(column, pattern=r"[^0-9(),.\-@]", replacement="x")
    return pc.replace_substring_regex(masked, pattern="[0-9]", replacement="n")


def _show_first_4(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    return _joined(pc.utf8_slice_codeunits(column, 0, 4), _mask_alphanum(pc.utf8_slice_codeunits(column, 4)))


def _show_last_4(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    return _joined(_mask_alphanum(pc.utf8_slice_codeunits(column, 0, -4)), pc.utf8_slice_codeunits(column, -4))


def _joined(head: pa.ChunkedArray, tail: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(head, tail, pa.scalar("", head.type))  # "" of the column's string type


def _replace_with_null(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    return pa.chunked_array([pa.nulls(len(column), column.type)], column.type)


def _fixed_value(field_type: IcebergType) -> object:
    if isinstance(field_type, StructType):
        return {f.name: _fixed_value(f.field_type) for f in field_type.fields}
    if isinstance(field_type, FixedType):
        return bytes(len(field_type))
    return _FIXED[type(field_type)]


def _mask_to_fixed_value(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    value = _fixed_value(field.field_type)
    arrow_type = column.type.storage_type if isinstance(column.type, pa.ExtensionType) else column.type
    values = pa.array([value] * len(column), arrow_type)
    if isinstance(column.type, pa.ExtensionType):
        values = pa.ExtensionArray.from_storage(column.type, values)
    return pa.chunked_array([values], column.type)


def _truncate(unit: str) -> Callable[[pa.ChunkedArray, NestedField, bytes], pa.ChunkedArray]:
    def truncate(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
        if isinstance(field.field_type, (TimestamptzType, TimestamptzNanoType)):  # in UTC, as the spec says
            utc = column.cast(pa.timestamp(column.type.unit, "UTC"))
            return pc.floor_temporal(utc, unit=unit).cast(column.type)
        return pc.floor_temporal(column, unit=unit)
    return truncate


def _value_bytes(value: object, field_type: IcebergType) -> bytes:
    if isinstance(field_type, StringType):
        return value.encode("utf-8")
    if isinstance(field_type, IntegerType):
        return value.to_bytes(4, "little", signed=True)
    if isinstance(field_type, LongType):
        return value.to_bytes(8, "little", signed=True)
    return bytes(value)


def _digest_value(digest: bytes, field_type: IcebergType) -> object:
    if isinstance(field_type, StringType):
        return digest.hex()
    if isinstance(field_type, IntegerType):
        return int.from_bytes(digest[:4], "little", signed=True)
    if isinstance(field_type, LongType):
        return int.from_bytes(digest[:8], "little", signed=True)
    return digest


def _sha_256(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    hashed = [None if v is None else _digest_value(hashlib.sha256(salt + _value_bytes(v, field.field_type)).digest(),
                                                   field.field_type)
              for v in column.to_pylist()]
    return pa.chunked_array([pa.array(hashed, column.type)], column.type)


def _sha_256_global(column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    return _sha_256(column, field, b"")


def _text(action: Callable[[pa.ChunkedArray], pa.ChunkedArray]) -> Callable:
    return lambda column, field, salt: action(column)


#: Each action of the spec: the Iceberg types its "Applicable to" names, and its function
#: ``(column, field, per-query salt) -> column``.
ACTIONS: dict[str, tuple[tuple[type, ...], Callable[[pa.ChunkedArray, NestedField, bytes], pa.ChunkedArray]]] = {
    "mask-alphanum": ((StringType,), _text(_mask_alphanum)),
    "mask-to-fixed-value": ((*_FIXED, FixedType, StructType), _mask_to_fixed_value),
    "replace-with-null": ((IcebergType,), _replace_with_null),
    "show-first-4": ((StringType,), _show_first_4),
    "show-last-4": ((StringType,), _show_last_4),
    "truncate-to-year": (_TEMPORAL, _truncate("year")),
    "truncate-to-month": (_TEMPORAL, _truncate("month")),
    "sha-256-global": (_HASHED, _sha_256_global),
    "sha-256-query-local": (_HASHED, _sha_256),
}


def _applies(action: str, field_type: IcebergType) -> bool:
    types, _ = ACTIONS[action]
    if not isinstance(field_type, types):
        return False
    if action == "mask-to-fixed-value" and isinstance(field_type, StructType):
        return all(_applies(action, f.field_type) for f in field_type.fields)
    return True


def apply_action(action: object, column: pa.ChunkedArray, field: NestedField, salt: bytes) -> pa.ChunkedArray:
    """``column`` (``field``'s values) with ``action`` applied; ``salt`` the query's salt for
    ``sha-256-query-local``. Raises :class:`ReadRestrictionError` for an action this reader
    does not know, or one the spec does not apply to the column's type or nullability."""
    if action not in ACTIONS:
        raise ReadRestrictionError(f"cannot apply the action {action!r} to {field.name}: not an action of the "
                                   f"Iceberg REST spec this reader knows ({', '.join(ACTIONS)})")
    if not _applies(action, field.field_type):
        raise ReadRestrictionError(f"cannot apply the action {action} to {field.name}: the spec does not apply it "
                                   f"to a {field.field_type} column")
    if action == "replace-with-null" and field.required:
        raise ReadRestrictionError(f"cannot apply the action {action} to {field.name}: a required column")
    return ACTIONS[action][1](column, field, salt)
