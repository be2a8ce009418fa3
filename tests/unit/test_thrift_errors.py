"""Every malformed input raises ProtocolError with a short reason, quickly."""

from __future__ import annotations

import pytest

from gateway.thrift.binary import BinaryMessageScanner, encode_binary_call, read_reply_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import TType
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary

DEC = '{"1":{"rec":{"1":{"rec":{"1":{"str":"%s"},"3":{"i16":2}}}}}}'  # unused helper shape

# Every test runs on both implementations (C extension and pure Python).
pytestmark = pytest.mark.usefixtures("thrift_impl")


def call(args: str, name: str = "get_table") -> bytes:
    return f'[1,"{name}",1,5,{args}]'.encode()


BAD_CALLS = {
    "not json": b"hello",
    "bad utf8": b'[1,"get_table",1,5,{"1":{"str":"\xff"}}]',
    "utf8 bom": b'\xef\xbb\xbf[1,"get_table",1,5,{}]',
    "empty": b"",
    "not a list": b'{"a":1}',
    "short envelope": b'[1,"get_table",1,5]',
    "long envelope": b'[1,"get_table",1,5,{},1]',
    "version 2": b'[2,"get_table",1,5,{}]',
    "version bool": b'[true,"get_table",1,5,{}]',
    "name not string": b'[1,7,1,5,{}]',
    "type reply": b'[1,"get_table",2,5,{}]',
    "type exception": b'[1,"get_table",3,5,{}]',
    "type string": b'[1,"get_table","1",5,{}]',
    "seqid float": b'[1,"get_table",1,5.0,{}]',
    "seqid too big": b'[1,"get_table",1,2147483648,{}]',
    "struct is list": b'[1,"get_table",1,5,[]]',
    "trailing garbage": b'[1,"get_table",1,5,{}]x',
    "two messages": b'[1,"get_table",1,5,{}][1,"get_table",1,5,{}]',
    "truncated": b'[1,"get_table",1,5,{"1":{"str":"a"}',
    "truncated number": b'[1,"get_table",1,5,{"1":{"i32":12',
    "bad field id": call('{"x":{"str":"a"}}'),
    "field id too big": call('{"40000":{"str":"a"}}'),
    "field two tags": call('{"1":{"str":"a","i32":1}}'),
    "field no tag": call('{"1":{}}'),
    "field not object": call('{"1":"a"}'),
    "unknown tag": call('{"1":{"string":"a"}}'),
    "str is number": call('{"1":{"str":1}}'),
    "i8 out of range": call('{"1":{"i8":128}}'),
    "i16 out of range": call('{"1":{"i16":-32769}}'),
    "i32 out of range": call('{"1":{"i32":2147483648}}'),
    "i64 out of range": call('{"1":{"i64":9223372036854775808}}'),
    "i32 float": call('{"1":{"i32":1.5}}'),
    "i32 string": call('{"1":{"i32":"1"}}'),
    "i64 bool": call('{"1":{"i64":true}}'),
    "i32 huge digits": call('{"1":{"i32":' + "9" * 5000 + "}}"),
    "dbl with 1,000 digits": call('{"1":{"dbl":1.' + "0" * 1000 + "}}"),
    "dbl integer with 1,000 digits": call('{"1":{"dbl":' + "9" * 1000 + "}}"),
    "tf string": call('{"1":{"tf":"yes"}}'),
    "dbl string": call('{"1":{"dbl":"1.5"}}'),
    "dbl null": call('{"1":{"dbl":null}}'),
    "list count high": call('{"1":{"lst":["str",3,"a","b"]}}'),
    "list count low": call('{"1":{"lst":["str",1,"a","b"]}}'),
    "list huge count": call('{"1":{"lst":["str",2147483647]}}'),
    "list count string": call('{"1":{"lst":["str","1","a"]}}'),
    "list bad tag": call('{"1":{"lst":["bogus",1,"a"]}}'),
    "list no header": call('{"1":{"lst":[]}}'),
    "list elem wrong type": call('{"1":{"lst":["i32",1,"a"]}}'),
    "map count": call('{"1":{"map":["str","str",2,{"a":"b"}]}}'),
    "map duplicate keys": call('{"1":{"map":["str","str",2,{"a":"b","a":"c"}]}}'),
    "map short": call('{"1":{"map":["str","str",1]}}'),
    "map entries list": call('{"1":{"map":["str","str",1,["a","b"]]}}'),
    "map int key": call('{"1":{"map":["i32","str",1,{"x":"b"}]}}'),
    "map int key range": call('{"1":{"map":["i16","str",1,{"40000":"b"}]}}'),
    "map dbl key": call('{"1":{"map":["dbl","str",1,{"1.2.3":"b"}]}}'),
    "map container key bad": call('{"1":{"map":["lst","str",1,{["str",2,"a"]:"b"}]}}'),
    "map container key unbalanced": call('{"1":{"map":["lst","str",1,{["str",1,"a"}:"b"}]}}'),
    "lone surrogate": call('{"1":{"str":"\\ud800"}}'),
    "deep nesting": call('{"1":{"rec":' * 70 + "{}" + "}}" * 70 + "}"),
    "deep list nesting": call('{"1":{"lst":["lst",1,' + '["lst",1,' * 70 + '["i32",0]' + "]" * 71 + "}}"),
    "json recursion": b"[" * 100000 + b"]" * 100000,
    "deep container key": call('{"1":{"map":["lst","str",1,{' + "[" * 100 + "]" * 100 + ':"x"}]}}'),
}


@pytest.mark.parametrize("body", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_calls_raise_protocol_error(body, schema):
    with pytest.raises(ProtocolError) as info:
        tjson_call_to_binary(body, schema)
    assert 0 < len(info.value.reason) < 120
    assert isinstance(info.value, ValueError)


def decimal_call(unscaled: str) -> bytes:
    # set_aggr_stats_for is not needed: Decimal appears in a call via ColumnStatistics;
    # use update_table_column_statistics(stats_obj) → statsObj → decimalStats.lowValue.unscaled.
    return call(
        '{"1":{"rec":{"2":{"lst":["rec",1,{"3":{"rec":{"6":{"rec":{"1":{"rec":{"1":{"str":"'
        + unscaled
        + '"},"3":{"i16":0}}}}}}}}]}}}}',
        name="update_table_column_statistics",
    )


@pytest.mark.parametrize("bad", ["@@@@", "AAAAA", "QQ=A", "Q"])
def test_bad_base64_in_binary_field(bad, schema):
    with pytest.raises(ProtocolError):
        tjson_call_to_binary(decimal_call(bad), schema)


@pytest.mark.parametrize("good,raw", [("AQI=", b"\x01\x02"), ("AQI", b"\x01\x02"), ("", b"")])
def test_base64_padded_or_not(good, raw, schema):
    _, message = tjson_call_to_binary(decimal_call(good), schema)
    assert len(raw).to_bytes(4, "big") + raw + b"\x06\x00\x03" in message


def test_reason_does_not_echo_payload(schema):
    secret = "s3cr3t-password-value-that-is-long"
    with pytest.raises(ProtocolError) as info:
        tjson_call_to_binary(call('{"1":{"i32":"' + secret + '"}}'), schema)
    assert secret not in info.value.reason


REPLY_HEAD = b"\x80\x01\x00\x02" + b"\x00\x00\x00\x09get_table" + b"\x00\x00\x00\x05"

BAD_REPLIES = {
    "empty": b"",
    "no version": b"\x00\x00\x00\x09get_table\x00\x00\x00\x05\x00",
    "wrong version": b"\x80\x02\x00\x02\x00\x00\x00\x09get_table\x00\x00\x00\x05\x00",
    "call not reply": b"\x80\x01\x00\x01\x00\x00\x00\x09get_table\x00\x00\x00\x05\x00",
    "name too long": b"\x80\x01\x00\x02\x7f\x00\x00\x00get_table",
    "truncated struct": REPLY_HEAD,
    "truncated field": REPLY_HEAD + b"\x0b\x00",
    "truncated string": REPLY_HEAD + b"\x0b\x00\x01\x00\x00\x00\x10abc",
    "negative string": REPLY_HEAD + b"\x0b\x00\x01\xff\xff\xff\xff\x00",
    "unknown type": REPLY_HEAD + b"\x07\x00\x01\x00",
    "huge list": REPLY_HEAD + b"\x0f\x00\x00\x0c\x7f\xff\xff\xff\x00",
    "negative list": REPLY_HEAD + b"\x0f\x00\x00\x0b\xff\xff\xff\xff\x00",
    "bad elem type": REPLY_HEAD + b"\x0f\x00\x00\x11\x00\x00\x00\x00\x00",
    "huge map": REPLY_HEAD + b"\x0d\x00\x00\x0b\x0b\x7f\xff\xff\xff\x00",
    "trailing bytes": REPLY_HEAD + b"\x00\x00",
    "deep structs": REPLY_HEAD + b"\x0c\x00\x01" * 100 + b"\x00" * 101,
    "bad name utf8": b"\x80\x01\x00\x02\x00\x00\x00\x01\xff\x00\x00\x00\x05\x00",
}


@pytest.mark.parametrize("message", BAD_REPLIES.values(), ids=BAD_REPLIES.keys())
def test_bad_replies_raise_protocol_error(message, schema):
    with pytest.raises(ProtocolError):
        binary_reply_to_tjson(message, schema)


@pytest.mark.parametrize(
    "message",
    [v for k, v in BAD_REPLIES.items() if k not in ("empty", "truncated struct", "truncated field", "truncated string", "trailing bytes", "call not reply", "bad name utf8", "name too long")],
)
def test_scanner_rejects_malformed(message):
    scanner = BinaryMessageScanner(1 << 20)
    with pytest.raises(ProtocolError):
        for i in range(len(message)):
            assert scanner.feed(message[i : i + 1]) is None


def test_scanner_enforces_max_bytes():
    message = encode_binary_call("set_ugi", 1, [(1, TType.STRING, "x" * 1000)])
    with pytest.raises(ProtocolError):
        BinaryMessageScanner(500).feed(message[:30])  # the declared string length is enough
    assert BinaryMessageScanner(len(message)).feed(message) == len(message)
    with pytest.raises(ProtocolError):
        BinaryMessageScanner(len(message) - 1).feed(message)


def test_read_reply_header_rejects_call():
    with pytest.raises(ProtocolError):
        read_reply_header(encode_binary_call("get_table", 1, []))
