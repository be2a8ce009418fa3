"""The one way the gateway's registries name an implementation: ``"module:attribute"``
(service kinds, step roles, authentication providers, Iceberg REST operations), imported on
first use, as uvicorn's ``--loop``/``--http`` choices are."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["resolve"]


def resolve(target: str) -> Any:
    """The attribute named by ``target`` (``"package.module:attribute"``), importing its module.
    Raises ``ImportError`` and ``AttributeError`` for a target that does not exist."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
