"""Identity assertion (Knox: the identity-assertion provider): principal mapping, group mapping
and ``doAs`` impersonation turn the principal into the effective identity
(:class:`gateway.providers.identity.IdentityAsserter`). A refused ``doAs`` → 403.

Where the topology has user directories (LDAP) and impersonation is on, a ``doAs`` target is
looked up there, which may wait: that topology gets :class:`DirectoryIdentityAssertion`, whose
hook is a coroutine; every other keeps the plain hook (no coroutine per request)."""

from __future__ import annotations

import logging

from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Forbidden
from gateway.pipeline.step import Step, StepContext
from gateway.pipeline.steps.authentication import topology_providers
from gateway.providers.authentication.base import UserDirectory
from gateway.providers.identity import Identity, IdentityAsserter

log = logging.getLogger(__name__)


class IdentityAssertion(Step):
    """Sets ``exchange.identity``. Raises :class:`Forbidden`."""

    name = "identity-assertion"

    def __init__(self, topology: str, asserter: IdentityAsserter):
        self.topology, self.asserter = topology, asserter

    @classmethod
    def build(cls, ctx: StepContext) -> "IdentityAssertion":
        """One per topology, from ``providers.identity_assertion`` and the topology's user
        directories. Raises ``ConfigError`` as the authentication providers' build."""
        assert ctx.providers is not None
        config = ctx.providers.identity_assertion

        def make() -> IdentityAssertion:
            directories = [p for p in topology_providers(ctx) if isinstance(p, UserDirectory)]
            asserter = IdentityAsserter(config, directories)
            step = DirectoryIdentityAssertion if asserter.directories else IdentityAssertion
            return step(ctx.topology, asserter)
        return ctx.per_topology(cls.name, make)

    def on_request(self, exchange: Exchange) -> None:
        principal = exchange.principal
        assert principal is not None, "authentication runs first"
        try:
            identity = self.asserter.assert_identity(principal, exchange.request)
        except PermissionError as exc:
            raise self._refused(exchange, exc) from None
        self._asserted(exchange, identity)

    def _refused(self, exchange: Exchange, exc: PermissionError) -> Forbidden:
        assert exchange.principal is not None
        log.info("403 %s: identity assertion refused %s: %s", self.topology, exchange.principal.name, exc)
        exchange.event.reason = str(exc)
        return Forbidden(f"forbidden: {exc}")

    @staticmethod
    def _asserted(exchange: Exchange, identity: Identity) -> None:
        exchange.identity = identity
        exchange.event.effective_user, exchange.event.impersonator = identity.user, identity.impersonator


class DirectoryIdentityAssertion(IdentityAssertion):
    """:class:`IdentityAssertion` looking ``doAs`` targets up in the topology's user
    directories (waits on them). Raises :class:`Forbidden`, also when a lookup fails."""

    async def on_request(self, exchange: Exchange) -> None:  # type: ignore[override]
        principal = exchange.principal
        assert principal is not None, "authentication runs first"
        try:
            identity = await self.asserter.assert_identity_from_directories(principal, exchange.request)
        except PermissionError as exc:
            raise self._refused(exchange, exc) from None
        self._asserted(exchange, identity)
