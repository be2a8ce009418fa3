"""The Iceberg REST Catalog's error model: every non-2xx answer is
``{"error": {"message": str, "type": str, "code": int}}`` (the spec's ``ErrorModel`` and
``IcebergErrorResponse``), ``type`` the exception name Iceberg's clients map back (Java's
``ErrorHandlers``, PyIceberg's ``_handle_non_200_response``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from aiohttp import web

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
MethodNotAllowed = _kind(405, "MethodNotAllowedException")
Unsupported = _kind(406, "UnsupportedOperationException")
AlreadyExists = _kind(409, "AlreadyExistsException")
NamespaceNotEmpty = _kind(409, "NamespaceNotEmptyException")
CommitFailed = _kind(409, "CommitFailedException")
RequestTimeout = _kind(408, "RequestTimeoutException")
PayloadTooLarge = _kind(413, "PayloadTooLargeException")
Unprocessable = _kind(422, "UnprocessableEntityException")
TooManyRequests = _kind(429, "TooManyRequestsException")
ServiceUnavailable = _kind(503, "ServiceUnavailableException")
#: HMS failed in a way that is not the client's doing (never for a commit: see CommitStateUnknown).
ServiceFailure = _kind(502, "ServiceFailureException")


class CommitStateUnknown(IcebergError):
    """A commit whose outcome the gateway cannot tell: 502 (HMS unreachable on re-read), 504
    (timed out), clients then must not clean up (the spec's 500/502/504 on commit)."""

    type = "CommitStateUnknownException"

    def __init__(self, message: str, status: int = 502):
        super().__init__(message)
        self.status = status
