"""event-stream service parts without servers: query validation, options, bodies, per-user
column removal from Thrift objects embedded in HMS messages."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from gateway.config import ConfigError
from gateway.upstream.notification_event import MetastoreEvent
from gateway.policy import load_policy_file
from gateway.services.base import validate_options
from gateway.policy.view import CatalogView
from gateway.services.event_stream import BadQuery, EventStreamOptions, _filter_message, _keep, _Query, _visible

POLICY = """
policies:
  - id: 1
    name: alice reads sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{users: [alice], accesses: [select]}]
  - id: 2
    name: but not customers
    resources: {database: [sales], table: [orders], column: [customer]}
    deny: [{users: [alice], accesses: [select]}]
"""


def query(qs: str, headers=None, sse=False) -> _Query:
    return _Query(make_mocked_request("GET", "/gateway/default/events?" + qs, headers=headers or {}), 60, sse)


@pytest.mark.parametrize("qs", ["after=x", "after=-1", "limit=0", "limit=1001", "wait=nan", "wait=-0.5",
                                "wait=61", "wait=abc", "format=xml", "db=" + "a" * 2000])
def test_bad_query_values_are_refused(qs):
    with pytest.raises(BadQuery):
        query(qs)


def test_query_defaults_and_last_event_id():
    q = query("")
    assert (q.after, q.limit, q.wait, q.db, q.types, q.cloudevents) == (None, 1000, 0.0, None, None, False)
    q = query("after=5&types=add_partition, DROP_TABLE&db=Sales&format=cloudevents")
    assert q.after == 5 and q.types == {"ADD_PARTITION", "DROP_TABLE"} and q.db == "sales" and q.cloudevents
    assert query("after=5", {"Last-Event-ID": "9"}, sse=True).after == 9
    assert query("after=5", {"Last-Event-ID": "9"}).after == 5  # long poll ignores it
    with pytest.raises(BadQuery):
        query("", {"Last-Event-ID": "9x"}, sse=True)


def test_options_errors_name_the_key():
    assert validate_options(EventStreamOptions, "t.yaml", 2, "event-stream", {}).ring_size == 10_000
    with pytest.raises(ConfigError, match=r"services\[2\]\.options\.ring_size"):
        validate_options(EventStreamOptions, "t.yaml", 2, "event-stream", {"ring_size": 0})
    with pytest.raises(ConfigError, match=r"services\[2\]\.options\.bogus"):
        validate_options(EventStreamOptions, "t.yaml", 2, "event-stream", {"bogus": 1})


def table_tjson(db: str, table: str, cols: list[str], params: dict[str, str]) -> str:
    fields = [{"1": {"str": c}, "2": {"str": "string"}} for c in cols]
    return json.dumps({"1": {"str": table}, "2": {"str": db},
                       "7": {"rec": {"1": {"lst": ["rec", len(fields), *fields]}}},
                       "9": {"map": ["str", "str", len(params), params]}})


@pytest.fixture
def viewer(tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    return CatalogView(load_policy_file(tmp_path / "p.yaml"), "alice", frozenset())


def event(db, table, message=None, kind="ALTER_TABLE"):
    return MetastoreEvent(1, 1, kind, db, table, message or {}, "json-0.2")


def test_viewer_sees_only_granted_objects_and_fails_closed(viewer):
    assert _visible(viewer, event("sales", "orders")) and _visible(viewer, event("SALES", None))
    assert not _visible(viewer, event("hr", "pay")) and not _visible(viewer, event(None, None))
    assert _keep(viewer, event("sales", "items")) is None  # every column allowed


def test_denied_columns_leave_embedded_tables_and_partitions(viewer):
    stats = json.dumps({"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true", "customer": "true"}})
    before = table_tjson("sales", "orders", ["id", "customer"], {"COLUMN_STATS_ACCURATE": stats, "k": "v"})
    part = json.dumps({"1": {"lst": ["str", 1, "2024"]},
                       "6": {"rec": {"1": {"lst": ["rec", 2, {"1": {"str": "id"}}, {"1": {"str": "customer"}}]}}}})
    message = {"db": "sales", "table": "orders", "tableObjBeforeJson": before, "tableObjAfterJson": before,
               "partitionListJson": [part], "unknownObjJson": "{}", "keyValues": {"y": "2024", "customer": "x"},
               "partitions": [{"y": "1", "customer": "a"}]}
    ev = event("sales", "orders", message)
    out = _filter_message(message, _keep(viewer, ev))
    assert "unknownObjJson" not in out and out["keyValues"] == {"y": "2024"} and out["db"] == "sales"
    assert out["partitions"] == [{"y": "1"}]  # a partition key is a column too
    table = json.loads(out["tableObjAfterJson"])
    assert [c["1"]["str"] for c in table["7"]["rec"]["1"]["lst"][2:]] == ["id"]
    assert table["7"]["rec"]["1"]["lst"][1] == 1
    params = table["9"]["map"][3]
    assert params["k"] == "v" and json.loads(params["COLUMN_STATS_ACCURATE"])["COLUMN_STATS"] == {"id": "true"}
    (p,) = [json.loads(x) for x in out["partitionListJson"]]
    assert [c["1"]["str"] for c in p["6"]["rec"]["1"]["lst"][2:]] == ["id"]


def test_unreadable_embedded_objects_are_dropped(viewer):
    ev = event("sales", "orders")
    out = _filter_message({"tableObjJson": "not json", "partitionListJson": ["[1]", "nope"]}, _keep(viewer, ev))
    assert "tableObjJson" not in out and out["partitionListJson"] == []


# --- the SSE path against a scripted feed (aiohttp test server) ------------------------------

class ScriptedFeed:
    """wait_after answers from ``script``: a list of event lists or exceptions, then blocks."""

    def __init__(self, script):
        self.script, self.ready, self.latest_id, self.calls = list(script), True, 0, []

    async def wait_ready(self, timeout):
        return None

    def events_after(self, after, limit):
        return []

    async def reach(self, after):
        return None

    def known_types(self):
        from gateway.events.feed import EVENT_TYPES

        return EVENT_TYPES

    async def wait_after(self, after, timeout, limit=1000):
        self.calls.append(after)
        if not self.script:
            await asyncio.sleep(timeout)
            return []
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def subscribed(self):
        return contextlib.nullcontext()


class OpenChain:
    """No authentication; leaves two response headers, as SPNEGO's session cookie does."""

    async def on_request(self, exchange):
        from gateway.providers.authentication.base import add_response_header

        exchange.identity = None
        add_response_header(exchange.request, "Set-Cookie", "a=1")
        add_response_header(exchange.request, "Set-Cookie", "b=2")


@contextlib.asynccontextmanager
async def sse_client(feed, heartbeat=30.0):
    from types import SimpleNamespace

    from gateway.observability.audit import AuditEvent
    from gateway.pipeline.exchange import Exchange
    from gateway.services.event_stream import EventStreamService

    service = object.__new__(EventStreamService)
    service.options = EventStreamOptions(heartbeat_seconds=heartbeat)
    service.topology, service.path, service.chain, service.policy = "t", "events", OpenChain(), None
    service.feed, service.source, service._streams = feed, "/gateway/t/events", set()
    service._delivered = SimpleNamespace(inc=lambda n=1: None)

    async def handler(request):
        response, _ = await service.handle(Exchange(request, AuditEvent("rid", None)))
        return response

    app = web.Application()
    app.router.add_get("/events", handler)
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_sse_sends_ids_then_ends_with_a_resync_event():
    from gateway.events.feed import Resync

    feed = ScriptedFeed([[event("db", None, {"db": "db"}, "CREATE_DATABASE")],
                         Resync("trimmed", "events after 1 were trimmed", 40)])
    async with sse_client(feed) as client, \
            client.get("/events?after=0", headers={"Accept": "text/event-stream"}) as r:
        assert r.status == 200 and r.headers["X-Request-Id"] == "rid"
        assert r.headers.getall("Set-Cookie") == ["a=1", "b=2"]  # what providers left, before the stream
        text = (await r.read()).decode()
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    first = blocks[0].splitlines()
    assert first[0] == "id: 1" and json.loads(first[1].removeprefix("data: "))["eventType"] == "CREATE_DATABASE"
    lines = blocks[1].splitlines()
    assert lines[0] == "event: resync"
    assert json.loads(lines[1][6:]) == {"error": "resync", "reason": "trimmed",
                                        "detail": "events after 1 were trimmed", "latest": 40}
    assert feed.calls == [0, 1]


async def test_sse_heartbeat_comments():
    async with sse_client(ScriptedFeed([]), heartbeat=0.2) as client, \
            client.get("/events?after=0", headers={"Accept": "text/event-stream"}) as r:
        first = await asyncio.wait_for(r.content.readline(), 10)
    assert first.startswith(b": ping")
