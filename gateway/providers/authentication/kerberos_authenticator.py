"""The ``kerberos`` provider's run-time check (:mod:`gateway.providers.authentication.kerberos`:
SPNEGO as Hadoop's handler, name rules, the session cookie, the settings): the handshake with
python-gssapi in a worker thread; imported only when a topology names the provider."""

from __future__ import annotations

import asyncio
import base64
import logging

import gssapi
import gssapi.exceptions
from aiohttp import hdrs, web

from gateway.client_address import client_address
from gateway.providers.authentication.base import Principal, add_response_header
from gateway.providers.authentication.name_rules import NameRules
from gateway.providers.authentication.session_cookie import SessionCookies
from gateway.providers.authentication.settings import ProviderSettings

log = logging.getLogger(__name__)

_MAX_TOKEN_CHARS = 64 * 1024


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
    """SPNEGO acceptor for ``config.principal``; 401 challenge ``Negotiate``. ``config`` is the
    provider's :class:`~gateway.providers.authentication.kerberos.KerberosProvider` (not
    imported here: it names this class, so importing it back would be a circle)."""

    name = "kerberos"

    def __init__(self, config: ProviderSettings):
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
