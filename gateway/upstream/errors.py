"""How a dispatch to an upstream HMS can fail, each mapped to one HTTP status by the gateway handler,
and the accounting every upstream call shares (metrics, the timeout error)."""

from __future__ import annotations

import asyncio
import time
from gateway.observability import metrics


class UpstreamError(Exception):
    """Base class; ``str()`` is a short reason safe to show to the client."""

    status = 502
    #: Value of the ``outcome`` label of ``hms_gateway_upstream_requests_total``.
    outcome = "error"
    #: Whether the error means the upstream is down (``hms_gateway_upstream_up`` 0).
    down = False


class UpstreamUnavailable(UpstreamError):
    """No upstream accepted the connection, or it broke before the reply was complete (502)."""

    status = 502
    outcome = "unavailable"
    down = True


class UpstreamConnectFailed(UpstreamUnavailable):
    """No connection could be opened: the request was never sent, so another upstream may take it."""


class UpstreamCredentialsUnavailable(UpstreamError):
    """The gateway cannot get the credentials a secured upstream needs now (the KDC cannot be
    reached): 503, the call may succeed later."""

    status = 503
    outcome = "unavailable"
    down = True


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within the configured time (504)."""

    status = 504
    outcome = "timeout"


class UpstreamBadReply(UpstreamError):
    """The upstream's reply was not a well-formed strict-binary Thrift message (502)."""

    status = 502
    outcome = "bad_reply"


_up: dict[str, int] = {}


def set_up(label: str, value: int) -> None:
    """Set ``hms_gateway_upstream_up`` of ``label`` to ``value`` (1 or 0), touching the gauge
    only when the value changes: every call reports it, and a gauge update takes a lock."""
    if _up.get(label) != value:
        _up[label] = value
        metrics.child(metrics.UPSTREAM_UP, label).set(value)


class AccountedCall:
    """Wrap one upstream call: count it and time it by ``origin`` (``metrics.ORIGIN_CLIENT`` or
    ``metrics.ORIGIN_GATEWAY``) and outcome, keep ``upstream_up`` current,
    and turn a ``TimeoutError`` into :class:`UpstreamTimeout` and a lost connection
    (``OSError``, ``IncompleteReadError``) into :class:`UpstreamUnavailable`.

    A class rather than a generator-based context manager: it wraps every upstream call, and a
    generator costs each one its creation and two resumptions (docs/performance.md, issue 14).
    """

    __slots__ = ("label", "timeout", "origin", "started")

    def __init__(self, label: str, timeout: float, origin: str = metrics.ORIGIN_CLIENT):
        self.label, self.timeout, self.origin = label, timeout, origin

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, kind, exc, tb) -> bool:
        label = self.label
        if kind is None:
            set_up(label, 1)
            outcome = "ok"
        elif issubclass(kind, TimeoutError):  # before OSError: TimeoutError is one
            self._count("timeout")
            raise UpstreamTimeout(f"upstream {label} did not answer within {self.timeout:g} s") from None
        elif issubclass(kind, (OSError, asyncio.IncompleteReadError)):
            set_up(label, 0)
            self._count("unavailable")
            reason = ("closed the connection" if isinstance(exc, asyncio.IncompleteReadError)
                      else exc.strerror or kind.__name__)
            raise UpstreamUnavailable(f"upstream {label}: {reason}") from None
        elif issubclass(kind, UpstreamError):
            if exc.down:
                set_up(label, 0)
            outcome = exc.outcome
        else:
            outcome = "ok"  # not the upstream's failure (a cancelled request, a client gone)
        self._count(outcome)
        return False

    def _count(self, outcome: str) -> None:
        label, origin = self.label, self.origin
        metrics.child(metrics.UPSTREAM_REQUESTS, label, origin, outcome).inc()
        metrics.child(metrics.UPSTREAM_DURATION, label, origin).observe(time.perf_counter() - self.started)
