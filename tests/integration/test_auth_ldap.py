"""LDAP authentication end to end: a real slapd (StartTLS, LDAPS, memberOf, groupOfNames), the
gateway as a subprocess, real HTTPS clients; plus the provider alone against the same slapd."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from aiohttp.test_utils import make_mocked_request

from gateway.explorer import METHODS as EXPLORER_METHODS
from gateway.hms_thrift.kind import SPEC_METHODS
from gateway.providers.authentication.base import DirectoryUnavailable
from gateway.providers.authentication.ldap import LdapProvider
from gateway.providers.authentication.ldap_authenticator import LdapAuthenticator
from tests.support.gateway import htpasswd_provider, in_workdir, service
from tests.support.ports import reserve_port
from tests.support.ldap_server import BASE, SERVICE_DN, start_ldap

pytestmark = pytest.mark.integration

BODY = b'[1,"get_all_databases",1,1,{}]'
JSON = {"Content-Type": "application/vnd.apache.thrift.json"}
USERS = {"alice": "alice-password", "bob": "bob-password", "star*": "star-password"}
POLICY_FILE = "policy.yaml"


@pytest.fixture(scope="module")
def ldap(tmp_path_factory):
    server = start_ldap(tmp_path_factory.mktemp("slapd"), USERS,
                        {"analysts": ["alice"], "admins": ["alice", "bob"]})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secrets") / "bind-password"
    path.write_text("service-password\n")
    return path


def search_provider(ldap, secret_file, **extra) -> dict:
    return {
        "type": "ldap", "realm": "Corp LDAP", "url": ldap.url, "start_tls": True,
        "ca_file": str(ldap.ca_file),
        "bind_dn": SERVICE_DN, "bind_password": f"file:{secret_file}",
        "user_search_base": f"ou=people,{BASE}", "user_search_filter": "(uid={user})",
        "group_member_attribute": "memberOf", "group_search_base": f"ou=groups,{BASE}",
        **extra,
    }


#: Issue 48 (3, 4): items naming alice and her LDAP group analysts, on the spec's sample table.
POLICY = """
policies:
  - id: 1
    name: everyone reads the spec database
    resources: {database: [hmshttptestdatabase], table: ["*"], column: ["*"]}
    allow: [{groups: [public], accesses: [select]}]
  - id: 2
    name: alice does not see ages
    resources: {database: [hmshttptestdatabase], table: [test_table], column: [age]}
    deny: [{users: [alice], accesses: [select]}]
  - id: 3
    name: alice sees black hair only
    resources: {database: [hmshttptestdatabase], table: [test_table]}
    row_filter: [{users: [alice], filter: "hair_color = 'black'"}]
  - id: 4
    name: alice sees names hashed
    resources: {database: [hmshttptestdatabase], table: [test_table], column: [name]}
    data_mask: [{users: [alice], mask: MASK_HASH}]
  - id: 5
    name: analysts see no hair colour
    resources: {database: [hmshttptestdatabase], table: [test_table], column: [hair_color]}
    data_mask: [{groups: [analysts], mask: MASK_NULL}]
"""
#: The trusted engine (in the users file, not in LDAP) and what it may impersonate.
ENGINE = ("engine", "engine-password")


@pytest.fixture(scope="module")
def gateway(hms, ldap, secret_file, module_gateway_factory):
    hms_url = f"thrift://{hms.host}:{hms.port}"
    # StartTLS needs the server's certificate to name the host: the dev certificate has localhost.
    search = search_provider(ldap, secret_file, url=f"ldap://localhost:{ldap.port}")
    direct = {"type": "ldap", "url": ldap.ldaps_url, "ca_file": str(ldap.ca_file),
              "user_dn_template": f"uid={{user}},ou=people,{BASE}"}
    thrift = {**service([hms_url], sorted(set(SPEC_METHODS) | set(EXPLORER_METHODS))),
              "policy_file": in_workdir(POLICY_FILE)}
    explorer = {"kind": "explorer", "path": "explorer", "options": {"thrift_service": thrift["path"]}}
    # Issue 48 (4): the engine may act for alice and for analysts (a group the directory gives) ...
    # (Every engine request fails one provider before the other: the failure throttle is off.)
    engine = {"users": ["alice"], "groups": ["analysts"], "hosts": ["127.0.0.0/8"]}
    policed = {"providers": {"authentication": [search, htpasswd_provider()],
                             "failure_throttle": {"enabled": False},
                             "identity_assertion": {"impersonation": {"proxy_users": {"engine": engine}}}},
               "services": [thrift, explorer]}
    # ... and here for alice, with a directory that does not answer.
    down = search_provider(ldap, secret_file, url=f"ldap://127.0.0.1:{reserve_port()}", timeout_seconds=2)
    unreachable = {"providers": {"authentication": [htpasswd_provider(), down], "identity_assertion": {
                       "impersonation": {"proxy_users": {"engine": {"users": ["alice"], "hosts": ["127.0.0.0/8"]}}}}},
                   "services": [service([hms_url])]}
    return module_gateway_factory(
        {
            "search": {"providers": {"authentication": [search]}, "services": [service([hms_url])]},
            "direct": {"providers": {"authentication": [direct]}, "services": [service([hms_url])]},
            "policed": policed,
            "unreachable": unreachable,
        },
        users=dict([ENGINE]), files={POLICY_FILE: POLICY},
    )


def post(gw, topology: str, auth=None) -> requests.Response:
    return requests.post(gw.url(topology), data=BODY, headers=JSON, auth=auth,
                         verify=str(gw.ca_file), timeout=30)


@pytest.mark.parametrize("topology", ["search", "direct"])
def test_valid_ldap_user_gets_the_reply(gateway, topology):
    response = post(gateway, topology, ("alice", "alice-password"))
    assert response.status_code == 200, gateway.log()[-2000:]
    assert '"default"' in response.text


@pytest.mark.parametrize("topology", ["search", "direct"])
@pytest.mark.parametrize(
    "auth", [("alice", "wrong"), ("nobody", "x"), ("alice", ""), ("*", "alice-password"),
             ("alice)(uid=*", "alice-password")],
)
def test_bad_credentials_401_with_basic_realm(gateway, topology, auth):
    response = post(gateway, topology, auth)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic realm=")


def test_filter_characters_in_a_user_name_are_escaped_not_interpreted(gateway):
    assert post(gateway, "search", ("star*", "star-password")).status_code == 200
    assert post(gateway, "search", ("star*", "alice-password")).status_code == 401


def test_a_burst_of_requests_is_one_bind(gateway, ldap):
    auth = ("bob", "bob-password")
    before = ldap.count_binds()
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: post(gateway, "search", auth).status_code, range(24)))
    assert codes == [200] * 24
    assert ldap.count_binds() - before == 1
    assert "bob-password" not in gateway.log()
    assert "service-password" not in gateway.log()


async def test_groups_from_member_of_and_group_search(ldap, secret_file):
    request = make_mocked_request("POST", "/", headers={"Authorization": "Basic YWxpY2U6YWxpY2UtcGFzc3dvcmQ="})
    for extra in ({"group_search_base": None}, {"group_member_attribute": None}):
        config = LdapProvider(**search_provider(ldap, secret_file, url=f"ldap://localhost:{ldap.port}",
                                                **extra))
        principal = await LdapAuthenticator(config).authenticate(request)
        assert principal is not None and principal.name == "alice"
        assert principal.groups == {"analysts", "admins"}


async def test_ldap_server_down_is_a_failed_login_not_a_crash(ldap, secret_file):
    config = LdapProvider(**search_provider(ldap, secret_file, url=f"ldap://localhost:{reserve_port()}",
                                            timeout_seconds=2))
    request = make_mocked_request("POST", "/", headers={"Authorization": "Basic YWxpY2U6YWxpY2UtcGFzc3dvcmQ="})
    assert await LdapAuthenticator(config).authenticate(request) is None


# --- issue 48 (3): a login in any spelling is the directory's user --------------------------

def request_as(user: str, password: str):
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    return make_mocked_request("POST", "/", headers={"Authorization": f"Basic {credentials}"})


@pytest.mark.parametrize("mode", ["search", "direct"])
async def test_a_login_in_any_case_is_the_directorys_spelling(ldap, secret_file, mode):
    settings = search_provider(ldap, secret_file, url=f"ldap://localhost:{ldap.port}")
    if mode == "direct":
        settings = {"type": "ldap", "url": ldap.ldaps_url, "ca_file": str(ldap.ca_file),
                    "user_dn_template": f"uid={{user}},ou=people,{BASE}", "group_member_attribute": "memberOf"}
    authenticator = LdapAuthenticator(LdapProvider(**settings))
    for login in ("ALICE", "Alice", "alice"):
        principal = await authenticator.authenticate(request_as(login, "alice-password"))
        assert principal is not None and principal.name == "alice", login
        assert principal.groups == {"analysts", "admins"}
    assert await authenticator.authenticate(request_as("ALICE", "wrong")) is None


def thrift_columns(gw, auth, query: str = "") -> list[str]:
    body = '[1,"get_table",1,1,{"1":{"str":"hmshttptestdatabase"},"2":{"str":"test_table"}}]'
    response = requests.post(gw.url("policed") + query, data=body, headers=JSON, auth=auth,
                             verify=str(gw.ca_file), timeout=30)
    assert response.status_code == 200, response.text
    table = response.json()[4]["0"]["rec"]
    return [column["1"]["str"] for column in table["7"]["rec"]["1"]["lst"][2:]]


def restrictions(gw, auth, query: str = "") -> requests.Response:
    return requests.get(gw.url("policed", "explorer"), params={"restrictions": "hmshttptestdatabase/test_table",
                                                                **dict(p.split("=") for p in query.split("&") if p)},
                        auth=auth, verify=str(gw.ca_file), timeout=30)


def test_items_naming_alice_apply_to_a_login_as_ALICE(gateway):
    """Issue 48 (3): slapd matches uid ignoring case; the column deny, row filter and mask
    written for alice hold for every spelling that authenticates as her."""
    for login in ("alice", "ALICE"):
        assert thrift_columns(gateway, (login, "alice-password")) == ["name"], login  # age denied
        answer = restrictions(gateway, (login, "alice-password"))
        assert answer.status_code == 200, answer.text
        found = answer.json()
        assert found["row-filter"] == {"expression": "hair_color = 'black'", "policy-id": 3}, login
        assert {m["column"]: m["mask-type"] for m in found["masks"]} == \
            {"name": "MASK_HASH", "hair_color": "MASK_NULL"}, login
    assert thrift_columns(gateway, ("bob", "bob-password")) == ["name", "age"]  # no item names bob


# --- issue 48 (4): doAs targets get their LDAP groups, or the call is refused ---------------

@pytest.mark.parametrize("target", ["alice", "ALICE"])
def test_an_engine_acting_for_alice_gets_her_ldap_groups(gateway, target):
    """The mask on analysts (a group only the directory gives alice) applies, and ``doAs=ALICE``
    is alice, with her own items and the proxy rule's ``users: [alice]``."""
    answer = restrictions(gateway, ENGINE, f"doAs={target}")
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["row-filter"] == {"expression": "hair_color = 'black'", "policy-id": 3}
    assert {m["column"]: m["mask-type"] for m in found["masks"]} == {"name": "MASK_HASH", "hair_color": "MASK_NULL"}
    assert thrift_columns(gateway, ENGINE, f"?doAs={target}") == ["name"]
    # bob is no analyst: the engine may not act for him; nobody is in no directory at all
    assert restrictions(gateway, ENGINE, "doAs=bob").status_code == 403
    refused = restrictions(gateway, ENGINE, "doAs=nobody")
    assert refused.status_code == 403 and "no user directory knows" in refused.text


def test_a_failed_group_lookup_refuses_the_call(gateway):
    """The engine may act for alice, but the directory that would give her groups does not
    answer: 403, nothing upstream, rather than alice without her groups."""
    response = requests.post(gateway.url("unreachable") + "?doAs=alice", data=BODY, headers=JSON, auth=ENGINE,
                             verify=str(gateway.ca_file), timeout=30)
    assert response.status_code == 403, response.text
    assert "could not look up alice" in response.text
    assert post(gateway, "unreachable", ENGINE).status_code == 200  # the engine as itself needs no lookup


async def test_lookup_by_name(ldap, secret_file):
    authenticator = LdapAuthenticator(LdapProvider(**search_provider(ldap, secret_file,
                                                                     url=f"ldap://localhost:{ldap.port}")))
    alice = await authenticator.lookup("ALICE")
    assert alice is not None and (alice.name, alice.groups) == ("alice", {"analysts", "admins"})
    assert await authenticator.lookup("nobody") is None
    down = LdapAuthenticator(LdapProvider(**search_provider(ldap, secret_file, timeout_seconds=2,
                                                            url=f"ldap://localhost:{reserve_port()}")))
    with pytest.raises(DirectoryUnavailable):
        await down.lookup("alice")
