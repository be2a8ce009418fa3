"""The Iceberg REST Catalog's error model, the one map of the ``iceberg-rest`` kind (its
errors and :class:`IcebergErrors`, how the HTTP frame writes them): every non-2xx answer is
``{"error": {"message": str, "type": str, "code": int}}`` (the spec's ``ErrorModel`` and
``IcebergErrorResponse``), ``type`` the exception name Iceberg's clients map back (Java's
``ErrorHandlers``, PyIceberg's ``_handle_non_200_response``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

from aiohttp import hdrs, web
from thriftpy2.thrift import TException

from gateway.pipeline import outcomes
from gateway.pipeline.exchange import Exchange
from gateway.providers.authentication.throttle import Throttled
from gateway.upstream.errors import UpstreamError

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


class IcebergErrors:
    """The spec's error model (:class:`~gateway.services.http_frame.ErrorModel`),
    ``IcebergErrorResponse``; the token endpoint's refusals in OAuth2's
    (:attr:`gateway.iceberg.routes.Route.error_model`, which ``error_model_of(operation)``
    gives: None for the catalog's own model). Never a 500 for HMS or storage failing: 500, 502
    and 504 on a commit mean "commit state unknown" to clients."""

    error = IcebergError

    def __init__(self, error_model_of: Callable[[str], Callable[[IcebergError], IcebergError] | None]):
        self.error_model_of = error_model_of

    @staticmethod
    def refusal(outcome: Exception, request: web.BaseRequest) -> tuple[IcebergError, str] | None:
        if isinstance(outcome, outcomes.Unauthenticated):
            headers = outcome.headers.items() if isinstance(outcome.headers, dict) else outcome.headers
            error: IcebergError = NotAuthorized("authentication required", headers or ())
        elif isinstance(outcome, outcomes.Forbidden):
            error = Forbidden(outcome.reason)
        elif isinstance(outcome, Throttled):  # also an operation's own password check (the token endpoint)
            error = TooManyRequests("too many failed authentications",
                                    [(hdrs.RETRY_AFTER, str(outcome.retry_after))])
        elif isinstance(outcome, outcomes.TooLarge):  # the spec lists no 413: an oversized body is a bad request
            error = BadRequest(outcome.reason)
        elif isinstance(outcome, outcomes.BodyTimeout):
            error = RequestTimeout(outcome.reason)
        else:
            return None
        return error, IcebergErrors.label(error)

    @staticmethod
    def label(error: IcebergError) -> str:
        return {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 408: "bad_request",
                413: "too_large", 415: "bad_request", 429: "throttled", 503: "upstream_unavailable",
                502: "upstream_unavailable", 504: "upstream_timeout"}.get(error.status, "exception")

    @staticmethod
    def upstream(failure: Exception, method: str | None) -> tuple[IcebergError, str]:
        if isinstance(failure, UpstreamError):
            # the reason is safe to show (UpstreamError's contract): it names the settings to fix
            # for a refused proxy user, a wrong service principal or QOP, an unreachable KDC
            return ServiceUnavailable(f"the Hive Metastore is unavailable: {failure}"), "upstream_unavailable"
        if isinstance(failure, TException):
            return ServiceFailure(f"the Hive Metastore failed ({method})"), "upstream_unavailable"
        return ServiceFailure("the storage of the metadata files failed"), "upstream_unavailable"

    @staticmethod
    def internal(request_id: str) -> IcebergError:
        return internal(request_id)

    def answer(self, error: IcebergError, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        model = self.error_model_of(exchange.event.method) if exchange.event.method else None
        if model is not None:
            error = model(error)
        return error.response(exchange.request.method == hdrs.METH_HEAD), error.message
