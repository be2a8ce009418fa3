"""List-bucketed (skewed) tables on a policy service: thriftpy2 cannot hold
``SkewedInfo.skewedColValueLocationMaps`` (``map<list<string>,string>``), so the object path
decodes leniently and puts HMS's bytes of every skew map back when it encodes the reply."""

from __future__ import annotations

import asyncio
import copy
import sys

import pytest

from gateway.observability.audit import AuditEvent
from gateway.thrift import objects as thrift_objects
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.steps.catalog_policy import CatalogPolicy
from gateway.policy import PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import TType, encode_binary_call, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import load_schema

SCHEMA = load_schema()
T = sys.modules[SCHEMA.methods["get_table"].result_class.__module__]
MAPS = {("a",): "file:/w/t/name=a", ("b", "c"): "file:/w/t/name=b/c"}


def sd(maps, location: str = "file:/w/t"):
    return T.StorageDescriptor(
        cols=[T.FieldSchema("name", "string", None), T.FieldSchema("ssn", "string", "secret")], location=location,
        serdeInfo=T.SerDeInfo("s", "lib", {}), bucketCols=[], sortCols=[], parameters={},
        skewedInfo=T.SkewedInfo(["name"], [["a"], ["b", "c"]], maps), storedAsSubDirectories=True)


def partition(i: int, maps):
    return T.Partition([str(i)], "db", "t", 1, 0, sd(maps, f"file:/w/t/p={i}"), {"k": "v"})


def test_the_idls_own_classes_cannot_hold_the_skew_map():
    message = thrift_objects.encode_reply("get_table", 1, SCHEMA.methods["get_table"].result_class(
        success=T.Table("t", "db", sd=sd(MAPS))))
    with pytest.raises(ProtocolError):
        thrift_objects.decode_struct(message, SCHEMA.methods["get_table"].result_class)


def test_a_filtered_reply_keeps_every_skew_map_byte_for_byte():
    result_class = SCHEMA.methods["get_partitions"].result_class
    parts = [partition(0, MAPS), partition(1, {}), partition(2, None), partition(3, {("z",): "file:/w/t/p=3/z"})]
    reply = ThriftReply(thrift_objects.encode_reply("get_partitions", 5, result_class(success=parts)), SCHEMA)
    result = reply.result
    for part in result.success:
        part.sd.cols = part.sd.cols[:1]
    del result.success[1]  # a filter may drop whole objects: their maps go with them
    reply.replace(result)

    expected = copy.deepcopy(parts)
    for part in expected:
        part.sd.cols = part.sd.cols[:1]
    del expected[1]
    assert reply.message == thrift_objects.encode_reply("get_partitions", 5, result_class(success=expected))
    assert b"file:/w/t/name=b/c" in reply.message and b"file:/w/t/p=3/z" in reply.message


def test_the_policy_step_removes_columns_of_a_skewed_table_and_keeps_its_map():
    engine = PolicyEngine([
        Policy(1, "read", (ResourceSpec(("db",)), ResourceSpec(("*",)), ResourceSpec(("*",))),
               allow=(PolicyItem(frozenset({"select"}), frozenset({"ann"})),)),
        Policy(2, "no ssn", (ResourceSpec(("db",)), ResourceSpec(("t",)), ResourceSpec(("ssn",))),
               deny=(PolicyItem(frozenset({"select"}), frozenset({"ann"})),)),
    ])
    step = CatalogPolicy("topo", "svc", engine, SCHEMA)
    table = T.Table("t", "db", "ann", 1, 0, 0, sd(MAPS), [], {"transient_lastDdlTime": "1"}, tableType="MANAGED_TABLE")
    result_class = SCHEMA.methods["get_table"].result_class
    call = encode_binary_call("get_table", 4, [(1, TType.STRING, "db"), (2, TType.STRING, "t")])
    exchange = ThriftExchange(None, AuditEvent("r", None),  # type: ignore[arg-type]
                        identity=Identity("ann", Principal("ann", "basic")), header=read_message_header(call)[0], call=call)
    reply = ThriftReply(thrift_objects.encode_reply("get_table", 4, result_class(success=table)), SCHEMA)
    asyncio.run(step.on_reply(exchange, reply))

    table.sd.cols = table.sd.cols[:1]
    assert reply.message == thrift_objects.encode_reply("get_table", 4, result_class(success=table))
    assert exchange.event.policy_columns_hidden == 1


def test_arguments_naming_a_skewed_table_decode_without_the_map():
    method = SCHEMA.methods["create_table"]
    call = bytearray(thrift_objects.encode_reply("create_table", 2, method.args_class(tbl=T.Table("t", "db", sd=sd(MAPS)))))
    call[3] = 1  # CALL
    args = thrift_objects.decode_args(bytes(call), method)
    assert (args.tbl.dbName, args.tbl.tableName) == ("db", "t")
    assert args.tbl.sd.skewedInfo.skewedColValues == [["a"], ["b", "c"]]
