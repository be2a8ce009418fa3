"""Identical scan plans in progress, planned once (issue 50): a dashboard's clients ask the same
plan at the same moment, and each asking planned it again, so sixteen of them took sixteen
plans' CPU (one planning costs about 0.5 s of CPU for 10,000 files: docs/performance.md).

:class:`Flights` maps a plan's key (:func:`gateway.iceberg.plan_cache.key`: the caller, the table
and its metadata file, the pinned request, the read restrictions; so only what would be answered
the same text is joined) to the one planning of it in progress. Each asker holds its own future
(:meth:`Flights.join`), which it may cancel alone: the planning stops (its flag set, at its next
manifest) only when every asker has let go. A planning that ended, well or not, is forgotten at
once: a later identical plan is the plan cache's (:mod:`gateway.iceberg.plan_cache`) or plans
again. Joins are counted (``hms_gateway_iceberg_plan_flights_total{result}``: ``started`` or
``joined``). Only the event loop's thread uses it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.observability import metrics

__all__ = ["Flights"]


@dataclass(eq=False)
class _Flight:
    stop: threading.Event = field(default_factory=threading.Event)
    work: asyncio.Future | None = None
    holders: int = 0


class Flights:
    """Plannings in progress by key. ``labels`` (topology, service) name its metrics."""

    def __init__(self, labels: tuple[str, str] = ("", "")):
        self._flights: dict[tuple[str, ...], _Flight] = {}
        self._started = metrics.child(metrics.ICEBERG_PLAN_FLIGHTS, *labels, "started")
        self._joined = metrics.child(metrics.ICEBERG_PLAN_FLIGHTS, *labels, "joined")

    def __len__(self) -> int:
        return len(self._flights)

    def join(self, key: tuple[str, ...], start: Callable[[threading.Event], Awaitable[str]]) -> asyncio.Future:
        """A future of the answer of the planning of ``key``: the one in progress, else
        ``start(stop)`` begun now (``stop``: the flag that ends it at its next manifest). The
        future has what the planning returns or raises; cancelling it lets this asker go, and
        the last asker's going stops the planning."""
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = _Flight()
            flight.work = asyncio.ensure_future(start(flight.stop))
            flight.work.add_done_callback(lambda _: self._ended(key, flight))
            self._started.inc()
        else:
            self._joined.inc()
        assert flight.work is not None
        flight.holders += 1
        mine = asyncio.get_running_loop().create_future()

        def settle(work: asyncio.Future) -> None:
            if mine.done():
                return
            if work.cancelled():
                mine.cancel()
            elif (failure := work.exception()) is not None:
                mine.set_exception(failure)
            else:
                mine.set_result(work.result())

        def leave(_: asyncio.Future) -> None:
            flight.holders -= 1
            if flight.holders == 0 and not flight.work.done():  # type: ignore[union-attr]
                flight.stop.set()
                flight.work.cancel()  # type: ignore[union-attr]
                self._ended(key, flight)

        flight.work.add_done_callback(settle)
        mine.add_done_callback(leave)
        return mine

    def _ended(self, key: tuple[str, ...], flight: _Flight) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
