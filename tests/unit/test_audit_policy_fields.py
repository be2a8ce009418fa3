"""The audit contract (gateway.observability.audit): on a service with a catalog policy, the
audit line of a policy decision has the same policy fields whatever the kind. One listing per
kind, where alice may see ``sales`` but not ``hr``: the Glue kind (GetDatabases), the Iceberg
REST kind (listNamespaces), both through the HTTP frame's ``record_policy``, the Thrift policy
step (get_all_databases) and the change feed (a long poll over events on both)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from unittest import mock

from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from gateway.config import Limits
from gateway.events.feed import ChangeFeed
from gateway.upstream.notification_event import MetastoreEvent
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.reply import Reply
from gateway.pipeline.steps.catalog_policy import CatalogPolicy
from gateway.policy import PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.services.event_stream import EventStreamOptions, EventStreamService
from gateway.services.glue import GlueOptions, GlueService
from gateway.services.iceberg_rest import IcebergRestOptions, IcebergRestService
from gateway.thrift import objects as thrift_objects
from gateway.thrift.binary import encode_binary_call, read_message_header
from tests.unit.test_glue_shapes import IDL, SCHEMA

ENGINE = PolicyEngine([Policy(7, "alice reads sales", (ResourceSpec(("sales",)), ResourceSpec(("*",)),
                                                       ResourceSpec(("*",))),
                              allow=(PolicyItem(expand_accesses(["select"]), frozenset({"alice"})),))])
ALICE = Identity("alice", Principal("alice", "basic"), frozenset())
#: The policy fields of every kind's line, and their values for this listing.
EXPECTED = {"policy_decision": "allowed", "policy_access": "_any", "policy_id": None,
            "policy_hidden": 1, "policy_columns_hidden": 0, "policy_restricted": []}


def policy_fields(event: AuditEvent) -> dict:
    line = json.loads(event.line("ok", 200))
    return {key: value for key, value in line.items() if key.startswith("policy_")}


class Alice:
    """The request-side steps: alice is the identity."""

    async def on_request(self, exchange: Exchange) -> None:
        exchange.identity = ALICE


class Metastore:
    """HMS for Glue: two databases."""

    async def call(self, message: bytes, **_):
        header, _ = read_message_header(message)
        result = SCHEMA.methods[header.name].result_class
        if header.name == "get_all_databases":
            return thrift_objects.encode_reply(header.name, header.seqid, result(success=["hr", "sales"]))
        return thrift_objects.encode_reply(header.name, header.seqid,
                                           result(success=IDL.Database(name="sales", parameters={})))


async def test_glue():
    body = b"{}"
    reader = StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=asyncio.get_running_loop())
    reader.feed_data(body)
    reader.feed_eof()
    request = make_mocked_request("POST", "/gateway/t/glue", payload=reader, headers={
        "X-Amz-Target": "AWSGlue.GetDatabases", "Content-Type": "application/x-amz-json-1.1",
        "Content-Length": str(len(body))})
    exchange = Exchange(request, AuditEvent("r", None))
    service = GlueService("t", "glue", Metastore(), Alice(), SCHEMA, ENGINE, Limits(), GlueOptions())
    response, outcome = await service.handle(exchange)  # type: ignore[arg-type]
    assert outcome == "ok", response.body
    assert [d["Name"] for d in json.loads(response.body)["DatabaseList"]] == ["sales"]
    assert policy_fields(exchange.event) == EXPECTED


async def test_iceberg_rest():
    request = make_mocked_request("GET", "/gateway/t/ice/v1/namespaces")
    exchange = Exchange(request, AuditEvent("r", None))
    service = IcebergRestService("t", "ice", Metastore(), Alice(), SCHEMA, ENGINE, Limits(),  # type: ignore[arg-type]
                                 IcebergRestOptions())
    response, outcome = await service.handle(exchange)
    assert outcome == "ok", response.body
    assert json.loads(response.body)["namespaces"] == [["sales"]]
    assert policy_fields(exchange.event) == EXPECTED


async def test_hms_thrift():
    step = CatalogPolicy("t", "hms", ENGINE, SCHEMA)
    call = encode_binary_call("get_all_databases", 7, [])
    exchange = Exchange(None, AuditEvent("r", None), identity=ALICE,  # type: ignore[arg-type]
                        header=read_message_header(call)[0], call=call)
    result = SCHEMA.methods["get_all_databases"].result_class(success=["hr", "sales"])
    reply = Reply(thrift_objects.encode_reply("get_all_databases", 7, result), SCHEMA)
    await step.on_call(exchange)
    await step.on_reply(exchange, reply)
    assert reply.result.success == ["sales"]
    assert policy_fields(exchange.event) == EXPECTED


class Log:
    """HMS's notification log: one event on each database."""

    events = [MetastoreEvent(i, 0, "CREATE_TABLE", db, "t", {}, "json-0.2") for i, db in ((1, "hr"), (2, "sales"))]

    async def current_id(self) -> int:
        return 2

    async def next_events(self, after: int, max_events: int):
        return [e for e in self.events if e.event_id > after][:max_events]


async def test_event_stream():
    feed = ChangeFeed(Log(), labels=("t", "events"))  # type: ignore[arg-type]
    await feed.poll_once()
    service = object.__new__(EventStreamService)
    service.options, service.chain, service.policy, service.feed = EventStreamOptions(), Alice(), ENGINE, feed
    service.topology, service.path, service.source, service._streams = "t", "events", "/gateway/t/events", set()
    service._delivered = SimpleNamespace(inc=lambda n=1: None)
    exchange = Exchange(make_mocked_request("GET", "/gateway/t/events?after=0"), AuditEvent("r", None))
    response, outcome = await service.handle(exchange)
    assert outcome == "ok"
    assert [e["db"] for e in json.loads(response.text)["events"]] == ["sales"]
    assert policy_fields(exchange.event) == EXPECTED
