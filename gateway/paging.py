"""Keyset paging tokens for catalog listings, shared by the HTTP kinds (Glue's ``NextToken``,
Iceberg REST's ``pageToken``).

A token holds the sort key of the last item returned (a name, or a partition's values), the
operation and the listing's scope (database, table, expression), as URL-safe base64 of JSON. A
page starts after that key, so objects created or dropped between calls neither repeat nor
shift items. The token grants nothing: every page is filtered by the caller's policy again, so
a forged token only moves where the listing resumes. A token that does not decode, or that
belongs to another operation or scope, raises :class:`InvalidPageToken`, which each kind
answers in its own error model.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["InvalidPageToken", "page"]

T = TypeVar("T")
_MAX_TOKEN = 8192


class InvalidPageToken(ValueError):
    """A page token that does not decode, or names another listing; the message is for the
    client (it holds no part of the token)."""


def _token(operation: str, scope: list, after: Any) -> str:
    raw = json.dumps({"op": operation, "scope": scope, "after": after}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _after(token: Any, operation: str, scope: list) -> Any:
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN:
        raise InvalidPageToken("invalid page token")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise InvalidPageToken("invalid page token") from None
    if not isinstance(decoded, dict) or decoded.get("op") != operation or decoded.get("scope") != scope:
        raise InvalidPageToken("invalid page token: it belongs to another request")
    return decoded.get("after")


def _gt(value: Any, after: Any) -> bool:
    try:
        return value > after
    except TypeError:  # a forged key of another type
        raise InvalidPageToken("invalid page token") from None


def page(items: Sequence[T], key: Callable[[T], Any], *, operation: str, scope: list,
         token: Any, limit: int) -> tuple[list[T], str | None]:
    """The page of ``items`` (any order; sorted here by ``key``, whose values must be JSON
    strings or lists of strings) after ``token`` (None: from the start), at most ``limit``
    long, and the token of the next page (None when this one is the last).

    Raises :class:`InvalidPageToken` for a token that does not decode or names another
    ``operation``/``scope``."""
    ordered = sorted(items, key=key)
    if token is not None:
        after = _after(token, operation, scope)
        ordered = [item for item in ordered if _gt(key(item), after)]
    chosen = ordered[:limit]
    more = len(ordered) > limit
    return chosen, (_token(operation, scope, key(chosen[-1])) if more else None)
