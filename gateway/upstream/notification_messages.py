"""Decode HMS notification messages (``NotificationEvent.message``) by their ``messageFormat``.

Formats, after Hive's messaging packages:

- ``json-0.2``: ``JSONMessageFactory`` (Hive 1.2 to 3, also Hive 4's ``JSONMessageEncoder``),
  the message is JSON text;
- ``gzip(json-2.0)``: Hive 4's ``GzipJSONMessageEncoder``, the message is Base64 of the gzip of
  the JSON text.

A format not listed whose text parses as JSON is accepted as JSON; anything else raises
:class:`MessageFormatError`, so raw bytes never reach a client.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib

__all__ = ["MAX_MESSAGE_BYTES", "MessageFormatError", "decode_message", "gunzip"]

#: A decompressed message larger than this (bytes) is refused: a gzip bomb stops here.
MAX_MESSAGE_BYTES = 64 << 20


class MessageFormatError(ValueError):
    """The message cannot be decoded as its ``messageFormat`` says (or the format is unknown)."""


def gunzip(data: bytes, limit: int | None = None) -> bytes:
    """The gzip member ``data`` inflated, at most ``limit`` bytes (default
    :data:`MAX_MESSAGE_BYTES`; a gzip bomb stops there).

    Raises :class:`MessageFormatError` when ``data`` is not gzip or inflates beyond ``limit``.
    """
    limit = MAX_MESSAGE_BYTES if limit is None else limit
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise MessageFormatError(f"not gzip data: {exc}") from None
    if len(out) > limit:
        raise MessageFormatError(f"data inflates beyond {limit} bytes")
    return out


def _json_object(text: str | bytes, fmt: str) -> dict:
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MessageFormatError(f"{fmt} message is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MessageFormatError(f"{fmt} message is JSON but not an object")
    return value


def decode_message(message: str, message_format: str | None) -> dict:
    """The JSON object carried by ``message`` in ``message_format`` (see the module docstring).

    Raises :class:`MessageFormatError` when it cannot be decoded.
    """
    fmt = (message_format or "").strip()
    if fmt.startswith("gzip(") and fmt.endswith(")"):
        try:
            raw = base64.b64decode(message, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise MessageFormatError(f"{fmt} message is not Base64: {exc}") from None
        return _json_object(gunzip(raw), fmt)
    return _json_object(message, fmt or "unlabelled")


def gzip_json_message(value: dict) -> str:
    """Encode ``value`` as Hive 4's ``gzip(json-2.0)`` does (Base64 of gzip of JSON); for tests."""
    return base64.b64encode(gzip.compress(json.dumps(value).encode())).decode("ascii")
