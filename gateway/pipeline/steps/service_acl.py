"""The service ACL (Knox's ``authorization`` provider, AclsAuthz: users; groups; ips): who may
use the service at all."""

from __future__ import annotations

import logging

from gateway.client_address import client_address
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Forbidden
from gateway.pipeline.step import Step, StepContext
from gateway.providers.authorization import Authorizer

log = logging.getLogger(__name__)


class ServiceAcl(Step):
    """Raises :class:`Forbidden` when the effective identity or client address is not in the ACL."""

    name = "authorization"

    def __init__(self, topology: str, service: str, authorizer: Authorizer):
        self.topology, self.service, self.authorizer = topology, service, authorizer

    @classmethod
    def build(cls, ctx: StepContext) -> "ServiceAcl":
        """From the service's ``authorization`` (None lets every authenticated identity in)."""
        return cls(ctx.topology, ctx.config.path, Authorizer(ctx.config.authorization))

    def on_request(self, exchange: Exchange) -> None:
        identity = exchange.identity
        assert identity is not None, "identity assertion runs first"
        reason = self.authorizer.deny_reason(identity, client_address(exchange.request))
        if reason is not None:
            exchange.event.reason = reason
            log.info("403 %s/%s: %s denied: %s", self.topology, self.service, identity.user, reason)
            raise Forbidden(f"forbidden: {reason}")
