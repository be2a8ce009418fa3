"""Replies the gateway writes itself in place of HMS's, shaped as HMS writes them: a method's
declared exception (``NoSuchObjectException``, ``MetaException``…), HMS 2.3.10's own answer for
a missing object, and an empty result. A caller cannot tell them from HMS's.

Every reply is a strict-binary REPLY message (:func:`gateway.thrift.objects.encode_reply`),
or a ``TApplicationException`` (``INTERNAL_ERROR``) where HMS answers with one.
"""

from __future__ import annotations

from .objects import encode_reply
from .codec import BINARY
from .schema import MethodSchema
from .translate import INTERNAL_ERROR

#: How HMS 2.3.10 answers a read of a missing object (measured per method, see
#: :data:`gateway.thrift.hive_methods.READS`): the declared exception and its message, with
#: ``{database}``, ``{table}``, ``{index}`` and ``{function}`` the names the call gave.
MISSING: dict[str, tuple[str, str]] = {
    "no_such_database": ("NoSuchObjectException", "{database}"),
    "unknown_database": ("UnknownDBException", "Could not find database {database}"),
    "no_such_table": ("NoSuchObjectException", "{database}.{table} table not found"),
    "unknown_table": ("UnknownTableException", "{database}.{table} table not found"),
    "no_such_db_table": ("NoSuchObjectException", "Specified database/table does not exist : {database}.{table}"),
    "unknown_table_event": ("UnknownTableException", "Table: {table} is not found."),
    "no_such_index": ("NoSuchObjectException", "{database}.{table} index={index} not found"),
    "no_such_function": ("NoSuchObjectException", "Function {database}.{function} does not exist"),
}
#: HMS's other answers for a missing object: an empty result, or an internal error.
EMPTY, INTERNAL = "empty", "internal_error"


def missing_reply(method: MethodSchema, name: str, seqid: int, how: str, **names: object) -> bytes:
    """HMS 2.3.10's answer to ``name`` for a missing object: ``how`` is a key of
    :data:`MISSING`, :data:`EMPTY` or :data:`INTERNAL`; ``names`` fill the message (database,
    table, index, function). Raises ``KeyError`` for an unknown ``how``."""
    if how == INTERNAL:
        return BINARY.application_exception(name, seqid, f"Internal error processing {name}", INTERNAL_ERROR)
    if how == EMPTY:
        return encode_reply(name, seqid, empty_result(method))
    exception, template = MISSING[how]
    fields = {"database": None, "table": None, "index": None, "function": None, **names}
    return exception_reply(method, name, seqid, exception, template.format(**fields))


def exception_reply(method: MethodSchema | None, name: str, seqid: int, struct_name: str,
                    message: str) -> bytes:
    """A REPLY carrying the declared exception ``struct_name`` with ``message``; a
    ``TApplicationException`` (INTERNAL_ERROR) when the method declares none."""
    found = declared(method, struct_name)
    if found is None:
        return BINARY.application_exception(name, seqid, message, INTERNAL_ERROR)
    field, cls = found
    result = method.result_class()  # type: ignore[union-attr, misc]
    setattr(result, field, cls(message=message))
    return encode_reply(name, seqid, result)


def declared(method: MethodSchema | None, struct_name: str) -> tuple[str, type] | None:
    """(result attribute, thriftpy2 class) of the exception ``struct_name`` that ``method``
    declares, or None."""
    if method is None or method.result_class is None:
        return None
    for spec in (method.result_class.thrift_spec or {}).values():
        if len(spec) > 2 and isinstance(spec[2], type) and spec[2].__name__ == struct_name:
            return spec[1], spec[2]
    return None


def empty_result(method: MethodSchema):
    """The method's result with an empty ``success``: ``[]``, or its struct with empty lists."""
    result = method.result_class()  # type: ignore[misc]
    spec = method.result_class.thrift_spec[0]  # type: ignore[union-attr]
    if spec[0] == 15:  # TType.LIST
        result.success = []
    else:
        value = spec[2]()
        for field in value.thrift_spec.values():
            if field[0] == 15:
                setattr(value, field[1], [])
        result.success = value
    return result
