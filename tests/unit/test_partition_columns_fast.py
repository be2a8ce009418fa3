"""The partition-list column filter (``PartitionSplice``: a shape decode, one count, then one
split of the shared column list, else per-partition edits, else the object path) gives, for
every reply shape, the bytes and the hidden-column count of the object path: ``ThriftReply.result``
filtered as a ``CatalogView`` keeps them and encoded back by ``ThriftReply.replace``."""

from __future__ import annotations

import asyncio
import gc

import pytest

from gateway.observability.audit import AuditEvent
from gateway.thrift import objects as thrift_objects
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.partition_splice import PartitionSplice
from gateway.policy.columns import filter_partition
from gateway.policy.view import CatalogView
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import TType, encode_binary_call, read_message_header
from tests.unit.test_policy_partition_columns import ENGINE, SCHEMA, STEP, partition

RESULT = SCHEMA.methods["get_partitions"].result_class
OLD = PartitionSplice._list_bytes(partition(0).sd.cols)  # the sd + cols bytes of x, ssn, y
ANN = Identity("ann", Principal("ann", "basic"))


def message_of(parts: list) -> bytes:
    return thrift_objects.encode_reply("get_partitions", 3, RESULT(success=parts))


def object_path(message: bytes) -> tuple[bytes, int | None]:
    """What the step answered before splicing existed: decode, filter each partition, encode."""
    reply = ThriftReply(message, SCHEMA)
    result = reply.result
    view = CatalogView(ENGINE, ANN.user, ANN.groups)
    for part in result.success or ():
        filter_partition(view, part)
    if view.hidden_columns:
        reply.replace(result)
    return reply.message, len(view.hidden_columns) or None


def spliced(message: bytes, monkeypatch) -> tuple[bytes, int | None, list[str]]:
    """The step's answer, and which ways ``PartitionSplice`` went (``uniform``,
    ``per_partition``, ``None`` for the object path)."""
    ways: list[str] = []

    def spy(name: str, record) -> None:
        real = getattr(PartitionSplice, name)

        def spied(self, *args):
            out = real(self, *args)
            ways.append(record(out))
            return out
        monkeypatch.setattr(PartitionSplice, name, spied)

    spy("_uniform", lambda out: "uniform")
    spy("_per_partition", lambda out: "per_partition")
    spy("filter", lambda out: "None" if out is None else "splice")
    call = encode_binary_call("get_partitions", 3, [(1, TType.STRING, "db"), (2, TType.STRING, "t"), (3, TType.I16, -1)])
    exchange = ThriftExchange(None, AuditEvent("r", None),  # type: ignore[arg-type]
                        identity=ANN, header=read_message_header(call)[0], call=call)
    reply = ThriftReply(message, SCHEMA)
    asyncio.run(STEP.on_reply(exchange, reply))
    monkeypatch.undo()
    return reply.message, exchange.event.policy_columns_hidden, ways


def other_table(i: int, **kw):
    part = partition(i, **kw)
    part.tableName = "u"  # no denial on db.u: all its columns stay
    return part


def no_sd(i: int):
    part = partition(i)
    part.sd = None
    return part


def sd_without_cols(i: int):
    part = partition(i)
    part.sd.cols = None
    return part


CASES = {
    "shared columns": ([partition(i) for i in range(6)], ["uniform", "splice"]),
    "a value holding the sd + cols bytes": (
        [partition(0, values=[OLD.decode("latin-1")]), partition(1)], ["None"]),
    "a parameter holding the bytes, the other partition without sd": (
        [partition(0, params={"k": OLD.decode("latin-1")}), no_sd(1)], ["None"]),
    "3,001 columns (a 126 KB list)": (
        [partition(i, cols=(*(f"c{j:04d}" for j in range(3000)), "ssn")) for i in range(2)], ["uniform", "splice"]),
    "differing columns": (
        [partition(0), partition(1, cols=("x", "y")), partition(2, cols=("ssn",)), partition(3)],
        ["uniform", "per_partition", "splice"]),
    "empty list": ([], ["splice"]),
    "no sd anywhere": ([no_sd(0), no_sd(1)], ["splice"]),
    "some partitions without sd": ([partition(0), no_sd(1), partition(2)], ["uniform", "splice"]),
    "an sd without cols": ([sd_without_cols(0), partition(1)], ["uniform", "splice"]),
    "an empty column list": ([partition(0, cols=()), partition(1)], ["uniform", "per_partition", "splice"]),
    "COLUMN_STATS names columns": (
        [partition(0, params={"COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":{"ssn":"true"}}'}),
         partition(1)], ["None"]),
    "BASIC_STATS only": (
        [partition(i, params={"COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}) for i in range(3)],
        ["uniform", "splice"]),
    "two tables, one with every column visible": (
        [partition(0), other_table(1), partition(2)], ["per_partition", "None"]),
    "two tables with differing columns": (
        [partition(0), other_table(1, cols=("x", "ssn")), partition(2)], ["per_partition", "splice"]),
    "a table with every column visible": ([other_table(i) for i in range(3)], ["splice"]),
}


@pytest.mark.parametrize("name", CASES)
def test_each_reply_shape_gives_the_bytes_of_the_object_path(name, monkeypatch):
    parts, expected_ways = CASES[name]
    message = message_of(parts)
    out, hidden, ways = spliced(message, monkeypatch)
    assert (out, hidden) == object_path(message)
    assert ways == expected_ways
    if any(p.sd is not None and p.sd.cols and p.tableName == "t" for p in parts):
        assert hidden == 1 and out != message
        sent = thrift_objects.decode_struct(out, RESULT).success
        assert not [p for p in sent if p.tableName == "t" and p.sd and "ssn" in [c.name for c in p.sd.cols or ()]]
    else:
        assert out == message and hidden is None


def test_the_header_bytes_counted_cannot_overlap_themselves():
    """``bytes.count`` counts non-overlapping matches: the filter's proof needs every match."""
    pattern = PartitionSplice._COLS
    assert not any(pattern.endswith(pattern[:n]) for n in range(1, len(pattern)))


def test_a_list_of_another_element_type_reads_as_empty_so_the_shape_decode_builds_no_columns():
    shape = thrift_objects.decode_struct(message_of([partition(0), sd_without_cols(1), no_sd(2)]),
                                         STEP._splice._shape).success
    assert [(p.dbName, p.tableName) for p in shape] == [("db", "t")] * 3
    assert [None if p.sd is None else p.sd.cols for p in shape] == [[], None, None]



@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_left_as_it_was(enabled, monkeypatch):
    """The decodes run with the collector paused; it must come back on, or stay off."""
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        for parts in ([partition(i) for i in range(3)], [partition(0), partition(1, cols=("x", "y"))]):
            assert spliced(message_of(parts), monkeypatch)[1] == 1
            assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
