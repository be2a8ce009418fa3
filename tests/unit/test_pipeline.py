"""The request pipeline: the one table of outcomes, step chains, and reply-side steps that see
(and may change) only the replies of the methods they declared."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import RawTestServer, TestClient

from gateway.config import Limits, ServiceConfig
from gateway.dispatch import Dispatcher
from gateway.limits import ConcurrencyLimiter
from gateway.pipeline import outcomes
from gateway.pipeline.step import Chain, Step
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.throttle import Throttled
from gateway.services.thrift_rpc import ThriftRpcService
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import load_schema
from gateway.topology import Router, Service, Topology
from gateway.upstream.errors import UpstreamBadReply, UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import FakeHMS

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


class _HideDefault(Step):
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
    assert chain._request == (anonymous,) and chain._call == ()
    assert chain.reply_steps("get_all_databases") == (hide,) and chain.reply_steps("get_table") == ()


async def test_a_reply_step_changes_the_reply_of_its_method():
    schema = load_schema()
    hide = _HideDefault()
    async with FakeHMS() as hms:
        upstream = Upstream([UpstreamPool(hms.url)])
        chain = Chain([_Anonymous(), hide])
        config = ServiceConfig(path=PATH, upstream={"urls": [hms.url]}, methods=["get_all_databases"])
        service = Service("t", config, upstream, ConcurrencyLimiter(None),
                          ThriftRpcService("t", PATH, upstream, chain, schema, Limits()))
        dispatcher = Dispatcher(Router({"t": Topology("t", {PATH: service})}))
        async with TestClient(RawTestServer(dispatcher)) as client:
            response = await client.post(f"/gateway/t/{PATH}", data=b'[1,"get_all_databases",1,9,{}]')
            body = await response.read()
        await upstream.close()
    assert response.status == 200, body
    assert json.loads(body) == [1, "get_all_databases", 2, 9, {"0": {"lst": ["str", 1, "x" * 5000]}}]
    assert hide.seen == ["get_all_databases"]
