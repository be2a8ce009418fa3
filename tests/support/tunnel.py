"""Run the real tunnel, the client distribution's ``hms-gateway-tunnel``, as a subprocess in
front of a test gateway.

The tunnel listens on a free loopback port it picks itself (``--listen 127.0.0.1:0``) and prints
the Spark setting naming it; :func:`start_tunnel` reads the port from that line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jose import jwt

from gateway.certs import write_client_certificate
from tests.support.gateway import MTLS, GatewayFactory, RunningGateway, htpasswd_provider, stop_process

#: The tunnel's command: the client distribution's console script (``hms-gateway-tunnel``,
#: :mod:`hms_gateway_client.cli`) as the suite's venv holds it (``make install``).
TUNNEL = (sys.executable, "-m", "hms_gateway_client.cli")

_SETTING = re.compile(r"spark\.hadoop\.hive\.metastore\.uris=thrift://127\.0\.0\.1:(\d+)")


@dataclass
class RunningTunnel:
    port: int
    process: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def output(self) -> str:
        """Everything the tunnel printed or logged so far."""
        return "".join(self.lines)

    def stop(self) -> None:
        stop_process(self.process)


def start_tunnel(gateway_url: str, auth_args: list[str], *, ca: Path | None, env: dict[str, str] | None = None,
                 extra: list[str] | None = None, timeout: float = 60.0,
                 program: Sequence[str] = TUNNEL) -> RunningTunnel:
    """Start ``hms-gateway-tunnel --gateway gateway_url <auth_args>`` and wait for its Spark line.

    ``env`` is added to this process's environment (secrets, ``KRB5CCNAME``); ``program`` is the
    tunnel's command (default :data:`TUNNEL`; the ``hms-gateway-tunnel`` of a fresh venv:
    tests/integration/test_client_install.py). Raises RuntimeError with the tunnel's output if it
    exits or prints nothing in ``timeout`` s.
    """
    cmd = [*program, "--gateway", gateway_url, "--listen", "127.0.0.1:0", *auth_args, *(extra or [])]
    if ca is not None:
        cmd += ["--ca", str(ca)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    tunnel = RunningTunnel(0, proc)
    found = threading.Event()

    def pump() -> None:  # keep reading so that the tunnel never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            tunnel.lines.append(line)
            match = _SETTING.search(line)
            if match and not found.is_set():
                tunnel.port = int(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.1):
        if time.monotonic() > deadline:
            break
    if not tunnel.port:
        tunnel.stop()
        raise RuntimeError(f"tunnel did not start: {tunnel.output()}")
    return tunnel


# --- the tunnel tests' gateway (tests/integration/conftest.py: the tunnel_* fixtures) ---------

HMAC_KEY = "hmac-key-of-the-tunnel-test-tokens-0123456789"
READS = ["set_ugi", "get_all_databases", "get_databases", "get_database", "get_table"]
WRITES = [*READS, "create_database"]
#: htpasswd users of the tunnel tests' gateway.
USERS = {"etl": "etl-password", "carol": "carol-password"}


def start_tunnel_test_gateway(start: GatewayFactory, workdir: Path, metastore, realm) -> RunningGateway:
    """A gateway started by ``start`` in ``workdir`` (``RunningGateway``, with ``client_certs``:
    the directory of alice's client certificate) whose topology ``spark`` has every
    authentication provider: client certificates, htpasswd (:data:`USERS`), JWT (HS256 with
    :data:`HMAC_KEY`, :func:`token`) and Kerberos in ``realm`` with a session cookie; services
    ``hive/ro`` (:data:`READS`), ``hive/rw`` (:data:`WRITES`) and ``hive/nougi`` on ``metastore``."""
    workdir.mkdir(parents=True, exist_ok=True)  # the secret files need absolute paths
    url = f"thrift://127.0.0.1:{metastore.port}"
    providers = [
        {"type": "mtls"},
        htpasswd_provider(),
        {"type": "jwt", "algorithms": ["HS256"], "issuer": "tunnel-test", "audience": "hms",
         "hmac_key": f"file:{secret_file(workdir / 'jwt.key', HMAC_KEY)}"},
        {"type": "kerberos", "principal": realm.principal, "keytab": str(realm.keytab),
         # the session cookie the tunnel keeps (calls after the first skip the handshake)
         "cookie": {"signing_key": f"file:{secret_file(workdir / 'cookie.key', HMAC_KEY + '-cookie')}",
                    "lifetime_seconds": 600}},
    ]
    topology = {
        "providers": {"authentication": providers, "identity_assertion": {"group_mapping": "etl=engineers;*=staff"}},
        "services": [
            {"path": "hive/ro", "upstream": {"urls": [url]}, "options": {"methods": READS}},
            {"path": "hive/rw", "upstream": {"urls": [url]}, "options": {"methods": WRITES}},
            {"path": "hive/nougi", "upstream": {"urls": [url]}, "options": {"methods": ["get_all_databases"]}},
        ],
    }
    gw = start({"spark": topology}, USERS, workdir=workdir, tls=MTLS, env={**realm.env, "KRB5_KTNAME": None})
    gw.client_certs = workdir / "certs"  # type: ignore[attr-defined]
    write_client_certificate(gw.client_certs, "alice")  # signed by the gateway's CA
    return gw


def gateway_env(realm) -> dict[str, str]:
    """The gateway's environment: the realm's krb5.conf, no KRB5_KTNAME (the keytab is config)."""
    env = {**os.environ, **realm.env, "PYTHONUNBUFFERED": "1"}
    env.pop("KRB5_KTNAME", None)
    return env


def secret_file(path: Path, value: str) -> Path:
    """``value`` written to ``path``, readable by its owner only."""
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def token(sub: str) -> str:
    """A JWT for ``sub`` that the tunnel tests' gateway accepts (10 minutes)."""
    now = int(time.time())
    return jwt.encode({"iss": "tunnel-test", "aud": "hms", "sub": sub, "exp": now + 600, "nbf": now},
                      HMAC_KEY, algorithm="HS256")
