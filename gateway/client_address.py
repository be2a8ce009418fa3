"""The client address of a request: the one address the audit log, the service ACL's ``ips``,
``doAs`` host rules and the authentication-failure throttle all judge.

Without trusted proxies it is the TCP peer. Behind load balancers, proxies in the configured
``listeners.gateway.trusted_proxies`` networks may name the client:

* ``X-Forwarded-For`` (de-facto standard, as nginx ``real_ip_recursive on`` and Knox read it):
  when the peer is trusted, the chain is walked from the right and the first address that is
  not itself a trusted proxy is the client; if every hop is trusted, the left-most one. From an
  untrusted peer the header is ignored: anyone can write it. A malformed entry met during the
  walk makes the peer the client (logged once, never an error).
* the PROXY protocol v1/v2 (HAProxy spec, :mod:`gateway.proxy_protocol`): the header's source
  address takes the place of the TCP peer; ``X-Forwarded-For`` then applies to it as above.

IPv4-mapped IPv6 addresses (``::ffff:192.0.2.1``, what a dual-stack socket reports) are
written as IPv4, so ``192.0.2.0/24`` in an ACL matches them.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping

from aiohttp import hdrs, web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Where :class:`ClientAddresses` stores the resolved address in the request.
CLIENT_ADDRESS = web.RequestKey("hms_gateway.client_address", str)
_MAPPED_PREFIX = "::ffff:"


def client_address(request: web.Request) -> str:
    """The request's client address (IP address text; ``"unknown"`` when the transport has none).

    The address :class:`ClientAddresses` resolved for this request; before that ran, the TCP peer.
    """
    address = request.get(CLIENT_ADDRESS)
    return address if address is not None else unmapped(request.remote)


def unmapped(address: str | None) -> str:
    """``address`` with an IPv4-mapped IPv6 prefix removed; None becomes ``"unknown"``."""
    if address is None:
        return "unknown"
    if address.startswith(_MAPPED_PREFIX) and "." in address:
        return address[len(_MAPPED_PREFIX):]
    return address


def parse_address(text: str) -> IPAddress | None:
    """One ``X-Forwarded-For`` entry as an address, else None.

    Accepts ``192.0.2.1``, ``2001:db8::1``, and with a port (some proxies add one)
    ``192.0.2.1:443`` and ``[2001:db8::1]:443``. IPv4-mapped IPv6 is returned as IPv4.
    """
    text = text.strip()
    if text.startswith("["):
        text, bracket, port = text[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return None
    elif text.count(":") == 1:
        text, _, port = text.partition(":")
        if not port.isdigit():
            return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The configured proxy networks (IP addresses or CIDR networks, IPv4 and IPv6)."""

    def __init__(self, networks: Iterable[str]):
        self.networks: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(n, strict=False) for n in networks
        )

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: IPAddress | str | None) -> bool:
        """True when ``address`` (an address or its text) lies in a trusted network."""
        if isinstance(address, str):
            address = parse_address(address)
        return address is not None and any(address in net for net in self.networks)

    def forwarded_client(self, peer: str, forwarded_for: Iterable[str]) -> str | None:
        """The client named by the ``X-Forwarded-For`` values of a request from trusted ``peer``.

        ``forwarded_for``: every ``X-Forwarded-For`` field value, in order (several fields are
        one comma-separated list, RFC 9110 §5.3). Returns the right-most address that is not a
        trusted proxy (the left-most if all are), or None when an entry met on the way is
        malformed (the caller then uses the peer).
        """
        entries = [e for value in forwarded_for for e in value.split(",")]
        client = None
        for entry in reversed(entries):
            client = parse_address(entry)
            if client is None:
                return None
            if not self.trusts(client):
                break
        return str(client) if client is not None else peer


class ClientAddresses:
    """Resolves each request's client address once and stores it under :data:`CLIENT_ADDRESS`.

    ``proxied_peers``: connection (aiohttp ``RequestHandler``) → source address its PROXY
    protocol header gave; None when the listener does not speak the PROXY protocol. Without
    trusted proxies a call only reads the TCP peer.
    """

    def __init__(
        self,
        trusted_proxies: Iterable[str] = (),
        proxied_peers: Mapping[RequestHandler, str] | None = None,
    ):
        self.trusted = TrustedProxies(trusted_proxies)
        self.proxied_peers = proxied_peers
        self._forwarding = bool(self.trusted)  # checked on every request: keep it an attribute
        self._malformed_logged = False

    def __call__(self, request: web.Request) -> str:
        """The client address of ``request`` (IP address text, or ``"unknown"``), stored in it."""
        peer = None
        if self.proxied_peers is not None:
            peer = self.proxied_peers.get(request.protocol)
        if peer is None:
            peer = unmapped(request.remote)
        if self._forwarding:
            forwarded = request.headers.getall(hdrs.X_FORWARDED_FOR, ())
            if forwarded and self.trusted.trusts(peer):
                client = self.trusted.forwarded_client(peer, forwarded)
                if client is None:
                    self._log_malformed(peer)
                else:
                    peer = client
        request[CLIENT_ADDRESS] = peer
        return peer

    def _log_malformed(self, peer: str) -> None:
        # Once per process: a misconfigured load balancer would otherwise log on every request.
        if not self._malformed_logged:
            self._malformed_logged = True
            log.info(
                "malformed X-Forwarded-For from trusted proxy %s: using the proxy's address "
                "(logged once)", peer,
            )
