"""TJSON value tree (from :func:`gateway.thrift.tjson_syntax.parse_tjson`) → strict binary struct.

Driven by the TJSON type tags; the schema only decides whether a ``str`` is IDL
``binary`` (base64 → raw bytes) or ``string`` (UTF-8). Positions the schema does not
know (unknown fields, or a tag that disagrees with the IDL) are encoded by their tags,
with ``str`` as UTF-8 string. Every count is checked against the elements present.
"""

from __future__ import annotations

import re
import struct

from .binary import DOUBLE, FIELD_HEADER, I8, I16, I32, I64, LIST_HEADER, MAP_HEADER
from .errors import MAX_DEPTH, ProtocolError, excerpt
from .schema import BINARY, StructSchema, TType, TypeSpec
from .tjson_syntax import TAG_TO_TYPE, decode_base64, parse_key, special_double

__all__ = ["write_struct", "compatible_spec"]

_FIELD_ID = re.compile(r"-?[0-9]{1,5}")
_INT_KEY = re.compile(r"-?[0-9]{1,20}")
_DOUBLE_KEY = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_PACKERS = {TType.I8: I8.pack, TType.I16: I16.pack, TType.I32: I32.pack, TType.I64: I64.pack}
_PY_SPECIAL_KEYS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
_INT_NAMES = {TType.I8: "i8", TType.I16: "i16", TType.I32: "i32", TType.I64: "i64"}


def compatible_spec(spec: TypeSpec | None, ttype: int) -> TypeSpec | None:
    """``spec`` if it describes wire type ``ttype``, else ``None`` (unknown position)."""
    if spec is None:
        return None
    if type(spec) is int:
        if spec == ttype or (spec == BINARY and ttype == TType.STRING):
            return spec
        return None
    return spec if spec.ttype == ttype else None  # type: ignore[union-attr]


def write_struct(out: bytearray, obj: object, schema: StructSchema | None, depth: int) -> None:
    """Append the binary encoding of TJSON struct ``obj`` (``{"id":{"tag":value}}``)."""
    if type(obj) is not dict:
        raise ProtocolError("struct must be a JSON object")
    if depth > MAX_DEPTH:
        raise ProtocolError("TJSON nested too deeply")
    fields = schema.fields if schema is not None else None
    for key, wrapped in obj.items():
        if not _FIELD_ID.fullmatch(key):
            raise ProtocolError(f"bad field id {excerpt(key)}")
        fid = int(key)
        if not -32768 <= fid <= 32767:
            raise ProtocolError(f"field id {fid} out of i16 range")
        if type(wrapped) is not dict or len(wrapped) != 1:
            raise ProtocolError(f"field {fid} must be an object with one type tag")
        ((tag, value),) = wrapped.items()
        ttype = TAG_TO_TYPE.get(tag)
        if ttype is None:
            raise ProtocolError(f"unknown type tag {excerpt(tag)} in field {fid}")
        spec = None
        if fields is not None:
            field = fields.get(fid)
            if field is not None:
                spec = compatible_spec(field.spec, ttype)
        out += FIELD_HEADER.pack(ttype, fid)
        write_value(out, ttype, value, spec, depth)
    out.append(TType.STOP)


def write_value(out: bytearray, ttype: int, value: object, spec: TypeSpec | None, depth: int) -> None:
    """Append one value of wire type ``ttype`` given as TJSON ``value``."""
    if ttype == TType.STRING:
        if type(value) is not str:
            raise ProtocolError("str value must be a JSON string")
        if spec == BINARY:
            raw = decode_base64(value)
        else:
            try:
                raw = value.encode("utf-8")
            except UnicodeEncodeError:
                raise ProtocolError("string holds an unpaired surrogate") from None
        out += I32.pack(len(raw))
        out += raw
    elif ttype in _INT_PACKERS:
        if type(value) is not int:
            raise ProtocolError(f"{_INT_NAMES[ttype]} value must be an integer, got {excerpt(value)}")
        _pack_int(out, ttype, value)
    elif ttype == TType.STRUCT:
        write_struct(out, value, spec if isinstance(spec, StructSchema) else None, depth + 1)
    elif ttype == TType.BOOL:
        if type(value) is not int and type(value) is not bool:
            raise ProtocolError(f"tf value must be 1 or 0, got {excerpt(value)}")
        out.append(1 if value else 0)
    elif ttype == TType.DOUBLE:
        out += DOUBLE.pack(_to_double(value))
    elif ttype == TType.LIST or ttype == TType.SET:
        _write_list(out, ttype, value, spec, depth + 1)
    elif ttype == TType.MAP:
        _write_map(out, value, spec, depth + 1)
    else:  # pragma: no cover - TAG_TO_TYPE holds only the types above
        raise ProtocolError(f"unsupported type {ttype}")


def _pack_int(out: bytearray, ttype: int, value: int) -> None:
    try:
        out += _INT_PACKERS[ttype](value)
    except struct.error:
        raise ProtocolError(f"{_INT_NAMES[ttype]} value out of range") from None


def _to_double(value: object) -> float:
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise ProtocolError("dbl value out of range") from None
    if kind is str:
        special = special_double(value)  # type: ignore[arg-type]
        if special is not None:
            return special
    raise ProtocolError(f"dbl value must be a number, got {excerpt(value)}")


def _write_list(out: bytearray, ttype: int, value: object, spec: TypeSpec | None, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ProtocolError("TJSON nested too deeply")
    if type(value) is not list or len(value) < 2:
        raise ProtocolError("lst/set value must be [tag, count, ...]")
    etype = TAG_TO_TYPE.get(value[0]) if type(value[0]) is str else None
    if etype is None:
        raise ProtocolError(f"unknown element type tag {excerpt(value[0])}")
    count = value[1]
    if type(count) is not int or count != len(value) - 2:
        raise ProtocolError("lst/set count disagrees with its elements")
    out += LIST_HEADER.pack(etype, count)
    espec = compatible_spec(spec.elem, etype) if spec is not None else None  # type: ignore[union-attr]
    for index in range(2, count + 2):
        write_value(out, etype, value[index], espec, depth)


def _write_map(out: bytearray, value: object, spec: TypeSpec | None, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ProtocolError("TJSON nested too deeply")
    if type(value) is not list or len(value) != 4:
        raise ProtocolError("map value must be [ktag, vtag, count, {...}]")
    ktag, vtag, count, entries = value
    ktype = TAG_TO_TYPE.get(ktag) if type(ktag) is str else None
    vtype = TAG_TO_TYPE.get(vtag) if type(vtag) is str else None
    if ktype is None or vtype is None:
        raise ProtocolError("unknown map key/value type tag")
    if type(entries) is not dict:
        raise ProtocolError("map entries must be a JSON object")
    if type(count) is not int or count != len(entries):
        raise ProtocolError("map count disagrees with its entries")
    out += MAP_HEADER.pack(ktype, vtype, count)
    kspec = vspec = None
    if spec is not None:
        kspec = compatible_spec(spec.key, ktype)  # type: ignore[union-attr]
        vspec = compatible_spec(spec.value, vtype)  # type: ignore[union-attr]
    for key, item in entries.items():
        _write_key(out, ktype, key, kspec, depth)
        write_value(out, vtype, item, vspec, depth)


def _write_key(out: bytearray, ktype: int, key: str, spec: TypeSpec | None, depth: int) -> None:
    """Map keys are JSON strings: numbers quoted, containers/structs as JSON text."""
    if ktype == TType.STRING:
        write_value(out, ktype, key, spec, depth)
    elif ktype in _INT_PACKERS or ktype == TType.BOOL:
        if not _INT_KEY.fullmatch(key):
            raise ProtocolError(f"map key must be an integer, got {excerpt(key)}")
        number = int(key)
        if ktype == TType.BOOL:
            out.append(1 if number else 0)
        else:
            _pack_int(out, ktype, number)
    elif ktype == TType.DOUBLE:
        special = special_double(key)
        if special is None:
            special = _PY_SPECIAL_KEYS.get(key)  # Python's writer quotes nan/inf keys as-is
        if special is None:
            if not _DOUBLE_KEY.fullmatch(key):
                raise ProtocolError(f"map key must be a number, got {excerpt(key)}")
            special = float(key)
        out += DOUBLE.pack(special)
    else:
        write_value(out, ktype, parse_key(key), spec, depth)
