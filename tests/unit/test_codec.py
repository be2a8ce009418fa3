"""Client codecs: detection by first byte, strict-binary pass-through, compact, errors."""

from __future__ import annotations

import pytest
from thrift.protocol import TBinaryProtocol, TCompactProtocol, TJSONProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TTransport

from gateway.thrift.codec import BINARY, COMPACT, TJSON, detect_codec
from gateway.thrift.errors import ProtocolError
from tests.support.apache_codec import strict_binary, write_message


def non_strict(transport):
    return TBinaryProtocol.TBinaryProtocol(transport, strictRead=False, strictWrite=False)


@pytest.fixture
def call(apache_hms):
    return apache_hms.service.get_table_args("db", "tbl")


def test_detection_by_first_byte(call):
    assert detect_codec(b'[1,"a",1,1,{}]') is TJSON
    assert detect_codec(b' \r\n[1,"a",1,1,{}]', "application/x-thrift") is TJSON
    assert detect_codec(write_message(strict_binary, "get_table", 1, 1, call), "application/vnd.apache.thrift.json") is BINARY
    assert detect_codec(write_message(TCompactProtocol.TCompactProtocol, "get_table", 1, 1, call)) is COMPACT
    for body in (b"", b"{}", b"\x00\x00\x00\x09get_table", write_message(non_strict, "get_table", 1, 1, call)):
        with pytest.raises(ProtocolError, match="neither TJSON"):
            detect_codec(body, "application/x-thrift")


def test_binary_call_passes_through_unchanged(call, schema):
    body = write_message(strict_binary, "get_table", 1, 42, call)
    header, binary = BINARY.decode_call(body, schema)
    assert (header.name, header.type, header.seqid) == ("get_table", 1, 42)
    assert binary == body
    # a method the 2.3 IDL does not know passes too (exposure is the service chain's decision)
    header, binary = BINARY.decode_call(write_message(strict_binary, "get_tables_ext", 1, 1, call), schema)
    assert header.type == 1 and "get_tables_ext" not in schema.methods


@pytest.mark.parametrize("codec", ["tjson", "binary", "compact"])
@pytest.mark.parametrize("name, mtype", [("get_table", 4), ("get_table_objects_by_name_req", 4), ("shutdown", 1),
                                         ("get_table", 2), ("get_table", 3)])
def test_message_type_must_agree_with_the_idl(call, schema, codec, name, mtype):
    """ONEWAY only for methods the IDL declares oneway (fb303's shutdown), CALL for all others:
    a two-way method called ONEWAY would leave HMS's reply unread on a pooled connection."""
    protocol, decoder = {
        "tjson": (TJSONProtocol.TJSONProtocol, TJSON),
        "binary": (strict_binary, BINARY),
        "compact": (TCompactProtocol.TCompactProtocol, COMPACT),
    }[codec]
    body = write_message(protocol, name, mtype, 1, call)
    with pytest.raises(ProtocolError, match=r"expected (CALL\(1\)|ONEWAY\(4\))|CALL\(1\) or ONEWAY\(4\)"):
        decoder.decode_call(body, schema)


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda b: b[:-1], "truncated"),
        (lambda b: b + b"\x00", "after the end"),
        (lambda b: b[:21], "truncated"),  # header only
        (lambda b: b"\x80\x02" + b[2:], "version"),
        (lambda b: b[:3] + b"\x02" + b[4:], "expected CALL(1)"),
        (lambda b: b[:4] + b"\x7f\xff\xff\xff" + b[8:], "name length"),
        (lambda b: b.replace(b"\x00\x00\x00\x02db", b"\x7f\x00\x00\x02db"), "size limit"),
    ],
)
def test_malformed_binary_calls_are_refused(call, schema, mutate, reason):
    body = mutate(write_message(strict_binary, "get_table", 1, 1, call))
    with pytest.raises(ProtocolError) as info:
        BINARY.decode_call(body, schema)
    assert reason in info.value.reason


def test_binary_reply_comes_back_with_the_clients_seqid(apache_hms, schema):
    result = apache_hms.service.get_all_databases_result(success=["default", "x"])
    upstream = write_message(strict_binary, "get_all_databases", 2, 7, result)
    assert BINARY.encode_reply(upstream, schema, 7) == upstream
    out = BINARY.encode_reply(upstream, schema, -3)
    protocol = strict_binary(TTransport.TMemoryBuffer(out))
    assert protocol.readMessageBegin() == ("get_all_databases", 2, -3)
    back = apache_hms.service.get_all_databases_result()
    back.read(protocol)
    assert back == result
    with pytest.raises(ProtocolError):
        BINARY.encode_reply(write_message(strict_binary, "get_all_databases", 1, 7, result), schema, 7)


def test_compact_call_and_reply(apache_hms, schema, call):
    header, binary = COMPACT.decode_call(write_message(TCompactProtocol.TCompactProtocol, "get_table", 1, 9, call), schema)
    assert header.seqid == 9 and binary == write_message(strict_binary, "get_table", 1, 9, call)
    with pytest.raises(ProtocolError, match="CALL"):
        COMPACT.decode_call(write_message(TCompactProtocol.TCompactProtocol, "get_table", 2, 9, call), schema)
    result = apache_hms.service.get_all_databases_result(success=["a"])
    out = COMPACT.encode_reply(write_message(strict_binary, "get_all_databases", 2, 1, result), schema, 9)
    assert out == write_message(TCompactProtocol.TCompactProtocol, "get_all_databases", 2, 9, result)
    with pytest.raises(ProtocolError):
        COMPACT.encode_reply(write_message(strict_binary, "get_all_databases", 2, 1, result)[:-2], schema, 9)


@pytest.mark.parametrize(
    "codec, factory",
    [(BINARY, strict_binary), (COMPACT, TCompactProtocol.TCompactProtocol),
     (COMPACT, TCompactProtocol.TCompactProtocolAccelerated)],
)
def test_application_exception_in_the_clients_protocol(codec, factory):
    data = codec.application_exception("drop_table", 11, "method drop_table is not exposed", 1)
    protocol = factory(TTransport.TMemoryBuffer(data))
    assert protocol.readMessageBegin() == ("drop_table", 3, 11)
    exc = TApplicationException()
    exc.read(protocol)
    assert exc.type == TApplicationException.UNKNOWN_METHOD and "drop_table" in exc.message


def test_content_types():
    assert BINARY.content_type == "application/x-thrift"
    assert COMPACT.content_type == "application/vnd.apache.thrift.compact"
    assert TJSON.content_type == "application/vnd.apache.thrift.json"
