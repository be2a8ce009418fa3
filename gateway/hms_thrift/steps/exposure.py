"""Method exposure: a service answers only the methods its topology lists in
``options.methods`` (the rest get a
``TApplicationException`` UNKNOWN_METHOD in the client's protocol, as a Thrift server answers
a method it does not have; nothing goes upstream)."""

from __future__ import annotations

import logging

from gateway.hms_thrift.exchange import ThriftExchange
from gateway.pipeline.outcomes import NotExposed
from gateway.hms_thrift.step import ThriftStep
from gateway.pipeline.step import StepContext
from gateway.thrift.translate import UNKNOWN_METHOD

log = logging.getLogger(__name__)


class MethodExposure(ThriftStep):
    """Raises :class:`NotExposed` for a method outside ``methods``."""

    name = "method-exposure"

    def __init__(self, topology: str, service: str, methods: frozenset[str]):
        self.topology, self.service, self.methods = topology, service, methods

    @classmethod
    def build(cls, ctx: StepContext) -> "MethodExposure":
        """From the kind's options' ``methods`` (a kind asking for this role has that option)."""
        return cls(ctx.topology, ctx.config.path, frozenset(ctx.options.methods))

    def on_call(self, exchange: ThriftExchange) -> None:
        header, codec = exchange.header, exchange.codec
        assert header is not None and codec is not None
        if header.name in self.methods:
            return
        user = exchange.identity.user if exchange.identity else None
        log.info("method %s not exposed by %s/%s (user %s)", header.name[:100], self.topology, self.service, user)
        reason = f"method {header.name} is not exposed by this service"
        body = codec.application_exception(header.name, header.seqid, reason, UNKNOWN_METHOD)
        raise NotExposed(reason, body, codec.content_type)
