"""Pooled, persistent binary-Thrift connections to one upstream Hive Metastore.

HMS listens for strict TBinaryProtocol on a plain TCP socket, unframed by default or framed
(``hive.metastore.thrift.framed.transport.enabled``). A connection carries one call at a time;
an idle connection is reused, and a connection that saw any error is closed, never reused, so
concurrent clients never see each other's replies.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from gateway.observability import metrics
from gateway.thrift.errors import ProtocolError
from gateway.upstream.deadlines import Deadlines
from gateway.upstream.errors import AccountedCall, UpstreamBadReply, UpstreamConnectFailed
from gateway.upstream.seqids import UpstreamCall
from gateway.upstream.connector import Connector, PlainConnector
from gateway.upstream.framing import READ_CHUNK, Unframed
from gateway.upstream.sasl import StaleCredentials
from gateway.upstream.streaming import ReplySink
from gateway.upstream.ugi import (
    Identity,
    UgiKey,
    check_set_ugi_reply,
    set_ugi_call,
    take_idle,
    trim_idle,
)

log = logging.getLogger(__name__)

class _Connection:
    __slots__ = ("io", "writer", "ugi")

    def __init__(self, io: Unframed, ugi: UgiKey = None):
        self.io, self.writer = io, io.writer
        #: The identity HMS was told with ``set_ugi`` on this connection (None: none sent).
        self.ugi = ugi

    def usable(self) -> bool:
        # An idle connection the server closed (HMS restarted) has seen EOF already; one with
        # unread bytes holds a reply nobody asked for, which the next caller must not get.
        return not (self.io.reader.at_eof() or self.writer.is_closing() or self.io.unread()
                    or not self.io.reusable())

    def close(self) -> None:
        self.writer.close()


class UpstreamPool:
    """Connections to the HMS at ``url`` (``thrift://host:port``).

    ``timeout`` (seconds) bounds one call from sending the request to reading the last reply
    byte; ``connect_timeout`` bounds opening a connection; at most ``pool_size`` idle
    connections are kept, of at most ``max_identities`` identities (LRU, see
    :mod:`gateway.upstream.ugi`); replies larger than ``max_reply_bytes`` are refused.
    ``connector`` sets up each new connection (:mod:`gateway.upstream.connector`: plain
    Thrift with ``set_ugi`` by default, SASL to a Kerberized HMS).
    """

    def __init__(
        self,
        url: str,
        *,
        framed: bool = False,
        connect_timeout: float = 5.0,
        timeout: float = 60.0,
        pool_size: int = 8,
        max_reply_bytes: int = 1 << 30,
        max_identities: int = 16,
        connector: Connector | None = None,
    ):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "localhost", parts.port or 9083
        self.label = f"{self.host}:{self.port}"
        self.framed = framed
        self.connect_timeout, self.timeout = connect_timeout, timeout
        self.pool_size, self.max_reply_bytes = pool_size, max_reply_bytes
        self.max_identities = max_identities
        self.connector = connector or PlainConnector(framed)
        self.connector.bind(self._gateway_call)
        self._idle: list[_Connection] = []
        self._busy = 0
        #: Calls in flight per key: an evicted identity's credentials go only when none is left.
        self._busy_keys: dict[UgiKey, int] = {}
        self._closed = False
        #: The deadline of each call in flight, from sending it to its reply's last byte.
        self._deadlines = Deadlines(timeout)
        # Read at scrape time rather than set on every call; the newest pool of an upstream
        # (after a topology reload) is the one reported.
        metrics.UPSTREAM_POOL.labels(upstream=self.label, state="idle").set_function(lambda: len(self._idle))
        metrics.UPSTREAM_POOL.labels(upstream=self.label, state="busy").set_function(lambda: self._busy)

    async def _checkout(self, key: UgiKey = None) -> _Connection:
        conn = take_idle(self._idle, key)
        if conn is not None:
            return conn
        try:
            return await self._connect(key)
        except StaleCredentials:  # an expired or cancelled token, dropped: once more, anew
            return await self._connect(key)

    async def _connect(self, key: UgiKey) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, limit=READ_CHUNK
                )
        except TimeoutError:
            raise UpstreamConnectFailed(
                f"upstream {self.label} did not accept a connection within "
                f"{self.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise UpstreamConnectFailed(
                f"cannot connect to upstream {self.label}: {exc.strerror or exc}"
            ) from None
        try:
            async with asyncio.timeout(self.timeout):
                io = await self.connector.open(reader, writer, self.label, key)
        except BaseException:
            writer.close()
            raise
        conn = _Connection(io, key)
        if key is not None and self.connector.sends_ugi:
            try:
                async with asyncio.timeout(self.timeout):
                    reply = await self._roundtrip(conn, UpstreamCall(set_ugi_call(key)), True)
                check_set_ugi_reply(reply or b"", self.label)
            except BaseException:
                conn.close()
                raise
        return conn

    def _checkin(self, conn: _Connection) -> None:
        if self._closed or not conn.usable():
            conn.close()
            return
        self._idle.append(conn)
        evicted = trim_idle(self._idle, self.pool_size, self.max_identities)
        for gone in evicted:
            gone.close()
        left = {c.ugi for c in self._idle}
        for key in {c.ugi for c in evicted} - left:
            if key is not None and not self._busy_keys.get(key):
                self.connector.released(key)

    async def _gateway_call(self, request: bytes) -> bytes:
        reply = await self.call(request, origin=metrics.ORIGIN_GATEWAY)
        assert reply is not None
        return reply

    async def call(
        self,
        request: bytes,
        *,
        expect_reply: bool = True,
        identity: Identity | None = None,
        sink: ReplySink | None = None,
        origin: str = metrics.ORIGIN_CLIENT,
    ) -> bytes | None:
        """Send one strict-binary message; return the whole reply message (None for oneway),
        with the request's seqid (upstream, the call carries the gateway's own:
        :mod:`gateway.upstream.seqids`).

        ``identity`` is the effective user the call acts for: the call goes over a connection
        on which HMS was told that identity with ``set_ugi`` (None: a connection without).
        With ``sink``, the reply is fed to it chunk by chunk as it arrives
        (:mod:`gateway.upstream.streaming`) and only its first bytes are returned. ``origin``
        labels the call's metrics (a client's call, or the gateway's own).

        Raises :class:`UpstreamUnavailable` (cannot connect, connection lost),
        :class:`UpstreamTimeout` (no complete reply within ``timeout``),
        :class:`UpstreamBadReply` (malformed or oversized reply, or one that does not answer
        this call) or :class:`UpstreamIdentityRefused` (HMS refused ``set_ugi``).
        """
        self._busy += 1
        key = self.connector.key(identity)
        self._busy_keys[key] = self._busy_keys.get(key, 0) + 1
        conn: _Connection | None = None
        try:
            with AccountedCall(self.label, self.timeout, origin):
                conn = await self._checkout(key)
                with self._deadlines.watch():
                    reply = await self._roundtrip(conn, UpstreamCall(request), expect_reply, sink)
                if expect_reply:  # after a oneway call nothing says whether HMS answered anyway
                    self._checkin(conn)
                    conn = None
                return reply
        finally:
            if conn is not None:
                conn.close()
            self._busy -= 1
            if self._busy_keys[key] == 1:
                del self._busy_keys[key]
            else:
                self._busy_keys[key] -= 1

    async def _roundtrip(
        self, conn: _Connection, call: UpstreamCall, expect_reply: bool, sink: ReplySink | None = None
    ) -> bytes | None:
        conn.io.write(call.message)
        if conn.writer.transport.get_write_buffer_size():  # a small call is usually written at once
            await conn.writer.drain()
        if not expect_reply:
            return None
        if sink is not None:
            return await self._stream(conn.io, call, sink)
        return call.client_reply(await conn.io.message(self.max_reply_bytes), self.label)

    async def _stream(self, io: Unframed, call: UpstreamCall, sink: ReplySink) -> bytes:
        """Feed the reply to ``sink`` chunk by chunk, flushing its output to the client as it
        goes, once its header shows that it answers ``call``, and complete the client's
        response at the reply's end; return the reply's first bytes (header and first field)."""
        sink.begin(self.max_reply_bytes)
        checked, fed = False, 0
        await io.begin(self.max_reply_bytes)
        while chunk := await io.chunk():
            fed += len(chunk)
            try:
                end = sink.feed(chunk)
            except ProtocolError as exc:
                raise UpstreamBadReply(f"upstream {self.label} sent {exc.reason}") from None
            checked = checked or call.check_reply(sink.head, self.label)
            if end is not None:
                if end != fed:
                    raise UpstreamBadReply(f"upstream {self.label} sent bytes after the reply")
                head = call.client_reply(sink.head, self.label)
                await sink.complete()  # the client first; the pool and the metrics after
                return head
            if checked:
                await sink.flush()
        raise UpstreamBadReply(f"upstream {self.label} sent binary message truncated")

    async def close(self) -> None:
        """Close idle connections (after the connector gave back its credentials: a
        delegation token is cancelled over the gateway's own connection); busy ones close
        when their call ends."""
        await self.connector.close()
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            try:
                await conn.writer.wait_closed()
            except OSError:
                pass

