"""TLS session resumption on the gateway's listener (issue 14): a client that sends
``Connection: close`` on every call (as Microsoft's Node client for this endpoint does) pays a
full handshake per call unless it resumes its session.

The real gateway subprocess (uvloop's TLS on the server side) in front of a real HMS:

* Python's ``ssl`` client keeps ``SSLSocket.session`` after a call and offers it on the next
  connection; the server must resume it with TLS 1.3 (session tickets, RFC 8446 4.6.1) and with
  TLS 1.2 (RFC 5077 tickets / session ids), and the resumed connection still serves the call;
* a session that this gateway never issued (another gateway's, same CA) is not resumed;
* Node's ``https.Agent`` (keepAlive false, so a new TLS connection per request) caches sessions
  by default: ``tlsSocket.isSessionReused()`` must be true from the second request on
  (``tests/node/tls_session_reuse.js``).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess

import pytest

from tests.support.gateway import GatewayFactory, RunningGateway, service
from tests.support.hms import RunningHMS
from tests.support.node import NODE_DIR, tool

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"
CALL = b'[1,"get_all_databases",1,1,{}]'
VERSIONS = {"TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLSv1.2": ssl.TLSVersion.TLSv1_2}


def _start(factory: GatewayFactory, hms: RunningHMS) -> RunningGateway:
    return factory(services=[service([f"thrift://127.0.0.1:{hms.port}"])], users={USER: PASSWORD})


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    return _start(module_gateway_factory, hms)


def call_with_close(gw: RunningGateway, context: ssl.SSLContext, session: ssl.SSLSession | None):
    """One get_all_databases with ``Connection: close`` on a new TLS connection offering ``session``.

    Returns (HTTP reply bytes, negotiated version, session_reused, the session to offer next),
    the session read after the reply: a TLS 1.3 ticket arrives after the handshake.
    """
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    head = (f"POST /{gw.url().split('/', 3)[3]} HTTP/1.1\r\nHost: localhost:{gw.port}\r\n"
            f"Authorization: Basic {token}\r\nContent-Type: application/vnd.apache.thrift.json\r\n"
            f"Content-Length: {len(CALL)}\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
            tls.sendall(head.encode() + CALL)
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
            return reply, tls.version(), tls.session_reused, tls.session


@pytest.mark.parametrize("version", VERSIONS)
def test_a_client_offering_its_session_gets_it_resumed(gateway, version):
    context = gateway.ssl_context()
    context.minimum_version = context.maximum_version = VERSIONS[version]
    reply, negotiated, reused, session = call_with_close(gateway, context, None)
    assert negotiated == version and not reused
    assert reply.startswith(b"HTTP/1.1 200") and b'"default"' in reply
    assert session is not None
    for _ in range(2):
        reply, negotiated, reused, session = call_with_close(gateway, context, session)
        assert negotiated == version and reused
        assert reply.startswith(b"HTTP/1.1 200") and b'"default"' in reply


def test_a_session_from_another_gateway_is_not_resumed(gateway, hms, gateway_factory):
    other = _start(gateway_factory, hms)
    context = other.ssl_context()  # the other gateway's CA; its certificate is for localhost too
    context.load_verify_locations(cafile=str(gateway.ca_file))
    _, _, _, foreign = call_with_close(other, context, None)
    reply, _, reused, _ = call_with_close(gateway, context, foreign)
    assert not reused
    assert reply.startswith(b"HTTP/1.1 200")


def test_node_https_agent_reuses_its_tls_session(gateway, tmp_path):
    config = {"host": "localhost", "port": gateway.port, "path": "/" + gateway.url().split("/", 3)[3],
              "user": USER, "password": PASSWORD, "ca": str(gateway.ca_file), "calls": 3}
    config_file = tmp_path / "node-config.json"
    config_file.write_text(json.dumps(config))
    out = subprocess.run([tool("node"), str(NODE_DIR / "tls_session_reuse.js"), str(config_file)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    for version in VERSIONS:
        calls = results[version]
        assert [c["status"] for c in calls] == [200, 200, 200], version
        assert all(c["protocol"] == version and '"default"' in c["body"] for c in calls), version
        assert [c["reused"] for c in calls] == [False, True, True], version
