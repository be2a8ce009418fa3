"""Kerberos/SPNEGO end to end: a real MIT KDC (k5test), the gateway as a subprocess with a
keytab, and real clients: ``curl --negotiate`` and ``requests-gssapi`` (mutual auth required)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from requests_gssapi import REQUIRED, HTTPSPNEGOAuth

from tests.support.gateway import service
from tests.support.kdc import REALM

pytestmark = pytest.mark.integration

BODY = b'[1,"get_all_databases",1,1,{}]'
JSON = {"Content-Type": "application/vnd.apache.thrift.json"}


@pytest.fixture(scope="module")
def clients(kerberos_realm, tmp_path_factory):
    """Client environments (krb5.conf + ccache) for alice and bob."""
    d = tmp_path_factory.mktemp("ccaches")
    return {name: kerberos_realm.add_user(name, f"{name}-password", d / name) for name in ("alice", "bob")}


@pytest.fixture(scope="module")
def gateway(hms, kerberos_realm, clients, tmp_path_factory, module_gateway_factory):
    hms_url = f"thrift://{hms.host}:{hms.port}"
    key = tmp_path_factory.mktemp("secrets") / "cookie-key"
    key.write_text("a-cookie-signing-key-only-the-gateway-knows\n")
    base = {"type": "kerberos", "principal": kerberos_realm.principal, "keytab": str(kerberos_realm.keytab)}
    topologies = {
        "krb": {"providers": {"authentication": [
            {**base, "cookie": {"signing_key": f"file:{key}", "lifetime_seconds": 600}}]},
            "services": [service([hms_url])]},
        "nocookie": {"providers": {"authentication": [base]}, "services": [service([hms_url])]},
        "onlyalice": {"providers": {"authentication": [
            {**base, "name_rules": [rf"RULE:[1:$1@$0](alice@{REALM.replace('.', '[.]')})s/@.*//"]}]},
            "services": [service([hms_url])]},
    }
    # krb5.conf of the test realm; no KRB5_KTNAME: the keytab is config
    return module_gateway_factory(topologies, users={"u": "unused-pw"},
                                  env={**kerberos_realm.env, "KRB5_KTNAME": None})


@pytest.fixture
def as_user(clients):
    """Run the test's in-process GSSAPI client as a user (sets KRB5CCNAME/KRB5_CONFIG)."""
    saved = dict(os.environ)

    def switch(name: str) -> None:
        os.environ.update(clients[name])

    yield switch
    os.environ.clear()
    os.environ.update(saved)


def gssapi_post(gw, topology: str, **kw) -> requests.Response:
    return requests.post(gw.url(topology), data=BODY, headers=JSON, verify=str(gw.ca_file),
                         auth=HTTPSPNEGOAuth(mutual_authentication=REQUIRED), timeout=30, **kw)


def test_no_credentials_401_negotiate(gateway):
    response = requests.post(gateway.url("krb"), data=BODY, headers=JSON, verify=str(gateway.ca_file))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Negotiate"


def test_requests_gssapi_with_mutual_auth_and_session_cookie(gateway, as_user):
    as_user("alice")
    first = gssapi_post(gateway, "krb")
    assert first.status_code == 200, gateway.log()[-2000:]
    assert first.headers["WWW-Authenticate"].startswith("Negotiate ")  # mutual-auth token
    cookie = first.headers["Set-Cookie"]
    for attribute in ("hadoop.auth=", "Secure", "HttpOnly", "Max-Age=600"):
        assert attribute in cookie
    value = first.cookies["hadoop.auth"]
    # The cookie alone authenticates: no handshake, no Authorization header.
    again = requests.post(gateway.url("krb"), data=BODY, headers=JSON, verify=str(gateway.ca_file),
                          cookies={"hadoop.auth": value})
    assert again.status_code == 200
    assert '"default"' in again.text
    forged = requests.post(gateway.url("krb"), data=BODY, headers=JSON, verify=str(gateway.ca_file),
                           cookies={"hadoop.auth": value[:-4] + "AAAA"})
    assert forged.status_code == 401


def test_curl_negotiate(gateway, clients):
    out = subprocess.run(
        ["curl", "-sS", "--negotiate", "-u", ":", "--cacert", str(gateway.ca_file),
         "-H", "Content-Type: application/vnd.apache.thrift.json", "--data-binary", BODY.decode(),
         "-o", "-", "-w", "\n%{http_code}", gateway.url("nocookie")],
        env={**os.environ, **clients["bob"]}, capture_output=True, text=True, timeout=60,
    )
    body, _, code = out.stdout.rpartition("\n")
    assert code == "200", out.stderr + gateway.log()[-2000:]
    assert '"default"' in body


def test_concurrent_clients_never_get_a_spurious_401(gateway, as_user):
    """Knox's replay-cache bug: many handshakes at once by the same principal."""
    as_user("alice")
    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(lambda _: gssapi_post(gateway, "nocookie").status_code, range(48)))
    assert codes == [200] * 48, gateway.log()[-3000:]
    assert "replay" not in gateway.log().lower()


def test_name_rules_decide_who_gets_in(gateway, as_user):
    as_user("alice")
    assert gssapi_post(gateway, "onlyalice").status_code == 200
    as_user("bob")
    response = requests.post(gateway.url("onlyalice"), data=BODY, headers=JSON,
                             verify=str(gateway.ca_file), auth=HTTPSPNEGOAuth(), timeout=30)
    assert response.status_code == 401
    assert "no auth_to_local rule maps bob@" in gateway.log()


def test_garbage_negotiate_token_is_401(gateway):
    for token in ("!!!notbase64", "YWJjZGVm"):
        response = requests.post(gateway.url("nocookie"), data=BODY, headers={
            **JSON, "Authorization": f"Negotiate {token}"}, verify=str(gateway.ca_file))
        assert response.status_code == 401
