"""Errors as AWS JSON 1.1 services answer them: an HTTP status and a JSON body
``{"__type": "<ErrorCode>", "message": "<text>"}`` with ``Content-Type:
application/x-amz-json-1.1`` (the protocol botocore's ``JSONParser`` reads: the code from
``__type``, the text from ``message``). Codes and statuses follow botocore's
``glue/2017-03-31/service-2.json`` and AWS's common errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from aiohttp import web

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
