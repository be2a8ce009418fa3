"""LDAP authentication end to end: a real slapd (StartTLS, LDAPS, memberOf, groupOfNames), the
gateway as a subprocess, real HTTPS clients; plus the provider alone against the same slapd."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from aiohttp.test_utils import make_mocked_request

from gateway.providers.authentication.ldap import LdapProvider
from gateway.providers.authentication.ldap_authenticator import LdapAuthenticator
from tests.support.gateway import service
from tests.support.ports import reserve_port
from tests.support.ldap_server import BASE, SERVICE_DN, start_ldap

pytestmark = pytest.mark.integration

BODY = b'[1,"get_all_databases",1,1,{}]'
JSON = {"Content-Type": "application/vnd.apache.thrift.json"}
USERS = {"alice": "alice-password", "bob": "bob-password", "star*": "star-password"}


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


@pytest.fixture(scope="module")
def gateway(hms, ldap, secret_file, module_gateway_factory):
    hms_url = f"thrift://{hms.host}:{hms.port}"
    # StartTLS needs the server's certificate to name the host: the dev certificate has localhost.
    search = search_provider(ldap, secret_file, url=f"ldap://localhost:{ldap.port}")
    direct = {"type": "ldap", "url": ldap.ldaps_url, "ca_file": str(ldap.ca_file),
              "user_dn_template": f"uid={{user}},ou=people,{BASE}"}
    return module_gateway_factory(
        {
            "search": {"providers": {"authentication": [search]}, "services": [service([hms_url])]},
            "direct": {"providers": {"authentication": [direct]}, "services": [service([hms_url])]},
        },
        users={"unused": "unused-password"},
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
