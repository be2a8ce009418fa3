"""Typed outcomes that end a request before a reply, and the one table of their HTTP statuses.

Statuses (MS-HMSHTTP 3.1.5 and the gateway's own contract): 400 malformed request or Thrift
message, 401 no valid credentials (every challenge of the topology), 403 refused by identity
assertion or the service ACL, 404 unknown topology or service, 405 not POST, 408 body not
received in time, 413 body over the limit, 429 too many failed password checks from one client
address (``Retry-After``, RFC 6585 §4), 502 upstream unreachable or its reply wrong, 503 the
service's ``max_concurrent_requests`` reached (``Retry-After``, RFC 9110 §15.6.4), 504 upstream
too slow, 505 an HTTP version other than 1.x (RFC 9110 §15.6.6). A method the service does not
expose is answered 200 with a ``TApplicationException`` in the client's protocol.

Each outcome also has its ``outcome`` label (metrics, audit ``detail``). Error bodies are one
line of plain text; no credentials or payloads.
"""

from __future__ import annotations

from aiohttp import hdrs, web

from gateway.providers.authentication.throttle import Throttled
from gateway.thrift.errors import ProtocolError
from gateway.upstream.errors import UpstreamCredentialsUnavailable, UpstreamError, UpstreamTimeout


class Outcome(Exception):
    """A request ends here. ``reason`` is the client-facing text (never a secret); ``headers``
    go with the response."""

    def __init__(self, reason: str, headers: dict[str, str] | list[tuple[str, str]] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.headers = headers or {}


class BadRequest(Outcome):
    """A request HTTP makes ambiguous (a header that must be single, repeated)."""


class NotFound(Outcome):
    """No such topology or service."""


class MethodNotAllowed(Outcome):
    """Not POST."""


class VersionNotSupported(Outcome):
    """A request line claiming HTTP/2 or later."""


class TooLarge(Outcome):
    """A body over ``limits.max_request_bytes``."""


class BodyTimeout(Outcome):
    """A body not received within ``limits.client_body_timeout_seconds``."""


class Unauthenticated(Outcome):
    """No valid credentials; ``headers`` carry every ``WWW-Authenticate`` challenge."""


class Forbidden(Outcome):
    """Authenticated, but refused (identity assertion, service ACL)."""


class Overloaded(Outcome):
    """The service's concurrency limit is reached."""


class NotExposed(Outcome):
    """The method is not exposed by the service: a ``TApplicationException`` (UNKNOWN_METHOD) in
    the client's protocol, ``body`` with ``content_type``."""

    def __init__(self, reason: str, body: bytes, content_type: str):
        super().__init__(reason)
        self.body, self.content_type = body, content_type


class Answered(Outcome):
    """A step answered the call itself, as HMS would (``reply``: a strict-binary REPLY or
    EXCEPTION with the call's seqid); the service kind writes it in the client's protocol and
    nothing goes upstream. Used for catalog-policy refusals."""

    def __init__(self, reason: str, reply: bytes):
        super().__init__(reason)
        self.reply = reply


class Served(Answered):
    """A step answered the call itself with an ordinary reply, not a refusal (``set_ugi``
    answered from the authenticated identity): audited and counted as ``ok``."""


#: Outcome (or error) class → (HTTP status, outcome label). Looked up along the class's MRO,
#: so a subclass (UpstreamTimeout of UpstreamError) may have its own row.
STATUSES: dict[type[Exception], tuple[int, str]] = {
    BadRequest: (400, "bad_request"),
    NotFound: (404, "not_found"),
    MethodNotAllowed: (405, "bad_request"),
    VersionNotSupported: (505, "bad_request"),
    ProtocolError: (400, "bad_request"),
    TooLarge: (413, "too_large"),
    BodyTimeout: (408, "bad_request"),
    Unauthenticated: (401, "unauthenticated"),
    Throttled: (429, "throttled"),
    Forbidden: (403, "forbidden"),
    Overloaded: (503, "overloaded"),
    NotExposed: (200, "not_exposed"),
    Answered: (200, "forbidden"),
    Served: (200, "ok"),
    UpstreamTimeout: (504, "upstream_timeout"),
    UpstreamCredentialsUnavailable: (503, "upstream_unavailable"),
    UpstreamError: (502, "upstream_unavailable"),
}


def status_of(error: Exception) -> tuple[int, str]:
    """The (HTTP status, outcome label) of ``error`` from :data:`STATUSES`.

    Raises ``KeyError`` for an error the table does not know (a bug: it becomes a 500).
    """
    for cls in type(error).__mro__:
        found = STATUSES.get(cls)
        if found is not None:
            return found
    raise KeyError(type(error).__name__)


def response_for(error: Exception) -> tuple[web.Response, str]:
    """The response to ``error`` (an :class:`Outcome`, ``ProtocolError``, ``Throttled`` or
    ``UpstreamError``) and its outcome label."""
    status, label = status_of(error)
    if isinstance(error, NotExposed):
        return web.Response(body=error.body, content_type=error.content_type), label
    if isinstance(error, ProtocolError):
        text = f"malformed Thrift message: {error.reason}"
    elif isinstance(error, Throttled):
        text = "too many failed authentications"
    else:
        text = str(error)
    response = web.Response(status=status, text=text + "\n")
    headers = error.headers if isinstance(error, Outcome) else {}
    for name, value in headers.items() if isinstance(headers, dict) else headers:
        response.headers.add(name, value)
    if isinstance(error, Throttled):
        response.headers[hdrs.RETRY_AFTER] = str(error.retry_after)
    return response, label
