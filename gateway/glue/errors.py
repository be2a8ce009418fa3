"""Errors as AWS JSON 1.1 services answer them: an HTTP status and a JSON body
``{"__type": "<ErrorCode>", "message": "<text>"}`` with ``Content-Type:
application/x-amz-json-1.1`` (the protocol botocore's ``JSONParser`` reads: the code from
``__type``, the text from ``message``). Codes and statuses follow botocore's
``glue/2017-03-31/service-2.json`` and AWS's common errors. :class:`GlueErrors` is the
``glue`` kind's one error map: how the HTTP frame writes refusals, failures and these errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from aiohttp import hdrs, web
from thriftpy2.thrift import TException

from gateway.pipeline import outcomes
from gateway.pipeline.exchange import Exchange
from gateway.providers.authentication.sigv4 import ALGORITHM, REFUSAL
from gateway.providers.authentication.throttle import Throttled
from gateway.upstream.errors import UpstreamError, UpstreamTimeout

#: The protocol's media type (AWS JSON 1.1).
CONTENT_TYPE = "application/x-amz-json-1.1"


class GlueError(Exception):
    """One error answer: ``code`` (``__type``), ``status`` and ``message`` (client-facing, no
    secrets)."""

    code = "InternalServiceException"
    status = 502  # an upstream failure, never the gateway's own 500 (AWS's __type kept)

    def __init__(self, message: str, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.message = message
        self.headers = list(headers)  # extra response headers (WWW-Authenticate, Retry-After)

    @classmethod
    def of(cls, code: str, status: int, message: str) -> GlueError:
        """An error of any ``code`` and ``status`` (one AWS names but this module does not)."""
        error = cls(message)
        error.code, error.status = code, status
        return error

    def response(self, request_id: str | None = None) -> web.Response:
        """The HTTP response: JSON body, Glue's status, ``x-amzn-RequestId`` when given."""
        body = json.dumps({"__type": self.code, "message": self.message}).encode()
        response = web.Response(status=self.status, body=body, content_type=CONTENT_TYPE)
        if request_id:
            response.headers["x-amzn-RequestId"] = request_id
        for name, value in self.headers:
            response.headers.add(name, value)
        return response


def _error(code: str, status: int, doc: str) -> type[GlueError]:
    return type(code, (GlueError,), {"code": code, "status": status, "__doc__": doc})


EntityNotFound = _error("EntityNotFoundException", 400, "A named database, table or partition does "
                        "not exist, or the caller may not see it (the two are not told apart).")
InvalidInput = _error("InvalidInputException", 400, "A request member is missing, of the wrong type "
                      "or out of its range.")
AccessDenied = _error("AccessDeniedException", 400, "The caller may not call this operation.")
PermissionTypeMismatch = _error("PermissionTypeMismatchException", 400, "The engine's "
                                "SupportedPermissionTypes cannot express the caller's grants.")
#: AWS's common errors (any JSON 1.1 service).
UnknownOperation = _error("UnknownOperationException", 400, "X-Amz-Target names no operation.")
Serialization = _error("SerializationException", 400, "The body is not a JSON object.")
InternalService = _error("InternalServiceException", 502, "HMS answered what the gateway cannot map "
                         "(502, as the gateway answers every upstream failure, with AWS's __type).")
ServiceUnavailable = _error("ServiceUnavailableException", 503, "The metastore is unreachable.")
OperationTimeout = _error("OperationTimeoutException", 400, "The metastore did not answer in time.")
#: Authentication failures (SigV4, RFC-less: AWS's own contract).
MissingAuthenticationToken = _error("MissingAuthenticationTokenException", 401,
                                    "No credentials the service accepts.")
InvalidSignature = _error("InvalidSignatureException", 403, "A SigV4 signature that does not "
                          "verify, or a request time outside the allowed clock skew.")
UnrecognizedClient = _error("UnrecognizedClientException", 403, "An unknown access key id.")
Forbidden = _error("AccessDeniedException", 403, "Refused by identity assertion or the service ACL.")
Throttling = _error("ThrottlingException", 429, "Too many failed authentications from this address.")
RequestTimeout = _error("RequestTimeoutException", 408, "A body not received in time.")
RequestTooLarge = _error("RequestEntityTooLargeException", 413, "A body over the gateway's limit.")


class GlueErrors:
    """Glue's error model (:class:`~gateway.services.http_frame.ErrorModel`): AWS JSON 1.1
    errors with ``x-amzn-RequestId``."""

    error = GlueError

    @staticmethod
    def refusal(outcome: Exception, request: web.BaseRequest) -> tuple[GlueError, str] | None:
        if isinstance(outcome, outcomes.Unauthenticated):
            refusal = request.get(REFUSAL)
            if refusal is not None:  # a SigV4 signature presented and refused: as AWS answers it
                return GlueError.of(refusal.code, refusal.status, refusal.message), "unauthenticated"
            headers = _headers(outcome.headers)
            return MissingAuthenticationToken(_missing_message(request, headers), headers), "unauthenticated"
        if isinstance(outcome, outcomes.Forbidden):
            return Forbidden(outcome.reason), "forbidden"
        if isinstance(outcome, Throttled):
            return Throttling("Rate exceeded: too many failed authentications",
                                     [(hdrs.RETRY_AFTER, str(outcome.retry_after))]), "throttled"
        if isinstance(outcome, outcomes.TooLarge):
            return RequestTooLarge(outcome.reason), "too_large"
        if isinstance(outcome, outcomes.BodyTimeout):
            return RequestTimeout(outcome.reason), "bad_request"
        return None

    @staticmethod
    def label(error: GlueError) -> str:
        if isinstance(error, (InvalidInput, Serialization, UnknownOperation)):
            return "bad_request"
        return "exception" if error.status < 500 else "upstream_unavailable"

    @staticmethod
    def upstream(failure: Exception, method: str | None) -> tuple[GlueError, str]:
        if isinstance(failure, UpstreamTimeout):
            return OperationTimeout(str(failure)), "upstream_timeout"
        if isinstance(failure, UpstreamError):
            return ServiceUnavailable(str(failure)), "upstream_unavailable"
        if isinstance(failure, TException):  # HMS's exception, or TApplicationException
            return InternalService(str(failure)[:1024]), "upstream_unavailable"
        return InternalService("the metastore failed"), "upstream_unavailable"

    @staticmethod
    def internal(request_id: str) -> GlueError:
        return GlueError.of("InternalServiceException", 500,
                            f"internal error; the gateway's log has the details under request id {request_id}")

    @staticmethod
    def answer(error: GlueError, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        return error.response(exchange.event.request_id), error.message


def _headers(headers) -> list[tuple[str, str]]:
    return list(headers.items()) if isinstance(headers, dict) else list(headers or ())


def _missing_message(request: web.BaseRequest, headers: list[tuple[str, str]]) -> str:
    """AWS's ``Missing Authentication Token``, with the schemes the topology accepts (its
    challenges): a SigV4 signature sent to a topology without a ``sigv4`` provider is named
    as such, rather than left looking like a wrong key."""
    schemes = list(dict.fromkeys(value.split(" ", 1)[0] for name, value in headers
                                 if name.lower() == hdrs.WWW_AUTHENTICATE.lower()))
    accepted = ", ".join(schemes) or "none"
    if request.headers.get(hdrs.AUTHORIZATION, "").startswith(ALGORITHM + " ") and ALGORITHM not in schemes:
        return (f"Missing Authentication Token: this service does not accept AWS Signature Version 4 "
                f"({ALGORITHM}; its topology has no sigv4 provider). It accepts: {accepted}.")
    return f"Missing Authentication Token. This service accepts: {accepted}."
