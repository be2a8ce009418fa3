"""What every authentication provider returns, and the interface the authentication step calls."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from aiohttp import web


@dataclass(frozen=True)
class Principal:
    """An authenticated user: ``name`` as the provider established it, with its groups."""

    name: str
    provider: str
    groups: frozenset[str] = field(default_factory=frozenset)


class AuthenticationProvider(Protocol):
    """One way of authenticating a request (Knox: an authentication provider)."""

    #: Provider type, used in metrics and logs (``htpasswd``, ``ldap``, ``kerberos``, ``jwt``).
    name: str

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value this provider offers in a 401 (RFC 9110 §11.6.1)."""
        ...

    async def authenticate(self, request: web.Request) -> Principal | None:
        """The principal when the request carries valid credentials for this provider, else None.

        Must not raise for bad credentials; must not log them.
        """
        ...


class DirectoryUnavailable(Exception):
    """A user directory could not answer (unreachable, timed out, refused the service account or
    a search). The message names the directory, never a credential."""


@runtime_checkable
class UserDirectory(Protocol):
    """Provider role: an authentication provider that can find a user by name, as a login as
    that user would (LDAP). Identity assertion asks it for a ``doAs`` target, so that an
    impersonated user has the name and groups a direct login would give."""

    async def lookup(self, name: str) -> Principal | None:
        """The principal a login as ``name`` would establish: the directory's own spelling of
        the name and the user's groups; None when the directory has no such user.

        Raises :class:`DirectoryUnavailable` when the directory cannot answer.
        """
        ...


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def well_formed(principal: Principal) -> bool:
    """Whether the principal's name and groups can stand in HTTP headers, logs, audit lines and
    Thrift strings (``set_ugi``): non-empty, encodable as UTF-8 (no lone surrogates), without
    control characters. A validly signed token can still carry anything in its claims."""
    for name in (principal.name, *principal.groups):
        if not name or _CONTROL.search(name):
            return False
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


#: Request key under which providers leave headers for the response (SPNEGO mutual-auth token,
#: session ``Set-Cookie``); every response gets them (``gateway.pipeline.exchange.response_headers``).
RESPONSE_HEADERS = "gateway.authentication.response_headers"


def add_response_header(request: web.Request, name: str, value: str) -> None:
    """Send ``name: value`` with this request's response, whoever sends it."""
    request.setdefault(RESPONSE_HEADERS, []).append((name, value))

