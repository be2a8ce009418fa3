"""Answers of identical scan plans, kept per ``iceberg-rest`` service (issue 50): dashboards plan
the same scan again and again, and a plan of a table whose metadata did not change plans the same
files.

:class:`PlanCache` maps a plan's key to its completed first answer's ``ScanTasks`` JSON text
(``delete-files``, ``file-scan-tasks``, ``plan-tasks``), and a plan task's key (the plan's
request and the task's span of manifests) to its answer, least recently used first out, at most
``planning.plan_cache_mib`` of text, each for at most ``planning.plan_cache_seconds`` (its plan
tasks expire after ``planning.expiry_seconds``). The key (:func:`key`) is everything the answer
depends on: the caller (plan tasks name their user), the table and its metadata file (a commit
writes a new one, so a plan after a commit is never answered from before it), and the request
with its snapshot pinned (filter, projection, statistics, case sensitivity, snapshot schema), and
the caller's read restrictions (issue 49: the required row filter prunes and joins every residual).

Lookups are counted (``hms_gateway_iceberg_plan_cache_lookups_total{result}``, hit or miss) and
the held bytes are a gauge (``hms_gateway_iceberg_plan_cache_bytes``). Only the event loop's
thread uses it.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict

from gateway.observability import metrics

__all__ = ["PlanCache", "key"]


def key(user: str, db: str, table: str, metadata_location: str, request: dict,
        restrictions: dict | None = None) -> tuple[str, ...]:
    """The key of a plan by ``user`` of ``db.table`` at ``metadata_location`` asking ``request``
    (the request as a token holds it, its snapshot pinned) under the caller's ``restrictions``
    (the load's ``read-restrictions``: a change of policy is planned afresh)."""
    return (user, db, table, metadata_location, json.dumps(request, sort_keys=True, separators=(",", ":")),
            json.dumps(restrictions, sort_keys=True, separators=(",", ":")))


class PlanCache:
    """Answers by :func:`key`, at most ``max_bytes`` of text (0: none kept), each for at most
    ``seconds``. ``labels`` (topology, service) name its metrics."""

    def __init__(self, max_bytes: int, seconds: float, labels: tuple[str, str] = ("", "")):
        self.max_bytes, self.seconds = max_bytes, seconds
        self._items: OrderedDict[tuple[str, ...], tuple[str, float]] = OrderedDict()
        self.bytes = 0
        self._hit = metrics.child(metrics.ICEBERG_PLAN_CACHE_LOOKUPS, *labels, "hit")
        self._miss = metrics.child(metrics.ICEBERG_PLAN_CACHE_LOOKUPS, *labels, "miss")
        self._gauge = metrics.child(metrics.ICEBERG_PLAN_CACHE_BYTES, *labels)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, plan: tuple[str, ...]) -> str | None:
        """The answer kept for ``plan``, None when there is none (or it is too old)."""
        found = self._items.get(plan)
        if found is not None and time.monotonic() - found[1] >= self.seconds:
            self._remove(plan)
            found = None
        if found is None:
            self._miss.inc()
            return None
        self._items.move_to_end(plan)
        self._hit.inc()
        return found[0]

    def put(self, plan: tuple[str, ...], text: str) -> None:
        """Keep ``text`` as ``plan``'s answer, dropping the least recently used beyond the bound."""
        if len(text) > self.max_bytes:
            return
        self._remove(plan)
        self._items[plan] = (text, time.monotonic())
        self.bytes += len(text)
        while self.bytes > self.max_bytes:
            self._remove(next(iter(self._items)))
        self._gauge.set(self.bytes)

    def _remove(self, plan: tuple[str, ...]) -> None:
        found = self._items.pop(plan, None)
        if found is not None:
            self.bytes -= len(found[0])
            self._gauge.set(self.bytes)
