"""Walking strict-binary values in a whole buffer: the one place that reads and checks their
field, container and string headers.

Follows Apache Thrift's TBinaryProtocol (strict): field header = type byte + i16 id, STOP
(``0``) ends a struct; list/set header = element type byte + i32 count; map header = key
type byte + value type byte + i32 count; string/binary = i32 length + bytes.

Everything here raises :class:`~gateway.thrift.errors.ProtocolError` on malformed input:
truncation, an unknown type, a negative size, a count the bytes left cannot hold (checked
before looping, so a hostile count costs nothing), nesting deeper than
:data:`~gateway.thrift.errors.MAX_DEPTH`, or more values than a :class:`Budget` allows.

Built on it: :mod:`.to_tjson` and :mod:`.compact` (translators that visit every value),
:mod:`.call_types` (a call's argument types against the IDL),
:mod:`gateway.providers.ownership` (rewrites one struct field), :func:`call_objects` (the
audit's database and table) and the ``set_ugi`` reply check. The resumable
:class:`~gateway.thrift.binary.BinaryMessageScanner` is separate: it is fed chunks and so keeps
its position in an explicit state machine, where these functions read a complete buffer.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator

from .binary import FIXED_SIZES, LIST_HEADER, MAP_HEADER, MAX_NAME_BYTES, MIN_SIZES, REPLY, read_message_header
from .errors import MAX_DEPTH, ProtocolError
from .schema import SchemaKeyed, ServiceSchema, StructSchema, TType

__all__ = [
    "Field",
    "Budget",
    "field_header",
    "string_span",
    "list_header",
    "map_header",
    "skip_value",
    "iter_fields",
    "struct_fields",
    "reply_succeeded",
    "call_objects",
]

#: ``(field id, wire type, value start, value end)``: offsets into the walked buffer.
Field = tuple[int, int, int, int]

_FIELD_HEADER = struct.Struct(">bh").unpack_from
_LIST_HEADER = LIST_HEADER.unpack_from
_MAP_HEADER = MAP_HEADER.unpack_from
_I32 = struct.Struct(">i").unpack_from


class Budget:
    """At most ``values`` values may be walked; one more raises ``ProtocolError``.

    For walks that only look for a few fields (the audit) and must cost a bounded amount
    whatever the message holds.
    """

    __slots__ = ("left",)

    def __init__(self, values: int) -> None:
        self.left = values

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ProtocolError("binary message holds more values than this walk allows")


def field_header(data: bytes, pos: int) -> tuple[int, int] | None:
    """``(wire type, field id)`` of the field header at ``pos``, or ``None`` at STOP.

    The value starts at ``pos + 3``. Raises ``ProtocolError`` if truncated.
    """
    if pos >= len(data):
        raise ProtocolError("binary message truncated")
    if data[pos] == TType.STOP:
        return None
    if pos + 3 > len(data):
        raise ProtocolError("binary message truncated")
    return _FIELD_HEADER(data, pos)


def string_span(data: bytes, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the bytes of the string/binary value at ``pos``.

    Raises ``ProtocolError`` if the length is negative or runs past the buffer.
    """
    if pos + 4 > len(data):
        raise ProtocolError("binary message truncated")
    (length,) = _I32(data, pos)
    start = pos + 4
    if length < 0 or length > len(data) - start:
        raise ProtocolError("bad string length in binary message")
    return start, start + length


def list_header(data: bytes, pos: int) -> tuple[int, int, int]:
    """``(element type, count, first element offset)`` of the list/set at ``pos``.

    Raises ``ProtocolError`` on truncation, an unknown element type, or a count that is
    negative or larger than the bytes left can hold.
    """
    if pos + 5 > len(data):
        raise ProtocolError("binary message truncated")
    etype, count = _LIST_HEADER(data, pos)
    pos += 5
    min_size = MIN_SIZES.get(etype)
    if min_size is None:
        raise ProtocolError(f"unknown binary element type {etype}")
    if count < 0 or count * min_size > len(data) - pos:
        raise ProtocolError("bad container size in binary message")
    return etype, count, pos


def map_header(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """``(key type, value type, count, first key offset)`` of the map at ``pos``.

    Raises ``ProtocolError`` as :func:`list_header`.
    """
    if pos + 6 > len(data):
        raise ProtocolError("binary message truncated")
    ktype, vtype, count = _MAP_HEADER(data, pos)
    pos += 6
    kmin, vmin = MIN_SIZES.get(ktype), MIN_SIZES.get(vtype)
    if kmin is None or vmin is None:
        raise ProtocolError("unknown binary map key/value type")
    if count < 0 or count * (kmin + vmin) > len(data) - pos:
        raise ProtocolError("bad container size in binary message")
    return ktype, vtype, count, pos


def skip_value(data: bytes, pos: int, ttype: int, depth: int = 0, budget: Budget | None = None) -> int:
    """The offset just after the value of wire type ``ttype`` at ``pos``.

    ``depth`` is the nesting of the value (0 for a message struct). Raises ``ProtocolError``
    on a malformed value, nesting deeper than ``MAX_DEPTH``, or ``budget`` running out.
    """
    if depth > MAX_DEPTH:
        raise ProtocolError("binary message nested too deeply")
    if budget is not None:
        budget.spend()
    size = FIXED_SIZES.get(ttype)
    if size is not None:
        end = pos + size
        if end > len(data):
            raise ProtocolError("binary message truncated")
        return end
    if ttype == TType.STRING:
        return string_span(data, pos)[1]
    if ttype == TType.STRUCT:
        for field in iter_fields(data, pos, depth, budget):
            pos = field[3]
        return pos + 1
    if ttype == TType.LIST or ttype == TType.SET:
        etype, count, pos = list_header(data, pos)
        size = FIXED_SIZES.get(etype)
        if size is not None:  # checked against the bytes left by list_header
            return pos + size * count
        for _ in range(count):
            pos = skip_value(data, pos, etype, depth + 1, budget)
        return pos
    if ttype == TType.MAP:
        ktype, vtype, count, pos = map_header(data, pos)
        for _ in range(count):
            pos = skip_value(data, pos, ktype, depth + 1, budget)
            pos = skip_value(data, pos, vtype, depth + 1, budget)
        return pos
    raise ProtocolError(f"unknown binary type {ttype}")


def iter_fields(data: bytes, pos: int, depth: int = 0, budget: Budget | None = None) -> Iterator[Field]:
    """The fields of the struct at ``pos``, in wire order, each :data:`Field`.

    Lazy: a caller that stops early walks no further. A struct that ends normally has its
    STOP byte at the last field's end (at ``pos`` when empty). Raises ``ProtocolError`` as
    :func:`skip_value`.
    """
    while (header := field_header(data, pos)) is not None:
        ftype, fid = header
        end = skip_value(data, pos + 3, ftype, depth + 1, budget)
        yield fid, ftype, pos + 3, end
        pos = end


def struct_fields(data: bytes, pos: int, depth: int = 0) -> tuple[list[Field], int]:
    """All fields of the struct at ``pos`` and the offset after its STOP byte.

    Raises ``ProtocolError`` as :func:`skip_value`.
    """
    fields = list(iter_fields(data, pos, depth))
    return fields, (fields[-1][3] if fields else pos) + 1


def reply_succeeded(message: bytes) -> bool:
    """Whether ``message`` is a REPLY whose result struct holds field 0 (success) or nothing
    (a void method's success); Thrift puts declared exceptions in fields 1..n.

    Reads only the message header and the first field header, as :func:`read_message_header`
    and :func:`field_header` would (the same answer, tested against them), straight from the
    bytes: it runs once per reply. ``False`` for an EXCEPTION, another message type or a
    malformed start, never raises.
    """
    size = len(message)
    if size < 12 or message[0] != 0x80 or message[1] != 0x01 or message[3] != REPLY:
        return False
    name_len = int.from_bytes(message[4:8], "big", signed=True)
    pos = 12 + name_len
    if name_len < 0 or name_len > MAX_NAME_BYTES or pos >= size:
        return False
    try:
        message[8:8 + name_len].decode("utf-8")
    except UnicodeDecodeError:
        return False
    if message[pos] == TType.STOP:
        return True
    return pos + 3 <= size and message[pos + 1] == 0 and message[pos + 2] == 0


# --- database and table named by a call -------------------------------------------------------

_DB_FIELDS = frozenset({"db_name", "dbname", "dbName", "databaseName", "db"})
_TABLE_FIELDS = frozenset({"tbl_name", "table_name", "tableName", "tblName", "tbl"})
#: Values walked before giving up, so looking costs a bounded amount per call.
CALL_OBJECTS_BUDGET = 20_000


#: Calls up to this size are remembered by :func:`call_objects` (the last :data:`_REMEMBERED`).
_REMEMBER_BYTES = 1024
_REMEMBERED = 1024


def call_objects(message: bytes, schema: ServiceSchema, max_chars: int = 256) -> tuple[str | None, str | None]:
    """``(database, table)`` a strict-binary CALL names, from its arguments' IDL names.

    Clients repeat the same metadata calls (a planner asks for the same tables again and again),
    so the answers for calls of up to 1 KiB are remembered, by their bytes with the seqid left
    out: at most 1,024 of them, least recently used dropped first (``functools.lru_cache``).

    Looks at string arguments named like ``db_name``/``tbl_name`` (Hive IDL spellings vary:
    ``dbname``, ``dbName``, ``tableName`` ...), ``name`` in ``*database*`` methods, and the same
    names one struct deep (``create_table(Table)``, ``create_database(Database)``, request
    structs). Names are decoded as UTF-8 with U+FFFD replacement and cut to ``max_chars``
    bytes' worth. Walks at most :data:`CALL_OBJECTS_BUDGET` values; never raises: what was
    found before a malformed part or the budget's end is returned, else ``None``.
    """
    if len(message) <= _REMEMBER_BYTES:
        name_end = 8 + int.from_bytes(message[4:8], "big", signed=True)
        if 8 <= name_end <= len(message) - 4:
            return _remembered(schema)(message[:name_end] + b"\0\0\0\0" + message[name_end + 4:], max_chars)
    return _call_objects(message, schema, max_chars)


def _remember(schema: ServiceSchema) -> Callable[[bytes, int], tuple[str | None, str | None]]:
    """:func:`call_objects`' remembered answers for one schema (``functools.lru_cache``)."""
    return functools.lru_cache(maxsize=_REMEMBERED)(
        lambda message, max_chars: _call_objects(message, schema, max_chars))


_remembered = SchemaKeyed(_remember)


def _call_objects(message: bytes, schema: ServiceSchema, max_chars: int = 256) -> tuple[str | None, str | None]:
    found: dict[str, str] = {}
    try:
        header, pos = read_message_header(message)
        method = schema.methods.get(header.name)
        if method is not None:
            _find_objects(message, pos, method.args, "database" in header.name, found,
                          Budget(CALL_OBJECTS_BUDGET), max_chars, 0)
    except ProtocolError:
        pass
    return found.get("database"), found.get("table")


def _find_objects(data: bytes, pos: int, schema: StructSchema, name_is_db: bool, found: dict[str, str],
                  budget: Budget, max_chars: int, depth: int) -> None:
    for fid, ftype, start, end in iter_fields(data, pos, depth, budget):
        field = schema.fields.get(fid)
        if field is None:
            continue
        if ftype == TType.STRING:
            name = field.name
            key = ("database" if name in _DB_FIELDS or (name == "name" and name_is_db)
                   else "table" if name in _TABLE_FIELDS else None)
            if key is not None:
                first, last = string_span(data, start)
                found.setdefault(key, data[first : min(last, first + max_chars)].decode("utf-8", "replace"))
        elif ftype == TType.STRUCT and depth == 0 and isinstance(field.spec, StructSchema):
            _find_objects(data, start, field.spec, field.spec.name == "Database", found, budget, max_chars, 1)
        if "database" in found and "table" in found:
            return
