"""The ``ldap`` provider's run-time check (:mod:`gateway.providers.authentication.ldap`: the
two ways to find the user's entry, groups, TLS, the settings): binds and searches with ldap3 in
a worker thread, verified credentials cached; imported only when a topology names the provider.
It is also a user directory (:class:`~gateway.providers.authentication.base.UserDirectory`):
identity assertion looks ``doAs`` targets up here, with the service account."""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import unicodedata
from collections.abc import Iterable
from urllib.parse import urlsplit

import ldap3
from aiohttp import web
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn, parse_dn

from gateway.providers.authentication.base import DirectoryUnavailable, Principal
from gateway.providers.authentication.basic import password_credentials
from gateway.providers.authentication.credential_cache import CredentialCache
from gateway.providers.authentication.settings import ProviderSettings
from gateway.providers.authentication.throttle import password_check

log = logging.getLogger(__name__)

#: Search result codes that answer (RFC 4511 §4.1.9): success, sizeLimitExceeded, noSuchObject.
_NO_SUCH_OBJECT = 32
_ANSWERED = (0, 4, _NO_SUCH_OBJECT)


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
        #: ``doAs`` targets looked up (:meth:`lookup`), by name: the same lifetime as logins.
        self._lookups = CredentialCache(config.cache_ttl_seconds)
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

    def _search(self, conn: ldap3.Connection, base: str, flt: str, scope, attributes: list[str],
                size_limit: int = 0) -> list:
        """The entries found; raises :class:`DirectoryUnavailable` when the search failed (a
        missing base, ``noSuchObject``, and a size limit reached are answers, not failures)."""
        conn.search(base, flt, search_scope=scope, attributes=attributes, size_limit=size_limit)
        code = conn.result.get("result")
        if code not in _ANSWERED:
            raise DirectoryUnavailable(f"{self.config.url}: search failed: {conn.result.get('description')}")
        return list(conn.entries) if code != _NO_SUCH_OBJECT else []

    def _service_connection(self) -> ldap3.Connection:
        """Bound as ``bind_dn`` (anonymous without one). Raises :class:`DirectoryUnavailable`."""
        cfg = self.config
        conn = self._connection(cfg.bind_dn, cfg.bind_password.reveal() if cfg.bind_password else None)
        if cfg.bind_dn is not None and not conn.bind():
            conn.unbind()
            raise DirectoryUnavailable(f"{cfg.url}: service account bind as {cfg.bind_dn} failed: "
                                       f"{conn.result.get('description')}")
        return conn

    def _find_user_dn(self, conn: ldap3.Connection | None, user: str) -> str | None:
        """The DN of ``user``'s entry: the template's, else the one entry the search finds with
        ``conn`` (None: none or several)."""
        cfg = self.config
        if cfg.user_dn_template is not None:
            return cfg.user_dn_template.replace("{user}", escape_rdn(user))
        assert conn is not None
        entries = self._search(conn, cfg.user_search_base,
                               cfg.user_search_filter.replace("{user}", escape_filter_chars(user)),
                               ldap3.SUBTREE, [], size_limit=2)
        return entries[0].entry_dn if len(entries) == 1 else None

    def _principal(self, conn: ldap3.Connection, user: str, dn: str) -> Principal | None:
        """The principal of the entry ``dn`` that ``user`` named: the directory's spelling of
        the name and the groups, read with ``conn``. None when the entry is not readable or
        holds no name value matching ``user``. Raises :class:`DirectoryUnavailable`."""
        cfg = self.config
        attributes = [*cfg.name_attributes, *([cfg.group_member_attribute] if cfg.group_member_attribute else [])]
        entries = self._search(conn, dn, "(objectClass=*)", ldap3.BASE, attributes)
        if len(entries) != 1:
            log.warning("ldap: the entry %s cannot be read (%s); refused", dn, conn.result.get("description"))
            return None
        entry = entries[0]
        dn = entry.entry_dn  # the directory's DN, for {dn} in the group search
        name = directory_spelling(user, (str(v) for a in cfg.name_attributes if a in entry
                                         for v in entry[a].values))
        if name is None:
            log.warning("ldap: the entry %s has no %s value matching the name it was found by; refused",
                        dn, "/".join(cfg.name_attributes))
            return None
        groups: set[str] = set()
        if cfg.group_member_attribute and cfg.group_member_attribute in entry:
            groups.update(_first_rdn_value(str(g)) for g in entry[cfg.group_member_attribute].values)
        if cfg.group_search_base:
            flt = (cfg.group_search_filter
                   .replace("{dn}", escape_filter_chars(dn))
                   .replace("{user}", escape_filter_chars(name)))
            for group in self._search(conn, cfg.group_search_base, flt, ldap3.SUBTREE, [cfg.group_name_attribute]):
                groups.update(str(v) for v in group[cfg.group_name_attribute].values)
        return Principal(name=name, provider=self.name, groups=frozenset(g for g in groups if g))

    def _verify(self, user: str, password: str) -> Principal | None:
        """Blocking: find the DN, bind as it, read the name and groups. None for bad credentials,
        and for a directory that cannot answer (logged)."""
        try:
            if self.config.user_dn_template is not None:
                dn = self._find_user_dn(None, user)
            else:
                service = self._service_connection()
                try:
                    dn = self._find_user_dn(service, user)
                finally:
                    service.unbind()
            if dn is None:
                return None
            conn = self._connection(dn, password)
            try:
                if not conn.bind():
                    return None
                return self._principal(conn, user, dn)
            finally:
                conn.unbind()
        except (DirectoryUnavailable, LDAPException, OSError) as exc:
            log.error("ldap: %s unreachable or failing: %s", self.config.url, exc)
            return None

    def _look_up(self, user: str) -> Principal | None:
        """Blocking: :meth:`lookup` with the service account (anonymous without ``bind_dn``)."""
        try:
            conn = self._service_connection()
            try:
                dn = self._find_user_dn(conn, user)
                return None if dn is None else self._principal(conn, user, dn)
            finally:
                conn.unbind()
        except (LDAPException, OSError) as exc:
            raise DirectoryUnavailable(f"{self.config.url}: {exc}") from None

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

    async def lookup(self, name: str) -> Principal | None:
        """:class:`~gateway.providers.authentication.base.UserDirectory`: the principal a login
        as ``name`` would establish (the directory's spelling, the groups), found with the
        service account, cached ``cache_ttl_seconds``, each LDAP operation limited to
        ``timeout_seconds``. None: no such entry, or one that cannot be read. Raises
        :class:`DirectoryUnavailable` (logged here, without the name's password: there is none)."""
        loop = asyncio.get_running_loop()
        try:
            # "" as the password: the lookups have a cache of their own, so no login can hit it.
            return await self._lookups.verified(name, "", lambda: loop.run_in_executor(None, self._look_up, name))
        except DirectoryUnavailable as exc:
            log.error("ldap: looking up a user failed: %s", exc)
            raise


def directory_spelling(login: str, values: Iterable[str]) -> str | None:
    """The first of ``values`` (an entry's name attribute values) that ``login`` matches as a
    directory's case-ignoring equality does (RFC 4518: Unicode compatibility forms, case and
    insignificant spaces ignored): the name as the directory spells it. None when none does
    (the entry was found some other way: refused rather than guessed)."""
    wanted = _folded(login)
    return next((v for v in values if _folded(v) == wanted), None)


def _folded(value: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _first_rdn_value(dn: str) -> str:
    """``cn=analysts,ou=groups,...`` → ``analysts``."""
    try:
        return parse_dn(dn, escape=False)[0][1]
    except (LDAPException, IndexError):
        return dn
