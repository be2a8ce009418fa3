"""The ``ldap`` provider's run-time check (:mod:`gateway.providers.authentication.ldap`: the
two ways to find the user's entry, groups, TLS, the settings): binds and searches with ldap3 in
a worker thread, verified credentials cached; imported only when a topology names the provider."""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from urllib.parse import urlsplit

import ldap3
from aiohttp import web
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn, parse_dn

from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.basic import password_credentials
from gateway.providers.authentication.credential_cache import CredentialCache
from gateway.providers.authentication.settings import ProviderSettings
from gateway.providers.authentication.throttle import password_check

log = logging.getLogger(__name__)


class LdapAuthenticator:
    """Basic (RFC 7617) against LDAP; 401 challenge ``Basic realm="<realm>"``. ``config`` is the
    provider's :class:`~gateway.providers.authentication.ldap.LdapProvider` (not imported here:
    it names this class, so importing it back would be a circle)."""

    name = "ldap"
    #: Checks user and password (Basic, or a form's client credentials: basic.password_credentials).
    checks_passwords = True

    def __init__(self, config: ProviderSettings, cache: CredentialCache | None = None):
        self.config = config
        self.realm = config.realm
        self._cache = cache if cache is not None else CredentialCache(config.cache_ttl_seconds)
        parts = urlsplit(config.url)
        use_ssl = parts.scheme == "ldaps"
        tls = None
        if use_ssl or config.start_tls:
            tls = ldap3.Tls(
                validate=ssl.CERT_REQUIRED,
                version=ssl.PROTOCOL_TLS_CLIENT,
                ca_certs_file=str(config.ca_file) if config.ca_file else None,
            )
        self._server = ldap3.Server(
            parts.hostname, port=parts.port or (636 if use_ssl else 389), use_ssl=use_ssl,
            tls=tls, get_info=ldap3.NONE, connect_timeout=config.timeout_seconds,
        )

    def challenge(self) -> str:
        return f'Basic realm="{self.realm}", charset="UTF-8"'

    def _connection(self, user: str | None = None, password: str | None = None) -> ldap3.Connection:
        conn = ldap3.Connection(
            self._server, user=user, password=password, auto_bind=ldap3.AUTO_BIND_NONE,
            receive_timeout=math.ceil(self.config.timeout_seconds), raise_exceptions=False,
            read_only=True,
        )
        conn.open()
        if self.config.start_tls and not conn.start_tls():
            conn.unbind()
            raise LDAPException(f"StartTLS refused: {conn.result.get('description')}")
        return conn

    def _find_user_dn(self, user: str) -> str | None:
        cfg = self.config
        if cfg.user_dn_template is not None:
            return cfg.user_dn_template.replace("{user}", escape_rdn(user))
        conn = self._connection(cfg.bind_dn, cfg.bind_password.reveal() if cfg.bind_password else None)
        try:
            if cfg.bind_dn is not None and not conn.bind():
                log.error("ldap: service account bind as %s failed: %s",
                          cfg.bind_dn, conn.result.get("description"))
                return None
            conn.search(
                cfg.user_search_base,
                cfg.user_search_filter.replace("{user}", escape_filter_chars(user)),
                search_scope=ldap3.SUBTREE, attributes=[], size_limit=2,
            )
            if len(conn.entries) != 1:
                return None
            return conn.entries[0].entry_dn
        finally:
            conn.unbind()

    def _groups(self, conn: ldap3.Connection, user: str, dn: str) -> frozenset[str]:
        cfg = self.config
        names: set[str] = set()
        if cfg.group_member_attribute:
            conn.search(dn, "(objectClass=*)", search_scope=ldap3.BASE,
                        attributes=[cfg.group_member_attribute])
            for entry in conn.entries:
                for group_dn in entry[cfg.group_member_attribute].values:
                    names.add(_first_rdn_value(str(group_dn)))
        if cfg.group_search_base:
            flt = (cfg.group_search_filter
                   .replace("{dn}", escape_filter_chars(dn))
                   .replace("{user}", escape_filter_chars(user)))
            conn.search(cfg.group_search_base, flt, search_scope=ldap3.SUBTREE,
                        attributes=[cfg.group_name_attribute])
            for entry in conn.entries:
                names.update(str(v) for v in entry[cfg.group_name_attribute].values)
        return frozenset(n for n in names if n)

    def _verify(self, user: str, password: str) -> Principal | None:
        """Blocking: find the DN, bind as it, read groups. None for bad credentials."""
        try:
            dn = self._find_user_dn(user)
            if dn is None:
                return None
            conn = self._connection(dn, password)
            try:
                if not conn.bind():
                    return None
                groups = self._groups(conn, user, dn)
            finally:
                conn.unbind()
        except (LDAPException, OSError) as exc:
            log.error("ldap: %s unreachable or failing: %s", self.config.url, exc)
            return None
        return Principal(name=user, provider=self.name, groups=groups)

    async def authenticate(self, request: web.Request) -> Principal | None:
        creds = password_credentials(request)
        if creds is None:
            return None
        user, password = creds
        if not password:
            return None
        loop = asyncio.get_running_loop()
        return await self._cache.verified(user, password, lambda: password_check(
            request, lambda: loop.run_in_executor(None, self._verify, user, password)))


def _first_rdn_value(dn: str) -> str:
    """``cn=analysts,ou=groups,...`` → ``analysts``."""
    try:
        return parse_dn(dn, escape=False)[0][1]
    except (LDAPException, IndexError):
        return dn
