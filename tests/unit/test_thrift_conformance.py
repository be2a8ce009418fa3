"""Conformance with Apache Thrift's Python library (TJSONProtocol, TBinaryProtocol, fastbinary)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thrift.protocol import TBinaryProtocol, TJSONProtocol
from thrift.transport import TTransport

from gateway.thrift.binary import CALL, REPLY, BinaryMessageScanner, encode_binary_call, read_reply_header
from gateway.thrift.schema import TType
from gateway.thrift.translate import (
    UNKNOWN_METHOD,
    binary_reply_to_tjson,
    tapplication_exception_tjson,
    tjson_call_to_binary,
)

from tests.support.apache_codec import strict_binary, write_message

# Every test runs on both implementations (C extension and pure Python).
pytestmark = pytest.mark.usefixtures("thrift_impl")


def tjson(name, mtype, seqid, obj):
    return write_message(TJSONProtocol.TJSONProtocol, name, mtype, seqid, obj)


def binary(name, mtype, seqid, obj):
    return write_message(strict_binary, name, mtype, seqid, obj)


def fastbinary(name, mtype, seqid, obj):
    return write_message(TBinaryProtocol.TBinaryProtocolAccelerated, name, mtype, seqid, obj)


def read_tjson(data: bytes, result_cls):
    protocol = TJSONProtocol.TJSONProtocol(TTransport.TMemoryBuffer(data))
    header = protocol.readMessageBegin()
    obj = result_cls()
    obj.read(protocol)
    return header, obj


def sample_table(t, skewed_maps=None):
    cols = [t.FieldSchema("name", "string", "c\u00e9 \"q\" \n"), t.FieldSchema("age", "int", None)]
    sd = t.StorageDescriptor(
        cols=cols,
        location="file:/warehouse/db/tbl",
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=t.SerDeInfo("ser", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"field.delim": ","}),
        bucketCols=[],
        sortCols=[t.Order("age", 1)],
        parameters={},
        skewedInfo=t.SkewedInfo(["name"], [["a"], ["b"]], skewed_maps or {}),
        storedAsSubDirectories=True,
    )
    return t.Table(
        tableName="test_table", dbName="hmshttptestdatabase", owner="\U0001f600 owner", createTime=2**31 - 1,
        lastAccessTime=-(2**31), retention=0, sd=sd, partitionKeys=[t.FieldSchema("hair_color", "string", "")],
        parameters={"transient_lastDdlTime": "1"}, tableType="MANAGED_TABLE", temporary=False, rewriteEnabled=True,
    )


def sample_stats(t):
    dec = t.DecimalColumnStatsData(t.Decimal(b"\x00\xff", 2), t.Decimal(b"", 0), 3, 4)
    objs = [
        t.ColumnStatisticsObj("d", "decimal(10,2)", t.ColumnStatisticsData(decimalStats=dec)),
        t.ColumnStatisticsObj("x", "double", t.ColumnStatisticsData(doubleStats=t.DoubleColumnStatsData(-math.inf, 1.5e300, 2**63 - 1, -(2**63)))),
        t.ColumnStatisticsObj("y", "double", t.ColumnStatisticsData(doubleStats=t.DoubleColumnStatsData(math.inf, 5e-324, 0, 0))),
        t.ColumnStatisticsObj("b", "boolean", t.ColumnStatisticsData(booleanStats=t.BooleanColumnStatsData(1, 2, 3))),
    ]
    return t.ColumnStatistics(t.ColumnStatisticsDesc(True, "db", "tbl", None, 12345678901), objs)


def test_call_matches_apache_binary(apache_hms, schema):
    t, s = apache_hms.ttypes, apache_hms.service
    for name, args in [
        ("create_table", s.create_table_args(tbl=sample_table(t, {("a",): "/loc/a", ("b", "c"): "/loc/bc"}))),
        ("update_table_column_statistics", s.update_table_column_statistics_args(stats_obj=sample_stats(t))),
        ("get_partitions", s.get_partitions_args("db", "tbl", -1)),
        ("get_all_databases", s.get_all_databases_args()),
    ]:
        header, message = tjson_call_to_binary(tjson(name, CALL, 42, args), schema)
        assert (header.name, header.type, header.seqid) == (name, CALL, 42)
        assert message == binary(name, CALL, 42, args) == fastbinary(name, CALL, 42, args)


def test_nan_from_python_writer_and_quoted_forms(apache_hms, schema):
    t, s = apache_hms.ttypes, apache_hms.service
    stats = t.ColumnStatistics(t.ColumnStatisticsDesc(True, "db", "tbl"), [
        t.ColumnStatisticsObj("x", "double", t.ColumnStatisticsData(doubleStats=t.DoubleColumnStatsData(math.nan, -math.inf, 0, 0))),
    ])
    args = s.update_table_column_statistics_args(stats_obj=stats)
    body = tjson("update_table_column_statistics", CALL, 1, args)
    assert b"nan" in body and b"-inf" in body  # Python writes bare, non-JSON specials
    _, message = tjson_call_to_binary(body, schema)
    quoted = body.replace(b"nan", b'"NaN"').replace(b"-inf", b'"-Infinity"')
    assert tjson_call_to_binary(quoted, schema)[1] == message
    assert message == binary("update_table_column_statistics", CALL, 1, args)


def test_escapes_and_unknown_method(schema):
    body = b'[1,"not_in_idl",4,-7,{"3":{"str":"a\\/b\\u00e9\\ud83d\\ude00"},"9":{"map":["i64","dbl",2,{"-1":1,"9007199254740993":"-Infinity"}]}}]'
    header, message = tjson_call_to_binary(body, schema)
    assert (header.name, header.type, header.seqid) == ("not_in_idl", 4, -7)
    assert "a/bé😀".encode() in message
    assert (9007199254740993).to_bytes(8, "big") + b"\xff\xf0" + b"\x00" * 6 in message


def test_reply_round_trips_through_apache_reader(apache_hms, schema):
    t, s = apache_hms.ttypes, apache_hms.service
    parts = [t.Partition([str(i)], "db", "tbl", i, 0, sample_table(t).sd, {"k": str(i)}) for i in range(3)]
    cases = [
        ("get_partitions", s.get_partitions_result(success=parts)),
        ("get_table", s.get_table_result(o2=t.NoSuchObjectException("no such table"))),
        ("get_all_databases", s.get_all_databases_result(success=["default", "hmshttptestdatabase"])),
        ("get_table_column_statistics", s.get_table_column_statistics_result(success=sample_stats(t))),
        ("getCounters", apache_hms.fb303.getCounters_result(success={"a": 2**62, "b": -1})),
    ]
    for name, result in cases:
        message = fastbinary(name, REPLY, 3, result)
        out = binary_reply_to_tjson(message, schema, seqid=99)
        json.loads(out)  # compact and strict JSON when no container keys are involved
        (rname, rtype, rseqid), back = read_tjson(out, type(result))
        assert (rname, rtype, rseqid) == (name, REPLY, 99)
        assert back == result
        assert read_reply_header(message)[0].seqid == 3


def test_container_key_map_round_trip(apache_hms, schema):
    # Apache's Python reader cannot rebuild list keys (unhashable), so compare bytes instead:
    # Apache's binary → our TJSON (raw JSON keys) → our binary == Apache's binary.
    t, s = apache_hms.ttypes, apache_hms.service
    table = sample_table(t, {("a",): "/loc/a", ("b", "c"): "/loc/bc"})
    reply = binary("get_table", REPLY, 8, s.get_table_result(success=table))
    out = binary_reply_to_tjson(reply, schema)
    assert b'{["str",1,"a"]:"/loc/a",["str",2,"b","c"]:"/loc/bc"}' in out
    call_body = out.replace(b'[1,"get_table",2,8,{"0":', b'[1,"create_table",1,8,{"1":', 1)
    _, message = tjson_call_to_binary(call_body, schema)
    assert message == binary("create_table", CALL, 8, s.create_table_args(tbl=table))


def test_decimal_binary_is_padded_base64(apache_hms, schema):
    t, s = apache_hms.ttypes, apache_hms.service
    out = binary_reply_to_tjson(fastbinary("get_table_column_statistics", REPLY, 1, s.get_table_column_statistics_result(success=sample_stats(t))), schema)
    assert b'"1":{"str":"AP8="}' in out and b'"1":{"dbl":"-Infinity"}' in out


def test_tapplication_exception(apache_hms):
    from thrift.Thrift import TApplicationException

    out = tapplication_exception_tjson("drop_everything", 12, 'not exposed: "drop"', UNKNOWN_METHOD)
    protocol = TJSONProtocol.TJSONProtocol(TTransport.TMemoryBuffer(out))
    assert protocol.readMessageBegin() == ("drop_everything", 3, 12)
    exc = TApplicationException()
    exc.read(protocol)
    assert (exc.message, exc.type) == ('not exposed: "drop"', TApplicationException.UNKNOWN_METHOD)


def test_exception_message_reply(schema):
    from thrift.Thrift import TApplicationException

    buffer = TTransport.TMemoryBuffer()
    protocol = TBinaryProtocol.TBinaryProtocol(buffer)
    protocol.writeMessageBegin("get_table", 3, 4)
    TApplicationException(TApplicationException.INTERNAL_ERROR, "boom").write(protocol)
    protocol.writeMessageEnd()
    assert binary_reply_to_tjson(buffer.getvalue(), schema) == b'[1,"get_table",3,4,{"1":{"str":"boom"},"2":{"i32":6}}]'


def test_encode_binary_call_matches_apache(apache_hms):
    s = apache_hms.service
    expected = binary("set_ugi", CALL, 5, s.set_ugi_args("alice", ["analysts", "é"]))
    assert encode_binary_call("set_ugi", 5, [(1, TType.STRING, "alice"), (2, TType.LIST, ["analysts", "é"])]) == expected


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 100000])
def test_scanner_finds_message_end(apache_hms, chunk):
    t, s = apache_hms.ttypes, apache_hms.service
    parts = [t.Partition([str(i)], "db", "tbl", i, 0, sample_table(t).sd, {"k": "v" * i}) for i in range(20)]
    message = fastbinary("get_partitions", REPLY, 1, s.get_partitions_result(success=parts))
    stream = message + b"\x80\x01\x00\x02next message"
    scanner = BinaryMessageScanner(len(message))
    results = [scanner.feed(stream[i : i + chunk]) for i in range(0, len(stream), chunk)]
    done = [r for r in results if r is not None]
    assert done and done[0] == len(message)
    first = results.index(len(message))
    assert (first + 1) * chunk >= len(message) > first * chunk  # reported as soon as complete


# Property-based: generated values of IDL structs.
text = st.text(max_size=12)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
doubles = st.floats(allow_nan=False)  # NaN != NaN would break object equality; covered above


@st.composite
def tables(draw, t):
    cols = draw(st.lists(st.builds(t.FieldSchema, text, text, st.one_of(st.none(), text)), max_size=4))
    skewed = t.SkewedInfo(
        draw(st.lists(text, max_size=3)),
        draw(st.lists(st.lists(text, max_size=3), max_size=3)),
        draw(st.dictionaries(st.tuples(text, text), text, max_size=3)),
    )
    sd = t.StorageDescriptor(cols=cols, location=draw(text), compressed=draw(st.booleans()), numBuckets=draw(i32),
                             serdeInfo=t.SerDeInfo(draw(text), draw(text), draw(st.dictionaries(text, text, max_size=3))),
                             sortCols=[t.Order(draw(text), draw(i32))], parameters=draw(st.dictionaries(text, text, max_size=4)),
                             skewedInfo=skewed)
    return t.Table(tableName=draw(text), dbName=draw(text), createTime=draw(i32), sd=sd,
                   parameters=draw(st.dictionaries(text, text, max_size=4)), temporary=draw(st.one_of(st.none(), st.booleans())))


@st.composite
def column_statistics(draw, t):
    stats = draw(st.one_of(
        st.builds(lambda a, b, c, d: t.ColumnStatisticsData(doubleStats=t.DoubleColumnStatsData(a, b, c, d)), doubles, doubles, i64, i64),
        st.builds(lambda a, b, c: t.ColumnStatisticsData(decimalStats=t.DecimalColumnStatsData(t.Decimal(a, b), None, c, c)), st.binary(max_size=20), st.integers(-(2**15), 2**15 - 1), i64),
        st.builds(lambda a, b: t.ColumnStatisticsData(stringStats=t.StringColumnStatsData(a, b, 0, 0, None)), i64, doubles),
    ))
    return t.ColumnStatistics(t.ColumnStatisticsDesc(draw(st.booleans()), draw(text), draw(text), draw(st.one_of(st.none(), text)), draw(st.one_of(st.none(), i64))),
                              [t.ColumnStatisticsObj(draw(text), draw(text), stats)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_tables_tjson_binary_tjson(apache_hms, schema, data):
    t, s = apache_hms.ttypes, apache_hms.service
    table = data.draw(tables(t))
    args = s.create_table_args(tbl=table)
    body = tjson("create_table", CALL, 1, args)
    _, message = tjson_call_to_binary(body, schema)
    assert message == fastbinary("create_table", CALL, 1, args)
    reply = fastbinary("get_table", REPLY, 1, s.get_table_result(success=table))
    out = binary_reply_to_tjson(reply, schema)
    # our TJSON → our binary gives Apache's bytes back (identity through both directions)
    call_body = out.replace(b'[1,"get_table",2,1,{"0":', b'[1,"create_table",1,1,{"1":', 1)
    assert tjson_call_to_binary(call_body, schema)[1] == message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_stats_and_partitions(apache_hms, schema, data):
    t, s = apache_hms.ttypes, apache_hms.service
    stats = data.draw(column_statistics(t))
    args = s.update_table_column_statistics_args(stats_obj=stats)
    assert tjson_call_to_binary(tjson("update_table_column_statistics", CALL, 2, args), schema)[1] == fastbinary("update_table_column_statistics", CALL, 2, args)
    result = s.get_table_column_statistics_result(success=stats)
    _, back = read_tjson(binary_reply_to_tjson(fastbinary("get_table_column_statistics", REPLY, 2, result), schema), type(result))
    assert back == result
    values = data.draw(st.lists(text, max_size=3))
    parts = s.get_partitions_result(success=[t.Partition(values, data.draw(text), "tbl", data.draw(i32), 0, None, data.draw(st.dictionaries(text, text, max_size=3)))])
    _, back = read_tjson(binary_reply_to_tjson(fastbinary("get_partitions", REPLY, 3, parts), schema), type(parts))
    assert back == parts


def test_negative_zero_double_from_python_writer(schema):
    body = b'[1,"x",1,1,{"1":{"dbl":-0},"2":{"i32":0},"3":{"str":"2024-01-01"}}]'
    _, message = tjson_call_to_binary(body, schema)
    assert b"\x04\x00\x01\x80" + b"\x00" * 7 in message  # -0.0 keeps its sign
