"""``set_ugi`` answered from the authenticated identity: a client cannot claim to be someone else.

Hive's metastore client calls ``set_ugi(user_name, group_names)`` right after connecting
(``hive.metastore.execute.setugi``, on by default since Hive 2.3), and an unsecured HMS acts as
the user named there for the rest of that connection. Forwarded through the gateway, the call
would rebind a pooled upstream connection to whatever name the client wrote. This step answers
it itself, as HMS 2.3's ``HMSHandler.set_ugi`` does (it returns ``group_names`` with
``user_name`` appended), but with the gateway's identity: the effective user and the groups
the gateway knows, never the client's arguments. The upstream already acts as that identity
(:mod:`gateway.upstream.ugi` binds each connection to it).

It runs after method exposure and the service ACL, so ``set_ugi`` must be among the service's
``options.methods``; it runs before the catalog policy, which has no catalog object to judge in it.
"""

from __future__ import annotations

import logging

from gateway.hms_thrift.exchange import ThriftExchange
from gateway.pipeline.outcomes import Served
from gateway.hms_thrift.step import ThriftStep
from gateway.pipeline.step import StepContext
from gateway.thrift.objects import encode_reply
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.ugi import SET_UGI

log = logging.getLogger(__name__)


class UgiAnswered(Served):
    """``set_ugi`` answered by the gateway (a normal reply, not a refusal)."""


def set_ugi_result(user: str, groups: frozenset[str] | set[str]) -> list[str]:
    """What HMS's ``set_ugi`` returns for ``user`` in ``groups``: the groups (sorted, so the
    answer is stable) followed by the user name."""
    return [*sorted(groups), user]


class UgiClaim(ThriftStep):
    """Answers ``set_ugi`` (raises :class:`UgiAnswered` with a strict-binary REPLY of the
    call's seqid); every other method passes untouched."""

    name = "ugi-claim"

    def __init__(self, topology: str, service: str, schema: ServiceSchema):
        self.topology, self.service = topology, service
        self.method = schema.methods.get(SET_UGI)  # None: an IDL without it, nothing to answer

    @classmethod
    def build(cls, ctx: StepContext) -> "UgiClaim":
        return cls(ctx.topology, ctx.config.path, ctx.schema)

    def on_call(self, exchange: ThriftExchange) -> None:
        header = exchange.header
        assert header is not None
        if header.name != SET_UGI or self.method is None:
            return
        identity = exchange.identity
        assert identity is not None  # identity assertion ran before
        result = self.method.result_class()  # type: ignore[misc]
        result.success = set_ugi_result(identity.user, identity.groups)
        # The claim itself is not decoded: whatever the client wrote has no effect.
        log.debug("set_ugi on %s/%s answered as %s", self.topology, self.service, identity.user)
        raise UgiAnswered(f"set_ugi answered with the authenticated identity {identity.user}",
                          encode_reply(SET_UGI, header.seqid, result))
