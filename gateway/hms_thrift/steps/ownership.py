"""Ownership assertion: objects created through the gateway are owned by the effective user
(:class:`gateway.providers.ownership.OwnerAssertion`; HMS 2.3 keeps whatever owner the client
wrote)."""

from __future__ import annotations


from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.step import ThriftStep
from gateway.pipeline.step import StepContext
from gateway.providers.ownership import OwnerAssertion


class OwnershipAssertion(ThriftStep):
    """Rewrites ``exchange.call``. Raises ``ProtocolError`` (400) for a malformed create call."""

    name = "ownership-assertion"

    def __init__(self, assertion: OwnerAssertion):
        self.assertion = assertion

    @classmethod
    def build(cls, ctx: StepContext) -> "OwnershipAssertion":
        """One per topology: the owner rules depend only on the IDL."""
        return ctx.per_topology(cls.name, lambda: cls(OwnerAssertion(ctx.schema)))

    def on_call(self, exchange: ThriftExchange) -> None:
        assert exchange.header is not None and exchange.identity is not None
        call = self.assertion.apply(exchange.call, exchange.header.name, exchange.identity.user)
        if call is not exchange.call:
            exchange.call, exchange.args = call, None  # arguments decoded earlier are the old call's
