"""Arguments of another type than the IDL's (issue 25) against the real gateway and HMS: a 400
naming the method, the field and both types in every client protocol, and nothing reaches HMS;
the same call with the IDL's types, or with an extra unknown field id, is served.

Bodies are written with Apache Thrift's own protocol classes, field by field, as a client with
a wrong IDL (or a hand-made TJSON call) would send them.
"""

from __future__ import annotations

import json

import pytest
from thrift.protocol import TBinaryProtocol, TCompactProtocol, TJSONProtocol
from thrift.Thrift import TMessageType, TType
from thrift.transport import TTransport

from tests.support.gateway import RunningGateway, post, service, upstream_calls
from tests.support.spec_calls import DB, TABLE
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

PROTOCOLS = {
    "tjson": (TJSONProtocol.TJSONProtocol, "application/vnd.apache.thrift.json"),
    "binary": (lambda t: TBinaryProtocol.TBinaryProtocol(t, strictRead=True, strictWrite=True),
               "application/x-thrift"),
    "compact": (TCompactProtocol.TCompactProtocol, "application/vnd.apache.thrift.compact"),
}


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    methods = ["get_all_databases", "get_database", "get_partitions", "get_partitions_by_names"]
    topologies = {"default": {"services": [service([f"thrift://127.0.0.1:{hms.port}"], methods=methods)]}}
    return module_gateway_factory(topologies, {"admin": "admin-password"})


def message(protocol: str, name: str, fields: list[tuple[int, int, object]]) -> bytes:
    """A CALL of ``name`` whose arguments are ``(id, TType, value)``, written field by field
    by Apache's ``protocol`` writer; a list value is ``(element TType, [elements])``."""
    buffer = TTransport.TMemoryBuffer()
    out = PROTOCOLS[protocol][0](buffer)
    out.writeMessageBegin(name, TMessageType.CALL, 7)
    out.writeStructBegin(f"{name}_args")
    for fid, ttype, value in fields:
        out.writeFieldBegin("", ttype, fid)
        if ttype == TType.LIST:
            etype, items = value
            out.writeListBegin(etype, len(items))
            for item in items:
                {TType.STRING: out.writeString, TType.I32: out.writeI32}[etype](item)
            out.writeListEnd()
        else:
            {TType.STRING: out.writeString, TType.I16: out.writeI16, TType.I32: out.writeI32}[ttype](value)
        out.writeFieldEnd()
    out.writeFieldStop()
    out.writeStructEnd()
    out.writeMessageEnd()
    return buffer.getvalue()


def call(gw: RunningGateway, protocol: str, name: str, fields):
    """(status, reply object or 400 text) of one call in ``protocol``."""
    status, _, body = post(gw, message(protocol, name, fields), headers={"Content-Type": PROTOCOLS[protocol][1]})
    if status != 200:
        return status, body.decode()
    service_mod, _ = hive_metastore_modules()
    reader = PROTOCOLS[protocol][0](TTransport.TMemoryBuffer(body))
    assert reader.readMessageBegin()[1] == TMessageType.REPLY
    result = getattr(service_mod, f"{name}_result")()
    result.read(reader)
    return status, result.success


TABLE_ARGS = [(1, TType.STRING, DB), (2, TType.STRING, TABLE)]

WRONG = {
    "max_parts as i32 (HMS would skip it and return all partitions)": (
        "get_partitions", [*TABLE_ARGS, (3, TType.I32, 1)],
        "get_partitions: field 3 (max_parts) is i16 in the IDL, got i32"),
    "a database name as i32 (HMS: Internal error processing get_database)": (
        "get_database", [(1, TType.I32, 5)],
        "get_database: field 1 (name) is string in the IDL, got i32"),
    "partition names as list<i32>": (
        "get_partitions_by_names", [*TABLE_ARGS, (3, TType.LIST, (TType.I32, [1, 2]))],
        "get_partitions_by_names: field 3 (names) is list<string> in the IDL, got list<i32>"),
}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("name, fields, reason", WRONG.values(), ids=WRONG.keys())
def test_a_field_of_another_type_is_a_400_and_never_reaches_hms(gateway, protocol, name, fields, reason):
    before = upstream_calls(gateway)
    status, text = call(gateway, protocol, name, fields)
    assert (status, text) == (400, f"malformed Thrift message: {reason}\n")
    assert upstream_calls(gateway) == before


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_the_idls_types_and_unknown_field_ids_are_served(gateway, protocol):
    # The refused call with max_parts as i16 returns one partition, so the field matters: sent
    # as i32 HMS would have returned both.
    before = upstream_calls(gateway)
    status, parts = call(gateway, protocol, "get_partitions", [*TABLE_ARGS, (3, TType.I16, 1)])
    assert status == 200 and len(parts) == 1
    status, parts = call(gateway, protocol, "get_partitions", TABLE_ARGS)  # IDL default -1: all
    assert status == 200 and len(parts) == 2
    # an id the 2.3 IDL does not know is carried by its wire type (a newer client's field)
    status, parts = call(gateway, protocol, "get_partitions", [*TABLE_ARGS, (3, TType.I16, 1), (40, TType.I32, 1)])
    assert status == 200 and len(parts) == 1
    status, names = call(gateway, protocol, "get_partitions_by_names",
                         [*TABLE_ARGS, (3, TType.LIST, (TType.STRING, ["hair_color=black"]))])
    assert status == 200 and [p.values for p in names] == [["black"]]
    assert upstream_calls(gateway) == before + 4


def test_a_hand_written_tjson_call_gets_the_same_reason(gateway):
    body = json.dumps([1, "get_partitions", 1, 1, {"1": {"str": DB}, "2": {"str": TABLE}, "3": {"i32": 1}}])
    status, _, text = post(gateway, body)
    assert (status, text) == (400, b"malformed Thrift message: get_partitions: field 3 (max_parts) "
                                   b"is i16 in the IDL, got i32\n")
