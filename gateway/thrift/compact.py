"""TCompactProtocol ⇄ strict TBinaryProtocol, message by message, by wire types only.

Follows Apache Thrift's compact protocol specification
(https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md) as its Java,
C++ and Python implementations write it:

* message: byte ``0x82``, byte ``(type << 5) | 1``, seqid as an unsigned varint32, method name
  as varint length + UTF-8 bytes, then one struct;
* field header: ``(delta << 4) | ctype`` when the id grows by 1..15 over the previous field of
  the same struct, else ``ctype`` then the id as a zigzag varint (i16); STOP is ``0``;
  a bool *field* carries its value in the ctype (1 true, 2 false) and has no body;
* i8 one byte; i16, i32, i64 zigzag varints; double 8 bytes **little-endian** (big-endian in
  binary); string/binary varint length + bytes (the two are the same on both wires, so no
  schema is needed);
* list/set header: ``(size << 4) | ctype`` for sizes under 15, else ``0xf0 | ctype`` then a
  varint size; a bool *element* is one byte (1 true, 2 false);
* map header: a single ``0`` byte when empty, else varint size then ``(kctype << 4) | vctype``.

Untrusted input is handled with bounded varints (5 bytes for 32-bit values, 10 for 64-bit),
every count checked against the bytes left (each element needs at least one), nesting limited
to :data:`~gateway.thrift.errors.MAX_DEPTH`, and output grown as elements are read, never
pre-allocated from a count (binary input: by :mod:`.walk`'s header readers). Every problem
raises :class:`ProtocolError`.
"""

from __future__ import annotations

import struct

from .binary import (
    DOUBLE,
    EXCEPTION,
    FIELD_HEADER,
    I16,
    I32,
    I64,
    LIST_HEADER,
    MAP_HEADER,
    MAX_NAME_BYTES,
    MessageHeader,
    read_message_header,
    write_message_header,
)
from .errors import MAX_DEPTH, ProtocolError
from .schema import TType
from .walk import field_header, list_header, map_header, string_span

__all__ = [
    "PROTOCOL_ID",
    "compact_message_to_binary",
    "binary_message_to_compact",
    "compact_application_exception",
]

PROTOCOL_ID = 0x82
VERSION = 1
_VERSION_MASK = 0x1F
_TYPE_SHIFT = 5

# Compact type codes (CompactType in Apache Thrift).
C_STOP, C_TRUE, C_FALSE, C_BYTE, C_I16, C_I32, C_I64, C_DOUBLE = 0, 1, 2, 3, 4, 5, 6, 7
C_BINARY, C_LIST, C_SET, C_MAP, C_STRUCT = 8, 9, 10, 11, 12

_TO_BINARY = {
    C_TRUE: TType.BOOL,
    C_FALSE: TType.BOOL,
    C_BYTE: TType.I8,
    C_I16: TType.I16,
    C_I32: TType.I32,
    C_I64: TType.I64,
    C_DOUBLE: TType.DOUBLE,
    C_BINARY: TType.STRING,
    C_LIST: TType.LIST,
    C_SET: TType.SET,
    C_MAP: TType.MAP,
    C_STRUCT: TType.STRUCT,
}
_TO_COMPACT = {
    TType.BOOL: C_TRUE,  # element type of a bool container, as Apache writers put it
    TType.I8: C_BYTE,
    TType.I16: C_I16,
    TType.I32: C_I32,
    TType.I64: C_I64,
    TType.DOUBLE: C_DOUBLE,
    TType.STRING: C_BINARY,
    TType.LIST: C_LIST,
    TType.SET: C_SET,
    TType.MAP: C_MAP,
    TType.STRUCT: C_STRUCT,
}

_LE_DOUBLE = struct.Struct("<d")
_I16_MIN, _I16_MAX = -(1 << 15), (1 << 15) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


# --- compact → binary -----------------------------------------------------------------------


class _CompactToBinary:
    """Reads one compact message from ``data`` and appends its strict-binary form to ``out``."""

    __slots__ = ("data", "pos", "end", "out")

    def __init__(self, data: bytes):
        self.data, self.pos, self.end = data, 0, len(data)
        self.out = bytearray()

    def _byte(self) -> int:
        if self.pos >= self.end:
            raise ProtocolError("compact message truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def _varint(self, max_bytes: int) -> int:
        data, pos, end = self.data, self.pos, self.end
        result = shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise ProtocolError("compact message truncated in a varint")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return result
            shift += 7
        raise ProtocolError("compact varint too long")

    def _zigzag(self, max_bytes: int) -> int:
        n = self._varint(max_bytes)
        return (n >> 1) ^ -(n & 1)

    def _size(self, what: str, min_each: int) -> int:
        size = self._varint(5)
        if size > _I32_MAX:
            raise ProtocolError(f"compact {what} size out of range")
        if size * min_each > self.end - self.pos:
            raise ProtocolError(f"compact {what} size {size} exceeds the bytes left")
        return size

    def message(self) -> MessageHeader:
        if self._byte() != PROTOCOL_ID:
            raise ProtocolError("not a compact message (first byte must be 0x82)")
        vt = self._byte()
        if vt & _VERSION_MASK != VERSION:
            raise ProtocolError(f"unsupported compact protocol version {vt & _VERSION_MASK}")
        mtype = vt >> _TYPE_SHIFT
        seqid = self._varint(5)
        if seqid > 0xFFFFFFFF:
            raise ProtocolError("compact seqid out of range")
        seqid = seqid - (1 << 32) if seqid > _I32_MAX else seqid
        name_len = self._varint(5)
        if name_len > MAX_NAME_BYTES or name_len > self.end - self.pos:
            raise ProtocolError("bad method name length in compact message")
        raw = self.data[self.pos : self.pos + name_len]
        self.pos += name_len
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("method name is not UTF-8") from None
        write_message_header(self.out, name, mtype, seqid)
        self._struct(1)
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} bytes after the end of the compact message")
        return MessageHeader(name, mtype, seqid)

    def _struct(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("compact message nested too deeply")
        out = self.out
        last = 0
        while True:
            b = self._byte()
            ctype = b & 0x0F
            if ctype == C_STOP:
                if b:
                    raise ProtocolError(f"bad compact field header 0x{b:02x}")
                out.append(TType.STOP)
                return
            delta = b >> 4
            if delta:
                fid = last + delta
            else:
                fid = self._zigzag(3)
            if not _I16_MIN <= fid <= _I16_MAX:
                raise ProtocolError("compact field id out of range")
            last = fid
            ttype = _TO_BINARY.get(ctype)
            if ttype is None:
                raise ProtocolError(f"unknown compact type {ctype}")
            out += FIELD_HEADER.pack(ttype, fid)
            if ctype == C_TRUE or ctype == C_FALSE:
                out.append(1 if ctype == C_TRUE else 0)
            else:
                self._value(ctype, depth)

    def _value(self, ctype: int, depth: int) -> None:
        out = self.out
        if ctype == C_BINARY:
            n = self._varint(5)
            if n > self.end - self.pos:
                raise ProtocolError("compact string longer than the bytes left")
            out += I32.pack(n)
            out += self.data[self.pos : self.pos + n]
            self.pos += n
        elif ctype == C_I32:
            v = self._zigzag(5)
            if not _I32_MIN <= v <= _I32_MAX:
                raise ProtocolError("compact i32 out of range")
            out += I32.pack(v)
        elif ctype == C_I64:
            v = self._zigzag(10)
            if not -(1 << 63) <= v < (1 << 63):
                raise ProtocolError("compact i64 out of range")
            out += I64.pack(v)
        elif ctype == C_I16:
            v = self._zigzag(3)
            if not _I16_MIN <= v <= _I16_MAX:
                raise ProtocolError("compact i16 out of range")
            out += I16.pack(v)
        elif ctype == C_BYTE:
            out.append(self._byte())
        elif ctype == C_DOUBLE:
            if self.end - self.pos < 8:
                raise ProtocolError("compact message truncated in a double")
            (v,) = _LE_DOUBLE.unpack_from(self.data, self.pos)
            self.pos += 8
            out += DOUBLE.pack(v)
        elif ctype == C_STRUCT:
            self._struct(depth + 1)
        elif ctype == C_LIST or ctype == C_SET:
            self._list(depth + 1)
        elif ctype == C_MAP:
            self._map(depth + 1)
        elif ctype == C_TRUE or ctype == C_FALSE:  # a bool container element: 1 true, 2 false
            b = self._byte()
            if b not in (C_TRUE, C_FALSE, 0):
                raise ProtocolError(f"bad compact bool 0x{b:02x}")
            out.append(1 if b == C_TRUE else 0)
        else:
            raise ProtocolError(f"unknown compact type {ctype}")

    def _list(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("compact message nested too deeply")
        b = self._byte()
        ctype = b & 0x0F
        size = b >> 4
        ttype = _TO_BINARY.get(ctype)
        if ttype is None:
            raise ProtocolError(f"unknown compact list element type {ctype}")
        min_each = 8 if ctype == C_DOUBLE else 1
        if size == 15:
            size = self._size("list", min_each)
        elif size * min_each > self.end - self.pos:
            raise ProtocolError(f"compact list size {size} exceeds the bytes left")
        self.out += LIST_HEADER.pack(ttype, size)
        for _ in range(size):
            self._value(ctype, depth)

    def _map(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("compact message nested too deeply")
        size = self._size("map", 2)
        if size == 0:
            self.out += MAP_HEADER.pack(TType.STRING, TType.STRING, 0)
            return
        kv = self._byte()
        kc, vc = kv >> 4, kv & 0x0F
        kt, vt = _TO_BINARY.get(kc), _TO_BINARY.get(vc)
        if kt is None or vt is None:
            raise ProtocolError("unknown compact map key or value type")
        min_each = (8 if kc == C_DOUBLE else 1) + (8 if vc == C_DOUBLE else 1)
        if size * min_each > self.end - self.pos:
            raise ProtocolError(f"compact map size {size} exceeds the bytes left")
        self.out += MAP_HEADER.pack(kt, vt, size)
        for _ in range(size):
            self._value(kc, depth)
            self._value(vc, depth)


def compact_message_to_binary(body: bytes) -> tuple[MessageHeader, bytes]:
    """Translate one whole TCompactProtocol message into a strict-binary message.

    Returns the header (name, type 1..4, signed i32 seqid) and the binary bytes. Raises
    ``ProtocolError`` if ``body`` is not exactly one well-formed compact message.
    """
    reader = _CompactToBinary(bytes(body))
    try:
        header = reader.message()
    except RecursionError:  # only if MAX_DEPTH exceeded the interpreter's limit
        raise ProtocolError("compact message nested too deeply") from None
    return header, bytes(reader.out)


# --- binary → compact -----------------------------------------------------------------------


def _uvarint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zz32(n: int) -> int:
    return ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF


def _zz64(n: int) -> int:
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


class _BinaryToCompact:
    """Reads one strict-binary message from ``data`` (headers checked by :mod:`.walk`) and
    appends its compact form to ``out``."""

    __slots__ = ("data", "pos", "out")

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0
        self.out = bytearray()

    def _fixed(self, size: int) -> int:
        """The offset of a fixed-size value at ``pos``, which moves past it."""
        pos = self.pos
        if len(self.data) - pos < size:
            raise ProtocolError("binary message truncated")
        self.pos = pos + size
        return pos

    def message(self, seqid: int | None) -> MessageHeader:
        header, self.pos = read_message_header(self.data)
        if header.type > 7:  # three bits in compact's second byte; the binary header has eight
            raise ProtocolError(f"message type {header.type} has no compact form")
        out = self.out
        out.append(PROTOCOL_ID)
        out.append((header.type << _TYPE_SHIFT) | VERSION)
        _uvarint(out, (header.seqid if seqid is None else seqid) & 0xFFFFFFFF)
        raw = header.name.encode("utf-8")
        _uvarint(out, len(raw))
        out += raw
        self._struct(1)
        if self.pos != len(self.data):
            raise ProtocolError(f"{len(self.data) - self.pos} bytes after the end of the binary message")
        return header

    def _struct(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("binary message nested too deeply")
        data, out = self.data, self.out
        last = 0
        while (header := field_header(data, self.pos)) is not None:
            ttype, fid = header
            self.pos += 3
            if ttype == TType.BOOL:
                ctype = C_TRUE if data[self._fixed(1)] else C_FALSE
            else:
                ctype = _TO_COMPACT.get(ttype)
                if ctype is None:
                    raise ProtocolError(f"unknown binary type {ttype}")
            delta = fid - last
            if 0 < delta <= 15:
                out.append((delta << 4) | ctype)
            else:
                out.append(ctype)
                _uvarint(out, _zz32(fid))
            last = fid
            if ttype != TType.BOOL:
                self._value(ttype, depth)
        self.pos += 1
        out.append(C_STOP)

    def _value(self, ttype: int, depth: int) -> None:
        data, out = self.data, self.out
        if ttype == TType.STRING:
            start, end = string_span(data, self.pos)
            _uvarint(out, end - start)
            out += data[start:end]
            self.pos = end
        elif ttype == TType.I32:
            _uvarint(out, _zz32(I32.unpack_from(data, self._fixed(4))[0]))
        elif ttype == TType.I64:
            _uvarint(out, _zz64(I64.unpack_from(data, self._fixed(8))[0]))
        elif ttype == TType.I16:
            _uvarint(out, _zz32(I16.unpack_from(data, self._fixed(2))[0]))
        elif ttype == TType.I8:
            out.append(data[self._fixed(1)])
        elif ttype == TType.BOOL:  # a container element
            out.append(C_TRUE if data[self._fixed(1)] else C_FALSE)
        elif ttype == TType.DOUBLE:
            out += _LE_DOUBLE.pack(DOUBLE.unpack_from(data, self._fixed(8))[0])
        elif ttype == TType.STRUCT:
            self._struct(depth + 1)
        elif ttype == TType.LIST or ttype == TType.SET:
            self._list(depth + 1)
        elif ttype == TType.MAP:
            self._map(depth + 1)
        else:
            raise ProtocolError(f"unknown binary type {ttype}")

    def _list(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("binary message nested too deeply")
        etype, n, self.pos = list_header(self.data, self.pos)
        ctype = _TO_COMPACT[etype]
        if n < 15:
            self.out.append((n << 4) | ctype)
        else:
            self.out.append(0xF0 | ctype)
            _uvarint(self.out, n)
        for _ in range(n):
            self._value(etype, depth)

    def _map(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ProtocolError("binary message nested too deeply")
        kt, vt, n, self.pos = map_header(self.data, self.pos)
        if n == 0:
            self.out.append(0)
            return
        _uvarint(self.out, n)
        self.out.append((_TO_COMPACT[kt] << 4) | _TO_COMPACT[vt])
        for _ in range(n):
            self._value(kt, depth)
            self._value(vt, depth)


def binary_message_to_compact(message: bytes, seqid: int | None = None) -> bytes:
    """Translate one whole strict-binary message into TCompactProtocol.

    ``seqid``, when given, replaces the message's own. Raises ``ProtocolError`` on a malformed
    or truncated message or bytes after it.
    """
    reader = _BinaryToCompact(bytes(message))
    try:
        reader.message(seqid)
    except RecursionError:
        raise ProtocolError("binary message nested too deeply") from None
    return bytes(reader.out)


def compact_application_exception(name: str, seqid: int, message: str, type_code: int) -> bytes:
    """A compact EXCEPTION message carrying ``TApplicationException{1: message, 2: type}``."""
    out = bytearray((PROTOCOL_ID, (EXCEPTION << _TYPE_SHIFT) | VERSION))
    _uvarint(out, seqid & 0xFFFFFFFF)
    raw = name.encode("utf-8", "replace")
    _uvarint(out, len(raw))
    out += raw
    text = message.encode("utf-8", "replace")
    out.append((1 << 4) | C_BINARY)
    _uvarint(out, len(text))
    out += text
    out.append((1 << 4) | C_I32)
    _uvarint(out, _zz32(type_code))
    out.append(C_STOP)
    return bytes(out)

