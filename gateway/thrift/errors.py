"""Errors raised by the Thrift translation core."""

from __future__ import annotations

__all__ = ["ProtocolError", "MAX_DEPTH"]

# Deepest nesting of structs/containers accepted in either direction.
MAX_DEPTH = 64


class ProtocolError(ValueError):
    """Malformed or unsupported Thrift data (TJSON or binary).

    ``reason`` is short and safe to return to a client: it names what is wrong and
    where, and echoes at most a few characters of the payload.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def excerpt(value: object, limit: int = 12) -> str:
    """At most ``limit`` characters of ``value``'s repr, for error reasons."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
