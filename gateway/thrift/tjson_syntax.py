"""TJSONProtocol syntax: type tags, parsing a request body, formatting scalars.

Follows Apache Thrift's TJSONProtocol (lib/java, lib/cpp): message
``[1,"name",type,seqid,{struct}]``; struct ``{"<id>":{"<tag>":value}}``; list/set
``["tag",count,...]``; map ``["ktag","vtag",count,{...}]``; bools 1/0; map keys are
always JSON strings; doubles NaN/Infinity/-Infinity quoted; binary as base64.

Parsing uses the stdlib ``json`` module. Two forms that Apache writers produce but
that are not JSON are accepted through a tolerant pre-pass (only when strict parsing
fails): bare ``nan``/``inf``/``-inf`` (Python's writer) and map keys that are raw JSON
containers or structs (``{["str",1,"a"]:"/loc"}``, every Apache writer). The pre-pass
turns the first into the quoted names and the second into a JSON string holding the
key's JSON text, which :func:`parse_key` reads back.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from json.encoder import encode_basestring as _encode_basestring  # C-accelerated

from .errors import MAX_DEPTH, ProtocolError
from .schema import TType

__all__ = [
    "TAG_TO_TYPE",
    "TYPE_TO_TAG",
    "parse_tjson",
    "parse_key",
    "quote_string",
    "format_double",
    "format_double_key",
    "encode_base64",
    "decode_base64",
    "special_double",
]

TAG_TO_TYPE = {
    "tf": TType.BOOL,
    "i8": TType.I8,
    "i16": TType.I16,
    "i32": TType.I32,
    "i64": TType.I64,
    "dbl": TType.DOUBLE,
    "str": TType.STRING,
    "rec": TType.STRUCT,
    "lst": TType.LIST,
    "set": TType.SET,
    "map": TType.MAP,
}
TYPE_TO_TAG = {v: k for k, v in TAG_TO_TYPE.items()}

_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_BARE_SPECIALS = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}

# One token of (almost-)JSON text, for the tolerant pre-pass.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+|\s+', re.S)
_CLOSERS = {"]": "[", "}": "{"}


def parse_tjson(body: bytes) -> object:
    """Decode a TJSON body (UTF-8) into Python values with ``json``.

    Raises ``ProtocolError`` on bad UTF-8, bad JSON, nesting deeper than ``MAX_DEPTH``
    in container keys, or numbers ``json`` refuses (e.g. too many digits).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"request is not UTF-8 (byte {exc.start})") from None
    return _loads(text)


def parse_key(text: str) -> object:
    """Parse a container/struct map key given as JSON text (see module doc)."""
    return _loads(text)


def _int_or_negative_zero(token: str) -> int | float:
    # Python's writer writes the double -0.0 as "-0"; json would read it as int 0.
    return -0.0 if token == "-0" else int(token)


#: Longest accepted number literal with a fraction or exponent. Real writers emit at most ~25
#: characters (shortest round-trip form); a thousand-digit literal is an attack, not a double.
MAX_FLOAT_LITERAL = 64


def _bounded_float(token: str) -> float:
    if len(token) > MAX_FLOAT_LITERAL:
        raise ProtocolError(f"number literal longer than {MAX_FLOAT_LITERAL} characters")
    return float(token)


def _loads(text: str) -> object:
    # strict=False: raw control characters in strings, as Python's writer emits them.
    parse_int = _int_or_negative_zero if "-0" in text else None
    try:
        return json.loads(text, strict=False, parse_int=parse_int, parse_float=_bounded_float)
    except json.JSONDecodeError as exc:
        first_error = exc
    except (ValueError, RecursionError):
        raise ProtocolError("invalid JSON number or nesting") from None
    try:
        strict, _ = _normalise(text, 0, 0, single=False)
        return json.loads(strict, strict=False, parse_int=parse_int, parse_float=_bounded_float)
    except ProtocolError:
        raise
    except json.JSONDecodeError:
        raise ProtocolError(f"invalid JSON at char {first_error.pos}: {first_error.msg}") from None
    except (ValueError, RecursionError):
        raise ProtocolError("invalid JSON number or nesting") from None


def _normalise(text: str, pos: int, depth: int, single: bool) -> tuple[str, int]:
    """Rewrite the two tolerated non-JSON forms into JSON, from ``pos``.

    With ``single``, stop after one complete container (used for a raw container key).
    Returns the rewritten text and the end position. Validity of everything else is
    left to ``json.loads``.
    """
    out: list[str] = []
    stack: list[str] = []
    expect_key = False
    end = len(text)
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ProtocolError(f"invalid JSON at char {pos}")
        token = match.group()
        start, pos = pos, match.end()
        first = token[0]
        if first in "[{":
            if expect_key:
                if depth + len(stack) >= MAX_DEPTH:
                    raise ProtocolError("TJSON nested too deeply")
                key, pos = _normalise(text, start, depth + len(stack) + 1, single=True)
                out.append(json.dumps(key))
                expect_key = False
                continue
            stack.append(first)
            if depth + len(stack) > MAX_DEPTH:
                raise ProtocolError("TJSON nested too deeply")
            expect_key = first == "{"
            out.append(token)
        elif first in "]}":
            if not stack or stack.pop() != _CLOSERS[first]:
                raise ProtocolError(f"invalid JSON at char {start}: unbalanced {first}")
            out.append(token)
            expect_key = False
            if single and not stack:
                return "".join(out), pos
        elif first == ",":
            expect_key = bool(stack) and stack[-1] == "{"
            out.append(token)
        elif first.isspace():
            continue
        else:
            expect_key = False
            out.append(_BARE_SPECIALS.get(token, token))
    if single:
        raise ProtocolError("TJSON map key truncated")
    return "".join(out), pos


def special_double(value: str) -> float | None:
    """The double for ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; ``None`` otherwise."""
    return _SPECIAL_DOUBLES.get(value)


def quote_string(value: str) -> str:
    """JSON string literal the way Apache's writers escape it (``"``, ``\\``, controls;
    non-ASCII left as UTF-8)."""
    return _encode_basestring(value)


def format_double(value: float) -> str:
    """A double as a TJSON value: shortest round-trip digits; NaN/±Infinity quoted."""
    if value != value:
        return '"NaN"'
    if value == math.inf:
        return '"Infinity"'
    if value == -math.inf:
        return '"-Infinity"'
    return repr(value)


def format_double_key(value: float) -> str:
    """A double as a TJSON map key (always quoted)."""
    text = format_double(value)
    return text if text[0] == '"' else f'"{text}"'


def encode_base64(value: bytes) -> str:
    """Standard base64, padded (as Apache's Python/Node writers do)."""
    return binascii.b2a_base64(value, newline=False).decode("ascii")


def decode_base64(value: str) -> bytes:
    """Standard base64, padded or not (Apache's C++/Java writers omit the padding).

    Raises ``ProtocolError`` on characters outside the alphabet or a bad length.
    """
    missing = -len(value) % 4
    if missing == 3:
        raise ProtocolError("bad base64 length in binary field")
    try:
        return binascii.a2b_base64(value + "=" * missing, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("bad base64 in binary field") from None
