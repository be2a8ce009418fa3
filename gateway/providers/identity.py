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
   the client address (Hadoop ``hadoop.proxyuser.<u>.users|groups|hosts``). The impersonated
   user's groups come from the group mapping alone: the proxy user's groups are not lent.

A refusal raises ``PermissionError`` with a short reason (no secrets); the gateway handler answers 403.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Mapping

from aiohttp import web

from gateway.client_address import client_address
from gateway.providers.settings import IdentityAssertionConfig, ProxyUserRule
from gateway.providers.authentication.base import Principal

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
    """Identity assertion from a topology's ``identity_assertion`` settings (defaults: identity)."""

    def __init__(self, config: IdentityAssertionConfig | None = None):
        config = config or IdentityAssertionConfig()
        self.principal_mapping: Mapping[str, str] = dict(config.principal_mapping)
        self.group_mapping = {u: frozenset(g) for u, g in config.group_mapping.items()}
        self.proxy_users = {u: _ProxyUser(r) for u, r in config.impersonation.proxy_users.items()}

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
        """The :class:`Identity` a request acts as. Raises ``PermissionError`` (→ 403) if refused."""
        identity = self.mapped(principal)
        user = identity.user
        target = _doas(request)
        if target is None or target == user:
            return identity
        if not self.proxy_users:
            raise PermissionError("impersonation (doAs) is not enabled for this topology")
        if not target or len(target) > _MAX_NAME or not target.isprintable():
            raise PermissionError("doAs names no valid user")
        proxy = self.proxy_users.get(user)
        if proxy is None:
            raise PermissionError(f"{user} is not a proxy user")
        target_groups = self.mapped_groups(target)
        reason = proxy.refusal(target, target_groups, client_address(request))
        if reason is not None:
            raise PermissionError(f"{user} is {reason}")
        return Identity(user=target, principal=principal, groups=target_groups, impersonator=user)


def _doas(request: web.Request) -> str | None:
    if "?" not in request.raw_path:  # no query string (the usual case): nothing to parse
        return None
    values = [v for k, v in request.query.items() if k.lower() == DOAS_PARAMETER]
    if len(values) > 1:
        raise PermissionError("doAs given more than once")
    return values[0] if values else None
