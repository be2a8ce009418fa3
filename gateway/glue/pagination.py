"""Glue's pagination: ``MaxResults`` (validated against the operation's page size range) and an
opaque ``NextToken`` (answered while more items follow, sent back to get them): the gateway's
keyset tokens (:mod:`gateway.paging`), a bad one answered as ``InvalidInputException``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gateway import paging
from gateway.glue.errors import InvalidInput

T = TypeVar("T")


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


def page(items: Sequence[T], key: Callable[[T], Any], *, operation: str, scope: list,
         token: Any, limit: int) -> tuple[list[T], str | None]:
    """:func:`gateway.paging.page` with Glue's error: raises ``InvalidInputException`` for a
    ``NextToken`` that does not decode or names another ``operation``/``scope``."""
    try:
        return paging.page(items, key, operation=operation, scope=scope, token=token, limit=limit)
    except paging.InvalidPageToken as exc:
        raise InvalidInput(str(exc).replace("invalid page token", "Invalid NextToken")) from None
