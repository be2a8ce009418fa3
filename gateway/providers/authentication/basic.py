"""Parsing the HTTP Basic ``Authorization`` header (RFC 7617)."""

from __future__ import annotations

import re
from base64 import b64decode

# RFC 7617 §2: user-id and password MUST NOT contain control characters (RFC 5234 CTL).
_CTL = re.compile(r"[\x00-\x1f\x7f]")


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` from ``Authorization: Basic <base64(user:password)>``, else None.

    Malformed headers (bad or non-ASCII base64, no colon, not UTF-8, control characters in
    user or password) give None, as if absent: the caller answers 401, never 500.
    """
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = b64decode(value.strip(), validate=True).decode("utf-8")
    except ValueError:  # binascii.Error, non-ASCII input, UnicodeDecodeError
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user or _CTL.search(decoded):
        return None
    return user, password


#: Request key: ``(user, password)`` a service took from the request body, checked by the password
#: providers in place of the ``Authorization`` header (OAuth2 client credentials sent in the form,
#: RFC 6749 §2.3.1; :mod:`gateway.iceberg.oauth`).
CLIENT_CREDENTIALS = "gateway.authentication.client_credentials"


def password_credentials(request) -> tuple[str, str] | None:
    """The ``(user, password)`` a password provider checks: the body's client credentials when a
    service put them in the request (:data:`CLIENT_CREDENTIALS`), else the Basic header's."""
    given = request.get(CLIENT_CREDENTIALS)
    if given is not None:
        return given
    return basic_credentials(request.headers.get("Authorization"))
