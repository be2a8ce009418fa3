"""What the gateway listener answers to requests HTTP itself makes ambiguous or unreadable.

- :func:`parse_failure_reason`: the one-line reason sent for a request aiohttp's parser refused.
  aiohttp's own 400 body quotes the offending bytes (an obs-folded or oversized
  ``Authorization`` header would come back to the client, credential included, and land in
  the log); the gateway names only the kind of fault.
- :func:`repeated_header`: a header that decides who the client is or what it calls must come
  once (RFC 9110 §5.3 allows repeating only list-valued fields). With two ``Authorization``
  headers a front proxy reading the last one and the gateway reading the first would judge
  different credentials, so the request is refused before any step sees it.
"""

from __future__ import annotations

from aiohttp import hdrs
from aiohttp.http_exceptions import (
    BadHttpMethod,
    BadStatusLine,
    HttpProcessingError,
    InvalidHeader,
    InvalidURLError,
    LineTooLong,
    PayloadEncodingError,
)
from multidict import CIMultiDictProxy

__all__ = ["SINGLE_HEADERS", "parse_failure_reason", "repeated_header"]

#: Headers that must not be repeated: credentials (``Authorization``; ``Cookie``: RFC 6265
#: §5.4 sends one) and what AWS SigV4 signs or routes by. aiohttp's parser itself refuses a
#: repeated ``Content-Type``, ``Content-Length``, ``Host`` or ``Transfer-Encoding``.
SINGLE_HEADERS: tuple[str, ...] = (
    hdrs.AUTHORIZATION,
    hdrs.COOKIE,
    "X-Amz-Target",
    "X-Amz-Date",
    "X-Amz-Content-SHA256",
    "X-Amz-Security-Token",
)

# Most specific first: LineTooLong and InvalidHeader are both BadHttpMessage.
_REASONS: tuple[tuple[type[HttpProcessingError], str], ...] = (
    (LineTooLong, "request line or header too long"),
    (InvalidHeader, "malformed header field"),
    (BadHttpMethod, "malformed request method"),
    (BadStatusLine, "malformed request line"),
    (InvalidURLError, "malformed request target"),
    (PayloadEncodingError, "malformed Content-Length or Transfer-Encoding"),
)


def parse_failure_reason(error: BaseException | None) -> str:
    """The client-facing reason for a request aiohttp's parser refused: one line naming the
    kind of fault, never a byte of the request (``"malformed request header"`` when unknown)."""
    for cls, reason in _REASONS:
        if isinstance(error, cls):
            return reason
    if isinstance(error, HttpProcessingError) and error.message.startswith("Duplicate '"):
        return "a header field that must be single is repeated"  # aiohttp's SINGLETON_HEADERS
    return "malformed request header"


def repeated_header(headers: CIMultiDictProxy[str]) -> str | None:
    """The first of :data:`SINGLE_HEADERS` that ``headers`` hold more than once, else None."""
    for name in SINGLE_HEADERS:
        if len(headers.getall(name, ())) > 1:
            return name
    return None
