"""The request pipeline: the one table of outcomes, step chains, and reply-side steps that see
(and may change) only the replies of the methods they declared."""

from __future__ import annotations

import asyncio
import json
import struct
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import RawTestServer, TestClient

from gateway.config import Limits, ServiceConfig
from gateway.handler import GatewayHandler
from gateway.limits import ConcurrencyLimiter
from gateway.pipeline import outcomes
from gateway.pipeline.step import Chain, Step
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.throttle import Throttled
from gateway.hms_thrift.kind import ThriftRpcService
from gateway.hms_thrift.step import ThriftChain, ThriftStep
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import load_schema
from gateway.topology import Router, Service, Topology
from gateway.upstream.errors import UpstreamBadReply, UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import CALL, FakeHMS, ScriptedServer, answer, list_of_strings_reply

PATH = "api/hms"


@pytest.mark.parametrize("error, status, label", [
    (outcomes.NotFound("x"), 404, "not_found"),
    (outcomes.Unauthenticated("x", [("WWW-Authenticate", "Basic realm=\"r\"")]), 401, "unauthenticated"),
    (Throttled(7), 429, "throttled"),
    (ProtocolError("bad"), 400, "bad_request"),
    (UpstreamTimeout("slow"), 504, "upstream_timeout"),
    (UpstreamBadReply("wrong"), 502, "upstream_unavailable"),
    (outcomes.Overloaded("busy", {"Retry-After": "1"}), 503, "overloaded"),
])
def test_every_ending_has_one_row_in_the_status_table(error, status, label):
    response, outcome = outcomes.response_for(error)
    assert (response.status, outcome) == (status, label)
    if isinstance(error, Throttled):
        assert response.headers["Retry-After"] == "7"
    if isinstance(error, outcomes.Unauthenticated):
        assert response.headers["WWW-Authenticate"] == 'Basic realm="r"'


def test_an_error_outside_the_table_is_a_bug_not_a_status():
    with pytest.raises(KeyError):
        outcomes.status_of(ValueError("x"))


class _Anonymous(Step):
    """Stands in for authentication (no identity: the scripted HMS knows no set_ugi)."""

    async def on_request(self, exchange):
        exchange.principal = Principal("alice", "test")


class _HideDefault(ThriftStep):
    reply_methods = frozenset({"get_all_databases"})

    def __init__(self):
        self.seen = []

    async def on_reply(self, exchange, reply):
        self.seen.append(reply.header.name)
        result = reply.result
        result.success = [name for name in result.success if name != "default"]
        reply.replace(result)


def test_a_chain_calls_only_the_hooks_a_step_defines():
    anonymous, hide = _Anonymous(), _HideDefault()
    chain = Chain([anonymous, hide])
    assert chain._request == ((anonymous.on_request, True),)
    calls = ThriftChain(chain)
    assert calls._call == ()
    assert calls.reply_steps("get_all_databases") == (hide,) and calls.reply_steps("get_table") == ()


def test_the_shared_step_has_only_the_request_hook():
    """The call and reply hooks read Thrift: they are the Thrift wing's (issue 48), and a
    shared step that defines an ``on_call`` is not run on the call side."""
    class Shared(Step):
        def on_call(self, exchange):
            raise AssertionError("a shared step has no call side")

    assert not {"on_call", "on_reply", "reply_methods", "wants_reply"} & set(dir(Step))
    recorder = _Recorder([])
    assert ThriftChain(Chain([Shared(), recorder]))._call == ((recorder.on_call, False),)


class _Recorder(ThriftStep):
    """A plain-method step (no coroutine) between coroutine steps."""

    def __init__(self, seen: list, refuse: bool = False):
        self.seen, self.refuse = seen, refuse

    def on_request(self, exchange):
        self.seen.append(("plain", exchange.principal.name))
        if self.refuse:
            raise outcomes.Forbidden("forbidden: test")

    def on_call(self, exchange):
        self.seen.append(("plain call", exchange.principal.name))


class _AsyncRecorder(Step):
    def __init__(self, seen: list):
        self.seen = seen

    async def on_request(self, exchange):
        await asyncio.sleep(0)
        self.seen.append(("coroutine", exchange.principal.name))


async def test_plain_and_coroutine_hooks_run_in_order_and_a_plain_one_can_end_the_request():
    seen: list = []
    exchange = SimpleNamespace(principal=None)
    chain = Chain([_Anonymous(), _Recorder(seen), _AsyncRecorder(seen)])
    assert [awaited for _, awaited in chain._request] == [True, False, True]
    await chain.on_request(exchange)
    await ThriftChain(chain).on_call(exchange)
    assert seen == [("plain", "alice"), ("coroutine", "alice"), ("plain call", "alice")]
    seen.clear()
    refusing = Chain([_Anonymous(), _Recorder(seen, refuse=True), _AsyncRecorder(seen)])
    with pytest.raises(outcomes.Forbidden):
        await refusing.on_request(exchange)
    assert seen == [("plain", "alice")]  # the steps after it never ran


async def test_a_reply_step_changes_the_reply_of_its_method():
    schema = load_schema()
    hide = _HideDefault()
    async with FakeHMS() as hms:
        upstream = Upstream([UpstreamPool(hms.url)])
        chain = Chain([_Anonymous(), hide])
        config = ServiceConfig(path=PATH, upstream={"urls": [hms.url]}, options={"methods": ["get_all_databases"]})
        service = Service("t", config, ConcurrencyLimiter(None),
                          ThriftRpcService("t", PATH, upstream, chain, schema, Limits()))
        handler = GatewayHandler(Router({"t": Topology("t", {PATH: service})}))
        async with TestClient(RawTestServer(handler)) as client:
            response = await client.post(f"/gateway/t/{PATH}", data=b'[1,"get_all_databases",1,9,{}]')
            body = await response.read()
        await upstream.close()
    assert response.status == 200, body
    assert json.loads(body) == [1, "get_all_databases", 2, 9, {"0": {"lst": ["str", 1, "x" * 5000]}}]
    assert hide.seen == ["get_all_databases"]


class _BigReplyHMS(ScriptedServer):
    """Answers each get_all_databases call with a ~2 MB reply carrying the call's seqid."""

    REPLY = list_of_strings_reply("get_all_databases", 1, [f"db{i:05d}-" + "x" * 500 for i in range(4000)])

    async def _serve(self, reader, writer):
        self.writers.append(writer)
        try:
            while True:
                writer.write(answer(await reader.readexactly(len(CALL)), self.REPLY))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


async def test_a_large_binary_reply_goes_out_whole_in_slices():
    """Non-streamed replies over 64 KiB are written in slices (bounded TLS buffers); the client
    still gets every byte, with its own seqid."""
    schema = load_schema()
    async with _BigReplyHMS() as hms:
        upstream = Upstream([UpstreamPool(hms.url)])
        config = ServiceConfig(path=PATH, upstream={"urls": [hms.url]}, options={"methods": ["get_all_databases"]})
        service = Service("t", config, ConcurrencyLimiter(None),
                          ThriftRpcService("t", PATH, upstream, Chain([_Anonymous()]), schema, Limits()))
        handler = GatewayHandler(Router({"t": Topology("t", {PATH: service})}))
        call = CALL[:25] + struct.pack("!i", 4242) + CALL[29:]
        async with TestClient(RawTestServer(handler)) as client:
            response = await client.post(f"/gateway/t/{PATH}", data=call)
            body = await response.read()
        await upstream.close()
    assert response.status == 200 and len(body) > 1 << 20
    assert body == answer(call, _BigReplyHMS.REPLY)


class _SeesSent:
    """An observer that records, for each response, whether it had been sent when it ran."""

    def __init__(self):
        self.seen: list[tuple[str, bool, bool]] = []

    def on_response(self, event, response, outcome):
        self.seen.append((outcome, response.prepared, "X-Request-Id" in response.headers))


@pytest.mark.parametrize("steps, target, outcome", [
    ([_Anonymous()], f"/gateway/t/{PATH}", "ok"),  # streamed: the pool completes the response
    ([_Anonymous(), _HideDefault()], f"/gateway/t/{PATH}", "ok"),  # read whole by a reply step
    ([_Anonymous()], "/gateway/t/nowhere", "not_found"),  # ended before any service
])
async def test_observers_run_after_the_response_was_sent(steps, target, outcome):
    schema = load_schema()
    observer = _SeesSent()
    async with FakeHMS() as hms:
        upstream = Upstream([UpstreamPool(hms.url)])
        config = ServiceConfig(path=PATH, upstream={"urls": [hms.url]}, options={"methods": ["get_all_databases"]})
        service = Service("t", config, ConcurrencyLimiter(None),
                          ThriftRpcService("t", PATH, upstream, Chain(steps), schema, Limits()))
        handler = GatewayHandler(Router({"t": Topology("t", {PATH: service})}), [observer])
        async with TestClient(RawTestServer(handler)) as client:
            response = await client.post(target, data=b'[1,"get_all_databases",1,9,{}]')
            await response.read()
        await upstream.close()
    assert response.headers["X-Request-Id"]
    assert observer.seen == [(outcome, True, True)]
