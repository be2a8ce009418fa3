"""Glue's pagination: ``MaxResults`` (validated against the operation's page size range) and an
opaque ``NextToken`` (answered while more items follow, sent back to get them).

The token is keyset-based: it holds the sort key of the last item returned (a name, or a
partition's values), the operation and the listing's scope (database, table, expression), as
URL-safe base64 of JSON. A page starts after that key, so objects created or dropped between
calls neither repeat nor shift items. The token grants nothing: every page is filtered by the
caller's policy again, so a forged token only moves where the listing resumes. A token that does
not decode, or that belongs to another operation or scope, is ``InvalidInputException``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gateway.glue.errors import InvalidInput

T = TypeVar("T")
_MAX_TOKEN = 8192


def max_results(value: Any, limit: int) -> int:
    """``MaxResults`` as given (1..``limit``), ``limit`` when absent.

    Raises ``InvalidInputException`` for a non-integer or an out-of-range value, worded as
    AWS's validation messages are."""
    if value is None:
        return limit
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("MaxResults must be an integer")
    if not 1 <= value <= limit:
        raise InvalidInput(f"1 validation error detected: Value '{value}' at 'maxResults' failed to "
                           f"satisfy constraint: Member must have value between 1 and {limit}")
    return value


def _token(operation: str, scope: list, after: Any) -> str:
    raw = json.dumps({"op": operation, "scope": scope, "after": after}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _after(token: Any, operation: str, scope: list) -> Any:
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN:
        raise InvalidInput("Invalid NextToken")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise InvalidInput("Invalid NextToken") from None
    if not isinstance(decoded, dict) or decoded.get("op") != operation or decoded.get("scope") != scope:
        raise InvalidInput("Invalid NextToken: it belongs to another request")
    return decoded.get("after")


def page(items: Sequence[T], key: Callable[[T], Any], *, operation: str, scope: list,
         token: Any, limit: int) -> tuple[list[T], str | None]:
    """The page of ``items`` (any order; sorted here by ``key``, whose values must be JSON
    strings or lists of strings) after ``token`` (None: from the start), at most ``limit``
    long, and the token of the next page (None when this one is the last).

    Raises ``InvalidInputException`` for a token that does not decode or names another
    ``operation``/``scope``."""
    ordered = sorted(items, key=key)
    if token is not None:
        after = _after(token, operation, scope)
        ordered = [item for item in ordered if _gt(key(item), after)]
    chosen = ordered[:limit]
    more = len(ordered) > limit
    return chosen, (_token(operation, scope, key(chosen[-1])) if more else None)


def _gt(value: Any, after: Any) -> bool:
    try:
        return value > after
    except TypeError:  # a forged key of another type
        raise InvalidInput("Invalid NextToken") from None
