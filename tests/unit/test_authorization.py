"""Service ACLs with Knox's AclsAuthorizationFilter semantics: users, groups, addresses, AND/OR."""

from __future__ import annotations

import pytest

from gateway.providers.settings import AuthorizationConfig
from gateway.providers.authentication.base import Principal
from gateway.providers.authorization import Authorizer
from gateway.providers.identity import Identity


def identity(user: str, *groups: str) -> Identity:
    return Identity(user, Principal(user, "htpasswd"), frozenset(groups))


def acl(**config) -> Authorizer:
    return Authorizer(AuthorizationConfig.model_validate(config))


def test_no_acl_allows_every_authenticated_identity():
    assert Authorizer().deny_reason(identity("anyone"), None) is None
    assert acl().deny_reason(identity("anyone"), "203.0.113.9") is None


@pytest.mark.parametrize("who, remote, reason", [
    (identity("alice", "analysts"), "10.1.2.3", None),
    (identity("alice", "analysts"), "::ffff:10.1.2.3", None),  # IPv4-mapped IPv6
    (identity("bob", "analysts"), "10.1.2.3", "user bob is not in the service ACL"),
    (identity("alice", "sales"), "10.1.2.3", "in none of the service ACL groups"),
    (identity("alice"), "10.1.2.3", "in none of the service ACL groups"),
    (identity("alice", "analysts"), "192.168.0.1", "client address 192.168.0.1 is not in"),
    (identity("alice", "analysts"), None, "client address None is not in"),
])
def test_and_mode_needs_every_part(who, remote, reason):
    got = acl(users=["alice"], groups=["analysts"], ips=["10.0.0.0/8"]).deny_reason(who, remote)
    assert got == reason if reason is None else reason in got


def test_and_mode_any_group_passes_a_user_without_groups():
    assert acl(users=["alice"]).deny_reason(identity("alice"), "1.2.3.4") is None


@pytest.mark.parametrize("who, remote, allowed", [
    (identity("alice"), "192.0.2.1", True),  # user part
    (identity("zed", "analysts"), "192.0.2.1", True),  # group part
    (identity("zed"), "10.0.0.7", True),  # address part
    (identity("zed", "sales"), "192.0.2.1", False),
])
def test_or_mode_one_part_is_enough(who, remote, allowed):
    reason = acl(users=["alice"], groups=["analysts"], ips=["10.0.0.0/8"], mode="or").deny_reason(who, remote)
    assert (reason is None) == allowed
    if not allowed:
        assert "matches none of the service ACL entries" in reason


def test_or_mode_wildcard_parts_never_match():
    # users '*' in OR mode must not let everyone in (Knox treats '*' as excluded there).
    reason = acl(users=["*"], ips=["10.0.0.0/8"], mode="OR").deny_reason(identity("zed"), "192.0.2.1")
    assert reason is not None
