"""Lossless across HMS versions: fields and methods the 2.3 IDL does not know survive the
translation by their wire types (issue 3, point 2), in both directions and through compact.

An HMS 3.x/4.x behind the gateway sends struct fields with ids the 2.3 IDL lacks and answers
methods it never heard of; the translator must carry them, not drop them.
"""

from __future__ import annotations

import json

import pytest
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TType
from thrift.transport import TTransport

from gateway.thrift.compact import binary_message_to_compact, compact_message_to_binary
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary

# Unknown fields of every wire type, nested in structs, lists, sets and maps.
UNKNOWN_FIELDS = {
    "90": {"tf": 1},
    "91": {"i8": -7},
    "92": {"i16": -300},
    "93": {"i32": 2147483647},
    "94": {"i64": -9007199254740993},
    "95": {"dbl": 2.5},
    "96": {"str": "caf\u00e9 \U0001f600"},
    "97": {"rec": {"1": {"str": "inner"}, "3000": {"rec": {"2": {"lst": ["i64", 2, 1, -1]}}}}},
    "98": {"lst": ["rec", 2, {"1": {"i32": 1}}, {}]},
    "99": {"set": ["str", 2, "a", "b"]},
    "100": {"map": ["i32", "map", 1, {"5": ["str", "dbl", 1, {"k": 1.5}]}]},
    "101": {"lst": ["tf", 3, 1, 0, 1]},
    "-5": {"map": ["str", "lst", 0, {}]},
}


def tjson_message(name: str, mtype: int, seqid: int, fields: dict) -> bytes:
    return json.dumps([1, name, mtype, seqid, fields], separators=(",", ":"), ensure_ascii=False).encode()


def as_reply(call_binary: bytes) -> bytes:
    return call_binary[:3] + b"\x02" + call_binary[4:]  # CALL → REPLY in the version word


@pytest.mark.parametrize("method", ["get_table", "get_table_objects_by_name_req", "a_4x_method"])
def test_unknown_fields_and_methods_survive_tjson_binary_tjson(schema, method):
    call = tjson_message(method, 1, 3, UNKNOWN_FIELDS)
    header, binary = tjson_call_to_binary(call, schema)
    assert header.name == method
    back = binary_reply_to_tjson(as_reply(binary), schema)
    assert json.loads(back) == json.loads(tjson_message(method, 2, 3, UNKNOWN_FIELDS))


def test_unknown_fields_survive_binary_tjson_binary(schema, apache_hms):
    # An HMS 4.x-style reply written by Apache's own binary protocol: the 2.3 result of
    # get_database plus fields 0 (a Database with unknown fields) read by wire types.
    buffer = TTransport.TMemoryBuffer()
    p = TBinaryProtocol.TBinaryProtocol(buffer, strictRead=True, strictWrite=True)
    p.writeMessageBegin("get_database", 2, 8)
    p.writeStructBegin("get_database_result")
    p.writeFieldBegin("success", TType.STRUCT, 0)
    p.writeStructBegin("Database")
    p.writeFieldBegin("name", TType.STRING, 1)
    p.writeString("default")
    p.writeFieldBegin("catalogName", TType.STRING, 8)  # 3.0+: catalogName
    p.writeString("hive")
    p.writeFieldBegin("createTime", TType.I32, 9)      # 4.x: createTime
    p.writeI32(1_700_000_000)
    p.writeFieldBegin("x", TType.MAP, 42)
    p.writeMapBegin(TType.STRING, TType.LIST, 1)
    p.writeString("k")
    p.writeListBegin(TType.DOUBLE, 2)
    p.writeDouble(-0.5)
    p.writeDouble(1e300)
    p.writeListEnd()
    p.writeMapEnd()
    p.writeFieldBegin("b", TType.BOOL, 43)
    p.writeBool(True)
    p.writeFieldStop()
    p.writeStructEnd()
    p.writeFieldStop()
    p.writeStructEnd()
    p.writeMessageEnd()
    reply = buffer.getvalue()

    tjson = binary_reply_to_tjson(reply, schema)
    parsed = json.loads(tjson)
    db = parsed[4]["0"]["rec"]
    assert db["8"] == {"str": "hive"} and db["9"] == {"i32": 1_700_000_000}
    assert db["42"] == {"map": ["str", "lst", 1, {"k": ["dbl", 2, -0.5, 1e300]}]}
    # Back to binary (as a CALL of the same struct): the bytes are the same.
    as_call = json.dumps([1, "get_database", 1, 8, parsed[4]], separators=(",", ":")).encode()
    _, binary = tjson_call_to_binary(as_call, schema)
    assert binary[4:] == reply[4:] and binary[3] == 1

    # and through compact and back, byte for byte
    assert compact_message_to_binary(binary_message_to_compact(reply))[1] == reply
