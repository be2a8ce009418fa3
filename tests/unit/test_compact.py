"""TCompactProtocol ⇄ strict binary, checked against Apache Thrift's Python library.

Apache's ``TCompactProtocol`` (pure Python) and ``TCompactProtocolAccelerated`` (``fastbinary``)
write objects of the generated Hive Metastore code; the gateway's translation must give exactly
Apache's binary bytes (or, for empty maps whose binary element types compact does not carry,
bytes Apache reads back equal), and the reverse exactly Apache's compact bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thrift.protocol import TCompactProtocol
from thrift.Thrift import TApplicationException, TType
from thrift.transport import TTransport

from gateway.thrift.binary import CALL, REPLY
from gateway.thrift.compact import (
    binary_message_to_compact,
    compact_application_exception,
    compact_message_to_binary,
)
from gateway.thrift.errors import MAX_DEPTH, ProtocolError
from tests.support.apache_codec import read_message, strict_binary, write_message

COMPACT_FACTORIES = {
    "pure": TCompactProtocol.TCompactProtocol,
    "accelerated": TCompactProtocol.TCompactProtocolAccelerated,
}


# --- a Hypothesis strategy for any generated struct, driven by its thrift_spec ---------------

_INTS = {TType.BYTE: 8, TType.I16: 16, TType.I32: 32, TType.I64: 64}


def _value(ttype, args, depth):
    if ttype == TType.BOOL:
        return st.booleans()
    if ttype in _INTS:
        bits = _INTS[ttype]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if ttype == TType.DOUBLE:
        return st.floats(allow_nan=False)
    if ttype == TType.STRING:
        return st.binary(max_size=20) if args == "BINARY" else st.text(max_size=12)
    if ttype == TType.STRUCT:
        return struct_of(args[0], depth + 1)
    if ttype in (TType.LIST, TType.SET):
        return st.lists(_value(args[0], args[1], depth + 1), max_size=4 if depth < 3 else 0)
    if ttype == TType.MAP:
        key = _value(args[0], args[1], depth + 1)
        if args[0] in (TType.LIST, TType.SET):
            # Apache's Python reader cannot build a dict keyed by lists: covered by
            # test_hms_objects_with_every_wire_type byte for byte instead.
            return st.just({})
        return st.dictionaries(key, _value(args[2], args[3], depth + 1), max_size=3 if depth < 3 else 0)
    raise AssertionError(f"type {ttype} not in the HMS IDL")


def struct_of(cls, depth=0):
    fields = {}
    for spec in cls.thrift_spec:
        if spec is None:
            continue
        _, ttype, name, args, default = spec
        value = _value(ttype, args, depth)
        if default is not None:  # an unset field reads back as its default
            fields[name] = value
        else:
            fields[name] = st.none() | value if depth < 4 else st.none()
    return st.builds(cls, **fields)


@pytest.fixture(scope="module")
def sample_classes(apache_hms):
    t = apache_hms.ttypes
    return [t.Table, t.Partition, t.ColumnStatistics, t.Decimal, t.SkewedInfo, t.PrincipalPrivilegeSet]


@pytest.mark.parametrize("flavour", sorted(COMPACT_FACTORIES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), seqid=st.integers(-(1 << 31), (1 << 31) - 1), mtype=st.sampled_from([1, 2, 3, 4]))
def test_random_objects_match_apache_both_ways(apache_hms, sample_classes, flavour, data, seqid, mtype):
    cls = data.draw(st.sampled_from(sample_classes))
    obj = data.draw(struct_of(cls))
    factory = COMPACT_FACTORIES[flavour]
    compact = write_message(factory, "some_method", mtype, seqid, obj)
    binary = write_message(strict_binary, "some_method", mtype, seqid, obj)

    assert binary_message_to_compact(binary) == compact

    header, translated = compact_message_to_binary(compact)
    assert (header.name, header.type, header.seqid) == ("some_method", mtype, seqid)
    back_header, back = read_message(strict_binary, translated, cls)
    assert back_header == ("some_method", mtype, seqid)
    assert back == obj
    if b"\x0d" not in binary:  # no map at all: the bytes must be Apache's exactly
        assert translated == binary
    assert binary_message_to_compact(translated) == compact
    # and Apache's own compact reader agrees with what we produce
    _, again = read_message(factory, binary_message_to_compact(translated), cls)
    assert again == obj


def test_hms_objects_with_every_wire_type(apache_hms):
    t, svc = apache_hms.ttypes, apache_hms.service
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("name", "string", "c\u00e9"), t.FieldSchema("age", "int", None)],
        location="file:/w", compressed=True, numBuckets=-1, storedAsSubDirectories=False,
        serdeInfo=t.SerDeInfo("s", "lib", {"a": "1"}), bucketCols=[], sortCols=[],
        parameters={"p": "q"}, skewedInfo=t.SkewedInfo(["c"], [["x", "y"]], {("x", "y"): "/loc"}),
    )
    table = t.Table("tbl", "db", "me", 1_700_000_000, 0, 0, sd, [t.FieldSchema("p", "string", None)],
                    {"k": "v"}, None, None, "MANAGED_TABLE", None, False)
    stats = t.ColumnStatistics(
        t.ColumnStatisticsDesc(True, "db", "tbl", None, 5),
        [t.ColumnStatisticsObj("c", "double", t.ColumnStatisticsData(
            doubleStats=t.DoubleColumnStatsData(-1.5e300, 2.25, 3, 4))),
         t.ColumnStatisticsObj("d", "decimal", t.ColumnStatisticsData(
            decimalStats=t.DecimalColumnStatsData(t.Decimal(b"\x00\xff\x80", 2), None, 1, 2)))],
    )
    for name, obj in [("get_table", svc.get_table_result(success=table)),
                      ("create_table", svc.create_table_args(tbl=table)),
                      ("update_table_column_statistics", svc.update_table_column_statistics_args(stats)),
                      ("get_all_databases", svc.get_all_databases_result(success=["a", "b" * 300] * 10))]:
        for factory in COMPACT_FACTORIES.values():
            compact = write_message(factory, name, REPLY, 7, obj)
            binary = write_message(strict_binary, name, REPLY, 7, obj)
            assert binary_message_to_compact(binary) == compact
            _, translated = compact_message_to_binary(compact)
            assert translated == binary


def test_seqid_is_replaced_and_negative_seqids_survive(apache_hms):
    obj = apache_hms.service.get_all_databases_args()
    binary = write_message(strict_binary, "get_all_databases", CALL, 5, obj)
    compact = binary_message_to_compact(binary, seqid=-2)
    header, _ = compact_message_to_binary(compact)
    assert header.seqid == -2
    assert read_message(TCompactProtocol.TCompactProtocol, compact, type(obj))[0][2] == -2


@pytest.mark.parametrize("factory", COMPACT_FACTORIES.values(), ids=sorted(COMPACT_FACTORIES))
def test_application_exception_is_read_by_apache(factory):
    data = compact_application_exception("get_table", 9, "method get_table is not exposed", 1)
    protocol = factory(TTransport.TMemoryBuffer(data))
    name, mtype, seqid = protocol.readMessageBegin()
    exc = TApplicationException()
    exc.read(protocol)
    assert (name, mtype, seqid) == ("get_table", 3, 9)
    assert exc.type == TApplicationException.UNKNOWN_METHOD and "not exposed" in exc.message


# --- hostile input ---------------------------------------------------------------------------

HEADER = b"\x82\x21\x01\x03abc"  # CALL, seqid 1, name "abc"


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"", "truncated"),
        (b"\x82", "truncated"),
        (b"\x80\x21\x01\x03abc\x00", "0x82"),
        (b"\x82\x22\x01\x03abc\x00", "version"),
        (HEADER, "truncated"),
        (HEADER + b"\x00\x00", "after the end"),
        (b"\x82\x21" + b"\xff" * 6 + b"\x01", "varint too long"),
        (b"\x82\x21\x01\xff\xff\xff\xff\x0f", "name length"),
        (b"\x82\x21\x01\x02\xff\xfe\x00", "UTF-8"),
        (HEADER + b"\x1d\x00", "unknown compact type"),
        (HEADER + b"\x19\xf8\xff\xff\xff\xff\x07", "list size"),   # 2**31-1 strings, none present
        (HEADER + b"\x19\xf8\x80\x80\x80\x80\x10", "out of range"),  # a size over i32
        (HEADER + b"\x19\x27" + b"\x00" * 8, "list size"),          # 2 doubles need 16 bytes
        (HEADER + b"\x1b\xff\xff\xff\xff\x07\x88", "map size"),
        (HEADER + b"\x18\x05ab\x00", "string longer"),
        (HEADER + b"\x15" + b"\xff" * 10, "varint too long"),
        (HEADER + b"\x15\xfe\xff\xff\xff\x1f\x00", "i32 out of range"),
        (HEADER + b"\x10\x00", "bad compact field header"),
        (HEADER + b"\x19\x11\x05\x00", "bad compact bool"),
    ],
)
def test_malformed_compact_is_refused(body, reason):
    with pytest.raises(ProtocolError) as info:
        compact_message_to_binary(body)
    assert reason in info.value.reason


def test_deep_nesting_is_refused_without_recursion_error():
    # struct field 1 holding a struct, MAX_DEPTH * 4 times
    body = HEADER + b"\x1c" * (MAX_DEPTH * 4) + b"\x00" * (MAX_DEPTH * 4 + 1)
    with pytest.raises(ProtocolError, match="nested too deeply"):
        compact_message_to_binary(body)
    nested_lists = HEADER + b"\x19" + b"\x19" * (MAX_DEPTH * 4) + b"\x00"
    with pytest.raises(ProtocolError, match="nested too deeply"):
        compact_message_to_binary(nested_lists)


def test_nesting_within_the_limit_is_accepted():
    depth = MAX_DEPTH - 1
    body = HEADER + b"\x1c" * depth + b"\x00" * (depth + 1)
    header, binary = compact_message_to_binary(body)
    assert header.name == "abc" and binary_message_to_compact(binary) == body


def test_malformed_binary_reply_is_refused():
    good = b"\x80\x01\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x01" + b"\x0f\x00\x00\x0b\x00\x00\x00\x01" + b"\x00\x00\x00\x01x\x00"
    assert compact_message_to_binary(binary_message_to_compact(good))[1] == good
    for bad in (good[:-1], good + b"\x00", good.replace(b"\x00\x00\x00\x01x", b"\x7f\xff\xff\xffx"),
                good.replace(b"\x0b\x00\x00\x00\x01", b"\x0b\x7f\xff\xff\xff")):
        with pytest.raises(ProtocolError):
            binary_message_to_compact(bad)
