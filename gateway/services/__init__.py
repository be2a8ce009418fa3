"""Service kinds: a service's ``kind`` in its topology picks the handler that serves it (Knox's
service role made meaningful). Each kind is one module; :data:`KINDS` is the registry, as
uvicorn's ``"module:attribute"`` tables, imported only when a topology names the kind.

The contract every kind meets is :class:`gateway.services.base.ServiceKind`; its ``roles``
name the pipeline steps of its chain (:data:`gateway.pipeline.steps.STEPS`), in order. A
JSON-over-HTTP kind is a :class:`gateway.services.http_frame.HttpKind`: its handlers, its error
model and a line here.
"""

from __future__ import annotations

from functools import cache

from gateway.pipeline.steps import STEPS, UnknownRole
from gateway.registry import resolve

#: ``kind`` in a topology's service → ``"module:Class"`` of its handler.
KINDS: dict[str, str] = {
    "hms-thrift": "gateway.hms_thrift.kind:ThriftRpcService",
    "glue": "gateway.glue.kind:GlueService",
    "explorer": "gateway.explorer.kind:ExplorerService",
    "event-stream": "gateway.events.kind:EventStreamService",
    "iceberg-rest": "gateway.iceberg.kind:IcebergRestService",
}


@cache
def service_kind(name: str) -> type | None:
    """The handler class registered for ``name``, or None when no kind has that name.

    Raises ``TypeError`` when the registered class does not declare that ``kind`` or a
    ``roles`` tuple, and
    :class:`~gateway.pipeline.steps.UnknownRole` when its ``roles`` name a step role that
    :data:`~gateway.pipeline.steps.STEPS` lacks.
    """
    target = KINDS.get(name)
    if target is None:
        return None
    cls = resolve(target)
    if getattr(cls, "kind", None) != name:
        raise TypeError(f"{target} must declare kind = {name!r}")
    roles = getattr(cls, "roles", None)
    if not isinstance(roles, tuple):  # never a kind without a chain (no authentication)
        raise TypeError(f"{target} must declare roles = (<step role>, ...)")
    unknown = [role for role in roles if role not in STEPS]
    if unknown:
        raise UnknownRole(f"service kind {name!r} ({target}) asks for unknown step role "
                          f"{unknown[0]!r}; known roles: {', '.join(STEPS)}")
    return cls
