"""Identity assertion (Knox's term): from the authenticated principal to the effective user.

The effective user is who HMS is told acts (``set_ugi`` / ``x-actor-username``) and whom the
authorization provider judges. Steps, as Knox's ``Default`` identity-assertion provider and
Hadoop's proxy-user rules define them:

1. principal mapping: the authenticated name becomes the mapped user (``guest,alice=hdfs``);
   unmapped names stay as they are;
2. group mapping: the user's groups are the principal's own (from LDAP, a JWT claim ...) plus
   the groups ``group_mapping`` gives that user and ``*``;
3. impersonation: a ``doAs=<user>`` query parameter (name matched case-insensitively, as Knox
   does) makes ``<user>`` the effective user, only if impersonation is enabled and the mapped
   user is a proxy user whose ``users`` or ``groups`` cover ``<user>`` and whose ``hosts`` cover
   the client address (Hadoop ``hadoop.proxyuser.<u>.users|groups|hosts``). The proxy user's
   groups are not lent. When the topology has user directories (authentication providers with
   the :class:`~gateway.providers.authentication.base.UserDirectory` role: LDAP), the target is
   looked up there as a login would be: it takes the directory's spelling of its name and its
   groups (plus the group mapping's); a target no directory knows, or a directory that cannot
   answer, refuses the request. Without directories its groups are the group mapping's alone.

A refusal raises ``PermissionError`` with a short reason (no secrets); the gateway handler answers 403.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from gateway.client_address import client_address
from gateway.providers.settings import IdentityAssertionConfig, ProxyUserRule
from gateway.providers.authentication.base import DirectoryUnavailable, Principal, UserDirectory, well_formed

#: Query parameter of Knox/Hadoop impersonation, compared case-insensitively.
DOAS_PARAMETER = "doas"
_MAX_NAME = 256

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Identity:
    """Who a request or an upstream call acts for: the effective user and groups, the principal
    that authenticated it (None for the gateway's own calls as a configured service user, such
    as the change feed's poller), and ``impersonator``, the (mapped) user that asked for
    ``doAs``, else None. The gateway's one identity type: the upstream reads ``user`` and
    ``groups`` (``set_ugi``, ``x-actor-username``).
    """

    user: str
    principal: Principal | None
    groups: frozenset[str] = field(default_factory=frozenset)
    impersonator: str | None = None


def address_matcher(patterns: list[str]) -> tuple[bool, tuple[IPNetwork, ...]]:
    """``(any, networks)`` for ``*`` / IP / CIDR patterns (validated by :mod:`gateway.settings_model`)."""
    if "*" in patterns:
        return True, ()
    return False, tuple(ipaddress.ip_network(p, strict=False) for p in patterns)


def address_in(remote: str | None, networks: tuple[IPNetwork, ...]) -> bool:
    """Whether ``remote`` (an IP address string, IPv4-mapped IPv6 unwrapped) is in ``networks``."""
    if not remote:
        return False
    try:
        addr = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in networks)


class _ProxyUser:
    def __init__(self, rule: ProxyUserRule):
        self.users = frozenset(rule.users)
        self.groups = frozenset(rule.groups)
        self.any_host, self.hosts = address_matcher(rule.hosts)

    def refusal(self, target: str, target_groups: frozenset[str], remote: str | None) -> str | None:
        if not ("*" in self.users or target in self.users
                or "*" in self.groups or target_groups & self.groups):
            return f"not allowed to impersonate {target}"
        if not (self.any_host or address_in(remote, self.hosts)):
            return f"not allowed to impersonate from {remote}"
        return None


class IdentityAsserter:
    """Identity assertion from a topology's ``identity_assertion`` settings (defaults: identity),
    with ``directories``, the topology's user directories, in provider order (consulted only
    when impersonation is on)."""

    def __init__(self, config: IdentityAssertionConfig | None = None,
                 directories: Iterable[UserDirectory] = ()):
        config = config or IdentityAssertionConfig()
        self.principal_mapping: Mapping[str, str] = dict(config.principal_mapping)
        self.group_mapping = {u: frozenset(g) for u, g in config.group_mapping.items()}
        self.proxy_users = {u: _ProxyUser(r) for u, r in config.impersonation.proxy_users.items()}
        #: Where ``doAs`` targets are looked up; empty: nowhere (the name is taken as given).
        self.directories = tuple(directories) if self.proxy_users else ()

    def mapped_groups(self, user: str) -> frozenset[str]:
        """Groups the group mapping gives ``user`` (its own entry and ``*``)."""
        return self.group_mapping.get(user, frozenset()) | self.group_mapping.get("*", frozenset())

    def mapped(self, principal: Principal) -> Identity:
        """The identity ``principal`` acts as without ``doAs``: principal mapping, then its
        groups plus the group mapping's (also what ``hms-gateway policy check`` applies)."""
        user = self.principal_mapping.get(principal.name, principal.name)
        return Identity(user=user, principal=principal,
                        groups=frozenset(principal.groups) | self.mapped_groups(user))

    def assert_identity(self, principal: Principal, request: web.Request) -> Identity:
        """The :class:`Identity` a request acts as, for an asserter without :attr:`directories`
        (use :meth:`assert_identity_from_directories` otherwise). Raises ``PermissionError``
        (→ 403) if refused."""
        if self.directories:  # its doAs targets need a lookup: never taken as given
            raise RuntimeError("an asserter with user directories asserts with assert_identity_from_directories")
        identity, target = self._requested(principal, request)
        if target is None:
            return identity
        return self._impersonated(identity, target, self.mapped_groups(target), request)

    async def assert_identity_from_directories(self, principal: Principal, request: web.Request) -> Identity:
        """:meth:`assert_identity` with the ``doAs`` target looked up in :attr:`directories`:
        the first that knows it gives its name and groups. Raises ``PermissionError`` (→ 403)
        when none knows it or one cannot answer (the groups would be missing: fail closed)."""
        identity, target = self._requested(principal, request)
        if target is None:
            return identity
        found = None
        for directory in self.directories:
            try:
                found = await directory.lookup(target)
            except DirectoryUnavailable:
                raise PermissionError(f"the user directory could not look up {target}") from None
            if found is not None:
                break
        if found is None:
            raise PermissionError(f"doAs names {target}, whom no user directory knows")
        if not well_formed(found):  # as a login's principal is checked
            raise PermissionError(f"the user directory gives {target} a name or group that is empty, "
                                  "not UTF-8 or holds control characters")
        if found.name == identity.user:  # oneself, spelt another way: no impersonation
            return identity
        return self._impersonated(identity, found.name, found.groups | self.mapped_groups(found.name), request)

    def _requested(self, principal: Principal, request: web.Request) -> tuple[Identity, str | None]:
        """The identity without ``doAs``, and the ``doAs`` target when the request impersonates
        (checked to be well formed, from a proxy user). Raises ``PermissionError``."""
        identity = self.mapped(principal)
        user = identity.user
        target = _doas(request)
        if target is None or target == user:
            return identity, None
        if not self.proxy_users:
            raise PermissionError("impersonation (doAs) is not enabled for this topology")
        if not target or len(target) > _MAX_NAME or not target.isprintable():
            raise PermissionError("doAs names no valid user")
        if user not in self.proxy_users:
            raise PermissionError(f"{user} is not a proxy user")
        return identity, target

    def _impersonated(self, identity: Identity, target: str, target_groups: frozenset[str],
                      request: web.Request) -> Identity:
        """``target`` (in ``target_groups``) acting through ``identity``'s user, if its proxy
        rule allows. Raises ``PermissionError``."""
        user = identity.user
        reason = self.proxy_users[user].refusal(target, target_groups, client_address(request))
        if reason is not None:
            raise PermissionError(f"{user} is {reason}")
        return Identity(user=target, principal=identity.principal, groups=target_groups, impersonator=user)


def _doas(request: web.Request) -> str | None:
    if "?" not in request.raw_path:  # no query string (the usual case): nothing to parse
        return None
    values = [v for k, v in request.query.items() if k.lower() == DOAS_PARAMETER]
    if len(values) > 1:
        raise PermissionError("doAs given more than once")
    return values[0] if values else None
