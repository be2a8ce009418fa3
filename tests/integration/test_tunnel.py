"""The tunnel (the client distribution's ``hms-gateway-tunnel``) end to end with every authentication provider, and the set_ugi rule.

Real parts: a real HMS 2.3.10 (empty, this module's own, since the calls create databases), the
real gateway (``hms-gateway serve``) with htpasswd, JWT, Kerberos (the test KDC) and client
certificates in one topology, the real tunnel (``hms-gateway-tunnel``, a subprocess), and
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
from thrift.Thrift import TApplicationException

from tests.support.gateway import stop_process
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules
from tests.support.tunnel import TUNNEL, USERS, gateway_env, secret_file, start_tunnel, token

pytestmark = pytest.mark.integration


def _tunnel(tunnel_gateway, path: str, provider: str, tmp_path, tunnel_kerberos_env=None):
    """(running tunnel, user the gateway should see) for ``provider``."""
    url = tunnel_gateway.url("spark", path)
    if provider == "basic":
        return start_tunnel(url, ["--auth", "basic", "--user", "etl", "--password-env", "TUNNEL_PW"],
                            ca=tunnel_gateway.ca_file, env={"TUNNEL_PW": USERS["etl"]}), "etl"
    if provider == "jwt":
        token_file = secret_file(tmp_path / "token", token("carol"))
        return start_tunnel(url, ["--auth", "bearer", "--token-file", str(token_file)], ca=tunnel_gateway.ca_file), "carol"
    if provider == "cert":
        certs = tunnel_gateway.client_certs
        return start_tunnel(url, ["--auth", "cert", "--cert", str(certs / "alice.crt"),
                                  "--key", str(certs / "alice.key")], ca=tunnel_gateway.ca_file), "alice"
    assert provider == "kerberos"
    return start_tunnel(url, ["--auth", "kerberos"], ca=tunnel_gateway.ca_file, env=tunnel_kerberos_env), "dave"


def _ugi_audit(tunnel_metastore, cmd: str, timeout: float = 30.0) -> str:
    """The ``ugi=`` of HMS's audit line for ``cmd`` (HMS writes its log asynchronously)."""
    pattern = re.compile(r"HiveMetaStore\.audit: ugi=(\S+)\s.*cmd=source:\S+ " + re.escape(cmd))
    deadline = time.monotonic() + timeout
    while True:
        match = pattern.search(tunnel_metastore.server.log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if time.monotonic() > deadline:
            raise AssertionError(f"no HMS audit line for {cmd}")
        time.sleep(0.2)


@pytest.mark.parametrize("provider", ["basic", "jwt", "cert", "kerberos"])
def test_each_provider_through_the_tunnel(tunnel_gateway, tunnel_metastore, provider, tmp_path, tunnel_kerberos_env):
    _, ttypes = hive_metastore_modules()
    tunnel, user = _tunnel(tunnel_gateway, "hive/rw", provider, tmp_path, tunnel_kerberos_env)
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
        assert _ugi_audit(tunnel_metastore, f"create_database: Database(name:{name},") == user
    finally:
        tunnel.stop()


def test_groups_are_the_gateways(tunnel_gateway, tmp_path):
    tunnel, _ = _tunnel(tunnel_gateway, "hive/ro", "basic", tmp_path)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            assert client.set_ugi("etl", ["wheel"]) == ["engineers", "staff", "etl"]
        finally:
            transport.close()
    finally:
        tunnel.stop()


def test_read_only_service_refuses_writes_and_unlisted_set_ugi(tunnel_gateway, tmp_path):
    _, ttypes = hive_metastore_modules()
    tunnel, _ = _tunnel(tunnel_gateway, "hive/ro", "basic", tmp_path)
    nougi, _ = _tunnel(tunnel_gateway, "hive/nougi", "basic", tmp_path)
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


def test_refused_credentials_stop_the_tunnel_at_start(tunnel_gateway, tmp_path):
    """The tunnel asks the gateway once before listening: wrong credentials end it with the
    gateway's reason and status 2, never with the password in a log."""
    url = tunnel_gateway.url("spark", "hive/ro")
    out = subprocess.run([*TUNNEL, "--gateway", url, "--listen", "127.0.0.1:0",
                          "--auth", "basic", "--user", "etl", "--password-env", "TUNNEL_PW",
                          "--ca", str(tunnel_gateway.ca_file)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "TUNNEL_PW": "wrong-password"})
    assert out.returncode == 2
    assert "tunnel: gateway refused the credentials (HTTP 401)" in out.stderr
    assert "spark.hadoop.hive.metastore.uris" not in out.stdout
    assert "wrong-password" not in out.stdout + out.stderr + tunnel_gateway.log()


def test_without_ca_the_tunnel_says_the_certificate_is_not_trusted(tunnel_gateway):
    url = tunnel_gateway.url("spark", "hive/ro")
    out = subprocess.run([*TUNNEL, "--gateway", url, "--listen", "127.0.0.1:0",
                          "--auth", "basic", "--user", "etl", "--password-env", "TUNNEL_PW"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "TUNNEL_PW": "etl-password"})
    assert out.returncode == 2
    assert out.stderr.startswith("tunnel: certificate not trusted: pass --ca")


def test_tunnel_survives_a_gateway_restart(tunnel_gateway, kerberos_realm, tmp_path):
    """The gateway goes away and comes back on the same port: the tunnel answers the calls in
    between with a TApplicationException and serves the same client connection afterwards."""
    tunnel, _ = _tunnel(tunnel_gateway, "hive/ro", "basic", tmp_path)
    try:
        client, transport = hive_metastore_client("127.0.0.1", tunnel.port)
        try:
            assert "default" in client.get_all_databases()
            stop_process(tunnel_gateway.process)
            with pytest.raises(TApplicationException, match="gateway unreachable"):
                client.get_all_databases()
            log = open(tunnel_gateway.workdir / "gateway.log", "ab")
            tunnel_gateway.process = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "serve", "--config", str(tunnel_gateway.workdir / "gateway.yaml")],
                stdout=log, stderr=subprocess.STDOUT, env=gateway_env(kerberos_realm))
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


def test_non_loopback_listen_is_refused(tunnel_gateway):
    out = subprocess.run([*TUNNEL, "--gateway", tunnel_gateway.url("spark", "hive/ro"),
                          "--listen", "0.0.0.0:0", "--auth", "kerberos"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--allow-remote" in out.stderr
