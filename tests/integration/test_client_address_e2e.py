"""The client address behind load balancers, end to end with the real gateway and HMS: one
address, from ``X-Forwarded-For`` of a trusted proxy or from a PROXY protocol header, feeds the
audit log, the service ACL's ``ips`` and the authentication-failure throttle.

The tests' own connections come from 127.0.0.1, which plays the load balancer.
"""

from __future__ import annotations

import base64
import http.client
import socket
import time
import uuid
from contextlib import contextmanager

import pytest

from tests.support.gateway import (SPEC_PATH, GatewayFactory, RunningGateway, audit_record, htpasswd_provider,
                                   metric, post, service)

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password"}
GET_ALL_DATABASES = '[1,"get_all_databases",1,0,{}]'
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def _gateway(factory: GatewayFactory, hms, listener: dict, **gateway_keys) -> RunningGateway:
    """A gateway whose HTTPS listener has ``listener``'s extra keys (and the gateway file
    ``gateway_keys``); audit lines in audit.jsonl."""
    svc = service([f"thrift://{hms.host}:{hms.port}"])
    topologies = {
        "default": {"services": [svc]},
        "acl": {"services": [dict(svc, authorization={"ips": ["203.0.113.0/24"]})]},
        "throttled": {
            "providers": {
                "authentication": [htpasswd_provider()],
                "failure_throttle": {"refuse_after": 2, "delay_after": 100, "window_seconds": 600},
            },
            "services": [svc],
        },
    }
    return factory(topologies, USERS, listener=listener, audit={"path": "audit.jsonl"}, **gateway_keys)


@pytest.fixture(scope="module")
def trusting(hms, module_gateway_factory):
    """127.0.0.1 is a trusted proxy."""
    return _gateway(module_gateway_factory, hms, {"trusted_proxies": ["127.0.0.1/32", "10.0.0.0/8"]})


@pytest.fixture(scope="module")
def distrusting(hms, module_gateway_factory):
    """Only 192.0.2.1 is a trusted proxy: our X-Forwarded-For is anyone's."""
    return _gateway(module_gateway_factory, hms, {"trusted_proxies": ["192.0.2.1"]})


@pytest.fixture(scope="module")
def proxied(hms, module_gateway_factory):
    """PROXY protocol from 127.0.0.1."""
    return _gateway(module_gateway_factory, hms, {"trusted_proxies": ["127.0.0.0/8"], "proxy_protocol": True})


def _post(gw, *, topology="default", xff: str | None = None, auth=("admin", "admin-password")):
    """POST get_all_databases; returns (status, the request's audit record)."""
    rid = "ca-" + uuid.uuid4().hex
    headers = {"X-Request-Id": rid}
    if xff is not None:
        headers["X-Forwarded-For"] = xff
    status, _, _ = post(gw, GET_ALL_DATABASES, topology=topology, auth=auth, headers=headers)
    return status, audit_record(gw, rid, path=gw.workdir / "audit.jsonl")


def test_forwarded_for_from_a_trusted_proxy_names_the_client(trusting):
    status, record = _post(trusting, xff="198.51.100.7")
    assert (status, record["client"]) == (200, "198.51.100.7")
    # the right-most address that is not a trusted proxy; the client's own entries are not believed
    status, record = _post(trusting, xff="203.0.113.66, 198.51.100.8, 10.1.2.3")
    assert (status, record["client"]) == (200, "198.51.100.8")
    status, record = _post(trusting)
    assert (status, record["client"]) == (200, "127.0.0.1")
    # a malformed entry: the proxy's own address, never an error
    status, record = _post(trusting, xff="198.51.100.7, not-an-address")
    assert (status, record["client"]) == (200, "127.0.0.1")


def test_acl_ips_judge_the_forwarded_client(trusting):
    status, record = _post(trusting, topology="acl", xff="203.0.113.5")
    assert (status, record["client"], record["outcome"]) == (200, "203.0.113.5", "allowed")
    status, record = _post(trusting, topology="acl", xff="198.51.100.7")
    assert (status, record["client"]) == (403, "198.51.100.7")
    assert "198.51.100.7" in record["reason"]
    status, _ = _post(trusting, topology="acl")  # the proxy itself is not in the ACL
    assert status == 403


def test_throttle_counts_per_forwarded_client(trusting):
    bad = ("admin", "wrong-password")
    for _ in range(2):
        assert _post(trusting, topology="throttled", xff="198.51.100.30", auth=bad)[0] == 401
    status, record = _post(trusting, topology="throttled", xff="198.51.100.30", auth=bad)
    assert (status, record["client"], record["detail"]) == (429, "198.51.100.30", "throttled")
    # another client behind the same proxy, and the proxy itself, are not locked out
    assert _post(trusting, topology="throttled", xff="198.51.100.31", auth=bad)[0] == 401
    assert _post(trusting, topology="throttled", xff="198.51.100.31")[0] == 200
    assert _post(trusting, topology="throttled")[0] == 200


def test_forwarded_for_from_an_untrusted_peer_is_ignored(distrusting):
    status, record = _post(distrusting, xff="198.51.100.7")
    assert (status, record["client"]) == (200, "127.0.0.1")
    status, record = _post(distrusting, topology="acl", xff="203.0.113.5")
    assert (status, record["client"]) == (403, "127.0.0.1")


# --- PROXY protocol (HAProxy spec), written byte by byte as a load balancer sends it ----------


def _v2(command: int, family: int, addresses: bytes) -> bytes:
    return V2_SIGNATURE + bytes([0x20 | command, family]) + len(addresses).to_bytes(2, "big") + addresses


def _v2_tcp4(source: str, port: int) -> bytes:
    return _v2(0x1, 0x11, socket.inet_aton(source) + socket.inet_aton("127.0.0.1")
               + port.to_bytes(2, "big") + (8443).to_bytes(2, "big"))


def _v2_tcp6(source: str, port: int) -> bytes:
    return _v2(0x1, 0x21, socket.inet_pton(socket.AF_INET6, source)
               + socket.inet_pton(socket.AF_INET6, "::1") + port.to_bytes(2, "big")
               + (8443).to_bytes(2, "big"))


def _wait_for_log(gw: RunningGateway, text: str, count: int, timeout: float = 10.0) -> None:
    """Wait until the gateway log holds ``text`` ``count`` times (it writes asynchronously)."""
    deadline = time.monotonic() + timeout
    while gw.log().count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} not logged {count} times:\n{gw.log()}"
        time.sleep(0.05)


@contextmanager
def _tls_after(gw: RunningGateway, header: bytes):
    """A TLS connection to ``gw`` whose first plaintext bytes are ``header``."""
    raw = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    raw.sendall(header)
    # An explicit handshake: when the gateway has already closed (a loaded machine), wrap_socket
    # finds the socket not connected (ENOTCONN) and silently skips the handshake.
    tls = gw.ssl_context().wrap_socket(raw, server_hostname="localhost", do_handshake_on_connect=False)
    tls.do_handshake()
    try:
        yield tls
    finally:
        tls.close()


def _proxied_post(gw: RunningGateway, header: bytes, requests: int = 1,
                  topology: str = "default") -> list[tuple[int, str]]:
    """POSTs over one connection that opens with ``header``: (status, audit client) for each."""
    results = []
    with _tls_after(gw, header) as tls:
        conn = http.client.HTTPSConnection("localhost", gw.port)
        conn.sock = tls
        for _ in range(requests):
            rid = "pp-" + uuid.uuid4().hex
            token = base64.b64encode(b"admin:admin-password").decode()
            conn.request("POST", f"/gateway/{topology}/{SPEC_PATH}", GET_ALL_DATABASES, {
                "Authorization": f"Basic {token}", "X-Request-Id": rid,
                "Content-Type": "application/vnd.apache.thrift.json"})
            response = conn.getresponse()
            response.read()
            record = audit_record(gw, rid, path=gw.workdir / "audit.jsonl")
            results.append((response.status, record["client"]))
    return results


@pytest.mark.parametrize("header, client", [
    (b"PROXY TCP4 198.51.100.20 127.0.0.1 40000 8443\r\n", "198.51.100.20"),
    (b"PROXY TCP6 2001:db8::20 ::1 40000 8443\r\n", "2001:db8::20"),
    (b"PROXY UNKNOWN\r\n", "127.0.0.1"),
    (_v2_tcp4("198.51.100.21", 40001), "198.51.100.21"),
    (_v2_tcp6("::ffff:198.51.100.22", 40002), "198.51.100.22"),
    (_v2(0x0, 0x00, b""), "127.0.0.1"),  # LOCAL: the balancer's own health check
])
def test_proxy_protocol_header_names_the_client(proxied, header, client):
    # two requests: the address belongs to the connection, not just its first request
    assert _proxied_post(proxied, header, requests=2) == [(200, client), (200, client)]


def test_proxy_protocol_with_two_workers_names_each_connections_client(hms, gateway_factory):
    # Both workers' PROXY listeners share the port (SO_REUSEPORT); each connection's header is
    # read by the worker that accepted it.
    gw = _gateway(gateway_factory, hms, {"trusted_proxies": ["127.0.0.0/8"], "proxy_protocol": True},
                  workers=2)
    sources = [f"198.51.100.{i}" for i in range(1, 25)]
    for source in sources:
        header = f"PROXY TCP4 {source} 127.0.0.1 40000 8443\r\n".encode()
        assert _proxied_post(gw, header) == [(200, source)]
    accepted = [metric(gw, "hms_gateway_worker_connections_total", worker=str(i)) for i in (0, 1)]
    assert all(n > 0 for n in accepted) and sum(accepted) >= len(sources), accepted


def test_proxy_protocol_source_feeds_the_acl(proxied):
    allowed = b"PROXY TCP4 203.0.113.5 127.0.0.1 40000 8443\r\n"
    assert _proxied_post(proxied, allowed, topology="acl") == [(200, "203.0.113.5")]
    outsider = b"PROXY TCP4 198.51.100.9 127.0.0.1 40000 8443\r\n"
    assert _proxied_post(proxied, outsider, topology="acl") == [(403, "198.51.100.9")]


@pytest.mark.parametrize("header", [
    b"",  # no header at all: the TLS ClientHello is not a PROXY header
    b"PROXY TCP4 198.51.100.20\r\n",  # malformed v1
    b"GET / HTTP/1.1\r\n",
])
def test_proxy_protocol_listener_refuses_connections_without_a_valid_header(proxied, header):
    refusals = proxied.log().count("no valid PROXY protocol header")
    with pytest.raises(OSError):  # ssl.SSLError, ConnectionResetError ...
        with _tls_after(proxied, header):
            pass
    _wait_for_log(proxied, "no valid PROXY protocol header", refusals + 1)
    # the listener still serves the next, well-formed connection
    assert _proxied_post(proxied, _v2_tcp4("198.51.100.23", 40003)) == [(200, "198.51.100.23")]


def test_proxy_protocol_refuses_untrusted_peers(hms, gateway_factory):
    gw = _gateway(gateway_factory, hms, {"trusted_proxies": ["192.0.2.1"], "proxy_protocol": True})
    refusals = gw.log().count("refused a connection from 127.0.0.1: not a trusted proxy")
    with pytest.raises(OSError):
        with _tls_after(gw, b"PROXY TCP4 198.51.100.20 127.0.0.1 40000 8443\r\n"):
            pass
    _wait_for_log(gw, "refused a connection from 127.0.0.1: not a trusted proxy", refusals + 1)
