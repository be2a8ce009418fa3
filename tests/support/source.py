"""Parsing the repository's own source in tests.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so another
thread compiling source meanwhile (an import without a ``.pyc``, as on a machine that sets
``PYTHONDONTWRITEBYTECODE=1``) can make ``ast.parse`` raise ``SystemError: AST constructor
recursion depth mismatch`` (python/cpython#106905; seen once in a clean-clone run, in a test that
parses every module of ``gateway/``). A parse that succeeds is exact, so the parse is retried.
"""

from __future__ import annotations

import ast

ATTEMPTS = 5


def parse(text: str) -> ast.Module:
    """``ast.parse(text)``, tried again on CPython's spurious recursion-depth ``SystemError``.
    Raises what ``ast.parse`` raises (``SyntaxError``; that ``SystemError`` after
    :data:`ATTEMPTS` tries)."""
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(text)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
