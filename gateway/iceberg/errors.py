"""The Iceberg REST Catalog's error model: every non-2xx answer is
``{"error": {"message": str, "type": str, "code": int}}`` (the spec's ``ErrorModel`` and
``IcebergErrorResponse``), ``type`` the exception name Iceberg's clients map back (Java's
``ErrorHandlers``, PyIceberg's ``_handle_non_200_response``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from aiohttp import web

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/json"
_MAX_MESSAGE = 2048


class IcebergError(Exception):
    """An answer in the error model: ``status`` (HTTP and ``code``), ``type``, ``message``;
    ``headers`` extra response headers (``WWW-Authenticate``, ``Retry-After``, ``Allow``)."""

    status = 500
    type = "ServerError"

    def __init__(self, message: str, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.message = message[:_MAX_MESSAGE]
        self.headers = list(headers)

    def body(self) -> dict:
        """The ``IcebergErrorResponse`` object."""
        return {"error": {"message": self.message, "type": self.type, "code": self.status}}

    def response(self, head: bool = False) -> web.Response:
        """The HTTP response (no body for ``HEAD``, as HTTP requires)."""
        response = web.Response(status=self.status, content_type=CONTENT_TYPE,
                                body=None if head else json.dumps(self.body()).encode())
        for name, value in self.headers:
            response.headers.add(name, value)
        return response


def _kind(status: int, name: str) -> type[IcebergError]:
    return type(name, (IcebergError,), {"status": status, "type": name, "__doc__": f"{status} ``{name}``."})


BadRequest = _kind(400, "BadRequestException")
NotAuthorized = _kind(401, "NotAuthorizedException")
Forbidden = _kind(403, "ForbiddenException")
NotFound = _kind(404, "NotFoundException")  # a path the API does not have
NoSuchNamespace = _kind(404, "NoSuchNamespaceException")
NoSuchTable = _kind(404, "NoSuchTableException")
NoSuchView = _kind(404, "NoSuchViewException")
NoSuchPlanId = _kind(404, "NoSuchPlanIdException")  # server-side scan planning
NoSuchPlanTask = _kind(404, "NoSuchPlanTaskException")
MethodNotAllowed = _kind(405, "MethodNotAllowedException")
Unsupported = _kind(406, "UnsupportedOperationException")
AlreadyExists = _kind(409, "AlreadyExistsException")
NamespaceNotEmpty = _kind(409, "NamespaceNotEmptyException")
CommitFailed = _kind(409, "CommitFailedException")
RequestTimeout = _kind(408, "RequestTimeoutException")
PayloadTooLarge = _kind(413, "PayloadTooLargeException")
#: A request body with a ``Content-Encoding`` (RFC 9110 section 15.5.16): clients send none.
UnsupportedMediaType = _kind(415, "UnsupportedMediaTypeException")
Unprocessable = _kind(422, "UnprocessableEntityException")
TooManyRequests = _kind(429, "TooManyRequestsException")
ServiceUnavailable = _kind(503, "ServiceUnavailableException")
#: HMS failed in a way that is not the client's doing (never for a commit: see CommitStateUnknown).
ServiceFailure = _kind(502, "ServiceFailureException")
#: A fault of the gateway itself (the spec's ``ServerErrorResponse`` example type).
InternalServerError = _kind(500, "InternalServerError")


def internal(request_id: str) -> IcebergError:
    """The answer to an exception no handler expected: 500 with a generic message naming the
    request id (the details are in the log under the same id, never in the answer)."""
    return InternalServerError(f"internal error; the gateway's log has the details under request id {request_id}")


def hms_refused(exc: Exception, doing: str) -> str:
    """The client's message for the Hive Metastore refusing ``doing`` (``"table db.t"``) with
    ``exc`` (a Thrift exception of the IDL): words of the gateway's own; HMS's text, which may be
    a Java exception's (``java.lang.NullPointerException``...), goes to the log only, with the
    exception's type name."""
    log.info("the Hive Metastore refused %s: %s: %s", doing, type(exc).__name__,
             (getattr(exc, "message", None) or str(exc))[:1000])
    return f"the Hive Metastore refused {doing}"


class CommitStateUnknown(IcebergError):
    """A commit whose outcome the gateway cannot tell: 502 (HMS unreachable on re-read), 504
    (timed out), clients then must not clean up (the spec's 500/502/504 on commit)."""

    type = "CommitStateUnknownException"

    def __init__(self, message: str, status: int = 502):
        super().__init__(message)
        self.status = status
