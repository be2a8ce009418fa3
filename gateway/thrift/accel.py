"""Chooses the translation implementation: the C extension ``_speedups`` or pure Python.

The C code (``gateway/thrift/_speedups.c``, built by ``pip install``) and the pure-Python
modules give the same bytes and the same ``ProtocolError`` reasons: whenever the C code
meets anything unusual (malformed input, duplicate JSON keys, the non-JSON forms Apache's
writers produce) it hands the message to the Python code, which decides. The environment
variable ``HMS_GATEWAY_PURE_PYTHON=1`` forces the Python code; so does a missing build,
which :func:`implementation` reports so that the server can log it at start-up.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .schema import MapSpec, SchemaKeyed, ServiceSchema, StructSchema, TypeSpec

__all__ = ["implementation", "set_implementation", "using", "tjson_call_to_binary", "reply_translator", "compiled"]

PURE_PYTHON_ENV = "HMS_GATEWAY_PURE_PYTHON"

try:
    from . import _speedups as _built
    _IMPORT_ERROR: str | None = None
except ImportError as exc:  # not built (source checkout without `pip install -e .`)
    _built = None
    _IMPORT_ERROR = str(exc)

_c = None if os.environ.get(PURE_PYTHON_ENV) == "1" else _built


def implementation() -> str:
    """``"c"`` or ``"python"``, with the reason when the C code is not in use."""
    if _c is not None:
        return "c"
    if _built is not None:
        return f"python ({PURE_PYTHON_ENV}=1)"
    return f"python (C extension not built: {_IMPORT_ERROR})"


def set_implementation(name: str) -> None:
    """Switch to ``"c"`` or ``"python"`` (tests run the conformance suite on both).

    Raises ``RuntimeError`` if ``"c"`` is asked for and the extension is not built.
    """
    global _c
    if name == "c":
        if _built is None:
            raise RuntimeError(f"C extension not built: {_IMPORT_ERROR}")
        _c = _built
    elif name == "python":
        _c = None
    else:
        raise ValueError(f"unknown implementation {name!r}")


@contextlib.contextmanager
def using(name: str) -> Iterator[None]:
    """Within the block, the ``"c"`` or ``"python"`` implementation; the previous one after.

    For tests and the benchmark, which compare both; raises as :func:`set_implementation`.
    """
    before = "c" if _c is not None else "python"
    set_implementation(name)
    try:
        yield
    finally:
        set_implementation(before)


def compiled(schema: ServiceSchema) -> tuple[dict, dict]:
    """``(args, results)``: method name → compiled args / result struct spec (see _speedups.c).

    Compiled specs: ``None``; an ``int`` TType (18 for IDL binary); ``(15|14, elem)``;
    ``(13, key, value)``; a ``dict`` field id → spec for a struct (recursive structs share it).
    Built once per schema.
    """
    return _compiled(schema)


def _compile(schema: ServiceSchema) -> tuple[dict, dict]:
    memo: dict[int, dict] = {}

    def spec(s: TypeSpec | None) -> object:
        if s is None or type(s) is int:
            return s
        if isinstance(s, StructSchema):
            found = memo.get(id(s))
            if found is None:
                found = memo[id(s)] = {}
                for fid, field in s.fields.items():
                    found[fid] = spec(field.spec)
            return found
        if isinstance(s, MapSpec):
            return (s.ttype, spec(s.key), spec(s.value))
        return (s.ttype, spec(s.elem))  # type: ignore[union-attr]

    args = {name: spec(m.args) for name, m in schema.methods.items()}
    results = {name: spec(m.result) for name, m in schema.methods.items()}
    return args, results


_compiled = SchemaKeyed(_compile)


def tjson_call_to_binary(body: bytes, schema: ServiceSchema) -> tuple[str, int, int, bytes] | None:
    """``(name, type, seqid, binary message)`` from the C code, or ``None``: use the Python code."""
    if _c is None:
        return None
    return _c.tjson_call_to_binary(body, compiled(schema)[0])


def reply_translator(schema: ServiceSchema, max_bytes: int, seqid: int | None):
    """A C ``ReplyTranslator`` (``feed(chunk) -> int | None``, ``take() -> bytes``), or ``None``."""
    if _c is None:
        return None
    return _c.ReplyTranslator(compiled(schema)[1], max_bytes, seqid)
