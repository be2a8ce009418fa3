"""The frame of the JSON-over-HTTP service kinds (``glue``, ``iceberg-rest``): one request's way
from admission to the answer, written once; a kind brings its handlers and its
:class:`ErrorModel`.

One request through :meth:`HttpKind.handle`:

1. :meth:`HttpKind.screen` may refuse before the body is read (Glue's 405, Iceberg's 415);
2. the body is read whole within the limits (:func:`gateway.pipeline.body.read_body`: 413, 408)
   and left under :data:`~gateway.providers.authentication.sigv4.SIGNED_BODY`, as the ``sigv4``
   provider signs over it;
3. :meth:`HttpKind.target` names what the request asks for (an operation, a route); its refusal
   (a path the API lacks) waits until the request-side steps ran, so that an anonymous caller
   learns nothing of the API;
4. the request-side steps (authentication, identity assertion, service ACL), unless the target
   is :meth:`HttpKind.public` (it authenticates its caller itself);
5. :meth:`HttpKind.serve` calls the handler as the effective user and answers with outcome
   ``ok``; it reports the policy's part with :meth:`HttpKind.record_policy`.

Whatever ends the request early becomes the protocol's error through the kind's error model:
the request-side outcomes (:data:`REFUSALS`) and the protocol's own errors by the model's
mapping; HMS's and storage's failures (``UpstreamError``, Thrift's ``TException``, ``OSError``)
by the model's :meth:`ErrorModel.upstream`, their text logged under the request id and never
sent; anything else (a gateway bug) by :meth:`ErrorModel.internal`, with the traceback logged.
Other pipeline outcomes (a 405 as the pipeline writes it) pass to the pipeline.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Protocol

from aiohttp import web
from thriftpy2.thrift import TException

from gateway.config import Limits
from gateway.observability import metrics
from gateway.observability.audit import AuditEvent
from gateway.pipeline.body import read_body
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import BodyTimeout, Forbidden, Outcome, TooLarge, Unauthenticated
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.policy.view import CatalogView
from gateway.providers.authentication.sigv4 import SIGNED_BODY
from gateway.providers.authentication.throttle import Throttled
from gateway.services.base import MetastoreBacked
from gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)

#: The request-side outcomes every error model writes in its protocol's words (raised by the
#: body reader, the steps, or a handler checking credentials itself).
REFUSALS: tuple[type[Exception], ...] = (Unauthenticated, Forbidden, Throttled, TooLarge, BodyTimeout)


class ErrorModel(Protocol):
    """How one protocol answers refusals and failures, and their outcome labels
    (``hms_gateway_requests_total``)."""

    #: The protocol's error class: handlers raise it, :meth:`answer` writes it.
    error: type[Exception]

    def refusal(self, outcome: Exception, request: web.BaseRequest) -> tuple[Exception, str] | None:
        """``(protocol error, label)`` for a request-side outcome of :data:`REFUSALS`; None to
        let the pipeline answer it."""
        ...

    def label(self, error: Any) -> str:
        """The outcome label of a protocol error a handler raised."""
        ...

    def upstream(self, failure: Exception, method: str | None) -> tuple[Exception, str]:
        """``(protocol error, label)`` for HMS or storage failing (``UpstreamError``,
        ``TException``, ``OSError``) during operation ``method``; the error's text is the
        client's and must not carry ``failure``'s unless the protocol does so."""
        ...

    def internal(self, request_id: str) -> Exception:
        """The protocol error for a gateway bug (its message names ``request_id`` at most)."""
        ...

    def answer(self, error: Any, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The response carrying ``error`` and the message for the audit line's reason."""
        ...


class HttpKind(MetastoreBacked):
    """The frame of an HTTP kind over HMS: subclasses set ``topology``, ``path``, ``chain``,
    ``limits``, ``policy`` and :attr:`errors`, and write :meth:`serve` (and, when needed,
    :meth:`screen`, :meth:`target`, :meth:`public`)."""

    errors: ClassVar[ErrorModel]
    topology: str
    path: str
    chain: Chain
    limits: Limits
    policy: PolicyEngine | None

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The response to one request and its outcome label, every refusal in the kind's error
        model; raises only the pipeline outcomes the model leaves to the pipeline."""
        event, model = exchange.event, self.errors
        reason = None
        try:
            body, target = await self._admit(exchange)
            return await self.serve(exchange, target, body)
        except REFUSALS as outcome:
            mapped = model.refusal(outcome, exchange.request)
            if mapped is None:
                raise
            error, label = mapped
        except Outcome:
            raise
        except model.error as raised:
            error, label = raised, model.label(raised)
        except (UpstreamError, TException, OSError) as exc:
            reason = self._failed(event, exc)
            error, label = model.upstream(exc, event.method)
        except Exception as exc:  # a gateway bug: still the error model, the details logged
            log.exception("%s/%s %s: unexpected %s", self.topology, self.path, event.method, type(exc).__name__)
            reason = f"internal error: {type(exc).__name__}"
            error, label = model.internal(event.request_id), "exception"
        response, message = model.answer(error, exchange)
        event.reason = reason or message
        return response, label

    def _failed(self, event: AuditEvent, exc: Exception) -> str:
        """Log HMS's or storage's own words (Java exception text, paths, hosts) under the
        request id; the audit line's reason."""
        if isinstance(exc, UpstreamError):
            log.warning("%d %s/%s %s: %s", exc.status, self.topology, self.path, event.method, exc)
            return str(exc)
        if isinstance(exc, TException):  # an HMS exception no operation expects, or TApplicationException
            log.warning("%s/%s %s: HMS failed: %r", self.topology, self.path, event.method, exc)
            return f"HMS failed: {exc!r}"[:1024]
        log.warning("%s/%s %s: storage failed: %s", self.topology, self.path, event.method, exc)
        return f"storage failed: {exc}"[:1024]

    async def _admit(self, exchange: Exchange) -> tuple[bytes, Any]:
        """The body and the target, after the request-side steps (but for a public target)."""
        request = exchange.request
        self.screen(request)
        body = await read_body(request, self.limits)
        request[SIGNED_BODY] = body  # the sigv4 provider signs over the body
        try:
            target, refused = self.target(request), None
        except self.errors.error as error:  # refused only after authentication
            target, refused = None, error
        if refused is not None or not self.public(target):
            await self.chain.on_request(exchange)
        if refused is not None:
            raise refused
        return body, target

    # --- what a kind writes ---------------------------------------------------------------------

    def screen(self, request: web.BaseRequest) -> None:
        """Refuse a request before its body is read (raises); nothing by default."""

    def target(self, request: web.BaseRequest) -> Any:
        """What the request asks for, from its line and headers; raises the protocol's error for
        one the API lacks (answered after the steps). None by default."""
        return None

    def public(self, target: Any) -> bool:
        """Whether ``target`` is answered without the request-side steps (it authenticates its
        caller itself). False by default."""
        return False

    async def serve(self, exchange: Exchange, target: Any, body: bytes) -> tuple[web.StreamResponse, str]:
        """The handler's answer (outcome ``ok``); raises the protocol's errors."""
        raise NotImplementedError

    # --- the policy's part ------------------------------------------------------------------------

    def record_policy(self, event: AuditEvent, view: CatalogView, decision: str | None) -> None:
        """The policy fields of the audit line from the request's ``view`` (``decision``:
        ``allowed``, ``denied``, or None when the policy decided nothing) and
        ``hms_gateway_policy_decisions_total`` (the decision, objects hidden, columns hidden)."""
        if decision is None or self.policy is None:
            return
        event.record_policy(view, decision)
        for outcome, count in ((decision, 1), ("hidden", view.hidden),
                               ("columns_hidden", len(view.hidden_columns))):
            if count:
                metrics.POLICY_DECISIONS.labels(topology=self.topology, service=self.path,
                                                outcome=outcome).inc(count)
