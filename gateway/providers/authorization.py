"""Authorization (Knox's term): may this identity use this service at all?

Follows Knox's ``AclsAuthorizationFilter``: a service ACL names users, groups and client
addresses (``*``, IP or CIDR). In ``AND`` mode (Knox's default) the effective user, one of its
groups and the client address must all match; ``*`` matches anything (also a user with no
groups). In ``OR`` mode one listed part matching is enough, and a ``*`` part counts as not
matching, so ``OR`` never lets everyone in by accident. An ACL listing only ``*`` allows every
authenticated identity. Which Thrift methods a service exposes is decided separately, by the
service's method list.
"""

from __future__ import annotations

from gateway.providers.settings import AuthorizationConfig
from gateway.providers.identity import Identity, address_in, address_matcher


class Authorizer:
    """A service's ACL; without configuration every authenticated identity is allowed."""

    def __init__(self, config: AuthorizationConfig | None = None):
        config = config or AuthorizationConfig()
        self.mode = config.mode
        self.any_user = "*" in config.users
        self.users = frozenset(config.users)
        self.any_group = "*" in config.groups
        self.groups = frozenset(config.groups)
        self.any_ip, self.networks = address_matcher(config.ips)
        self.open = self.any_user and self.any_group and self.any_ip

    def deny_reason(self, identity: Identity, remote: str | None) -> str | None:
        """None when ``identity`` connecting from ``remote`` (an IP address) may proceed,
        else a short reason for the 403 (no secrets)."""
        if self.open:
            return None
        user_ok = self.any_user or identity.user in self.users
        group_ok = self.any_group or bool(identity.groups & self.groups)
        ip_ok = self.any_ip or address_in(remote, self.networks)
        if self.mode == "OR":
            if ((user_ok and not self.any_user) or (group_ok and not self.any_group)
                    or (ip_ok and not self.any_ip)):
                return None
            return f"user {identity.user} from {remote} matches none of the service ACL entries"
        if not user_ok:
            return f"user {identity.user} is not in the service ACL"
        if not group_ok:
            return f"user {identity.user} is in none of the service ACL groups"
        if not ip_ok:
            return f"client address {remote} is not in the service ACL"
        return None
