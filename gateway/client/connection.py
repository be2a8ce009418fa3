"""A Hive Metastore client through the gateway: thriftpy2's typed ``ThriftHiveMetastore``
client over HTTPS.

Each Thrift call is one HTTPS ``POST`` (strict binary or TJSON, as the gateway accepts them,
MS-HMSHTTP) on one persistent connection (urllib3, HTTP/1.1 keep-alive; reconnected when the
gateway closed it while idle). Authentication headers are made per request by the auth object
(:mod:`gateway.client.auth`), so a Kerberos client sends a fresh Negotiate token each time.

An HTTP status other than 200 is a :class:`GatewayError` (401, 403, 5xx have subclasses) with
the status and the gateway's one-line reason; Thrift errors from HMS (``NoSuchObjectException``,
``MetaException``…) and ``TApplicationException`` (a method the service does not expose) arrive
as thriftpy2 exceptions, as from a direct connection.
"""

from __future__ import annotations

import functools
import io
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import thriftpy2
import urllib3
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.protocol.apache_json import TApacheJSONProtocol
from thriftpy2.thrift import TClient
from thriftpy2.transport import TBufferedTransportFactory

from gateway.client.auth import Auth, ssl_context

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "GatewayClient",
    "GatewayError",
    "GatewayUnavailable",
    "GatewayUnreachable",
    "HttpsTransport",
    "PROTOCOLS",
    "connect",
    "hive_metastore_idl",
]

IDL_PATH = Path(__file__).resolve().parent.parent / "thrift" / "idl" / "hive_metastore.thrift"
#: protocol name → Content-Type sent (the gateway reads the first byte; the type is informative).
PROTOCOLS = {"binary": "application/x-thrift", "tjson": "application/vnd.apache.thrift.json"}
_REASON_CHARS = 300  # the gateway's reasons are one line; a proxy's HTML page is cut here


@functools.lru_cache(maxsize=1)
def hive_metastore_idl():
    """The bundled Hive Metastore IDL (``gateway/thrift/idl``) loaded by thriftpy2, once.

    Its attributes are the Thrift types (``Table``, ``Partition``, ``NoSuchObjectException``…)
    and the service ``ThriftHiveMetastore``. The module name ends in ``_thrift``, so its
    objects pickle.
    """
    return thriftpy2.load(str(IDL_PATH), module_name="hms_gateway_client_thrift")


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


class HttpsTransport:
    """A Thrift transport (thriftpy2's read/write/flush interface) where each flushed message
    is one HTTPS POST and the reply body is what :meth:`read` returns.

    ``url``: ``https://host[:port]/gateway/<topology>/<service path>``; ``auth``: an object of
    :mod:`gateway.client.auth` or None; ``context``: the TLS context (verifies the gateway);
    ``timeout``: seconds for connecting and for each read; ``content_type``: sent as is.
    Raises :class:`GatewayError` subclasses from :meth:`flush`.
    """

    def __init__(self, url: str, *, auth: Auth | None, context: ssl.SSLContext, timeout: float,
                 content_type: str):
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"expected an https:// gateway URL, got {url!r}")
        if parts.username or parts.password:
            raise ValueError("credentials do not belong in the URL: pass auth=")
        self.url = url
        self.host = parts.hostname
        self.path = parts.path or "/"
        self._auth = auth
        self._content_type = content_type
        # One connection (maxsize=1), kept alive; urllib3 drops it if the gateway closed it
        # while idle. No retries: a POST may have reached HMS (Thrift calls are not idempotent).
        self._pool = urllib3.HTTPSConnectionPool(
            self.host, parts.port or 443, maxsize=1, block=True, ssl_context=context,
            timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False,
        )
        self._wbuf: list[bytes] = []
        self._rbuf = io.BytesIO()
        self.last_headers: Any = {}

    # thriftpy2 calls these names
    def is_open(self) -> bool:
        return True

    def open(self) -> None:
        """Nothing to do: the connection opens on the first call."""

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        self._pool.close()

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
        headers = {"Content-Type": self._content_type, "Accept": self._content_type}
        if self._auth is not None:
            headers.update(self._auth.headers(self.host))
        try:
            response = self._pool.urlopen("POST", self.path, body=body, headers=headers,
                                          preload_content=True, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise GatewayUnreachable(None, _unreachable_reason(exc), self.url) from exc
        self.last_headers = response.headers
        if response.status != 200:
            text = response.data.decode("utf-8", "replace").strip()
            reason = (text.splitlines() or [""])[0][:_REASON_CHARS] or (response.reason or "")
            raise _error_for(response.status, reason, self.url, response.headers)
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
    :mod:`gateway.client.auth` (or :func:`gateway.client.auth.auth_from_options`); None sends
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
