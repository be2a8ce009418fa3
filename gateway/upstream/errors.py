"""How a dispatch to an upstream HMS can fail, each mapped to one HTTP status by the dispatch,
and the accounting every upstream call shares (metrics, the timeout error)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within the configured time (504)."""

    status = 504
    outcome = "timeout"


class UpstreamBadReply(UpstreamError):
    """The upstream's reply was not a well-formed strict-binary Thrift message (502)."""

    status = 502
    outcome = "bad_reply"


@contextmanager
def accounted_call(label: str, timeout: float) -> Iterator[None]:
    """Wrap one upstream call: count it and time it by outcome, keep ``upstream_up`` current,
    and turn a ``TimeoutError`` into :class:`UpstreamTimeout` and a lost connection
    (``OSError``, ``IncompleteReadError``) into :class:`UpstreamUnavailable`."""
    started, outcome = time.perf_counter(), "ok"
    up = metrics.child(metrics.UPSTREAM_UP, label)
    try:
        yield
        up.set(1)
    except TimeoutError:  # before OSError: TimeoutError is one
        outcome = "timeout"
        raise UpstreamTimeout(f"upstream {label} did not answer within {timeout:g} s") from None
    except (OSError, asyncio.IncompleteReadError) as exc:
        outcome = "unavailable"
        up.set(0)
        reason = ("closed the connection" if isinstance(exc, asyncio.IncompleteReadError)
                  else exc.strerror or type(exc).__name__)
        raise UpstreamUnavailable(f"upstream {label}: {reason}") from None
    except UpstreamError as exc:
        outcome = exc.outcome
        if exc.down:
            up.set(0)
        raise
    finally:
        metrics.child(metrics.UPSTREAM_REQUESTS, label, outcome).inc()
        metrics.child(metrics.UPSTREAM_DURATION, label).observe(time.perf_counter() - started)
