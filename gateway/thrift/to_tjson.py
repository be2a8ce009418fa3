"""Strict binary struct → compact TJSON text, the way Apache's Java/C++ writers write it.

Driven by the binary type bytes; the schema only decides whether a string is IDL
``binary`` (written as padded base64) or ``string``. Fields the schema does not know
pass through by wire type, so replies from newer HMS versions stay lossless except for
strings that are not UTF-8: those are decoded with U+FFFD replacement, as Apache Java's
``TBinaryProtocol.readString`` does (it is ``new String(bytes, UTF_8)``).

Output pieces are appended to a list of ``str``; the caller joins them. List, set and map
headers are read and checked by :mod:`.walk`; field and string headers and fixed-size values
are read inline, the per-value hot path. The C extension (``_speedups.ReplyTranslator``) has
the same contract.
"""

from __future__ import annotations

from .binary import DOUBLE, FIELD_HEADER, I8, I16, I32, I64
from .errors import MAX_DEPTH, ProtocolError
from .schema import BINARY, StructSchema, TType, TypeSpec
from .tjson_syntax import TYPE_TO_TAG, encode_base64, format_double, format_double_key, quote_string
from .to_binary import compatible_spec
from .walk import list_header, map_header

__all__ = ["read_struct"]

_unpack_i8 = I8.unpack_from
_unpack_i16 = I16.unpack_from
_unpack_i32 = I32.unpack_from
_unpack_i64 = I64.unpack_from
_unpack_double = DOUBLE.unpack_from
_FIELD_HEAD = FIELD_HEADER.unpack_from

_STRING, _I32, _I64, _STRUCT, _BOOL = TType.STRING, TType.I32, TType.I64, TType.STRUCT, TType.BOOL
_LIST, _SET, _MAP, _DOUBLE, _I16, _I8 = TType.LIST, TType.SET, TType.MAP, TType.DOUBLE, TType.I16, TType.I8

# '"<id>":{"<tag>":' prefixes, built once per (field id, type).
_prefixes: dict[tuple[int, int], str] = {}


def _prefix(fid: int, ftype: int) -> str:
    tag = TYPE_TO_TAG.get(ftype)
    if tag is None:
        raise ProtocolError(f"unknown binary type {ftype} in field {fid}")
    text = f'"{fid}":{{"{tag}":'
    if len(_prefixes) < 65536:
        _prefixes[(fid, ftype)] = text
    return text


def read_struct(data: bytes, pos: int, schema: StructSchema | None, out: list[str], depth: int) -> int:
    """Append the TJSON of the binary struct at ``data[pos:]``; return the offset after it.

    Raises ``ProtocolError`` on unknown types, negative sizes, nesting deeper than
    ``MAX_DEPTH``; ``IndexError``/``struct.error`` on truncation (the caller maps them).
    """
    if depth > MAX_DEPTH:
        raise ProtocolError("binary message nested too deeply")
    fields = schema.fields if schema is not None else None
    append = out.append
    append("{")
    separator = ""
    while True:
        ftype = data[pos]
        if ftype == 0:
            append("}")
            return pos + 1
        ftype, fid = _FIELD_HEAD(data, pos)
        pos += 3
        prefix = _prefixes.get((fid, ftype)) or _prefix(fid, ftype)
        spec = None
        if fields is not None:
            field = fields.get(fid)
            if field is not None:
                spec = compatible_spec(field.spec, ftype)
        append(separator)
        append(prefix)
        pos = _read_value(data, pos, ftype, spec, out, depth)
        append("}")
        separator = ","


def _read_value(data: bytes, pos: int, ttype: int, spec: TypeSpec | None, out: list[str], depth: int) -> int:
    if ttype == _STRING:  # walk.string_span, inline: one call per string costs 10 %
        length = _unpack_i32(data, pos)[0]
        pos += 4
        end = pos + length
        if length < 0 or end > len(data):
            raise ProtocolError("bad string length in binary message")
        if spec == BINARY:
            out.append('"' + encode_base64(data[pos:end]) + '"')
        else:
            out.append(quote_string(data[pos:end].decode("utf-8", "replace")))
        return end
    if ttype == _I32:
        out.append(str(_unpack_i32(data, pos)[0]))
        return pos + 4
    if ttype == _STRUCT:
        return read_struct(data, pos, spec if isinstance(spec, StructSchema) else None, out, depth + 1)
    if ttype == _MAP:
        return _read_map(data, pos, spec, out, depth + 1)
    if ttype == _LIST or ttype == _SET:
        return _read_list(data, pos, spec, out, depth + 1)
    if ttype == _I64:
        out.append(str(_unpack_i64(data, pos)[0]))
        return pos + 8
    if ttype == _BOOL:
        out.append("1" if data[pos] == 1 else "0")  # Java: readByte() == 1
        return pos + 1
    if ttype == _DOUBLE:
        out.append(format_double(_unpack_double(data, pos)[0]))
        return pos + 8
    if ttype == _I16:
        out.append(str(_unpack_i16(data, pos)[0]))
        return pos + 2
    if ttype == _I8:
        out.append(str(_unpack_i8(data, pos)[0]))
        return pos + 1
    raise ProtocolError(f"unknown binary type {ttype}")


def _read_list(data: bytes, pos: int, spec: TypeSpec | None, out: list[str], depth: int) -> int:
    if depth > MAX_DEPTH:
        raise ProtocolError("binary message nested too deeply")
    etype, count, pos = list_header(data, pos)
    tag = TYPE_TO_TAG[etype]
    espec = compatible_spec(spec.elem, etype) if spec is not None else None  # type: ignore[union-attr]
    out.append(f'["{tag}",{count}')
    append = out.append
    for _ in range(count):
        append(",")
        pos = _read_value(data, pos, etype, espec, out, depth)
    append("]")
    return pos


def _read_map(data: bytes, pos: int, spec: TypeSpec | None, out: list[str], depth: int) -> int:
    if depth > MAX_DEPTH:
        raise ProtocolError("binary message nested too deeply")
    ktype, vtype, count, pos = map_header(data, pos)
    ktag, vtag = TYPE_TO_TAG[ktype], TYPE_TO_TAG[vtype]
    kspec = vspec = None
    if spec is not None:
        kspec = compatible_spec(spec.key, ktype)  # type: ignore[union-attr]
        vspec = compatible_spec(spec.value, vtype)  # type: ignore[union-attr]
    append = out.append
    append(f'["{ktag}","{vtag}",{count},{{')
    separator = ""
    for _ in range(count):
        append(separator)
        pos = _read_key(data, pos, ktype, kspec, out, depth)
        append(":")
        pos = _read_value(data, pos, vtype, vspec, out, depth)
        separator = ","
    append("}]")
    return pos


def _read_key(data: bytes, pos: int, ktype: int, spec: TypeSpec | None, out: list[str], depth: int) -> int:
    """Map keys are JSON strings; numbers and bools quoted; containers/structs raw JSON (Apache)."""
    if ktype == _STRING:
        return _read_value(data, pos, ktype, spec, out, depth)
    if ktype == _DOUBLE:
        out.append(format_double_key(_unpack_double(data, pos)[0]))
        return pos + 8
    if ktype == _I32 or ktype == _I64 or ktype == _I16 or ktype == _I8 or ktype == _BOOL:
        mark = len(out)
        pos = _read_value(data, pos, ktype, spec, out, depth)
        out[mark] = '"' + out[mark] + '"'
        return pos
    return _read_value(data, pos, ktype, spec, out, depth)
