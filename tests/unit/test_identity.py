"""Identity assertion: Knox mapping syntax, configuration errors, principal/group mapping, doAs."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.config import ConfigError, load_topology_file
from gateway.providers.settings import IdentityAssertionConfig
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import IdentityAsserter
from gateway.providers.knox_syntax import parse_group_mapping, parse_principal_mapping


def request(query: str = "", remote: str = "127.0.0.1"):
    return make_mocked_request("POST", "/gateway/t/svc" + query).clone(remote=remote)


def asserter(**config) -> IdentityAsserter:
    return IdentityAsserter(IdentityAssertionConfig.model_validate(config))


def test_knox_principal_mapping_syntax():
    assert parse_principal_mapping("guest,alice=hdfs;mary=alice2") == {
        "guest": "hdfs", "alice": "hdfs", "mary": "alice2"}
    assert parse_principal_mapping(" a = b ; ") == {"a": "b"}


@pytest.mark.parametrize("text, reason", [
    ("alice", "has no '='"),
    ("alice=hdfs;alice=other", "mapped twice"),
    ("alice=hdfs,yarn", "more than one user"),
    ("=hdfs", "not a valid name"),
    ("al ice=hdfs", "not a valid name"),
])
def test_knox_principal_mapping_errors(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_principal_mapping(text)


def test_knox_group_mapping_syntax_accumulates():
    assert parse_group_mapping("*=users;alice,bob=admins;alice=ops") == {
        "*": ["users"], "alice": ["admins", "ops"], "bob": ["admins"]}


def test_config_errors_name_file_and_key(tmp_path):
    users = tmp_path / "users"
    users.write_text("")
    topo = tmp_path / "t.yaml"
    base = ("providers:\n  authentication: [{type: htpasswd, users_file: users}]\n"
            "  identity_assertion:\n")
    services = "services: [{path: p, upstream: {urls: ['thrift://h:1']}}]\n"
    topo.write_text(base + "    principal_mapping: 'alice'\n" + services)
    with pytest.raises(ConfigError) as err:
        load_topology_file(topo)
    assert err.value.key == "providers.identity_assertion.principal_mapping"
    assert "has no '='" in err.value.reason and str(topo) in str(err.value)
    topo.write_text(base + "    impersonation: {proxy_users: {alice: {users: [bob]}}}\n" + services)
    with pytest.raises(ConfigError) as err:
        load_topology_file(topo)
    assert err.value.key == "providers.identity_assertion.impersonation.proxy_users.alice.hosts"
    topo.write_text(base + "    impersonation: {proxy_users: {alice: {users: [bob], hosts: [nowhere]}}}\n"
                    + services)
    with pytest.raises(ConfigError, match="not '\\*', an IP address or a CIDR network"):
        load_topology_file(topo)


def test_default_is_the_principal_itself():
    principal = Principal("alice", "htpasswd", frozenset({"ldap-group"}))
    identity = IdentityAsserter().assert_identity(principal, request())
    assert (identity.user, identity.groups, identity.impersonator) == ("alice", {"ldap-group"}, None)


def test_principal_and_group_mapping():
    a = asserter(principal_mapping="guest,alice=hdfs;mary=alice2",
                 group_mapping={"hdfs": ["admins"], "*": "users"})
    hdfs = a.assert_identity(Principal("guest", "htpasswd", frozenset({"g"})), request())
    assert hdfs.user == "hdfs" and hdfs.groups == {"admins", "users", "g"}
    assert hdfs.principal.name == "guest"
    mary = a.assert_identity(Principal("mary", "htpasswd"), request())
    assert mary.user == "alice2" and mary.groups == {"users"}
    other = a.assert_identity(Principal("zed", "htpasswd"), request())
    assert other.user == "zed"


IMPERSONATION = {"proxy_users": {
    "alice": {"users": ["bob"], "groups": ["etl"], "hosts": ["127.0.0.0/8", "::1"]},
    "svc": {"users": ["*"], "hosts": ["*"]},
}}


@pytest.mark.parametrize("user, query, remote, effective, refusal", [
    ("alice", "?doAs=bob", "127.0.0.1", "bob", None),
    ("alice", "?DOAS=bob", "::1", "bob", None),  # parameter name is case-insensitive
    ("alice", "?doAs=carl", "127.0.0.1", "carl", None),  # carl is in group etl
    ("alice", "?doAs=alice", "10.9.9.9", "alice", None),  # oneself: no impersonation
    ("svc", "?doAs=anyone", "192.0.2.1", "anyone", None),
    ("alice", "?doAs=dave", "127.0.0.1", None, "alice is not allowed to impersonate dave"),
    ("alice", "?doAs=bob", "10.0.0.1", None, "not allowed to impersonate from 10.0.0.1"),
    ("bob", "?doAs=alice", "127.0.0.1", None, "bob is not a proxy user"),
    ("alice", "?doAs=bob&doas=svc", "127.0.0.1", None, "more than once"),
    ("alice", "?doAs=", "127.0.0.1", None, "no valid user"),
])
def test_doas(user, query, remote, effective, refusal):
    a = asserter(group_mapping="carl=etl", impersonation=IMPERSONATION)
    principal = Principal(user, "htpasswd", frozenset({"proxy-own-group"}))
    if refusal:
        with pytest.raises(PermissionError, match=refusal):
            a.assert_identity(principal, request(query, remote))
        return
    identity = a.assert_identity(principal, request(query, remote))
    assert identity.user == effective and identity.principal is principal
    if effective != user:
        assert identity.impersonator == user
        assert "proxy-own-group" not in identity.groups  # the proxy's groups are not lent


def test_doas_refused_when_impersonation_disabled():
    a = asserter(impersonation={"proxy_users": {}})
    with pytest.raises(PermissionError, match="not enabled"):
        a.assert_identity(Principal("alice", "htpasswd"), request("?doAs=bob"))
