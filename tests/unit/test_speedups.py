"""The C translation code (``_speedups``): built, used, and equal to the pure-Python code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.thrift import _speedups, accel
from gateway.thrift.errors import ProtocolError
from gateway.thrift.reply_translator import reply_translator
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary
from tests.support.fake_hms import list_of_strings_reply
from tests.unit.test_thrift_conformance import binary, sample_stats, sample_table, tjson


@pytest.fixture
def messages(apache_hms):
    t, s = apache_hms.ttypes, apache_hms.service
    table = sample_table(t)
    parts = [
        t.Partition([f"v{i}"], "db", "tbl", i, 0, table.sd, {"k": str(i), "é": "\u2028"}) for i in range(50)
    ]
    return {
        "partitions": binary("get_partitions", 2, 9, s.get_partitions_result(success=parts)),
        "stats": binary("get_table_column_statistics", 2, 3, s.get_table_column_statistics_result(success=sample_stats(t))),
        "exception": binary("get_table", 2, 4, s.get_table_result(o2=t.NoSuchObjectException("no \"such\" table"))),
    }, tjson("add_partitions", 1, 5, s.add_partitions_args(new_parts=parts))


def test_extension_is_built_and_selected():
    assert accel.implementation() == "c", accel.implementation()


def test_c_translates_without_handing_back_to_python(messages, schema):
    replies, call = messages
    args, results = accel.compiled(schema)
    fast = _speedups.tjson_call_to_binary(call, args)
    assert fast is not None  # None would mean "let Python decide": the C path was not used
    with accel.using("python"):
        header, slow = tjson_call_to_binary(call, schema)
        expected = {name: binary_reply_to_tjson(msg, schema, seqid=77) for name, msg in replies.items()}
    assert fast == (header.name, header.type, header.seqid, slow)
    for name, message in replies.items():
        translator = _speedups.ReplyTranslator(results, len(message), 77)
        assert translator.feed(message) == len(message), name
        assert translator.take() == expected[name], name


@pytest.mark.parametrize("chunk", [1, 3, 1000, 1 << 20])
def test_streaming_equals_whole_message(messages, schema, thrift_impl, chunk):
    replies, _ = messages
    message = replies["partitions"]
    whole = binary_reply_to_tjson(message, schema, seqid=5)
    translator = reply_translator(schema, 1 << 30, 5)
    out, end = [], None
    data = message + b"\x80extra"  # bytes after the message are not the translator's
    for i in range(0, len(data), chunk):
        end = translator.feed(data[i : i + chunk])
        out.append(translator.take())
        if end is not None:
            break
    assert end == len(message)
    assert b"".join(out) == whole


def test_streaming_emits_before_the_end(messages, schema):
    message = messages[0]["partitions"]
    translator = reply_translator(schema, 1 << 30, 5)
    assert translator.feed(message[: len(message) // 2]) is None
    assert translator.pending > len(message) // 3  # TJSON of the first half is ready


def test_streaming_errors(messages, schema, thrift_impl):
    message = messages[0]["partitions"]
    with pytest.raises(ProtocolError, match="version"):
        reply_translator(schema, 1 << 20).feed(b"\x00" * 64)
    with pytest.raises(ProtocolError, match="size limit"):
        translator = reply_translator(schema, 1000)
        for i in range(0, len(message), 100):
            translator.feed(message[i : i + 100])
    bad = bytearray(message)
    bad[len(bad) - 1] = 1  # last STOP becomes an unknown field type
    translator = reply_translator(schema, 1 << 30)
    with pytest.raises(ProtocolError):
        assert translator.feed(bytes(bad) + b"\x00" * 8) is None
    assert reply_translator(schema, 1 << 30).feed(message[:-1]) is None  # truncated: wants more


def test_environment_variable_forces_pure_python():
    code = "from gateway.thrift import accel; print(accel.implementation())"
    env = {**os.environ, "HMS_GATEWAY_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("python (HMS_GATEWAY_PURE_PYTHON=1)")


@pytest.fixture
def large_mixed_reply(apache_hms):
    """A get_table_column_statistics reply of about 200 KiB with the rarer cases: doubles incl.
    infinities, IDL binary (Decimal.unscaled), escapes, non-ASCII, a string that is not UTF-8,
    and enough struct types to exercise the translator's field-spec cache."""
    t, s = apache_hms.ttypes, apache_hms.service
    stats = sample_stats(t)
    stats.statsObj = [
        t.ColumnStatisticsObj(f"col{i} \"q\" é\u2028", o.colType, o.statsData)
        for i in range(600) for o in sample_stats(t).statsObj
    ]
    message = binary("get_table_column_statistics", 2, 3, s.get_table_column_statistics_result(success=stats))
    assert len(message) > 2 * 64 * 1024 and b"col599 " in message
    return message.replace(b"col599 ", b"\xffol599 ", 1)


def test_large_mixed_reply_equals_python_in_any_chunking(large_mixed_reply, schema):
    with accel.using("python"):
        expected = binary_reply_to_tjson(large_mixed_reply, schema, seqid=7)
    assert "\ufffdol599".encode() in expected  # the replaced byte, as Java's decoder would
    for chunk in (len(large_mixed_reply), 64 * 1024, 1000):
        translator = reply_translator(schema, 1 << 30, 7)
        out = []
        for i in range(0, len(large_mixed_reply), chunk):
            end = translator.feed(large_mixed_reply[i : i + chunk])
            out.append(translator.take())
        assert end == len(large_mixed_reply)
        assert b"".join(out) == expected, chunk


def test_large_reply_errors(large_mixed_reply, schema):
    bad = bytearray(large_mixed_reply)
    bad[-1] = 1  # last STOP becomes an unknown field type
    for data, limit, match in [(bytes(bad) + b"\x00" * 8, 1 << 30, "unknown binary type"),
                               (large_mixed_reply, 100_000, "size limit")]:
        with pytest.raises(ProtocolError, match=match):
            reply_translator(schema, limit).feed(data)


def test_strings_are_escaped_at_every_position(schema):
    """The C translator checks strings eight bytes at a time: put every kind of byte at every
    position of strings of 0 to 24 bytes and compare with the pure-Python translation."""
    specials = [b'"', b"\\", b"\n", b"\x01", b"\x1f", b"\x7f", b" ", b"~", "é".encode(),
                "\u2028".encode(), b"\xff", b"\xc3"]  # the last two are not UTF-8
    message = list_of_strings_reply("get_all_databases", 1, [
        b"a" * pos + ch + b"b" * (length - pos) for length in range(25) for pos in range(length + 1) for ch in specials
    ])
    with accel.using("python"):
        expected = binary_reply_to_tjson(message, schema)
    assert binary_reply_to_tjson(message, schema) == expected
