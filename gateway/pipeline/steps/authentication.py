"""Authentication (Knox: the authentication provider of a topology): the first provider that
establishes a principal wins; none → 401 with every challenge of the topology (RFC 9110 §11.6.1).
Password checks spend the client address's budget (:mod:`gateway.providers.authentication.throttle`):
a spent budget raises ``Throttled`` (429)."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import hdrs

from gateway.client_address import client_address
from gateway.config import ConfigError, GatewayConfig, Providers
from gateway.observability import metrics
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Unauthenticated
from gateway.pipeline.step import Step, StepContext
from gateway.providers.authentication.base import AuthenticationProvider, well_formed
from gateway.providers.authentication.throttle import THROTTLE, AuthFailureThrottle, Throttled

log = logging.getLogger(__name__)


def authentication_providers(providers: Providers, gateway: GatewayConfig,
                             source: Path | str) -> tuple[AuthenticationProvider, ...]:
    """Each ``providers.authentication`` entry's authenticator, made by its settings model (see
    the provider registry); ``source`` is the topology file, for errors.

    Raises :class:`ConfigError` when a provider's ``check`` finds the gateway file lacking.
    """
    for i, provider in enumerate(providers.authentication):
        reason = provider.check(gateway)
        if reason:
            raise ConfigError(source, f"providers.authentication[{i}]", reason)
    return tuple(provider.build() for provider in providers.authentication)


def topology_providers(ctx: StepContext) -> tuple[AuthenticationProvider, ...]:
    """The authenticators of ``ctx``'s topology, built once per topology build: the
    authentication step checks credentials with them, identity assertion looks ``doAs``
    targets up in those that are user directories. Raises :class:`ConfigError` as
    :func:`authentication_providers`."""
    assert ctx.providers is not None
    return ctx.per_topology("authentication-providers",
                            lambda: authentication_providers(ctx.providers, ctx.gateway, ctx.source))


class Authentication(Step):
    """Sets ``exchange.principal``. Raises :class:`Unauthenticated` or ``Throttled``."""

    name = "authentication"

    def __init__(self, topology: str, providers: tuple[AuthenticationProvider, ...],
                 throttle: AuthFailureThrottle):
        self.topology, self.providers, self.throttle = topology, providers, throttle
        self.challenges = [(hdrs.WWW_AUTHENTICATE, c) for p in providers if (c := p.challenge())]
        self._counters: dict[tuple[str, str], object] = {}

    @classmethod
    def build(cls, ctx: StepContext) -> "Authentication":
        """One per topology: its providers and one failure throttle for all its services.
        Raises :class:`ConfigError` as :func:`authentication_providers`."""
        providers = ctx.providers
        assert providers is not None

        def make() -> "Authentication":
            built = topology_providers(ctx)
            throttle = AuthFailureThrottle(providers.failure_throttle, topology=ctx.topology)
            return cls(ctx.topology, built, throttle)

        return ctx.per_topology(cls.name, make)

    def _counted(self, provider: str, outcome: str):
        """The ``hms_gateway_authentication_total`` child of (provider, outcome), kept here: one
        dict lookup per request rather than building the label key each time."""
        counter = self._counters.get((provider, outcome))
        if counter is None:
            counter = self._counters[(provider, outcome)] = metrics.child(
                metrics.AUTHENTICATION, self.topology, provider, outcome)
        return counter

    async def on_request(self, exchange: Exchange) -> None:
        request = exchange.request
        request[THROTTLE] = self.throttle  # the providers' password checks spend its budget
        try:
            for provider in self.providers:
                principal = await provider.authenticate(request)
                if principal is not None and not well_formed(principal):
                    log.info("401 %s: %s gave a user or group name that is empty, not UTF-8 or "
                             "holds control characters", self.topology, provider.name)
                    principal = None
                if principal is not None or request.headers.get(hdrs.AUTHORIZATION):
                    self._counted(provider.name, "success" if principal else "failure").inc()
                if principal is not None:
                    exchange.principal, exchange.event.user = principal, principal.name
                    return
        except Throttled:
            log.warning("429 %s: password checks from %s refused: too many failures",
                        self.topology, client_address(request))
            raise
        log.info("401 %s from %s", self.topology, client_address(request))
        raise Unauthenticated("authentication required", self.challenges)
