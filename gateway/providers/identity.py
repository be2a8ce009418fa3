"""Identity assertion (Knox's term): from the authenticated principal to the effective user.

The effective user is who HMS is told acts (``set_ugi`` / ``x-actor-username``) and whom the
authorization provider judges. Without mapping rules it is the principal itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from gateway.providers.authentication.base import Principal


@dataclass(frozen=True)
class Identity:
    """The effective user and groups of a request, and the principal that authenticated it."""

    user: str
    principal: Principal
    groups: frozenset[str] = field(default_factory=frozenset)


class IdentityAsserter:
    """The default identity assertion: the effective user is the authenticated principal."""

    def assert_identity(self, principal: Principal, request: web.Request) -> Identity:
        """The :class:`Identity` a request acts as. Raises ``PermissionError`` (→ 403) if refused."""
        return Identity(user=principal.name, principal=principal, groups=principal.groups)
