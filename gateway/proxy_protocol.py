"""The gateway listener when ``listeners.gateway.proxy_protocol`` is on: every connection starts
with a PROXY protocol header (HAProxy "The PROXY protocol", versions 1 and 2) in plaintext,
before the TLS handshake.

A connection is accepted as plain TCP; one from outside ``trusted_proxies`` is closed at once
(anyone could otherwise claim any address). The header is read without consuming a byte past
it, parsed by the ``proxy-protocol`` package, and the socket is then handed to the event loop
with TLS (``connect_accepted_socket``) and to aiohttp's request handler, like any other
connection. A missing, malformed or late (``limits.client_header_timeout_seconds``) header
closes the connection. The header's source address is kept per connection for
:class:`gateway.client_address.ClientAddresses`; a ``LOCAL`` (v2) or ``UNKNOWN`` header, as load
balancers send for their own health checks, leaves the TCP peer as the client.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from proxyprotocol.detect import ProxyProtocolDetect
from proxyprotocol.reader import ProxyProtocolReader
from proxyprotocol.result import ProxyResult, is_ipv4, is_ipv6

from gateway.client_address import TrustedProxies, unmapped

log = logging.getLogger(__name__)

#: A v1 header is at most 107 bytes, CRLF included (spec section 2.1).
_V1_MAX = 107
#: Largest v2 address block + TLVs accepted; the spec allows 65535, load balancers send < 300.
_V2_MAX = 4096
_BACKLOG = 128
_READER = ProxyProtocolReader(ProxyProtocolDetect())


class ProxiedServer(web.Server):
    """aiohttp's low-level server that remembers each connection's PROXY source address
    (:attr:`proxied_peers`, handler → address) for as long as the connection lives."""

    def __init__(self, *args, proxied_peers: dict[RequestHandler, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.proxied_peers = proxied_peers

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        self.proxied_peers.pop(handler, None)
        super().connection_lost(handler, exc)


def source_address(result: ProxyResult) -> str | None:
    """The client address a parsed header names; None for ``LOCAL``, ``UNKNOWN`` and UNIX."""
    if not (result.proxied and (is_ipv4(result) or is_ipv6(result))):
        return None
    address = result.source[0]
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


class _SocketReader:
    """The ``readexactly``/``readline`` reader ``ProxyProtocolReader`` expects, over a raw
    non-blocking socket, never reading past the header: the bytes after it are the TLS
    ClientHello and belong to the TLS layer."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._read = 0

    async def readexactly(self, n: int) -> bytes:
        if self._read + n > 16 + _V2_MAX:
            raise ValueError(f"PROXY header longer than {16 + _V2_MAX} bytes")
        data = bytearray()
        while len(data) < n:
            chunk = await self._loop.sock_recv(self._sock, n - len(data))
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(data), n)
            data += chunk
        self._read += n
        return bytes(data)

    async def readline(self) -> bytes:
        # The v1 line has no length field: peek until its LF has arrived, then read up to it.
        while True:
            await self._readable()
            ahead = self._sock.recv(_V1_MAX - self._read, socket.MSG_PEEK)
            if not ahead:
                raise asyncio.IncompleteReadError(b"", None)
            end = ahead.find(b"\n")
            if end >= 0:
                return await self.readexactly(end + 1)
            if len(ahead) >= _V1_MAX - self._read:
                raise ValueError(f"PROXY v1 header longer than {_V1_MAX} bytes")
            await asyncio.sleep(0.01)  # a partial line stays readable: do not spin on it

    async def _readable(self) -> None:
        ready = self._loop.create_future()
        fd = self._sock.fileno()
        self._loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            self._loop.remove_reader(fd)


class ProxyProtocolListener:
    """Accepts TLS connections that open with a PROXY protocol header from a trusted proxy.

    ``proxied_peers``: the :class:`ProxiedServer`'s map, filled here; ``handler_factory``: makes
    aiohttp's request handler for a connection (the server's protocol factory).
    """

    def __init__(
        self,
        proxied_peers: dict[RequestHandler, str],
        handler_factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext,
        trusted: TrustedProxies,
        header_timeout: float,
    ):
        self.proxied_peers, self.handler_factory = proxied_peers, handler_factory
        self.ssl_context, self.trusted, self.header_timeout = ssl_context, trusted, header_timeout
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self, host: str, port: int, reuse_port: bool = False) -> int:
        """Bind ``host:port`` and accept in the background; returns the bound port.
        ``reuse_port``: ``SO_REUSEPORT``, so worker processes share the port."""
        loop = asyncio.get_running_loop()
        family, *_, address = (await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))[0]
        self._sock = socket.create_server(address, family=family, backlog=_BACKLOG,
                                           reuse_port=reuse_port)
        self._sock.setblocking(False)
        self._spawn(self._accept())
        return self._sock.getsockname()[1]

    async def stop(self) -> None:
        """Stop accepting and drop connections whose header or handshake is still pending."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(self._sock)
            except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._spawn(self._admit(conn, unmapped(peer[0])))

    async def _admit(self, conn: socket.socket, peer: str) -> None:
        conn.setblocking(False)
        handler, handed_over = None, False
        try:
            if not self.trusted.trusts(peer):
                log.info("refused a connection from %s: not a trusted proxy (PROXY protocol listener)", peer)
                return
            try:
                async with asyncio.timeout(self.header_timeout):
                    result = await _READER.read(_SocketReader(conn))
            except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.info("closed a connection from %s: no valid PROXY protocol header (%s)",
                         peer, exc or type(exc).__name__)
                return
            protocol = self.handler_factory()
            handler = getattr(protocol, "handler", protocol)  # behind the request-line check
            client = source_address(result)
            if client is not None:
                self.proxied_peers[handler] = client
            try:
                await asyncio.get_running_loop().connect_accepted_socket(
                    lambda: protocol, conn, ssl=self.ssl_context,
                    ssl_handshake_timeout=self.header_timeout,
                )
                handed_over = True
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                log.info("TLS handshake with %s (via %s) failed: %s", client or peer, peer, exc)
        finally:
            if not handed_over:  # also on cancellation by stop()
                if handler is not None:
                    self.proxied_peers.pop(handler, None)
                conn.close()
