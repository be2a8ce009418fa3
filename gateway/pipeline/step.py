"""The interface of a pipeline step, and the chain of one service's steps.

A step is a small object with up to three hooks, each optional, each either a plain method or a
coroutine method: a check that never waits is a plain method, so that the request does not pay
for a coroutine per step (docs/performance.md, issue 14):

* ``on_request(exchange)``: HTTP level, before the body is read (authentication, identity
  assertion, service ACL);
* ``on_call(exchange)``: after a kind that calls per method has decoded the call (the
  ``hms-thrift`` kind: ``exchange.header`` and ``exchange.call`` of its
  :class:`~gateway.hms_thrift.exchange.ThriftExchange`; method exposure, ownership assertion,
  catalog policy);
* ``on_reply(exchange, reply)``: for the methods named in ``reply_methods`` only, with the
  whole reply (``hms-thrift``: :class:`gateway.hms_thrift.reply.ThriftReply`) to read or
  change. Every other method's reply streams to the client untouched (the C translator's path).

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
    """Base class: hooks left as they are here are never called (the chain skips them)."""

    #: The step's role (its key in :data:`gateway.pipeline.steps.STEPS`), for docs and logs.
    name = "step"
    #: Methods whose replies :meth:`on_reply` must see.
    reply_methods: frozenset[str] = frozenset()

    @classmethod
    def build(cls, ctx: StepContext) -> "Step | None":
        """This step for the service of ``ctx``, or None when it has nothing to do there.
        Raises ``ConfigError`` when the service's configuration does not allow it."""
        raise NotImplementedError

    async def on_request(self, exchange: "Exchange") -> None:
        """Before the body is read. Raise an ``Outcome`` to end the request."""

    async def on_call(self, exchange: "Exchange") -> None:
        """After the call is decoded. Raise an ``Outcome`` to end the request."""

    async def on_reply(self, exchange: "Exchange", reply: Any) -> None:
        """With the whole reply of a method in :attr:`reply_methods`."""

    def wants_reply(self, exchange: "Exchange") -> bool:
        """Whether this request's reply needs :meth:`on_reply` (asked after ``on_call``, for
        methods in :attr:`reply_methods` only). False lets the reply stream untouched."""
        return True


def _overrides(step: Step, hook: str) -> bool:
    return getattr(type(step), hook) is not getattr(Step, hook)


#: One hook of one step, bound, and whether it is a coroutine method (to be awaited).
_Hook = tuple[Callable[..., Any], bool]


def _hooks(steps: Iterable[Step], hook: str) -> tuple[_Hook, ...]:
    return tuple((getattr(s, hook), inspect.iscoroutinefunction(getattr(s, hook)))
                 for s in steps if _overrides(s, hook))


class Chain:
    """One service's steps in order, with each hook's list worked out once at start-up."""

    def __init__(self, steps: Iterable[Step]):
        self.steps = tuple(steps)
        self._request = _hooks(self.steps, "on_request")
        self._call = _hooks(self.steps, "on_call")
        reply: dict[str, list[Step]] = {}
        for step in self.steps:
            for method in step.reply_methods:
                reply.setdefault(method, []).append(step)
        self._reply = {method: tuple(steps) for method, steps in reply.items()}

    async def on_request(self, exchange: "Exchange") -> None:
        for hook, awaited in self._request:
            if awaited:
                await hook(exchange)
            else:
                hook(exchange)

    async def on_call(self, exchange: "Exchange") -> None:
        for hook, awaited in self._call:
            if awaited:
                await hook(exchange)
            else:
                hook(exchange)

    def reply_steps(self, method: str, exchange: "Exchange | None" = None) -> tuple[Step, ...]:
        """The steps that must see the reply of ``method`` (empty: stream it untouched); with
        ``exchange``, only those whose :meth:`Step.wants_reply` says so for this request."""
        steps = self._reply.get(method, ())
        if exchange is None or not steps:
            return steps
        return tuple(s for s in steps if s.wants_reply(exchange))

    async def on_reply(self, exchange: "Exchange", reply: Any,
                       steps: tuple[Step, ...] | None = None) -> None:
        for step in self._reply.get(reply.header.name, ()) if steps is None else steps:
            result = step.on_reply(exchange, reply)
            if inspect.isawaitable(result):
                await result
