"""Client address resolution: TCP peer, X-Forwarded-For from trusted proxies only, PROXY protocol
source addresses, IPv4-mapped IPv6, malformed entries, and the configuration keys."""

from __future__ import annotations

import logging

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict
from proxyprotocol.detect import ProxyProtocolDetect

from gateway.client_address import (
    CLIENT_ADDRESS,
    ClientAddresses,
    TrustedProxies,
    client_address,
    parse_address,
)
from gateway.config import ConfigError, GatewayConfig, load_gateway_config
from gateway.proxy_protocol import source_address


def request(remote: str | None = "127.0.0.1", *forwarded_for: str):
    headers = CIMultiDict(("X-Forwarded-For", value) for value in forwarded_for)
    return make_mocked_request("POST", "/gateway/t/svc", headers=headers).clone(remote=remote)


LB = ["10.0.0.0/8", "2001:db8:1::/48"]


@pytest.mark.parametrize("peer, xff, expected", [
    # the right-most address that is not a trusted proxy
    ("10.0.0.5", ["198.51.100.7"], "198.51.100.7"),
    ("10.0.0.5", ["203.0.113.9, 198.51.100.7"], "198.51.100.7"),
    ("10.0.0.5", ["198.51.100.7, 10.1.2.3"], "198.51.100.7"),
    ("10.0.0.5", ["spoofed, 198.51.100.7, 10.1.2.3"], "198.51.100.7"),
    # several header fields form one list, in order (RFC 9110 5.3)
    ("10.0.0.5", ["203.0.113.9", "198.51.100.7, 10.1.2.3"], "198.51.100.7"),
    # every hop trusted: the left-most
    ("10.0.0.5", ["10.9.9.9, 10.1.2.3"], "10.9.9.9"),
    # ports, brackets, IPv6, IPv4-mapped
    ("10.0.0.5", ["198.51.100.7:4711"], "198.51.100.7"),
    ("10.0.0.5", ["[2001:db8:2::1]:443"], "2001:db8:2::1"),
    ("10.0.0.5", ["2001:DB8:2:0::1"], "2001:db8:2::1"),
    ("10.0.0.5", ["::ffff:198.51.100.7"], "198.51.100.7"),
    ("2001:db8:1::9", ["198.51.100.7"], "198.51.100.7"),
    ("::ffff:10.0.0.5", ["198.51.100.7"], "198.51.100.7"),
    # malformed entries met on the walk: the peer
    ("10.0.0.5", ["not-an-address"], "10.0.0.5"),
    ("10.0.0.5", ["198.51.100.7, unknown"], "10.0.0.5"),
    ("10.0.0.5", [""], "10.0.0.5"),
    ("10.0.0.5", ["198.51.100.7:port"], "10.0.0.5"),
    ("10.0.0.5", ["[2001:db8::1"], "10.0.0.5"),
    # ... but not the ones left of the client: the client wrote those
    ("10.0.0.5", ["garbage, 198.51.100.7"], "198.51.100.7"),
    # an untrusted peer's header is ignored
    ("198.51.100.50", ["203.0.113.9"], "198.51.100.50"),
    ("::ffff:198.51.100.50", ["203.0.113.9"], "198.51.100.50"),
    # no header
    ("10.0.0.5", [], "10.0.0.5"),
])
def test_forwarded_for_resolution(peer, xff, expected):
    resolve = ClientAddresses(LB)
    req = request(peer, *xff)
    assert resolve(req) == expected
    assert client_address(req) == expected  # stored once, read by everyone after


def test_without_trusted_proxies_the_header_is_never_read():
    req = request("198.51.100.50", "203.0.113.9")
    assert ClientAddresses()(req) == "198.51.100.50"
    assert req[CLIENT_ADDRESS] == "198.51.100.50"


def test_accessor_before_resolution_and_without_a_peer():
    assert client_address(request("::ffff:192.0.2.1")) == "192.0.2.1"
    assert client_address(request("2001:db8::1")) == "2001:db8::1"
    assert client_address(request(None)) == "unknown"
    assert ClientAddresses(LB)(request(None, "198.51.100.7")) == "unknown"


def test_proxy_protocol_source_replaces_the_peer():
    req = request("10.0.0.5")
    resolve = ClientAddresses(LB, {req.protocol: "198.51.100.20"})
    assert resolve(req) == "198.51.100.20"
    # a PROXY source that is itself a trusted proxy may pass X-Forwarded-For on
    chained = request("10.0.0.5", "203.0.113.4")
    assert ClientAddresses(LB, {chained.protocol: "10.3.3.3"})(chained) == "203.0.113.4"
    # an untrusted PROXY source's header is ignored
    spoof = request("10.0.0.5", "203.0.113.4")
    assert ClientAddresses(LB, {spoof.protocol: "198.51.100.20"})(spoof) == "198.51.100.20"
    # a connection without a PROXY source (LOCAL header) keeps the TCP peer
    assert ClientAddresses(LB, {})(request("10.0.0.5")) == "10.0.0.5"


def test_malformed_header_is_logged_once(caplog):
    resolve = ClientAddresses(LB)
    with caplog.at_level(logging.INFO, logger="gateway.client_address"):
        for _ in range(3):
            assert resolve(request("10.0.0.5", "bogus")) == "10.0.0.5"
    lines = [r for r in caplog.records if "malformed X-Forwarded-For" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO


@pytest.mark.parametrize("text, expected", [
    ("192.0.2.1", "192.0.2.1"), (" 192.0.2.1 ", "192.0.2.1"), ("192.0.2.1:80", "192.0.2.1"),
    ("[::1]", "::1"), ("[::1]:8443", "::1"), ("::1", "::1"), ("::ffff:192.0.2.1", "192.0.2.1"),
    ("192.0.2.256", None), ("[::1]x", None), ("[::1]:", None), ("a:b", None), ("", None),
    ("unknown", None), ("_hidden", None),
])
def test_parse_address(text, expected):
    parsed = parse_address(text)
    assert (str(parsed) if parsed else None) == expected


def test_trusted_proxies_mix_families():
    trusted = TrustedProxies(["192.0.2.0/24", "2001:db8::/32", "198.51.100.1"])
    assert trusted.trusts("192.0.2.77") and trusted.trusts("::ffff:192.0.2.77")
    assert trusted.trusts("2001:db8:ffff::1") and trusted.trusts("198.51.100.1")
    assert not trusted.trusts("198.51.100.2") and not trusted.trusts("unknown")
    assert not TrustedProxies([])


@pytest.mark.parametrize("header, expected", [
    (b"PROXY TCP4 198.51.100.20 192.0.2.1 40000 8443\r\n", "198.51.100.20"),
    (b"PROXY TCP6 2001:db8::20 2001:db8::1 40000 8443\r\n", "2001:db8::20"),
    (b"PROXY TCP6 ::ffff:198.51.100.20 ::1 40000 8443\r\n", "198.51.100.20"),
    (b"PROXY UNKNOWN\r\n", None),
    # v2 PROXY TCP over IPv4, 12 address bytes
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c" + bytes([198, 51, 100, 21, 192, 0, 2, 1])
     + (40000).to_bytes(2, "big") + (8443).to_bytes(2, "big"), "198.51.100.21"),
    # v2 LOCAL (a load balancer's own health check)
    (b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00", None),
])
def test_proxy_header_source_address(header, expected):
    assert source_address(ProxyProtocolDetect().unpack(header)) == expected


def write(tmp_path, listener: dict):
    (tmp_path / "gateway.yaml").write_text(
        "tls: {certificate: c.pem, private_key: k.pem}\n"
        f"listeners: {{gateway: {listener!r}}}\n".replace("'", '"').replace("True", "true")
    )
    return tmp_path / "gateway.yaml"


def test_config_defaults_and_values(tmp_path):
    default = GatewayConfig.model_validate({"tls": {"certificate": "c", "private_key": "k"}})
    assert default.listeners.gateway.trusted_proxies == []
    assert default.listeners.gateway.proxy_protocol is False
    cfg = load_gateway_config(write(tmp_path, {
        "port": 8443, "trusted_proxies": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"],
        "proxy_protocol": True}))
    assert cfg.listeners.gateway.trusted_proxies == ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]
    assert cfg.listeners.gateway.proxy_protocol is True


@pytest.mark.parametrize("listener, key, reason", [
    ({"port": 1, "trusted_proxies": ["10.0.0.0/33"]}, "listeners.gateway.trusted_proxies",
     "'10.0.0.0/33' is not an IP address or a CIDR network"),
    ({"port": 1, "trusted_proxies": ["*"]}, "listeners.gateway.trusted_proxies", "'*' is not"),
    ({"port": 1, "proxy_protocol": True}, "listeners.gateway", "proxy_protocol needs trusted_proxies"),
    ({"port": 1, "proxy_protocl": True}, "listeners.gateway.proxy_protocl", "Extra inputs"),
])
def test_config_errors_name_file_key_reason(tmp_path, listener, key, reason):
    path = write(tmp_path, listener)
    with pytest.raises(ConfigError) as err:
        load_gateway_config(path)
    assert err.value.file == str(path.resolve())
    assert err.value.key == key
    assert reason in err.value.reason
