"""Service kinds: a service's ``kind`` in its topology picks the handler that serves it (Knox's
service role made meaningful). Each kind is one module; :data:`KINDS` is the registry, as
uvicorn's ``"module:attribute"`` tables, imported only when a topology names the kind.

The contract every kind meets is :class:`gateway.services.base.ServiceKind`.
"""

from __future__ import annotations

import importlib
from functools import cache

#: ``kind`` in a topology's service → ``"module:Class"`` of its handler.
KINDS: dict[str, str] = {
    "hms-thrift": "gateway.services.thrift_rpc:ThriftRpcService",
    "glue": "gateway.services.glue:GlueService",
    "explorer": "gateway.services.explorer:ExplorerService",
    "event-stream": "gateway.services.event_stream:EventStreamService",
}


@cache
def service_kind(name: str) -> type | None:
    """The handler class registered for ``name``, or None when no kind has that name.

    Raises ``TypeError`` when the registered class does not declare that ``kind``.
    """
    target = KINDS.get(name)
    if target is None:
        return None
    module, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    if getattr(cls, "kind", None) != name:
        raise TypeError(f"{target} must declare kind = {name!r}")
    return cls
