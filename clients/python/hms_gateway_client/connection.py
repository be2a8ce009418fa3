"""A Hive Metastore client through the gateway: thriftpy2's typed ``ThriftHiveMetastore``
client over HTTPS.

Each Thrift call is one HTTPS ``POST`` (strict binary or TJSON, as the gateway accepts them,
MS-HMSHTTP) on one persistent connection (urllib3, HTTP/1.1 keep-alive; reconnected when the
gateway closed it while idle). Authentication headers are made per request by the auth object
(:mod:`hms_gateway_client.auth`), so a Kerberos client sends a fresh Negotiate token each time.

An HTTP status other than 200 is a :class:`GatewayError` (401, 403, 5xx have subclasses) with
the status and the gateway's one-line reason; Thrift errors from HMS (``NoSuchObjectException``,
``MetaException``…) and ``TApplicationException`` (a method the service does not expose) arrive
as thriftpy2 exceptions, as from a direct connection.
"""

from __future__ import annotations

import functools
import io
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.protocol.apache_json import TApacheJSONProtocol
from thriftpy2.thrift import TClient
from thriftpy2.transport import TBufferedTransportFactory

from hms_gateway_client.auth import Auth, ssl_context
from hms_gateway_client._thrift.lenient import load_lenient
from hms_gateway_client._thrift.schema import DEFAULT_IDL

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "EventPoller",
    "GatewayClient",
    "GatewayError",
    "GatewayUnavailable",
    "GatewayUnreachable",
    "HttpsTransport",
    "PROTOCOLS",
    "ResyncRequired",
    "connect",
    "events",
    "hive_metastore_idl",
]

IDL_PATH = DEFAULT_IDL
#: protocol name → Content-Type sent (the gateway reads the first byte; the type is informative).
PROTOCOLS = {"binary": "application/x-thrift", "tjson": "application/vnd.apache.thrift.json"}
_REASON_CHARS = 300  # the gateway's reasons are one line; a proxy's HTML page is cut here


@functools.lru_cache(maxsize=1)
def hive_metastore_idl():
    """The bundled Hive Metastore IDL (``gateway/thrift/idl``) loaded by thriftpy2, once.

    Its attributes are the Thrift types (``Table``, ``Partition``, ``NoSuchObjectException``…)
    and the service ``ThriftHiveMetastore``. The module name ends in ``_thrift``, so its
    objects pickle. ``SkewedInfo.skewedColValueLocationMaps`` is declared ``map<string,string>``
    (:mod:`hms_gateway_client._thrift.lenient`): a list-bucketed table reads without it over binary, and with
    its keys as JSON text over TJSON, instead of failing.
    """
    return load_lenient(str(IDL_PATH), "hms_gateway_client_thrift")


class GatewayError(Exception):
    """The gateway (or something in front of it) answered with an HTTP status other than 200.

    ``status``: the HTTP status (None when no answer came, see :class:`GatewayUnreachable`);
    ``reason``: the gateway's one-line reason (never a credential); ``url``: the service URL;
    ``retry_after``: seconds from ``Retry-After`` (429, 503) or None.
    """

    def __init__(self, status: int | None, reason: str, url: str, retry_after: float | None = None):
        self.status, self.reason, self.url, self.retry_after = status, reason, url, retry_after
        prefix = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{prefix} from {url}: {reason}")


class AuthenticationFailed(GatewayError):
    """401: the gateway did not accept the credentials. ``challenges`` lists the
    ``WWW-Authenticate`` values it offered (RFC 9110 §11.6.1)."""

    challenges: list[str] = []


class AccessDenied(GatewayError):
    """403: authenticated, but refused by identity assertion or the service ACL."""


class GatewayUnavailable(GatewayError):
    """5xx: HMS unreachable or wrong (502), the service saturated (503), HMS too slow (504)."""


class GatewayUnreachable(GatewayError):
    """No HTTP answer: connection refused, TLS failure (e.g. an untrusted certificate) or a
    read timeout. ``status`` is None; ``__cause__`` is urllib3's error."""


def _error_for(status: int, reason: str, url: str, headers: Any) -> GatewayError:
    retry_after = headers.get("Retry-After")
    try:
        seconds = float(retry_after) if retry_after else None
    except ValueError:  # an HTTP date: not worth parsing for a hint
        seconds = None
    if status == 401:
        error = AuthenticationFailed(status, reason, url, seconds)
        error.challenges = headers.getlist("WWW-Authenticate")
        return error
    if status == 403:
        return AccessDenied(status, reason, url, seconds)
    if status >= 500:
        return GatewayUnavailable(status, reason, url, seconds)
    return GatewayError(status, reason, url, seconds)


class _GatewayHTTP:
    """One kept-alive HTTPS connection to a gateway service URL, with per-request auth headers
    and statuses other than 200 raised as :class:`GatewayError` subclasses."""

    def __init__(self, url: str, *, auth: Auth | None, context: ssl.SSLContext, timeout: float):
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"expected an https:// gateway URL, got {url!r}")
        if parts.username or parts.password:
            raise ValueError("credentials do not belong in the URL: pass auth=")
        self.url = url
        self.host = parts.hostname
        self.path = parts.path or "/"
        self._auth = auth
        self._timeout = timeout
        # One connection (maxsize=1), kept alive; urllib3 drops it if the gateway closed it
        # while idle. No retries: a POST may have reached HMS (Thrift calls are not idempotent).
        self._pool = urllib3.HTTPSConnectionPool(
            self.host, parts.port or 443, maxsize=1, block=True, ssl_context=context,
            timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False,
        )

    def request(self, method: str, target: str, *, body: bytes | None = None, headers: dict[str, str],
                read_timeout: float | None = None, ok: tuple[int, ...] = (200,)) -> urllib3.BaseHTTPResponse:
        """Send one request (``target``: path and query) and return the whole response.

        Raises :class:`GatewayError` for a status not in ``ok``, :class:`GatewayUnreachable`
        when no answer came.
        """
        if self._auth is not None:
            headers = {**headers, **self._auth.headers(self.host)}
        timeout = urllib3.Timeout(connect=self._timeout, read=read_timeout or self._timeout)
        try:
            response = self._pool.urlopen(method, target, body=body, headers=headers, timeout=timeout,
                                          preload_content=True, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise GatewayUnreachable(None, _unreachable_reason(exc), self.url) from exc
        if response.status not in ok:
            text = response.data.decode("utf-8", "replace").strip()
            reason = (text.splitlines() or [""])[0][:_REASON_CHARS] or (response.reason or "")
            raise _error_for(response.status, reason, self.url, response.headers)
        return response

    def close(self) -> None:
        self._pool.close()


class HttpsTransport:
    """A Thrift transport (thriftpy2's read/write/flush interface) where each flushed message
    is one HTTPS POST and the reply body is what :meth:`read` returns.

    ``url``: ``https://host[:port]/gateway/<topology>/<service path>``; ``auth``: an object of
    :mod:`hms_gateway_client.auth` or None; ``context``: the TLS context (verifies the gateway);
    ``timeout``: seconds for connecting and for each read; ``content_type``: sent as is.
    Raises :class:`GatewayError` subclasses from :meth:`flush`.
    """

    def __init__(self, url: str, *, auth: Auth | None, context: ssl.SSLContext, timeout: float,
                 content_type: str):
        self._http = _GatewayHTTP(url, auth=auth, context=context, timeout=timeout)
        self.url, self.host = url, self._http.host
        self._pool = self._http._pool
        self._headers = {"Content-Type": content_type, "Accept": content_type}
        self._wbuf: list[bytes] = []
        self._rbuf = io.BytesIO()

    # thriftpy2 calls these names
    def is_open(self) -> bool:
        return True

    def open(self) -> None:
        """Nothing to do: the connection opens on the first call."""

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        self._http.close()

    def write(self, buf: bytes) -> None:
        self._wbuf.append(bytes(buf))

    def read(self, sz: int) -> bytes:
        return self._rbuf.read(sz)

    def getvalue(self) -> bytes:
        """The whole reply body (thriftpy2's TJSON reader parses it in one go)."""
        return self._rbuf.getvalue()

    def flush(self) -> None:
        """POST the buffered message; keep the reply for :meth:`read`.

        Raises :class:`GatewayError` for a status other than 200, :class:`GatewayUnreachable`
        when no answer came.
        """
        body = b"".join(self._wbuf)
        self._wbuf = []
        response = self._http.request("POST", self._http.path, body=body, headers=self._headers)
        self._rbuf = io.BytesIO(response.data)


def _unreachable_reason(exc: urllib3.exceptions.HTTPError) -> str:
    inner = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the real one
    if isinstance(inner, urllib3.exceptions.SSLError):
        return f"TLS failed: {inner}"
    if isinstance(inner, urllib3.exceptions.ReadTimeoutError):
        return "no reply within the timeout"
    return f"cannot connect: {type(inner).__name__}"


class _ApacheJSONProtocol(TApacheJSONProtocol):
    """thriftpy2's Apache TJSON protocol, made reusable: it keeps the parsed reply after
    reading it, so the next call would return the previous reply."""

    def read_message_end(self) -> None:
        self._req = None


class GatewayClient(TClient):
    """The typed ``ThriftHiveMetastore`` client (thriftpy2 ``TClient``) on an
    :class:`HttpsTransport`. Every IDL method is an attribute (``client.get_table("db", "t")``
    returns a ``Table``); the IDL's types are in :attr:`types`. A context manager: leaving it
    closes the connection.
    """

    def __init__(self, transport: HttpsTransport, protocol: str):
        idl = hive_metastore_idl()
        if protocol == "binary":
            # strict header both ways: HMS and the gateway read only the versioned form
            proto = TBinaryProtocolFactory(strict_read=True, strict_write=True).get_protocol(
                TBufferedTransportFactory().get_transport(transport))
        else:
            proto = _ApacheJSONProtocol(transport)
        super().__init__(idl.ThriftHiveMetastore, proto)
        self.transport = transport
        self.protocol = protocol
        self.types = idl

    def close(self) -> None:
        """Close the HTTPS connection."""
        self.transport.close()

    def __enter__(self) -> "GatewayClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def connect(url: str, auth: Auth | None = None, ca: str | Path | None = None, *,
            protocol: str = "binary", timeout: float = 60.0,
            context: ssl.SSLContext | None = None) -> GatewayClient:
    """Open a client of the gateway service at ``url``.

    ``url``: ``https://host:port/gateway/<topology>/<service path>``. ``auth``: ``BasicAuth``,
    ``BearerAuth``, ``KerberosAuth`` or ``ClientCertificateAuth`` from
    :mod:`hms_gateway_client.auth` (or :func:`hms_gateway_client.auth.auth_from_options`); None sends
    no credentials. ``ca``: PEM file to trust for the gateway's certificate (None: the system
    store); ``context`` replaces the TLS context built from ``ca`` and ``auth``.
    ``protocol``: ``"binary"`` (strict binary, the default: no translation in the gateway) or
    ``"tjson"``. ``timeout``: seconds to connect and to wait for each reply.

    Nothing is sent until the first call. Raises ``ValueError`` for a bad URL, protocol or TLS
    file; calls raise :class:`GatewayError` subclasses and the IDL's Thrift exceptions.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if context is None:
        context = ssl_context(str(ca) if ca is not None else None, auth)
    transport = HttpsTransport(url, auth=auth, context=context, timeout=timeout,
                               content_type=PROTOCOLS[protocol])
    return GatewayClient(transport, protocol)


class ResyncRequired(GatewayError):
    """410 from an ``event-stream`` service: the events after the position asked for are gone
    (``cause`` ``"trimmed"``: HMS's time-to-live or the gateway's ring) or the position is
    ahead of HMS (``"reset"``). Re-read the catalog, then follow again from ``latest``."""

    cause: str = ""
    latest: int | None = None


class EventPoller:
    """Long polls of an ``event-stream`` service over one kept-alive HTTPS connection; the
    building block of :func:`events` and of the data source's streaming reader.

    ``url``, ``auth``, ``context``, ``timeout`` as for :func:`connect`; ``db``, ``table``,
    ``types`` filter on the gateway; ``limit`` events at most per poll (1-1000).
    """

    def __init__(self, url: str, *, auth: Auth | None, context: ssl.SSLContext, timeout: float = 60.0,
                 limit: int = 1000, db: str | None = None, table: str | None = None,
                 types: list[str] | None = None, not_ready_retries: int = 30):
        self.url = url
        self._http = _GatewayHTTP(url, auth=auth, context=context, timeout=timeout)
        self._timeout = timeout
        self._not_ready_retries = not_ready_retries
        self._filters: dict[str, Any] = {"limit": limit}
        for key, value in (("db", db), ("table", table), ("types", ",".join(types) if types else None)):
            if value:
                self._filters[key] = value

    def poll(self, after: int | None, wait: float = 0.0) -> tuple[list[dict], int]:
        """``(events, next)``: the events after id ``after`` (None: the newest id, so none), at
        most ``wait`` seconds for a first one; ``next`` is the ``after`` of the next poll.

        Raises :class:`ResyncRequired` (410), :class:`GatewayError` subclasses, and
        ``GatewayUnavailable`` when the feed is still not ready (503) after
        ``not_ready_retries`` tries a second or ``Retry-After`` apart.
        """
        query = {**self._filters, "wait": wait}
        if after is not None:
            query["after"] = after
        target = f"{self._http.path}?{urlencode(query)}"
        for attempt in range(self._not_ready_retries + 1):
            try:
                response = self._http.request("GET", target, headers={"Accept": "application/json"},
                                              read_timeout=wait + self._timeout, ok=(200, 410))
                break
            except GatewayUnavailable as exc:
                if exc.status != 503 or attempt == self._not_ready_retries:
                    raise
                time.sleep(exc.retry_after or 1.0)
        page = json.loads(response.data)
        if response.status == 410:
            error = ResyncRequired(410, str(page.get("detail") or page.get("reason")), self.url)
            error.cause, error.latest = page.get("reason", ""), page.get("latest")
            raise error
        return page["events"], page["next"]

    def close(self) -> None:
        self._http.close()


def events(url: str, auth: Auth | None = None, ca: str | Path | None = None, *, after: int | None = None,
           wait: float = 30.0, limit: int = 1000, db: str | None = None, table: str | None = None,
           types: list[str] | None = None, timeout: float = 60.0, context: ssl.SSLContext | None = None,
           not_ready_retries: int = 30) -> Iterator[dict]:
    """Follow an ``event-stream`` service of the gateway (HMS's notification log): yields each
    event, oldest first, forever (stop iterating to stop following).

    ``url``: ``https://host:port/gateway/<topology>/<event-stream path>``; ``auth``, ``ca``,
    ``context``, ``timeout`` as for :func:`connect`. ``after``: the last event id already seen
    (None: follow from now). Each poll is a long poll (``GET …?after=&limit=&wait=``) answered
    after ``wait`` seconds or at the first event; ``limit``, ``db``, ``table``, ``types`` as
    for :class:`EventPoller`.

    An event is the service's JSON object: for the six HCatalog types ``{"eventId",
    "timestamp", "eventType", "server", "servicePrincipal", "db", "table"?, "partitions"?}``,
    for others ``{"eventId", "eventTime", "eventType", "db", "table", "messageFormat",
    "message"}``. Raises what :meth:`EventPoller.poll` raises (:class:`ResyncRequired` on 410).
    """
    if context is None:
        context = ssl_context(str(ca) if ca is not None else None, auth)
    poller = EventPoller(url, auth=auth, context=context, timeout=timeout, limit=limit, db=db, table=table,
                         types=types, not_ready_retries=not_ready_retries)
    try:
        while True:
            page, after = poller.poll(after, wait)
            yield from page
    finally:
        poller.close()
