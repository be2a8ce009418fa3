"""Dispatch to a Hive 4 Metastore in HTTP mode: strict binary Thrift in HTTP POST bodies.

Hive 4 (``metastore.server.thrift.transport.mode=http``, servlet ``HmsThriftHttpServlet`` at
path ``/metastore``) reads one Thrift message per POST and answers it in the body. In its
unsecured mode it takes the acting user from the ``x-actor-username`` header and answers
401 ("Authentication error: User header x-actor-username missing in request") without it.
The gateway sends the asserted identity's user there, so HMS acts as that user.

Failures map to the same errors as the TCP pool (:mod:`gateway.upstream.errors`): no
connection → :class:`UpstreamConnectFailed`; connection lost or HTTP 5xx →
:class:`UpstreamUnavailable`; HTTP 4xx (HMS refused the identity or the request; another
upstream would answer the same) or a malformed or oversized reply → :class:`UpstreamBadReply`;
too slow → :class:`UpstreamTimeout`. Each reason names the status and at most 200 characters
of HMS's text; it never carries request bytes.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import aiohttp

from gateway.observability import metrics
from gateway.upstream.ugi import Identity
from gateway.thrift.binary import BinaryMessageScanner
from gateway.thrift.errors import ProtocolError
from gateway.upstream.errors import (
    AccountedCall,
    UpstreamBadReply,
    UpstreamConnectFailed,
    UpstreamError,
    UpstreamUnavailable,
)
from gateway.upstream.seqids import UpstreamCall
from gateway.upstream.streaming import ReplySink

log = logging.getLogger(__name__)

#: Header Hive 4's HTTP-mode servlet reads the acting user from (HmsThriftHttpServlet.X_USER).
ACTOR_HEADER = "x-actor-username"
CONTENT_TYPE = "application/x-thrift"
_REASON_CHARS = 200


class HttpUpstream:
    """One Hive 4 HTTP-mode endpoint, ``http(s)://host[:port]/path``.

    ``timeout`` (seconds) bounds one call from sending the request to the last reply byte;
    ``connect_timeout`` bounds opening a connection (TCP and TLS); ``pool_size`` 0 closes the
    connection after each call, otherwise connections are kept alive and reused; replies over
    ``max_reply_bytes`` are refused. The aiohttp session is created on the first call, inside
    the running event loop.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        timeout: float = 60.0,
        pool_size: int = 8,
        max_reply_bytes: int = 1 << 30,
    ):
        parts = urlsplit(url)
        default_port = 443 if parts.scheme == "https" else 80
        self.url = url
        self.label = f"{parts.hostname}:{parts.port or default_port}{parts.path or '/'}"
        self.connect_timeout, self.timeout = connect_timeout, timeout
        self.pool_size, self.max_reply_bytes = pool_size, max_reply_bytes
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=0, force_close=self.pool_size == 0, keepalive_timeout=30.0
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout),
                auto_decompress=False,
            )
        return self._session

    async def call(
        self,
        request: bytes,
        *,
        expect_reply: bool = True,
        identity: Identity | None = None,
        sink: ReplySink | None = None,
        origin: str = metrics.ORIGIN_CLIENT,
    ) -> bytes | None:
        """POST one strict-binary message; return the reply message (None for oneway), with
        the request's seqid (upstream, the call carries the gateway's own:
        :mod:`gateway.upstream.seqids`). ``sink`` is not used: replies come whole; ``origin``
        labels the call's metrics.

        ``identity.user`` goes in ``x-actor-username``. Raises the errors listed in the module
        docstring, and :class:`UpstreamBadReply` for a reply that does not answer this call.
        """
        call = UpstreamCall(request)
        with AccountedCall(self.label, self.timeout, origin):
            async with asyncio.timeout(self.timeout):
                reply = await self._post(call.message, expect_reply, identity)
            return None if reply is None else call.client_reply(reply, self.label)

    async def _post(
        self, request: bytes, expect_reply: bool, identity: Identity | None
    ) -> bytes | None:
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if identity is not None:
            headers[ACTOR_HEADER] = identity.user
        try:
            async with self._client().post(self.url, data=request, headers=headers) as resp:
                if resp.status != 200:
                    raise self._status_error(resp.status, await self._reason(resp))
                body = await self._read(resp)
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamConnectFailed(
                f"cannot connect to upstream {self.label}: {exc.os_error.strerror or exc.os_error}"
            ) from None
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamConnectFailed(
                f"upstream {self.label} did not accept a connection within "
                f"{self.connect_timeout:g} s"
            ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"upstream {self.label}: {type(exc).__name__}") from None
        if not expect_reply:
            return None
        self._check_message(body)
        return body

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        if resp.content_length is not None and resp.content_length > self.max_reply_bytes:
            raise UpstreamBadReply(f"upstream {self.label} sent a reply of {resp.content_length} bytes")
        chunks, size = [], 0
        async for chunk in resp.content.iter_chunked(256 * 1024):
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise UpstreamBadReply(f"upstream {self.label} sent a reply over {self.max_reply_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _check_message(self, body: bytes) -> None:
        if not body:
            raise UpstreamBadReply(f"upstream {self.label} sent an empty reply")
        try:
            end = BinaryMessageScanner(len(body)).feed(body)
        except ProtocolError as exc:
            raise UpstreamBadReply(f"upstream {self.label} sent {exc.reason}") from None
        if end != len(body):
            raise UpstreamBadReply(f"upstream {self.label} sent a truncated or padded reply")

    @staticmethod
    async def _reason(resp: aiohttp.ClientResponse) -> str:
        try:
            raw = await resp.content.read(_REASON_CHARS * 4)
        except aiohttp.ClientError:
            raw = b""
        text = " ".join(raw.decode("utf-8", "replace").split())[:_REASON_CHARS]
        return text or (resp.reason or "")

    def _status_error(self, status: int, reason: str) -> UpstreamError:
        text = f"upstream {self.label} answered HTTP {status}: {reason}"
        if status >= 500:
            return UpstreamUnavailable(text)
        return UpstreamBadReply(text)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
