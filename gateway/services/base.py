"""What every service kind is given and what it must offer (the seam of :data:`KINDS`).

A kind (Knox's service role made meaningful) serves the requests routed to one service path.
It is built once per service when its topology is built (start-up and each reload), from a
:class:`ServiceContext`; the gateway then calls :meth:`ServiceKind.start` when the topology goes
live and :meth:`ServiceKind.close` when a reload has replaced it or at shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiohttp import web
from pydantic import BaseModel, ValidationError

from gateway.config import ConfigError, GatewayConfig, ServiceConfig
from gateway.pipeline.step import Chain
from gateway.thrift.schema import ServiceSchema

if TYPE_CHECKING:
    from gateway.pipeline.exchange import Exchange
    from gateway.policy import PolicyEngine
    from gateway.upstream.failover import Upstream


@dataclass(frozen=True, eq=False)
class ServiceContext:
    """Everything a kind may use to build one service.

    ``config``: the service's entry as validated by :mod:`gateway.config`; ``options``: the
    kind's own ``options:`` validated into its ``Options`` model (None when it has none);
    ``chain``: the service's steps (authentication → identity assertion → ACL → exposure →
    catalog policy → ownership); ``policy``: the catalog policy engine when ``policy_file`` is
    set; ``source``/``index``: where the entry is, for :class:`ConfigError`; ``siblings``: the
    topology's service entries by path.
    """

    topology: str
    config: ServiceConfig
    chain: Chain
    schema: ServiceSchema
    gateway: GatewayConfig
    options: Any = None
    policy: "PolicyEngine | None" = None
    source: str = ""
    index: int = 0
    #: Every service entry of the same topology, by path (for kinds that refer to another).
    siblings: dict[str, ServiceConfig] = field(default_factory=dict)
    _upstream: list = field(default_factory=list, repr=False)

    def resolve(self, path: Path) -> Path:
        """``path`` made absolute against the topology file's folder (as ``policy_file`` is)."""
        return path if path.is_absolute() else (Path(self.source).parent / path).resolve()

    def error(self, key: str, reason: str) -> ConfigError:
        """A :class:`ConfigError` naming this service's entry (``services[i].<key>``)."""
        return ConfigError(self.source, f"services[{self.index}].{key}", reason)

    def upstream(self) -> "Upstream":
        """The HMS pools of the service's ``upstream:`` (built once; no I/O until a call).

        Raises :class:`ConfigError` when the entry has no ``upstream:``.
        """
        if not self._upstream:
            if self.config.upstream is None:
                raise self.error("upstream", f"service kind {self.config.kind!r} needs an upstream")
            from gateway.topology import build_upstream

            self._upstream.append(build_upstream(self.config, self.gateway))
        return self._upstream[0]


def validate_options(model: type[BaseModel] | None, ctx_source: str, index: int,
                     kind: str, options: dict[str, Any]) -> Any:
    """``options`` validated into ``model``; errors name ``services[i].options.<key>``.

    Raises :class:`ConfigError` for bad options, or options given to a kind that takes none.
    """
    if model is None:
        if options:
            raise ConfigError(ctx_source, f"services[{index}].options",
                              f"service kind {kind!r} takes no options")
        return None
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(ctx_source, f"services[{index}].options" + (f".{key}" if key else ""),
                          first["msg"]) from None


class ServiceKind(Protocol):
    """A service kind's handler, one per service."""

    kind: ClassVar[str]
    #: The kind's own settings (a topology's ``options:``), or None when it takes none.
    Options: ClassVar[type[BaseModel] | None]
    #: The HMS pools it calls (probed by ``/readyz``), or None for kinds that call none.
    upstream: "Upstream | None"

    @classmethod
    def build(cls, ctx: ServiceContext) -> "ServiceKind": ...

    async def handle(self, exchange: "Exchange") -> tuple[web.StreamResponse, str]:
        """The response to one routed request and its outcome label; raises pipeline outcomes
        (:mod:`gateway.pipeline.outcomes`) to end the request early."""
        ...

    async def start(self) -> None:
        """Start background work (a poller, say) when the topology goes live."""
        ...

    async def close(self) -> None:
        """Release everything after a reload replaced the service, or at shutdown."""
        ...
