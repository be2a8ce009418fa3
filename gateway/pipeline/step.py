"""The interface of a pipeline step, and the chain of one service's steps.

A step has the hook every service kind runs, ``on_request(exchange)``: HTTP level, before the
body is read (authentication, identity assertion, service ACL). It is either a plain method or
a coroutine method: a check that never waits is a plain method, so that the request does not
pay for a coroutine per step (docs/performance.md, issue 14). A kind whose steps also see what
it decodes adds their hooks in its own wing, on a subclass of :class:`Step`, and runs them with
:func:`hooks` and :func:`run_hooks` (the ``hms-thrift`` kind's call and reply hooks:
:mod:`gateway.hms_thrift.step`).

A hook ends the request by raising an :class:`gateway.pipeline.outcomes.Outcome` (or
``ProtocolError``, ``Throttled``); the status comes from the one table in that module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.config import ConfigError, GatewayConfig, Providers, ServiceConfig
from gateway.thrift.schema import ServiceSchema

if TYPE_CHECKING:
    from gateway.pipeline.exchange import Exchange
    from gateway.policy import PolicyEngine

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)
class StepContext:
    """What a step builds itself from (:meth:`Step.build`), for one service of a topology.

    ``config``: the service's entry as validated by :mod:`gateway.config`; ``options``: the
    kind's own ``options:`` validated into its ``Options`` model (None when it has none);
    ``policy``: the catalog policy engine when ``policy_file`` is set; ``source``/``index``:
    where the entry is, for :class:`ConfigError`; ``siblings``/``sibling_options``: the
    topology's service entries and their validated options by path; ``providers``: the
    topology's providers (authentication, failure throttle, identity assertion).
    """

    topology: str
    config: ServiceConfig
    schema: ServiceSchema
    gateway: GatewayConfig
    options: Any = None
    policy: "PolicyEngine | None" = None
    source: str = ""
    index: int = 0
    siblings: dict[str, ServiceConfig] = field(default_factory=dict)
    sibling_options: dict[str, Any] = field(default_factory=dict)
    providers: Providers | None = None
    #: What is built once per topology (shared by every context of one topology build).
    shared: dict[str, Any] = field(default_factory=dict, repr=False)

    def per_topology(self, key: str, make: Callable[[], _T]) -> _T:
        """``make()``, called once per topology build: later services of the topology get the
        same object (a step every service shares, such as authentication and its throttle)."""
        if key not in self.shared:
            self.shared[key] = make()
        return self.shared[key]

    def resolve(self, path: Path) -> Path:
        """``path`` made absolute against the topology file's folder (as ``policy_file`` is)."""
        return path if path.is_absolute() else (Path(self.source).parent / path).resolve()

    def error(self, key: str, reason: str) -> ConfigError:
        """A :class:`ConfigError` naming this service's entry (``services[i].<key>``)."""
        return ConfigError(self.source, f"services[{self.index}].{key}", reason)


class Step:
    """Base class: a hook left as it is here is never called (the chain skips it)."""

    #: The step's role (its key in :data:`gateway.pipeline.steps.STEPS`), for docs and logs.
    name = "step"

    @classmethod
    def build(cls, ctx: StepContext) -> "Step | None":
        """This step for the service of ``ctx``, or None when it has nothing to do there.
        Raises ``ConfigError`` when the service's configuration does not allow it."""
        raise NotImplementedError

    async def on_request(self, exchange: "Exchange") -> None:
        """Before the body is read. Raise an ``Outcome`` to end the request."""


#: One hook of one step, bound, and whether it is a coroutine method (to be awaited).
Hook = tuple[Callable[..., Any], bool]


def hooks(steps: Iterable[Step], hook: str, base: type[Step] = Step) -> tuple[Hook, ...]:
    """The ``hook`` of each of ``steps`` that overrides ``base``'s, in order, bound: the hooks a
    chain calls (a hook left as ``base`` has it is never called)."""
    found = []
    for step in steps:
        if getattr(type(step), hook) is not getattr(base, hook):
            bound = getattr(step, hook)
            found.append((bound, inspect.iscoroutinefunction(bound)))
    return tuple(found)


async def run_hooks(found: tuple[Hook, ...], *args: Any) -> None:
    """Call each of ``found`` (:func:`hooks`) with ``args`` in order, awaiting the coroutine
    methods. An ``Outcome`` a hook raises ends the run: the hooks after it never run."""
    for hook, awaited in found:
        if awaited:
            await hook(*args)
        else:
            hook(*args)


class Chain:
    """One service's steps in order, with their ``on_request`` hooks worked out once at start-up."""

    def __init__(self, steps: Iterable[Step]):
        self.steps = tuple(steps)
        self._request = hooks(self.steps, "on_request")

    async def on_request(self, exchange: "Exchange") -> None:
        await run_hooks(self._request, exchange)
