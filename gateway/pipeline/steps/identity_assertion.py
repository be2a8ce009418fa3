"""Identity assertion (Knox: the identity-assertion provider): principal mapping, group mapping
and ``doAs`` impersonation turn the principal into the effective identity
(:class:`gateway.providers.identity.IdentityAsserter`). A refused ``doAs`` → 403."""

from __future__ import annotations

import logging

from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Forbidden
from gateway.pipeline.step import Step, StepContext
from gateway.providers.identity import IdentityAsserter

log = logging.getLogger(__name__)


class IdentityAssertion(Step):
    """Sets ``exchange.identity``. Raises :class:`Forbidden`."""

    name = "identity-assertion"

    def __init__(self, topology: str, asserter: IdentityAsserter):
        self.topology, self.asserter = topology, asserter

    @classmethod
    def build(cls, ctx: StepContext) -> "IdentityAssertion":
        """One per topology, from ``providers.identity_assertion``."""
        assert ctx.providers is not None
        config = ctx.providers.identity_assertion
        return ctx.per_topology(cls.name, lambda: cls(ctx.topology, IdentityAsserter(config)))

    def on_request(self, exchange: Exchange) -> None:
        principal = exchange.principal
        assert principal is not None, "authentication runs first"
        try:
            identity = self.asserter.assert_identity(principal, exchange.request)
        except PermissionError as exc:
            log.info("403 %s: identity assertion refused %s: %s", self.topology, principal.name, exc)
            exchange.event.reason = str(exc)
            raise Forbidden(f"forbidden: {exc}") from None
        exchange.identity = identity
        exchange.event.effective_user, exchange.event.impersonator = identity.user, identity.impersonator
