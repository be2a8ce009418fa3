"""The supervisor's shared throttle budgets (gateway/workers.py) without processes: two workers
spend one budget, a worker that exits mid-check gives its checks back, and a worker's throttle
asks the shared budgets instead of counting alone."""

from __future__ import annotations

import asyncio
import os

import pytest

from gateway.config import GatewayConfig
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.authentication.throttle import AuthFailureThrottle, Throttled, share_budgets
from gateway.workers import BudgetKeeper, worker_count

SETTINGS = FailureThrottle(refuse_after=3, delay_after=1, delay_seconds=0.25, window_seconds=60)


def body(worker: int, address: str = "10.0.0.1", **extra) -> dict:
    return {"worker": worker, "topology": "default", "address": address,
            "config": SETTINGS.model_dump(mode="json"), **extra}


def test_two_workers_spend_one_budget():
    keeper = BudgetKeeper()
    for worker in (0, 1, 0):
        assert keeper.begin(body(worker)) == {"retry_after": None}
        keeper.end(body(worker, ok=False))
    refused = keeper.begin(body(1))["retry_after"]
    assert refused is not None and 1 <= refused <= 60
    assert keeper.begin(body(0, address="10.0.0.2")) == {"retry_after": None}  # other address


def test_failures_beyond_delay_after_are_slowed_down():
    keeper = BudgetKeeper()
    keeper.begin(body(0))
    assert keeper.end(body(0, ok=False)) == {"delay": 0.0}
    keeper.begin(body(1))
    assert keeper.end(body(1, ok=False)) == {"delay": 0.25}


def test_checks_in_flight_count_and_a_gone_worker_gives_them_back():
    keeper = BudgetKeeper()
    for _ in range(3):
        assert keeper.begin(body(0))["retry_after"] is None  # three checks running on worker 0
    assert keeper.begin(body(1))["retry_after"] is not None
    keeper.worker_gone(0)
    assert keeper.begin(body(1))["retry_after"] is None


def test_changed_settings_are_a_new_budget():
    keeper = BudgetKeeper()
    for _ in range(3):
        keeper.begin(body(0))
        keeper.end(body(0, ok=False))
    assert keeper.begin(body(0))["retry_after"] is not None
    looser = body(0, config=FailureThrottle(refuse_after=10).model_dump(mode="json"))
    assert keeper.begin(looser)["retry_after"] is None


def test_malformed_requests_raise_what_the_control_app_answers_400():
    keeper = BudgetKeeper()
    with pytest.raises(KeyError):
        keeper.begin({"worker": 0})
    with pytest.raises(ValueError):
        keeper.begin(body(0, config={"refuse_after": 0}))


class Recording:
    """SharedBudgets that records the calls and refuses when told."""

    def __init__(self, refuse: bool = False):
        self.calls: list[tuple] = []
        self.refuse = refuse

    async def begin(self, throttle, address):
        self.calls.append(("begin", throttle.topology, address))
        if self.refuse:
            raise Throttled(7)

    async def end(self, throttle, address, ok):
        self.calls.append(("end", throttle.topology, address, ok))
        return 0.0


def test_a_workers_throttle_asks_the_shared_budgets():
    throttle = AuthFailureThrottle(SETTINGS, topology="t")
    shared = Recording()
    share_budgets(shared)
    try:
        async def failing():
            return None

        assert asyncio.run(throttle.run("10.0.0.9", failing)) is None
        assert shared.calls == [("begin", "t", "10.0.0.9"), ("end", "t", "10.0.0.9", False)]
        assert throttle.retry_after("10.0.0.9") is None  # nothing counted locally
        share_budgets(Recording(refuse=True))
        with pytest.raises(Throttled) as refused:
            asyncio.run(throttle.run("10.0.0.9", failing))
        assert refused.value.retry_after == 7
    finally:
        share_budgets(None)


def test_worker_count():
    tls = {"certificate": "c.pem", "private_key": "k.pem"}
    assert worker_count(GatewayConfig(tls=tls)) == 1
    assert worker_count(GatewayConfig(tls=tls, workers=3)) == 3
    assert worker_count(GatewayConfig(tls=tls, workers="auto")) == len(os.sched_getaffinity(0))


def test_current_worker_is_none_outside_a_worker_process():
    from gateway.worker_role import current_worker

    assert current_worker() is None
