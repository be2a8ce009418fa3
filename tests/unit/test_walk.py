"""The strict-binary walk (gateway/thrift/walk.py): fields and ends of Apache-written values,
every malformed header refused with ProtocolError, depth and budget limits, laziness."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thrift.Thrift import TMessageType

from gateway.thrift.binary import read_message_header
from gateway.thrift.errors import MAX_DEPTH, ProtocolError
from gateway.thrift.schema import TType
from gateway.thrift.walk import (
    Budget,
    call_objects,
    iter_fields,
    reply_succeeded,
    list_header,
    map_header,
    skip_value,
    string_span,
    struct_fields,
)
from tests.support.apache_codec import strict_binary, write_message
from tests.support.fake_hms import binary_message, list_of_strings_reply
from tests.unit.test_thrift_conformance import sample_stats, sample_table


def test_fields_and_ends_of_an_apache_written_call(apache_hms):
    t, svc = apache_hms.ttypes, apache_hms.service
    table = sample_table(t, skewed_maps={("a", "b"): "/loc/ab"})
    args = svc.create_table_with_environment_context_args(tbl=table, environment_context=t.EnvironmentContext({"k": "v"}))
    call = write_message(strict_binary, "create_table_with_environment_context", TMessageType.CALL, 1, args)
    _, pos = read_message_header(call)
    fields, end = struct_fields(call, pos)
    assert end == len(call)
    assert [(fid, ftype) for fid, ftype, _, _ in fields] == [(1, TType.STRUCT), (2, TType.STRUCT)]
    assert fields[0][3] == fields[1][2] - 3  # the next field header follows the first value
    assert skip_value(call, pos, TType.STRUCT) == len(call)
    inner, _ = struct_fields(call, fields[0][2])
    names = {fid: call[start + 4:stop].decode() for fid, ftype, start, stop in inner if ftype == TType.STRING}
    assert names[1] == table.tableName and names[2] == table.dbName


def test_statistics_reply_walks_to_its_end(apache_hms):
    s = apache_hms.service
    reply = write_message(strict_binary, "get_table_column_statistics", TMessageType.REPLY, 1,
                          s.get_table_column_statistics_result(success=sample_stats(apache_hms.ttypes)))
    _, pos = read_message_header(reply)
    assert skip_value(reply, pos, TType.STRUCT) == len(reply)
    for cut in range(pos, len(reply)):
        with pytest.raises(ProtocolError):
            skip_value(reply[:cut], pos, TType.STRUCT)


@pytest.mark.parametrize("data, reader, reason", [
    (b"\x00\x00\x00", string_span, "truncated"),
    (b"\xff\xff\xff\xff", string_span, "bad string length"),
    (b"\x00\x00\x00\x05abcd", string_span, "bad string length"),
    (b"\x0b\x00\x00", list_header, "truncated"),
    (b"\x0b\xff\xff\xff\xff", list_header, "bad container size"),
    (b"\x0b\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00", list_header, "bad container size"),  # 2 strings need 8
    (b"\x01\x00\x00\x00\x00", list_header, "unknown binary element type"),
    (b"\x0b\x0b\x00\x00\x00\x01" + b"\x00" * 7, map_header, "bad container size"),
    (b"\x0b\x14\x00\x00\x00\x00", map_header, "unknown binary map"),
])
def test_bad_headers_are_refused(data, reader, reason):
    with pytest.raises(ProtocolError, match=reason):
        reader(data, 0)


def test_headers_read_what_apache_wrote():
    assert string_span(b"\x00\x00\x00\x02hi", 0) == (4, 6)
    assert list_header(b"\x08\x00\x00\x00\x01\x00\x00\x00\x07", 0) == (TType.I32, 1, 5)
    assert map_header(b"\x0b\x08\x00\x00\x00\x00", 0) == (TType.STRING, TType.I32, 0, 6)


def test_unknown_type_and_deep_nesting_are_refused():
    with pytest.raises(ProtocolError, match="unknown binary type"):
        skip_value(b"\x00", 0, 1)
    deep = b"\x0c\x00\x01" * (MAX_DEPTH + 2) + b"\x00" * (MAX_DEPTH + 3)
    with pytest.raises(ProtocolError, match="nested too deeply"):
        skip_value(deep, 0, TType.STRUCT)
    shallow = b"\x0c\x00\x01" * (MAX_DEPTH - 2) + b"\x00" * (MAX_DEPTH - 1)
    assert skip_value(shallow, 0, TType.STRUCT) == len(shallow)


def test_hostile_fixed_size_count_costs_nothing():
    # 2**31-1 i64 elements declared, none present: refused from the header, not by walking
    with pytest.raises(ProtocolError, match="bad container size"):
        skip_value(b"\x0a\x7f\xff\xff\xff", 0, TType.LIST)


def test_budget_limits_values_walked():
    strings = b"".join(struct.pack("!i", 1) + b"x" for _ in range(10))
    value = b"\x0b" + struct.pack("!i", 10) + strings
    assert skip_value(value, 0, TType.LIST, budget=Budget(11)) == len(value)
    with pytest.raises(ProtocolError, match="more values"):
        skip_value(value, 0, TType.LIST, budget=Budget(10))


def test_iter_fields_is_lazy():
    # field 1 a string, then garbage: the first field comes out before the garbage is met
    data = b"\x0b\x00\x01" + struct.pack("!i", 2) + b"ok" + b"\x63\x00\x02"
    fields = iter_fields(data, 0)
    assert next(fields) == (1, TType.STRING, 3, 9)
    with pytest.raises(ProtocolError):
        next(fields)


def test_call_objects_stops_once_both_names_are_found(schema):
    # get_partitions_by_names(db, tbl, names): a names list beyond the budget is not walked
    names = b"\x0f\x00\x03\x0b" + struct.pack("!i", 30_000) + struct.pack("!i", 0) * 30_000
    body = b"".join(b"\x0b" + struct.pack("!h", i) + struct.pack("!i", 2) + v for i, v in ((1, b"db"), (2, b"tb")))
    head = struct.pack("!Ii", 0x80010001, 23) + b"get_partitions_by_names" + struct.pack("!i", 1)
    assert call_objects(head + body + names + b"\x00", schema) == ("db", "tb")
    # the same list first: the budget ends the walk and nothing is found, without an error
    reordered = head + names + body + b"\x00"
    assert call_objects(reordered, schema) == (None, None)


def test_reply_succeeded_reads_the_result_field(apache_hms):
    s, t = apache_hms.service, apache_hms.ttypes
    assert reply_succeeded(list_of_strings_reply("get_all_databases", 1, ["a"]))
    assert reply_succeeded(binary_message("drop_database", 2, 1, b"\x00"))  # void
    no_such = write_message(strict_binary, "get_database", TMessageType.REPLY, 1,
                            s.get_database_result(o1=t.NoSuchObjectException("gone")))
    assert not reply_succeeded(no_such)
    assert not reply_succeeded(binary_message("get_database", 3, 1, b"\x00"))  # EXCEPTION
    assert not reply_succeeded(binary_message("get_database", 2, 1, b""))  # truncated
    assert not reply_succeeded(b"\x00garbage")


def _reply_succeeded_by_the_readers(message: bytes) -> bool:
    """The answer :func:`reply_succeeded` must give, from the general readers."""
    from gateway.thrift.binary import REPLY, read_message_header
    from gateway.thrift.errors import ProtocolError
    from gateway.thrift.walk import field_header
    try:
        header, pos = read_message_header(message)
        if header.type != REPLY:
            return False
        first = field_header(message, pos)
    except ProtocolError:
        return False
    return first is None or first[1] == 0


@settings(max_examples=3000, deadline=None)
@given(st.data())
def test_reply_succeeded_matches_the_readers(data):
    base = data.draw(st.sampled_from([
        list_of_strings_reply("get_all_databases", 1, ["a"]),
        binary_message("drop_database", 2, 1, b"\x00"),
        binary_message("get_database", 2, 1, b"\x0c\x00\x01\x0b\x00\x01\x00\x00\x00\x01x\x00\x00"),
        binary_message("get_database", 3, 1, b"\x00"),
        binary_message("caf\u00e9", 2, 1, b"\x0f\x00\x00\x0b\x00\x00\x00\x00\x00"),
    ]))
    message = bytearray(base)
    for _ in range(data.draw(st.integers(0, 3))):  # flip, cut or extend a few bytes
        kind = data.draw(st.sampled_from(["flip", "cut", "extend"]))
        if kind == "flip" and message:
            i = data.draw(st.integers(0, len(message) - 1))
            message[i] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del message[data.draw(st.integers(0, len(message))):]
        else:
            message += data.draw(st.binary(max_size=4))
    assert reply_succeeded(bytes(message)) == _reply_succeeded_by_the_readers(bytes(message))
