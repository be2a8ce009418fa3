"""The observers of every response, routed or not: request metrics and the audit line.

The gateway handler (:mod:`gateway.handler`) calls each ``on_response`` last, after the response
was sent, with the request's :class:`~gateway.observability.audit.AuditEvent`, the response and
its outcome label (:mod:`gateway.pipeline.outcomes`).
"""

from __future__ import annotations

import time
from typing import Protocol

from aiohttp import web

from gateway.observability import metrics
from gateway.observability.audit import AuditEvent, AuditLog


class Observer(Protocol):
    """What the gateway handler gives every response to, once it was sent."""

    def on_response(self, event: AuditEvent, response: web.StreamResponse, outcome: str) -> None: ...


class RequestMetrics:
    """``hms_gateway_requests_total`` and ``hms_gateway_request_duration_seconds`` by topology,
    service, method (an IDL method or ``other``) and outcome. Unrouted requests (404, 505) have
    no topology and are not counted here (the audit line has them)."""

    def __init__(self, known_methods: frozenset[str]):
        self.known_methods = known_methods
        # (topology, service, method label, outcome) → both children: one lookup per request.
        # Bounded as the labels are (gateway.observability.metrics).
        self._children: dict[tuple[str, str, str, str], tuple] = {}

    def on_response(self, event: AuditEvent, response: web.StreamResponse, outcome: str) -> None:
        if event.topology is None or event.service is None:
            return
        method = event.method
        label = metrics.method_label(method, self.known_methods) if method else "other"
        key = (event.topology, event.service, label, outcome)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (metrics.child(metrics.REQUESTS, *key),
                                              metrics.child(metrics.REQUEST_DURATION, *key))
        children[0].inc()
        children[1].observe(time.perf_counter() - event.started)


class AuditTrail:
    """Writes the request's audit line."""

    def __init__(self, log: AuditLog):
        self.log = log

    def on_response(self, event: AuditEvent, response: web.StreamResponse, outcome: str) -> None:
        self.log.write(event, outcome, response.status)
