"""What every authentication provider returns, and the interface the dispatch calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

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


#: Request key under which providers leave headers for the response (SPNEGO mutual-auth token,
#: session ``Set-Cookie``); the dispatcher copies them onto whatever response it sends.
RESPONSE_HEADERS = "gateway.authentication.response_headers"


def add_response_header(request: web.Request, name: str, value: str) -> None:
    """Ask the dispatcher to send ``name: value`` with this request's response."""
    request.setdefault(RESPONSE_HEADERS, []).append((name, value))


def presented_credentials(request: web.Request) -> bool:
    """Whether the request carries something that claims to be credentials (header or cookie)."""
    return bool(request.headers.get("Authorization") or request.cookies)
