"""Identity assertion: Knox mapping syntax, configuration errors, principal/group mapping, doAs."""

from __future__ import annotations

import inspect

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.config import ConfigError, load_topology_file
from gateway.providers.settings import IdentityAssertionConfig
from gateway.providers.authentication.base import DirectoryUnavailable, Principal, UserDirectory
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


# --- issue 48: doAs targets looked up in the topology's user directories ---------------------

class Directory:
    """A user directory (the LDAP provider's role) over ``users``: folded name → (spelling,
    groups); ``down`` makes every lookup fail. Records the names asked for."""

    def __init__(self, users: dict[str, tuple[str, set[str]]], down: bool = False):
        self.users, self.down, self.asked = users, down, []

    async def lookup(self, name: str) -> Principal | None:
        self.asked.append(name)
        if self.down:
            raise DirectoryUnavailable("ldap://ldap:389: unreachable")
        found = self.users.get(name.lower())
        return None if found is None else Principal(found[0], "ldap", frozenset(found[1]))


DIRECTORY = {"alice": ("alice", {"analysts"}), "bob": ("bob", set()), "etl": ("etl", {"engines"})}
PROXIES = {"proxy_users": {"etl": {"users": ["bob"], "groups": ["analysts"], "hosts": ["127.0.0.0/8"]}}}


def looking_up(*directories, **config) -> IdentityAsserter:
    return IdentityAsserter(IdentityAssertionConfig.model_validate(config), directories)


def test_directory_is_a_provider_role():
    assert isinstance(Directory({}), UserDirectory)
    assert not isinstance(IdentityAsserter(), UserDirectory)


@pytest.mark.parametrize("query, user, groups", [
    ("?doAs=alice", "alice", {"analysts", "everyone"}),  # her LDAP group, plus the mapping's
    ("?doAs=ALICE", "alice", {"analysts", "everyone"}),  # the directory's spelling, never a second user
    ("?doAs=Bob", "bob", {"everyone"}),  # allowed by users: [bob], matched after the lookup
])
async def test_doas_target_gets_the_directorys_name_and_groups(query, user, groups):
    a = looking_up(Directory(DIRECTORY), group_mapping="*=everyone", impersonation=PROXIES)
    identity = await a.assert_identity_from_directories(Principal("etl", "htpasswd"), request(query))
    assert (identity.user, identity.groups, identity.impersonator) == (user, groups, "etl")


async def test_doas_naming_oneself_in_another_spelling_is_not_impersonation():
    a = looking_up(Directory(DIRECTORY), impersonation=PROXIES)
    etl = Principal("etl", "ldap", frozenset({"engines"}))
    identity = await a.assert_identity_from_directories(etl, request("?doAs=ETL"))
    assert (identity.user, identity.groups, identity.impersonator) == ("etl", {"engines"}, None)


async def test_the_first_directory_that_knows_the_target_answers():
    first, second = Directory({}), Directory({"carol": ("Carol", {"analysts"})})
    a = looking_up(first, second, impersonation=PROXIES)
    identity = await a.assert_identity_from_directories(Principal("etl", "htpasswd"), request("?doAs=carol"))
    assert (identity.user, identity.groups) == ("Carol", {"analysts"})
    assert first.asked == second.asked == ["carol"]


@pytest.mark.parametrize("directory, principal, query, refusal", [
    (Directory(DIRECTORY, down=True), "etl", "?doAs=alice", "the user directory could not look up alice"),
    (Directory(DIRECTORY), "etl", "?doAs=zed", "doAs names zed, whom no user directory knows"),
    (Directory(DIRECTORY), "etl", "?doAs=ETL2", "no user directory knows"),
    (Directory({"dave": ("dave", {"ops"})}), "etl", "?doAs=dave", "etl is not allowed to impersonate dave"),
    (Directory({"eve": ("eve", {"bad\ngroup"})}), "etl", "?doAs=eve", "control characters"),
])
async def test_doas_refusals_with_a_directory(directory, principal, query, refusal):
    a = looking_up(directory, impersonation=PROXIES)
    with pytest.raises(PermissionError, match=refusal):
        await a.assert_identity_from_directories(Principal(principal, "htpasswd"), request(query))


async def test_no_lookup_for_who_is_no_proxy_user_or_asks_no_doas():
    directory = Directory(DIRECTORY)
    a = looking_up(directory, impersonation=PROXIES)
    with pytest.raises(PermissionError, match="bob is not a proxy user"):
        await a.assert_identity_from_directories(Principal("bob", "ldap"), request("?doAs=alice"))
    alice = await a.assert_identity_from_directories(Principal("alice", "ldap", frozenset({"g"})), request())
    assert (alice.user, alice.groups) == ("alice", {"g"})
    assert directory.asked == []


def test_directories_are_consulted_only_when_impersonation_is_on():
    assert looking_up(Directory(DIRECTORY)).directories == ()
    assert looking_up(Directory(DIRECTORY), impersonation=PROXIES).directories


def _build_step(tmp_path, providers: list[dict], identity_assertion: dict):
    """The identity-assertion step a topology with ``providers`` gets."""
    import yaml

    from gateway.config import GatewayConfig
    from gateway.pipeline.step import StepContext
    from gateway.pipeline.steps.identity_assertion import IdentityAssertion
    (tmp_path / "users").write_text("")
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump({
        "providers": {"authentication": providers, "identity_assertion": identity_assertion},
        "services": [{"path": "p", "upstream": {"urls": ["thrift://h:1"]}}]}))
    topology = load_topology_file(topo)
    gateway = GatewayConfig.model_validate({"tls": {"certificate": "c", "private_key": "k"}})
    ctx = StepContext(topology="t", config=topology.services[0], schema=None, gateway=gateway,
                      providers=topology.providers, source=str(topo))
    return IdentityAssertion.build(ctx)


LDAP = {"type": "ldap", "url": "ldap://ldap:389", "user_search_base": "dc=x"}
HTPASSWD = {"type": "htpasswd", "users_file": "users"}


@pytest.mark.parametrize("providers, identity_assertion, waits", [
    ([HTPASSWD, LDAP], {"impersonation": PROXIES}, True),
    ([HTPASSWD], {"impersonation": PROXIES}, False),  # no directory: the name as given
    ([LDAP], {}, False),  # no impersonation: nothing to look up
])
def test_the_step_waits_only_where_a_target_is_looked_up(tmp_path, providers, identity_assertion, waits):
    step = _build_step(tmp_path, providers, identity_assertion)
    assert inspect.iscoroutinefunction(step.on_request) is waits
    assert len(step.asserter.directories) == (1 if waits else 0)


def test_an_asserter_with_directories_never_takes_a_target_as_given():
    a = looking_up(Directory(DIRECTORY), impersonation=PROXIES)
    with pytest.raises(RuntimeError, match="assert_identity_from_directories"):
        a.assert_identity(Principal("etl", "htpasswd"), request("?doAs=alice"))
