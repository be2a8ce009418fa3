"""Parsing the HTTP Basic ``Authorization`` header (RFC 7617)."""

from __future__ import annotations

import binascii
from base64 import b64decode


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` from ``Authorization: Basic <base64(user:password)>``, else None.

    Malformed headers (bad base64, no colon, not UTF-8) give None, as if absent.
    """
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password
