"""Secrets in configuration: references to a file or an environment variable, never inline values.

A topology file is committed to version control, so a secret field holds a *reference*:

* ``file:/absolute/path``: the file's content, surrounding whitespace stripped (a mounted
  Kubernetes/Docker secret);
* ``env:NAME``: the value of environment variable ``NAME``.

Anything else is refused at load time, so a password pasted inline fails start-up with a
:class:`~gateway.config.ConfigError` naming the key. The value is read once, when the file is
validated; :class:`Secret` never shows it in ``repr``/``str``, so it cannot leak into a log line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema


class Secret:
    """A secret value read from a ``file:``/``env:`` reference; ``reveal()`` gives the text."""

    __slots__ = ("_value", "reference")

    def __init__(self, value: str, reference: str):
        self._value = value
        #: Where the value came from (``file:/run/secrets/x``): safe to log.
        self.reference = reference

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self.reference!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.reference == self.reference

    def __hash__(self) -> int:
        return hash(self.reference)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler):
        return core_schema.no_info_plain_validator_function(
            cls.from_reference,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda s: s.reference),
        )

    @classmethod
    def from_reference(cls, reference: object) -> Secret:
        """Read ``file:/path`` or ``env:NAME``. Raises ValueError (no secret text in the message)."""
        if isinstance(reference, Secret):
            return reference
        if not isinstance(reference, str):
            raise ValueError("must be a 'file:/path' or 'env:NAME' reference")
        kind, sep, target = reference.partition(":")
        if not sep or kind not in ("file", "env") or not target:
            raise ValueError(
                "secrets are never inline: use 'file:/absolute/path' or 'env:NAME'"
            )
        if kind == "env":
            value = os.environ.get(target)
            if value is None:
                raise ValueError(f"environment variable {target} is not set")
            if not value:
                raise ValueError(f"environment variable {target} is empty")
            return cls(value, reference)
        path = Path(target)
        if not path.is_absolute():
            raise ValueError(f"secret file {target!r} must be an absolute path")
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"cannot read secret file {target}: {exc.strerror or exc}") from None
        if not value:
            raise ValueError(f"secret file {target} is empty")
        return cls(value, reference)
