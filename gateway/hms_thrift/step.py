"""The ``hms-thrift`` kind's steps: a :class:`~gateway.pipeline.step.Step` that also sees the
decoded call and, for the methods it names, the whole reply; and the call and reply sides of
one service's chain (:class:`ThriftChain`). The shared floor's steps (authentication, identity
assertion, service ACL) have only ``on_request``; these hooks read Thrift, so they live here:

* ``on_call(exchange)``: after the call is decoded (``exchange.header`` and ``exchange.call``
  of the :class:`~gateway.hms_thrift.exchange.ThriftExchange`; method exposure, the
  ``set_ugi`` claim, catalog policy, ownership assertion);
* ``on_reply(exchange, reply)``: for the methods named in ``reply_methods`` only, with the
  whole reply (:class:`~gateway.hms_thrift.reply.ThriftReply`) to read or change. Every other
  method's reply streams to the client untouched (the C translator's path).

Each hook is a plain method or a coroutine method, as ``on_request`` is
(:mod:`gateway.pipeline.step`), and ends the request the same way: by raising an ``Outcome``.
"""

from __future__ import annotations

import inspect
from typing import Any

from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.reply import ThriftReply
from gateway.pipeline.step import Chain, Step, hooks, run_hooks

__all__ = ["ThriftChain", "ThriftStep"]


class ThriftStep(Step):
    """Base class of the steps only ``hms-thrift`` runs: hooks left as they are here are never
    called (:class:`ThriftChain` skips them)."""

    #: Methods whose replies :meth:`on_reply` must see.
    reply_methods: frozenset[str] = frozenset()

    async def on_call(self, exchange: ThriftExchange) -> None:
        """After the call is decoded. Raise an ``Outcome`` to end the request."""

    async def on_reply(self, exchange: ThriftExchange, reply: ThriftReply) -> None:
        """With the whole reply of a method in :attr:`reply_methods`."""

    def wants_reply(self, exchange: ThriftExchange) -> bool:
        """Whether this request's reply needs :meth:`on_reply` (asked after ``on_call``, for
        methods in :attr:`reply_methods` only). False lets the reply stream untouched."""
        return True


class ThriftChain:
    """The call and reply sides of one ``hms-thrift`` service's :class:`Chain`: its
    :class:`ThriftStep` s' hooks, worked out once at start-up (the chain's other steps have
    only ``on_request``, which the chain runs itself)."""

    def __init__(self, chain: Chain):
        steps = tuple(step for step in chain.steps if isinstance(step, ThriftStep))
        self._call = hooks(steps, "on_call", ThriftStep)
        reply: dict[str, list[ThriftStep]] = {}
        for step in steps:
            for method in step.reply_methods:
                reply.setdefault(method, []).append(step)
        self._reply = {method: tuple(found) for method, found in reply.items()}

    async def on_call(self, exchange: ThriftExchange) -> None:
        await run_hooks(self._call, exchange)

    def reply_steps(self, method: str, exchange: ThriftExchange | None = None) -> tuple[ThriftStep, ...]:
        """The steps that must see the reply of ``method`` (empty: stream it untouched); with
        ``exchange``, only those whose :meth:`ThriftStep.wants_reply` says so for this request."""
        steps = self._reply.get(method, ())
        if exchange is None or not steps:
            return steps
        return tuple(s for s in steps if s.wants_reply(exchange))

    async def on_reply(self, exchange: ThriftExchange, reply: ThriftReply,
                       steps: tuple[ThriftStep, ...] | None = None) -> None:
        for step in self._reply.get(reply.header.name, ()) if steps is None else steps:
            result: Any = step.on_reply(exchange, reply)
            if inspect.isawaitable(result):
                await result
