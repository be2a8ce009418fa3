"""Strict TBinaryProtocol pieces: packers, message header, message scanner, call encoder.

Follows Apache Thrift's TBinaryProtocol with strict read/write: a message starts with
the i32 ``0x80010000 | type``, then the method name (i32 length + UTF-8 bytes), then the
i32 seqid, then one struct. All integers are big-endian. Field header = type byte + i16
id; STOP byte ends a struct; list/set header = element type byte + i32 count; map header
= key type byte + value type byte + i32 count; string/binary = i32 length + bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import MAX_DEPTH, ProtocolError
from .schema import TType

__all__ = [
    "VERSION_1",
    "VERSION_MASK",
    "CALL",
    "REPLY",
    "EXCEPTION",
    "ONEWAY",
    "FIXED_SIZES",
    "MessageHeader",
    "read_message_header",
    "read_reply_header",
    "write_message_header",
    "BinaryMessageScanner",
    "encode_binary_call",
]

VERSION_1 = 0x80010000
VERSION_MASK = 0xFFFF0000

# Message types (TMessageType).
CALL = 1
REPLY = 2
EXCEPTION = 3
ONEWAY = 4

MAX_NAME_BYTES = 4096

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
DOUBLE = struct.Struct(">d")
FIELD_HEADER = struct.Struct(">bh")
LIST_HEADER = struct.Struct(">bi")
MAP_HEADER = struct.Struct(">bbi")

# Encoded size of each fixed-size wire type.
FIXED_SIZES = {
    TType.BOOL: 1,
    TType.I8: 1,
    TType.I16: 2,
    TType.I32: 4,
    TType.DOUBLE: 8,
    TType.I64: 8,
}
# Smallest possible encoding of one value of each type (for count sanity checks).
MIN_SIZES = {**FIXED_SIZES, TType.STRING: 4, TType.STRUCT: 1, TType.LIST: 5, TType.SET: 5, TType.MAP: 6}


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """A Thrift message header: method name, message type (CALL=1 … ONEWAY=4), seqid."""

    name: str
    type: int
    seqid: int


def read_message_header(message: bytes | bytearray | memoryview) -> tuple[MessageHeader, int]:
    """Read a strict header from the start of ``message``.

    Returns the header and the offset of the message struct. Raises ``ProtocolError`` on a
    missing/wrong version word, a bad name length, a name that is not UTF-8, or truncation.
    """
    if len(message) < 12:
        raise ProtocolError("binary message truncated in header")
    word = U32.unpack_from(message, 0)[0]
    if word & VERSION_MASK != VERSION_1:
        raise ProtocolError(f"bad binary message version 0x{word:08x}")
    mtype = word & 0xFF
    name_len = I32.unpack_from(message, 4)[0]
    if name_len < 0 or name_len > MAX_NAME_BYTES or 8 + name_len + 4 > len(message):
        raise ProtocolError("bad method name length in binary message")
    try:
        name = bytes(message[8 : 8 + name_len]).decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("method name is not UTF-8") from None
    seqid = I32.unpack_from(message, 8 + name_len)[0]
    return MessageHeader(name, mtype, seqid), 12 + name_len


def read_reply_header(message: bytes | bytearray | memoryview) -> tuple[MessageHeader, int]:
    """:func:`read_message_header` of a message that must be a REPLY or an EXCEPTION.

    Raises ``ProtocolError`` as :func:`read_message_header`, or naming the type otherwise.
    """
    header, pos = read_message_header(message)
    if header.type not in (REPLY, EXCEPTION):
        raise ProtocolError(f"expected a REPLY or EXCEPTION message, got type {header.type}")
    return header, pos


def write_message_header(out: bytearray, name: str, mtype: int, seqid: int) -> None:
    """Append a strict message header to ``out``."""
    raw = name.encode("utf-8")
    out += U32.pack(VERSION_1 | mtype)
    out += I32.pack(len(raw))
    out += raw
    out += I32.pack(seqid)


# Scanner frame kinds.
_STRUCT, _LIST, _MAP = 0, 1, 2
# Header steps before the message struct.
_H_VERSION, _H_NAME_LEN, _H_SEQID, _H_DONE = 0, 1, 2, 3


class BinaryMessageScanner:
    """Finds where one strict-binary message ends in a byte stream fed chunk by chunk.

    ``feed(chunk)`` returns the total message length in bytes (counted from the first byte
    ever fed) once the bytes fed so far hold a complete message, else ``None``. Bytes fed
    after the end of the message are ignored (the caller slices them off). The scanner keeps
    an explicit stack and only a few unconsumed bytes, so the total cost is linear in the
    message size and memory does not grow with it. Raises ``ProtocolError`` on a malformed
    message, nesting deeper than ``MAX_DEPTH``, or a message longer than ``max_bytes``.

    It does not share :mod:`gateway.thrift.walk`, which reads a complete buffer by recursion:
    a chunk may end inside any token, so the scanner must be able to stop anywhere and resume
    from saved state (the stack of open containers, the bytes still to skip).
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self._tail = b""  # unconsumed bytes (shorter than the token being read)
        self._base = 0  # stream offset of _tail[0]
        self._skip = 0  # bytes to skip (string bodies, fixed-size list bodies)
        self._header = _H_VERSION
        self._pending: int | None = None  # type of the value to read next
        self._stack: list[list[int]] = []
        self._done: int | None = None

    def feed(self, chunk: bytes) -> int | None:
        if self._done is not None:
            return self._done
        if self._tail:
            data = self._tail + chunk
        else:
            data = bytes(chunk)
        pos = 0
        end = len(data)
        base = self._base
        limit = self.max_bytes
        stack = self._stack
        pending = self._pending
        try:
            while True:
                if self._skip:
                    step = min(self._skip, end - pos)
                    pos += step
                    self._skip -= step
                    if self._skip:
                        break
                if self._header != _H_DONE:
                    if self._header == _H_VERSION:
                        if end - pos < 4:
                            break
                        word = U32.unpack_from(data, pos)[0]
                        if word & VERSION_MASK != VERSION_1:
                            raise ProtocolError(f"bad binary message version 0x{word:08x}")
                        pos += 4
                        self._header = _H_NAME_LEN
                    elif self._header == _H_NAME_LEN:
                        if end - pos < 4:
                            break
                        name_len = I32.unpack_from(data, pos)[0]
                        if name_len < 0 or name_len > MAX_NAME_BYTES:
                            raise ProtocolError("bad method name length in binary message")
                        pos += 4
                        self._skip = name_len
                        self._header = _H_SEQID
                    else:
                        if end - pos < 4:
                            break
                        pos += 4
                        self._header = _H_DONE
                        pending = TType.STRUCT
                    continue
                if pending is not None:
                    size = FIXED_SIZES.get(pending)
                    if size is not None:
                        if end - pos < size:
                            break
                        pos += size
                    elif pending == TType.STRING:
                        if end - pos < 4:
                            break
                        length = I32.unpack_from(data, pos)[0]
                        if length < 0:
                            raise ProtocolError("negative string length in binary message")
                        pos += 4
                        self._skip = length
                    elif pending == TType.STRUCT:
                        if len(stack) >= MAX_DEPTH:
                            raise ProtocolError("binary message nested too deeply")
                        stack.append([_STRUCT])
                    elif pending == TType.LIST or pending == TType.SET:
                        if end - pos < 5:
                            break
                        etype, count = LIST_HEADER.unpack_from(data, pos)
                        pos += 5
                        self._check_count(count, MIN_SIZES.get(etype), base + pos)
                        if len(stack) >= MAX_DEPTH:
                            raise ProtocolError("binary message nested too deeply")
                        size = FIXED_SIZES.get(etype)
                        if size is not None:
                            self._skip = size * count  # fixed-size elements: skip in one step
                        else:
                            stack.append([_LIST, etype, count])
                    elif pending == TType.MAP:
                        if end - pos < 6:
                            break
                        ktype, vtype, count = MAP_HEADER.unpack_from(data, pos)
                        pos += 6
                        kmin, vmin = MIN_SIZES.get(ktype), MIN_SIZES.get(vtype)
                        self._check_count(count, None if kmin is None or vmin is None else kmin + vmin, base + pos)
                        if len(stack) >= MAX_DEPTH:
                            raise ProtocolError("binary message nested too deeply")
                        stack.append([_MAP, ktype, vtype, 2 * count])
                    else:
                        raise ProtocolError(f"unknown binary type {pending}")
                    pending = None
                    if base + pos + self._skip > limit:
                        raise ProtocolError("binary message exceeds size limit")
                    continue
                if not stack:
                    total = base + pos
                    if total > limit:
                        raise ProtocolError("binary message exceeds size limit")
                    self._done = total
                    return total
                frame = stack[-1]
                kind = frame[0]
                if kind == _STRUCT:
                    if end - pos < 1:
                        break
                    ftype = data[pos]
                    if ftype == TType.STOP:
                        pos += 1
                        stack.pop()
                        continue
                    if end - pos < 3:
                        break
                    pos += 3
                    pending = ftype
                elif kind == _LIST:
                    if frame[2] == 0:
                        stack.pop()
                        continue
                    frame[2] -= 1
                    pending = frame[1]
                else:
                    if frame[3] == 0:
                        stack.pop()
                        continue
                    frame[3] -= 1
                    pending = frame[2] if frame[3] & 1 == 0 else frame[1]
        finally:
            self._pending = pending
        if base + pos + self._skip > limit:
            raise ProtocolError("binary message exceeds size limit")
        self._tail = data[pos:]
        self._base = base + pos
        return None

    def _check_count(self, count: int, min_size: int | None, offset: int) -> None:
        if min_size is None:
            raise ProtocolError("unknown binary container element type")
        if count < 0:
            raise ProtocolError("negative container size in binary message")
        if offset + count * min_size > self.max_bytes:
            raise ProtocolError("binary message exceeds size limit")


def encode_binary_call(method: str, seqid: int, args: list[tuple[int, int, object]]) -> bytes:
    """Encode a strict-binary CALL of ``method`` with the given argument fields.

    ``args`` are ``(field id, TType, value)``; supported: ``STRING`` (str or bytes),
    ``BOOL``, ``I16``, ``I32``, ``I64``, and ``LIST`` of strings (a list of str/bytes).
    Example: ``encode_binary_call("set_ugi", 1, [(1, TType.STRING, "alice"),
    (2, TType.LIST, ["analysts"])])``. Raises ``ValueError`` on an unsupported type.
    """
    out = bytearray()
    write_message_header(out, method, CALL, seqid)
    for fid, ttype, value in args:
        out += FIELD_HEADER.pack(ttype, fid)
        if ttype == TType.STRING:
            _write_string(out, value)
        elif ttype == TType.LIST:
            items = list(value)  # type: ignore[call-overload]
            out += LIST_HEADER.pack(TType.STRING, len(items))
            for item in items:
                _write_string(out, item)
        elif ttype == TType.BOOL:
            out.append(1 if value else 0)
        elif ttype == TType.I16:
            out += I16.pack(value)
        elif ttype == TType.I32:
            out += I32.pack(value)
        elif ttype == TType.I64:
            out += I64.pack(value)
        else:
            raise ValueError(f"encode_binary_call does not support type {ttype}")
    out.append(TType.STOP)
    return bytes(out)


def _write_string(out: bytearray, value: object) -> None:
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
    out += I32.pack(len(raw))
    out += raw
