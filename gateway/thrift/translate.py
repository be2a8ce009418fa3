"""Public translation API: TJSON calls → strict binary, strict binary replies → TJSON.

Wire formats follow Apache Thrift's TJSONProtocol and TBinaryProtocol (strict), as used
by MS-HMSHTTP clients and the Hive Metastore; see :mod:`gateway.thrift.tjson_syntax` and
:mod:`gateway.thrift.binary` for the details.
"""

from __future__ import annotations

import struct

from . import accel
from .binary import (
    CALL,
    EXCEPTION,
    ONEWAY,
    REPLY,
    BinaryMessageScanner,
    MessageHeader,
    encode_binary_call,
    read_reply_header,
    write_message_header,
)
from .errors import ProtocolError, excerpt
from .schema import FieldSchema, ServiceSchema, StructSchema, TType
from .tjson_syntax import parse_tjson, quote_string
from .to_binary import write_struct
from .to_tjson import read_struct

__all__ = [
    "MessageHeader",
    "BinaryMessageScanner",
    "tjson_call_to_binary",
    "binary_reply_to_tjson",
    "tapplication_exception_tjson",
    "encode_binary_call",
    "CALL",
    "REPLY",
    "EXCEPTION",
    "ONEWAY",
    "UNKNOWN",
    "UNKNOWN_METHOD",
    "INVALID_MESSAGE_TYPE",
    "WRONG_METHOD_NAME",
    "BAD_SEQUENCE_ID",
    "MISSING_RESULT",
    "INTERNAL_ERROR",
    "PROTOCOL_ERROR",
    "INVALID_TRANSFORM",
    "INVALID_PROTOCOL",
    "UNSUPPORTED_CLIENT_TYPE",
]

# TApplicationException type codes (Apache Thrift, TApplicationException.Type).
UNKNOWN = 0
UNKNOWN_METHOD = 1
INVALID_MESSAGE_TYPE = 2
WRONG_METHOD_NAME = 3
BAD_SEQUENCE_ID = 4
MISSING_RESULT = 5
INTERNAL_ERROR = 6
PROTOCOL_ERROR = 7
INVALID_TRANSFORM = 8
INVALID_PROTOCOL = 9
UNSUPPORTED_CLIENT_TYPE = 10

TJSON_VERSION = 1
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1

# struct TApplicationException { 1: string message, 2: i32 type }
TAPPLICATION_EXCEPTION = StructSchema(
    "TApplicationException",
    {1: FieldSchema(1, "message", TType.STRING), 2: FieldSchema(2, "type", TType.I32)},
)


def tjson_call_to_binary(body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
    """Translate one TJSON CALL/ONEWAY message into a strict-binary message.

    ``body`` is ``[1,"name",type,seqid,{args struct}]`` (UTF-8). Returns the header and
    the binary message (``0x80010000|type``, name, seqid, struct). Methods unknown to
    ``schema`` translate too (every ``str`` as string); exposure is the caller's call.
    Raises ``ProtocolError`` for anything malformed (see :mod:`gateway.thrift.to_binary`).
    """
    fast = accel.tjson_call_to_binary(body, schema)
    if fast is not None:
        return MessageHeader(fast[0], fast[1], fast[2]), fast[3]
    tree = parse_tjson(body)
    if type(tree) is not list or len(tree) != 5:
        raise ProtocolError("message must be [1, name, type, seqid, {struct}]")
    version, name, mtype, seqid, args = tree
    if type(version) is not int or version != TJSON_VERSION:
        raise ProtocolError(f"unsupported TJSON message version {excerpt(version)}")
    if type(name) is not str:
        raise ProtocolError("method name must be a JSON string")
    if type(mtype) is not int or mtype not in (CALL, ONEWAY):
        raise ProtocolError(f"message type must be CALL(1) or ONEWAY(4), got {excerpt(mtype)}")
    if type(seqid) is not int or not _I32_MIN <= seqid <= _I32_MAX:
        raise ProtocolError("seqid must be an i32")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError("method name holds an unpaired surrogate") from None
    method = schema.methods.get(name)
    out = bytearray()
    write_message_header(out, name, mtype, seqid)
    write_struct(out, args, method.args if method is not None else None, 0)
    return MessageHeader(name, mtype, seqid), bytes(out)


def binary_reply_to_tjson(message: bytes, schema: ServiceSchema, seqid: int | None = None) -> bytes:
    """Translate one strict-binary REPLY/EXCEPTION message into compact TJSON (UTF-8).

    Writes ``[1,"name",type,seqid,{struct}]`` as Apache's Java/C++ TJSONProtocol does;
    ``seqid``, when given, replaces the one in ``message``. A REPLY's struct is read with
    the method's result schema (unknown method: by wire types only); an EXCEPTION's as
    TApplicationException. Raises ``ProtocolError`` on a malformed or truncated message,
    another message type, or bytes after the message.
    """
    data = bytes(message)
    translator = accel.reply_translator(schema, max(len(data), 1), seqid)
    if translator is not None:
        try:
            if translator.feed(data) == len(data):
                return translator.take()
        except ProtocolError:
            pass  # the Python code below gives the canonical reason
    header, pos = read_reply_header(data)
    if header.type == REPLY:
        method = schema.methods.get(header.name)
        result = method.result if method is not None else None
    else:
        result = TAPPLICATION_EXCEPTION
    out = ["[1,", quote_string(header.name), f",{header.type},{header.seqid if seqid is None else seqid},"]
    try:
        end = read_struct(data, pos, result, out, 0)
    except (IndexError, struct.error):
        raise ProtocolError("binary message truncated") from None
    except RecursionError:  # only reachable if MAX_DEPTH exceeds the interpreter's limit
        raise ProtocolError("binary message nested too deeply") from None
    if end != len(data):
        raise ProtocolError(f"{len(data) - end} bytes after the end of the binary message")
    out.append("]")
    return "".join(out).encode("utf-8")


def tapplication_exception_tjson(name: str, seqid: int, message: str, type_code: int) -> bytes:
    """A TJSON EXCEPTION message (type 3) carrying ``TApplicationException{message, type}``.

    ``type_code`` is one of the module's constants (``UNKNOWN_METHOD`` …).
    """
    return (
        f'[1,{quote_string(name)},{EXCEPTION},{int(seqid)},'
        f'{{"1":{{"str":{quote_string(message)}}},"2":{{"i32":{int(type_code)}}}}}]'
    ).encode("utf-8", "replace")

