"""``AccountedCall``: every upstream call counted once by outcome, the error it becomes, and
``hms_gateway_upstream_up`` following the last call (set only when it changes)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.observability import metrics
from gateway.upstream.errors import (
    AccountedCall,
    UpstreamBadReply,
    UpstreamTimeout,
    UpstreamUnavailable,
    set_up,
)


def _count(label: str, outcome: str, origin: str = "client") -> float:
    return metrics.REGISTRY.get_sample_value(
        "hms_gateway_upstream_requests_total",
        {"upstream": label, "origin": origin, "outcome": outcome}) or 0.0


def _up(label: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("hms_gateway_upstream_up", {"upstream": label})


def _calls(label: str, origin: str = "client") -> float:
    return metrics.REGISTRY.get_sample_value(
        "hms_gateway_upstream_duration_seconds_count", {"upstream": label, "origin": origin}) or 0.0


@pytest.mark.parametrize("raised, becomes, outcome, up", [
    (None, None, "ok", 1.0),
    (TimeoutError(), UpstreamTimeout, "timeout", None),
    (ConnectionResetError(104, "Connection reset by peer"), UpstreamUnavailable, "unavailable", 0.0),
    (asyncio.IncompleteReadError(b"", 10), UpstreamUnavailable, "unavailable", 0.0),
    (UpstreamBadReply("bad"), UpstreamBadReply, "bad_reply", None),
    (UpstreamUnavailable("gone"), UpstreamUnavailable, "unavailable", 0.0),
    (asyncio.CancelledError(), asyncio.CancelledError, "ok", None),
])
def test_each_outcome_is_counted_once(raised, becomes, outcome, up):
    label = f"acct-{outcome}-{type(raised).__name__}:9083"
    before = _count(label, outcome)
    if raised is None:
        with AccountedCall(label, 2.5):
            pass
    else:
        with pytest.raises(becomes) as caught, AccountedCall(label, 2.5):
            raise raised
        if becomes is UpstreamTimeout:
            assert "within 2.5 s" in str(caught.value)
        if becomes is UpstreamUnavailable and isinstance(raised, asyncio.IncompleteReadError):
            assert "closed the connection" in str(caught.value)
    assert _count(label, outcome) == before + 1
    assert _calls(label) == 1
    assert _up(label) == up


def test_up_follows_the_last_call_and_other_setters():
    label = "acct-up:9083"
    with AccountedCall(label, 1):
        pass
    assert _up(label) == 1.0
    with pytest.raises(UpstreamUnavailable), AccountedCall(label, 1):
        raise OSError(111, "Connection refused")
    assert _up(label) == 0.0
    with AccountedCall(label, 1):
        pass
    assert _up(label) == 1.0
    set_up(label, 0)  # what the failover's probe does
    assert _up(label) == 0.0
    with AccountedCall(label, 1):
        pass
    assert _up(label) == 1.0


def test_the_gateway_s_own_calls_are_counted_apart_from_clients_calls():
    label = "acct-origin:9083"
    with AccountedCall(label, 1):
        pass
    with AccountedCall(label, 1, metrics.ORIGIN_GATEWAY):
        pass
    with pytest.raises(UpstreamTimeout), AccountedCall(label, 1, metrics.ORIGIN_GATEWAY):
        raise TimeoutError()
    assert (_count(label, "ok", "client"), _count(label, "ok", "gateway")) == (1, 1)
    assert (_count(label, "timeout", "client"), _count(label, "timeout", "gateway")) == (0, 1)
    assert (_calls(label, "client"), _calls(label, "gateway")) == (1, 2)
