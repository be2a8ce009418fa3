"""The ugi-claim step: ``set_ugi`` answered from the gateway's identity, never the client's claim."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gateway.pipeline.outcomes import Answered, status_of
from gateway.hms_thrift.steps.ugi_claim import UgiAnswered, UgiClaim, set_ugi_result
from gateway.thrift.objects import decode_struct
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import REPLY, encode_binary_call, read_message_header
from gateway.thrift.schema import TType, load_schema

SCHEMA = load_schema()


def _exchange(call: bytes, user: str = "etl", groups=frozenset({"staff", "analysts"})):
    header, _ = read_message_header(call)
    identity = Identity(user, Principal(user, "htpasswd"), frozenset(groups))
    return SimpleNamespace(header=header, call=call, identity=identity)


async def test_set_ugi_answered_with_the_authenticated_identity():
    step = UgiClaim("t", "svc", SCHEMA)
    spoof = encode_binary_call("set_ugi", 17, [(1, TType.STRING, "admin"), (2, TType.LIST, ["supergroup"])])
    with pytest.raises(UgiAnswered) as info:
        step.on_call(_exchange(spoof))
    assert isinstance(info.value, Answered)
    header, _ = read_message_header(info.value.reply)
    assert (header.name, header.type, header.seqid) == ("set_ugi", REPLY, 17)
    result = decode_struct(info.value.reply, SCHEMA.methods["set_ugi"].result_class)
    # HMS 2.3 returns group_names + [user_name]; here: the gateway's groups and user.
    assert result.success == ["analysts", "staff", "etl"]
    assert "admin" not in info.value.reply.decode("latin-1")
    # an ordinary answer, not a refusal: audited and counted as ok
    assert status_of(info.value) == (200, "ok")


async def test_other_methods_pass():
    step = UgiClaim("t", "svc", SCHEMA)
    call = encode_binary_call("get_database", 1, [(1, TType.STRING, "sales")])
    exchange = _exchange(call)
    step.on_call(exchange)  # no outcome
    assert exchange.call == call


def test_set_ugi_result_shape():
    assert set_ugi_result("u", frozenset()) == ["u"]
    assert set_ugi_result("u", {"b", "a"}) == ["a", "b", "u"]
