"""``hms-gateway tunnel`` end to end with every authentication provider, and the set_ugi rule.

Real parts: a real HMS 2.3.10 (empty, this module's own, since the calls create databases), the
real gateway (``hms-gateway serve``) with htpasswd, JWT, Kerberos (the test KDC) and client
certificates in one topology, the real tunnel (``hms-gateway tunnel``, a subprocess), and
Apache Thrift's generated client over a plain ``TSocket``: what Hive's own client speaks.

Which user HMS acts as is read from HMS's own audit log (``HiveMetaStore.audit: ugi=<user>``)
and from the owner of what the call created.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

import pytest
from jose import jwt
from thrift.Thrift import TApplicationException

from gateway.certs import write_client_certificate
from tests.support.gateway import start_gateway, stop_process
from tests.support.hms import start_hms
from tests.support.kdc import start_realm
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules
from tests.support.tunnel import start_tunnel

pytestmark = pytest.mark.integration

HMAC_KEY = "hmac-key-of-the-tunnel-test-tokens-0123456789"
READS = ["set_ugi", "get_all_databases", "get_databases", "get_database", "get_table"]
WRITES = [*READS, "create_database"]
USERS = {"etl": "etl-password", "carol": "carol-password"}


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    r = start_realm()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def metastore(tmp_path_factory):
    running = start_hms(tmp_path_factory.mktemp("hms-tunnel"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def gateway(metastore, realm, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gw-tunnel")
    certs = workdir / "certs"
    write_client_certificate(certs, "alice")
    url = f"thrift://127.0.0.1:{metastore.port}"
    providers = [
        {"type": "mtls"},
        {"type": "htpasswd", "realm": "HMS Gateway", "users_file": str(workdir / "users.htpasswd")},
        {"type": "jwt", "algorithms": ["HS256"], "issuer": "tunnel-test", "audience": "hms",
         "hmac_key": f"file:{_secret(workdir / 'jwt.key', HMAC_KEY)}"},
        {"type": "kerberos", "principal": realm.principal, "keytab": str(realm.keytab),
         # the session cookie the tunnel keeps (calls after the first skip the handshake)
         "cookie": {"signing_key": f"file:{_secret(workdir / 'cookie.key', HMAC_KEY + '-cookie')}",
                    "lifetime_seconds": 600}},
    ]
    topology = {
        "providers": {"authentication": providers, "identity_assertion": {"group_mapping": "etl=engineers;*=staff"}},
        "services": [
            {"path": "hive/ro", "upstream": {"urls": [url]}, "methods": READS},
            {"path": "hive/rw", "upstream": {"urls": [url]}, "methods": WRITES},
            {"path": "hive/nougi", "upstream": {"urls": [url]}, "methods": ["get_all_databases"]},
        ],
    }
    tls = {"certificate": str(certs / "server.crt"), "private_key": str(certs / "server.key"),
           "client_ca": str(certs / "ca.crt")}
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_gateway_env(realm))
    try:
        gw = start_gateway(workdir, {"spark": topology}, USERS, gateway_extra={"tls": tls})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    gw.client_certs = certs  # type: ignore[attr-defined]
    yield gw
    gw.stop()


def _gateway_env(realm) -> dict[str, str]:
    """The gateway's environment: the realm's krb5.conf, no KRB5_KTNAME (the keytab is config)."""
    env = {**os.environ, **realm.env, "PYTHONUNBUFFERED": "1"}
    env.pop("KRB5_KTNAME", None)
    return env


def _secret(path, value: str):
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def _token(sub: str) -> str:
    now = int(time.time())
    return jwt.encode({"iss": "tunnel-test", "aud": "hms", "sub": sub, "exp": now + 600, "nbf": now},
                      HMAC_KEY, algorithm="HS256")


@pytest.fixture(scope="module")
def kerberos_env(realm, tmp_path_factory):
    return realm.add_user("dave", "dave-password", tmp_path_factory.mktemp("ccache") / "dave")


def _tunnel(gateway, path: str, provider: str, tmp_path, kerberos_env=None):
    """(running tunnel, user the gateway should see) for ``provider``."""
    url = gateway.url("spark", path)
    if provider == "basic":
        return start_tunnel(url, ["--auth", "basic", "--user", "etl", "--password-env", "TUNNEL_PW"],
                            ca=gateway.ca_file, env={"TUNNEL_PW": USERS["etl"]}), "etl"
    if provider == "jwt":
        token = _secret(tmp_path / "token", _token("carol"))
        return start_tunnel(url, ["--auth", "bearer", "--token-file", str(token)], ca=gateway.ca_file), "carol"
    if provider == "cert":
        certs = gateway.client_certs
        return start_tunnel(url, ["--auth", "cert", "--cert", str(certs / "alice.crt"),
                                  "--key", str(certs / "alice.key")], ca=gateway.ca_file), "alice"
    assert provider == "kerberos"
    return start_tunnel(url, ["--auth", "kerberos"], ca=gateway.ca_file, env=kerberos_env), "dave"


def _ugi_audit(metastore, cmd: str, timeout: float = 30.0) -> str:
    """The ``ugi=`` of HMS's audit line for ``cmd`` (HMS writes its log asynchronously)."""
    pattern = re.compile(r"HiveMetaStore\.audit: ugi=(\S+)\s.*cmd=source:\S+ " + re.escape(cmd))
    deadline = time.monotonic() + timeout
    while True:
        match = pattern.search(metastore.server.log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if time.monotonic() > deadline:
            raise AssertionError(f"no HMS audit line for {cmd}")
        time.sleep(0.2)


@pytest.mark.parametrize("provider", ["basic", "jwt", "cert", "kerberos"])
def test_each_provider_through_the_tunnel(gateway, metastore, provider, tmp_path, kerberos_env):
    _, ttypes = hive_metastore_modules()
    tunnel, user = _tunnel(gateway, "hive/rw", provider, tmp_path, kerberos_env)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            # A spoofed claim: the answer is the authenticated user, as HMS shapes it (groups + user).
            groups = client.set_ugi("admin", ["supergroup"])
            assert groups[-1] == user and "admin" not in groups and "supergroup" not in groups
            assert "staff" in groups
            assert "default" in client.get_all_databases()
            name = f"tunnel_{provider}_{uuid.uuid4().hex[:8]}"
            client.create_database(ttypes.Database(name=name, description="via tunnel", ownerName="admin",
                                                   parameters={}))
            assert client.get_database(name).ownerName == user
        finally:
            transport.close()
        assert _ugi_audit(metastore, f"create_database: Database(name:{name},") == user
    finally:
        tunnel.stop()


def test_groups_are_the_gateways(gateway, tmp_path):
    tunnel, _ = _tunnel(gateway, "hive/ro", "basic", tmp_path)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            assert client.set_ugi("etl", ["wheel"]) == ["engineers", "staff", "etl"]
        finally:
            transport.close()
    finally:
        tunnel.stop()


def test_read_only_service_refuses_writes_and_unlisted_set_ugi(gateway, tmp_path):
    _, ttypes = hive_metastore_modules()
    tunnel, _ = _tunnel(gateway, "hive/ro", "basic", tmp_path)
    nougi, _ = _tunnel(gateway, "hive/nougi", "basic", tmp_path)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            with pytest.raises(TApplicationException, match="not exposed"):
                client.create_database(ttypes.Database(name="never_created", parameters={}))
            assert "never_created" not in client.get_all_databases()  # same connection, still usable
        finally:
            transport.close()
        client, transport = hive_metastore_client("127.0.0.1", nougi.port)
        try:  # set_ugi is a method like any other: a service must list it
            with pytest.raises(TApplicationException, match="set_ugi is not exposed"):
                client.set_ugi("etl", [])
        finally:
            transport.close()
    finally:
        tunnel.stop()
        nougi.stop()


def test_refused_credentials_reach_the_client_as_tapplicationexception(gateway, tmp_path):
    url = gateway.url("spark", "hive/ro")
    tunnel = start_tunnel(url, ["--auth", "basic", "--user", "etl", "--password-env", "TUNNEL_PW"],
                          ca=gateway.ca_file, env={"TUNNEL_PW": "wrong-password"})
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            with pytest.raises(TApplicationException, match=r"refused the credentials \(HTTP 401\)"):
                client.get_all_databases()
        finally:
            transport.close()
        deadline = time.monotonic() + 10
        while "get_all_databases (seqid" not in tunnel.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "HTTP 401" in tunnel.output()
        assert "wrong-password" not in tunnel.output() + gateway.log()
    finally:
        tunnel.stop()


def test_tunnel_survives_a_gateway_restart(gateway, realm, tmp_path):
    """The gateway goes away and comes back on the same port: the tunnel answers the calls in
    between with a TApplicationException and serves the same client connection afterwards."""
    tunnel, _ = _tunnel(gateway, "hive/ro", "basic", tmp_path)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            assert "default" in client.get_all_databases()
            stop_process(gateway.process)
            with pytest.raises(TApplicationException, match="gateway unreachable"):
                client.get_all_databases()
            log = open(gateway.workdir / "gateway.log", "ab")
            gateway.process = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "serve", "--config", str(gateway.workdir / "gateway.yaml")],
                stdout=log, stderr=subprocess.STDOUT, env=_gateway_env(realm))
            deadline = time.monotonic() + 60
            while True:
                try:
                    assert "default" in client.get_all_databases()
                    break
                except TApplicationException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            transport.close()
    finally:
        tunnel.stop()


def test_non_loopback_listen_is_refused(gateway):
    out = subprocess.run([sys.executable, "-m", "gateway.cli", "tunnel", "--gateway", gateway.url("spark", "hive/ro"),
                          "--listen", "0.0.0.0:0", "--auth", "kerberos"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--allow-remote" in out.stderr
