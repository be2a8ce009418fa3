"""Kerberos via SPNEGO (RFC 4559), as Hadoop's ``KerberosAuthenticationHandler`` behind Knox.

* No or another ``Authorization``: not ours; the 401 offers ``WWW-Authenticate: Negotiate``.
* ``Authorization: Negotiate <token>``: the token is accepted with python-gssapi (the library
  under pyspnego) using credentials for the configured service principal from the configured
  keytab (``cred_store``, so each provider has its own keytab, no process-wide ``KRB5_KTNAME``).
  On success the reply carries the mutual-authentication token
  (``WWW-Authenticate: Negotiate <token>``, RFC 4559 §5) and, when ``cookie`` is configured,
  a signed session cookie so later requests skip the handshake.
* The Kerberos principal becomes a short user name through Hadoop ``auth_to_local`` rules
  (:mod:`.name_rules`); no mapping means 401.

Each handshake gets its own acceptor context and runs in a worker thread. MIT krb5's replay
cache (1.18+) keys entries on the authenticator itself, so concurrent clients (even the same
principal in the same second) are not mistaken for replays: the spurious-401 bug Knox users hit.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from pathlib import Path
from typing import ClassVar, Literal

import gssapi
import gssapi.exceptions
from aiohttp import hdrs, web
from pydantic import Field, field_validator

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal, add_response_header
from gateway.providers.authentication.name_rules import NameRules, parse_rules
from gateway.providers.authentication.session_cookie import SessionCookies
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import FrozenModel, ProviderSettings

log = logging.getLogger(__name__)

_MAX_TOKEN_CHARS = 64 * 1024


class SessionCookie(FrozenModel):
    """The signed cookie issued after a successful SPNEGO handshake (Knox: ``hadoop.auth``)."""

    name: str = "hadoop.auth"
    #: Key the cookie is signed (and encrypted) with; share it between gateway replicas.
    signing_key: Secret
    lifetime_seconds: int = Field(default=3600, gt=0, le=86400)


class KerberosProvider(ProviderSettings):
    """SPNEGO (RFC 4559) with a keytab, as Hadoop's ``KerberosAuthenticationHandler``.

    ``keytab`` may be a path or ``env:NAME`` (a variable holding the path).
    """

    type: Literal["kerberos"]
    #: Service principal, ``HTTP/<fully qualified host>@REALM``.
    principal: str
    keytab: Path
    #: Hadoop ``auth_to_local`` rules (``RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//``, ``DEFAULT``).
    name_rules: list[str] = Field(default_factory=lambda: ["DEFAULT"], min_length=1)
    cookie: SessionCookie | None = None

    path_fields: ClassVar[tuple[str, ...]] = ("keytab",)

    @field_validator("keytab", mode="before")
    @classmethod
    def _keytab_from_env(cls, value: object) -> object:
        if isinstance(value, str) and value.startswith("env:"):
            return Secret.from_reference(value).reveal()
        return value

    @field_validator("principal")
    @classmethod
    def _service_principal(cls, principal: str) -> str:
        service, slash, rest = principal.partition("/")
        host, at, realm = rest.partition("@")
        if not (service and slash and host and at and realm):
            raise ValueError(f"{principal!r} is not a service principal like HTTP/host@REALM")
        return principal

    @field_validator("name_rules")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        parse_rules(rules)  # raises ValueError naming the bad rule
        return rules

    def build(self) -> KerberosAuthenticator:
        return KerberosAuthenticator(self)


def negotiate_token(header: str | None) -> bytes | None:
    """The GSS token of ``Authorization: Negotiate <base64>``, else None (also when malformed)."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "negotiate" or not value or len(value) > _MAX_TOKEN_CHARS:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII characters in the header
        return None


class KerberosAuthenticator:
    """SPNEGO acceptor for ``config.principal``; 401 challenge ``Negotiate``."""

    name = "kerberos"

    def __init__(self, config: KerberosProvider):
        self.config = config
        realm = config.principal.rpartition("@")[2]
        self.rules = NameRules(config.name_rules, default_realm=realm)
        self._service = gssapi.Name(config.principal, gssapi.NameType.kerberos_principal)
        self._store = {"keytab": str(config.keytab)}
        self.cookies = (
            SessionCookies(config.cookie.name, config.cookie.signing_key.reveal(),
                           config.cookie.lifetime_seconds)
            if config.cookie else None
        )
        # Fail at start-up, not on the first request, when the keytab lacks the principal.
        self._credentials()

    def _credentials(self) -> gssapi.Credentials:
        return gssapi.Credentials(name=self._service, usage="accept", store=self._store)

    def challenge(self) -> str:
        return "Negotiate"

    def _accept(self, token: bytes) -> tuple[str, bytes | None]:
        """Blocking: ``(client principal, mutual-auth token)``; raises GSSError on a bad token."""
        ctx = gssapi.SecurityContext(creds=self._credentials(), usage="accept")
        out = ctx.step(token)
        if not ctx.complete:
            raise gssapi.exceptions.GSSError(0, 0)  # a multi-leg exchange HTTP cannot carry
        return str(ctx.initiator_name), out

    async def authenticate(self, request: web.Request) -> Principal | None:
        if self.cookies is not None:
            session = self.cookies.check(request.cookies.get(self.cookies.name))
            if session is not None:
                return Principal(name=session[0], provider=self.name)
        token = negotiate_token(request.headers.get(hdrs.AUTHORIZATION))
        if token is None:
            return None
        try:
            client, out = await asyncio.get_running_loop().run_in_executor(None, self._accept, token)
        except gssapi.exceptions.GSSError as exc:
            log.info("kerberos: handshake from %s failed: %s", client_address(request), _gss_reason(exc))
            return None
        user = self.rules.short_name(client)
        if user is None:
            log.info("kerberos: no auth_to_local rule maps %s (from %s)", client, client_address(request))
            return None
        if out:
            add_response_header(request, hdrs.WWW_AUTHENTICATE,
                                "Negotiate " + base64.b64encode(out).decode())
        if self.cookies is not None:
            add_response_header(request, hdrs.SET_COOKIE, self.cookies.issue(user, client))
        return Principal(name=user, provider=self.name)


def _gss_reason(exc: gssapi.exceptions.GSSError) -> str:
    try:
        return exc.gen_message()
    except Exception:  # noqa: BLE001 - a message for a log line only
        return type(exc).__name__
