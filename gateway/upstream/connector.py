"""How an upstream connection is set up once its TCP socket is open: the seam between the pool
(:mod:`gateway.upstream.pool`, which owns sockets, idle lists, deadlines) and the way HMS is
told who calls.

* :class:`PlainConnector`: an unsecured HMS; the Thrift transport as configured (unframed or
  framed), the identity sent with ``set_ugi`` on each new connection.
* :class:`gateway.upstream.secure.SaslConnector`: a Kerberized HMS; SASL (GSSAPI as the
  gateway, or DIGEST-MD5 with an end user's delegation token), no ``set_ugi``.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Protocol

from gateway.upstream.framing import Framed, Unframed
from gateway.upstream.ugi import Identity, UgiKey, ugi_key

#: A call as the gateway itself (strict-binary request → reply), for a connector's own RPCs.
GatewayCall = Callable[[bytes], Awaitable[bytes]]


class Connector(Protocol):
    #: Whether the pool sends ``set_ugi`` for a connection's identity.
    sends_ugi: bool

    def key(self, identity: Identity | None) -> UgiKey:
        """The pooling key of a call acting for ``identity`` (None: the gateway's own)."""

    def bind(self, gateway_call: GatewayCall) -> None:
        """Give the connector the pool's own call as the gateway (None identity)."""

    async def open(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   label: str, key: UgiKey) -> Unframed:
        """The transport of a freshly opened connection for ``key``. Raises
        :class:`~gateway.upstream.errors.UpstreamError` subclasses."""

    def released(self, key: UgiKey) -> None:
        """The pool evicted the last connection of ``key`` (its credentials may go)."""

    async def close(self) -> None:
        """The pool is closing: give back what the connector holds."""


class PlainConnector:
    """An unsecured HMS: binary Thrift as configured; identities by ``set_ugi``."""

    sends_ugi = True

    def __init__(self, framed: bool = False):
        self.framed = framed

    def key(self, identity: Identity | None) -> UgiKey:
        return ugi_key(identity)

    def bind(self, gateway_call: GatewayCall) -> None:
        pass

    async def open(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   label: str, key: UgiKey) -> Unframed:
        return (Framed if self.framed else Unframed)(reader, writer, label)

    def released(self, key: UgiKey) -> None:
        pass

    async def close(self) -> None:
        pass
