"""Server-side scan planning bounded and fair (issue 50), through the four handlers with a fake
planner in place of PyIceberg's (the table, its checks and vending faked too): the planner's own
threads shared between users, the caps on plans in progress with 503 and ``Retry-After``, plans
let go once their outcome is fetched and at once when cancelled, their work stopped; identical
plans answered from the plan cache; a plan id answered by a worker that does not hold it (another
worker, another replica, its owner restarted), bound to its caller and table."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from gateway.iceberg import errors, plan_store, scan_plans
from gateway.iceberg.paths import RouteMatch
from gateway.iceberg.plan_cache import PlanCache
from gateway.iceberg.plan_executor import PlanExecutor
from gateway.iceberg.plan_models import FetchScanTasksRequest, PlanTableScanRequest
from gateway.iceberg.plan_store import PLAN, TASK, PendingPlans, PlanningOptions, decode, encode
from gateway.iceberg.planning import Planned
from gateway.iceberg.service_state import ServiceState

TABLE = SimpleNamespace(location="file:///warehouse/db/t/metadata/1.metadata.json",
                        metadata=SimpleNamespace(location="file:///warehouse/db/t"), restrictions=None)
SCOPE = SimpleNamespace(appends=None, snapshot=None, columns=frozenset(), filter=None, required=None)
#: Hang guard only: every wait below ends at once when the code is right.
GUARD = 60


@pytest.fixture
async def planner(monkeypatch):  # async: released before the loop waits for its threads
    """The fake planner: ``first(catalog, ..., stop)`` records its thread, and blocks a user's
    plan while ``planner.blocked`` names the user, until ``release`` or its stop flag is set."""
    fake = SimpleNamespace(blocked=set(), release=threading.Event(), threads=[], stopped=threading.Event())

    def first(catalog, db, name, found, request, stop=None):
        fake.threads.append(threading.current_thread().name)
        if catalog.user in fake.blocked:
            while not fake.release.wait(0.01):
                if stop is not None and stop.is_set():
                    fake.stopped.set()
                    break
        return Planned(file_scan_tasks=[{"data-file": {"file-path": f"file:///warehouse/db/t/{catalog.user}"}}]).text()

    async def checked(catalog, db, name, ask):
        return TABLE, SCOPE

    async def readable(catalog, db, name):
        return TABLE

    async def delegated(catalog, request, db, name, location):
        return None, []

    monkeypatch.setattr(scan_plans, "_first", first)
    monkeypatch.setattr(scan_plans, "_checked", checked)
    monkeypatch.setattr(scan_plans, "readable", readable)
    monkeypatch.setattr(scan_plans, "delegated", delegated)
    monkeypatch.setattr(scan_plans, "_again", lambda table, ask, missing: SCOPE)
    monkeypatch.setattr(scan_plans, "bound", lambda catalog, db, name, table, found: found)
    yield fake
    fake.release.set()


async def _settled(caller, answer: dict) -> dict:
    """``answer``, or once its plan's work is done the plan fetched again: an unblocked plan is
    answered within ``wait_seconds`` only when the planner's thread is quick enough (not under load)."""
    if answer["status"] != "submitted":
        return answer
    await asyncio.wait_for(caller.service.pending.plans[answer["plan-id"]].work, GUARD)
    return await _fetch(caller, answer["plan-id"])


def _service(**planning) -> ServiceState:
    options = PlanningOptions(**planning)
    return ServiceState(planning=options, planner=PlanExecutor(options.threads, options.threads_per_user))


def _caller(service: ServiceState, user: str):
    return SimpleNamespace(service=service, user=user)


def _values(reply) -> dict:
    import json
    return json.loads(reply.body.model_dump_json())


async def _plan(catalog, ask: PlanTableScanRequest | None = None) -> dict:
    route = RouteMatch("planTableScan", "db", "t")
    return _values(await scan_plans.plan_table_scan(catalog, route, None, ask or PlanTableScanRequest()))


def _other(n: int) -> PlanTableScanRequest:
    """A plan request unlike any other ``n``'s (identical ones share one planning)."""
    return PlanTableScanRequest(select=[f"c{n}"])


async def _fetch(catalog, plan_id: str) -> dict:
    route = RouteMatch("fetchPlanningResult", "db", "t", plan_id=plan_id)
    return _values(await scan_plans.fetch_planning_result(catalog, route, None, None))


async def _cancel(catalog, plan_id: str) -> int:
    route = RouteMatch("cancelPlanning", "db", "t", plan_id=plan_id)
    return (await scan_plans.cancel_planning(catalog, route, None, None)).status


async def test_64_slow_plans_of_one_user_hold_back_neither_another_user_nor_metadata_reads(planner):
    service = _service(wait_seconds=30, threads=4, threads_per_user=2, max_pending=64, max_pending_per_user=8)
    hog, other = _caller(service, "hog"), _caller(service, "other")
    planner.blocked.add("hog")
    plans = [asyncio.ensure_future(_plan(hog, _other(n))) for n in range(64)]
    for _ in range(20):  # every plan reaches its wait or its refusal
        await asyncio.sleep(0)
    refused = [p for p in plans if p.done()]
    assert len(refused) == 56
    for plan in refused:
        error = plan.exception()
        assert isinstance(error, errors.ServiceUnavailable)
        assert "planning.max_pending_per_user is 8" in error.message and "hog" in error.message
        assert ("Retry-After", "30") in error.headers
    assert service.planner.running == 2 and service.planner.queued("hog") == 6  # its share of the threads
    # asyncio's default pool, which reads metadata, is not the planner's
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "metadata read"), GUARD) == "metadata read"
    answer = await asyncio.wait_for(_plan(other), GUARD)
    assert answer["status"] == "completed"
    assert answer["file-scan-tasks"] == [{"data-file": {"file-path": "file:///warehouse/db/t/other"}}]
    assert all(name.startswith("iceberg-plan") for name in planner.threads)
    planner.release.set()
    held = await asyncio.wait_for(asyncio.gather(*[p for p in plans if p not in refused]), GUARD)
    assert [a["status"] for a in held] == ["completed"] * 8
    assert service.pending.plans == {}  # answered at once: nothing held


async def test_the_cap_on_all_plans_names_its_limit_and_unfetched_plans_make_room(planner):
    service = _service(wait_seconds=0.001, max_pending=2, max_pending_per_user=2)
    planner.blocked.update({"a", "b"})
    first = await _plan(_caller(service, "a"))
    await _plan(_caller(service, "b"))
    with pytest.raises(errors.ServiceUnavailable) as refused:
        await _plan(_caller(service, "c"))
    assert "planning.max_pending is 2" in refused.value.message
    assert ("Retry-After", "1") in refused.value.headers
    planner.release.set()
    await asyncio.wait_for(service.pending.plans[first["plan-id"]].work, GUARD)
    # a's plan is done and nobody fetched it: the oldest such plan makes room for a new one
    planner.blocked.clear()
    made_room = await _settled(_caller(service, "c"), await _plan(_caller(service, "c")))
    assert made_room["status"] == "completed"
    assert first["plan-id"] not in service.pending.plans


async def test_a_submitted_plan_is_let_go_once_its_outcome_is_fetched(planner):
    service = _service(wait_seconds=0.001)
    etl = _caller(service, "etl")
    planner.blocked.add("etl")
    submitted = await _plan(etl)
    plan_id = submitted["plan-id"]
    assert submitted["status"] == "submitted"
    assert (await _fetch(etl, plan_id))["status"] == "submitted"
    planner.release.set()
    await asyncio.wait_for(service.pending.plans[plan_id].work, GUARD)
    completed = await _fetch(etl, plan_id)
    assert completed["status"] == "completed" and completed["plan-id"] == plan_id
    assert len(completed["file-scan-tasks"]) == 1
    assert service.pending.plans == {}
    # the id still names the plan: asked again, it is planned again
    assert (await _settled(etl, await _fetch(etl, plan_id)))["status"] == "completed"
    assert service.pending.plans == {}


async def test_a_cancelled_plan_is_let_go_at_once_and_its_work_stops(planner):
    service = _service(wait_seconds=0.001)
    etl = _caller(service, "etl")
    planner.blocked.add("etl")
    plan_id = (await _plan(etl))["plan-id"]
    with pytest.raises(errors.NoSuchPlanId):  # another user's cancel is not this plan's
        await _cancel(_caller(service, "bob"), plan_id)
    assert await _cancel(etl, plan_id) == 204
    assert service.pending.plans == {}
    assert await asyncio.to_thread(planner.stopped.wait, GUARD)  # the planner saw its stop flag
    assert not planner.release.is_set()
    for again in (_fetch, _cancel):
        with pytest.raises(errors.NoSuchPlanId):
            await again(etl, plan_id)


async def test_a_plan_waiting_for_a_thread_never_runs_once_cancelled(planner):
    service = _service(wait_seconds=0.001, threads=1, threads_per_user=1)
    planner.blocked.add("etl")
    etl = _caller(service, "etl")
    running = (await _plan(etl, _other(1)))["plan-id"]
    waiting = (await _plan(etl, _other(2)))["plan-id"]
    assert service.planner.queued("etl") == 1
    assert await _cancel(etl, waiting) == 204
    assert await _cancel(etl, running) == 204
    await asyncio.to_thread(planner.stopped.wait, GUARD)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(planner.threads) == 1 and service.planner.running == 0 and service.planner.queued() == 0


async def test_the_planner_takes_users_in_turn():
    executor = PlanExecutor(1, 1)
    gate, order = threading.Event(), []

    def call(tag):
        gate.wait(GUARD)
        order.append(tag)
    calls = [asyncio.ensure_future(executor.run(user, call, f"{user}{n}")) for user, n in
             (("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1), ("b", 2))]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.wait_for(asyncio.gather(*calls), GUARD)
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"]


async def test_an_identical_plan_is_answered_without_planning_but_never_across_a_commit(planner, monkeypatch):
    service = ServiceState(planning=PlanningOptions(), answers=PlanCache(1 << 20, 60.0))
    etl = _caller(service, "etl")
    first, again = await _plan(etl), await _plan(etl)
    assert len(planner.threads) == 1
    assert again["status"] == "completed" and again["file-scan-tasks"] == first["file-scan-tasks"]
    await _plan(_caller(service, "bob"))  # another caller's plan tasks name them: planned for them
    assert len(planner.threads) == 2
    committed = SimpleNamespace(location="file:///warehouse/db/t/metadata/2.metadata.json", metadata=TABLE.metadata,
                                restrictions=None)

    async def checked(catalog, db, name, ask):
        return committed, SCOPE
    monkeypatch.setattr(scan_plans, "_checked", checked)
    await _plan(etl)  # a commit wrote new metadata: planned again
    assert len(planner.threads) == 3


# Any worker, any replica (issue 50): two ServiceStates are two workers (or replicas) that share
# nothing but the table.

async def test_a_plan_submitted_on_one_worker_is_polled_fetched_and_cancelled_on_another(planner):
    owner, stranger = _service(wait_seconds=0.001), _service(wait_seconds=0.001)
    planner.blocked.add("etl")
    plan_id = (await _plan(_caller(owner, "etl")))["plan-id"]
    etl = _caller(stranger, "etl")
    assert await _fetch(etl, plan_id) == {"status": "submitted", "plan-id": plan_id}
    adopted = stranger.pending.plans[plan_id]  # planned again under the same id, within the caps
    assert await _fetch(etl, plan_id) == {"status": "submitted", "plan-id": plan_id}
    assert stranger.pending.plans[plan_id] is adopted  # polled: not planned a third time
    planner.release.set()
    await asyncio.wait_for(adopted.work, GUARD)
    completed = await _fetch(etl, plan_id)
    assert completed["status"] == "completed" and completed["plan-id"] == plan_id
    assert completed["file-scan-tasks"] == [{"data-file": {"file-path": "file:///warehouse/db/t/etl"}}]
    assert stranger.pending.plans == {}
    # a cancel on the stranger: 204, and the stranger answers 404 for the id from then on
    assert await _cancel(etl, plan_id) == 204
    for again in (_fetch, _cancel):
        with pytest.raises(errors.NoSuchPlanId, match="cancelled"):
            await again(etl, plan_id)


async def test_a_restarted_owner_answers_the_plans_it_gave(planner):
    planner.blocked.add("etl")
    plan_id = (await _plan(_caller(_service(wait_seconds=0.001), "etl")))["plan-id"]
    planner.release.set()
    restarted = _service(wait_seconds=30)  # nothing held: the id alone says what to plan
    assert (await _fetch(_caller(restarted, "etl"), plan_id))["status"] == "completed"


async def test_a_cancel_stops_the_work_of_the_worker_that_takes_it(planner):
    owner, stranger = _service(wait_seconds=0.001), _service(wait_seconds=0.001)
    planner.blocked.add("etl")
    plan_id = (await _plan(_caller(stranger, "etl")))["plan-id"]
    await _fetch(_caller(owner, "etl"), plan_id)  # both workers now plan it
    assert await _cancel(_caller(owner, "etl"), plan_id) == 204
    assert owner.pending.plans == {}
    assert await asyncio.to_thread(planner.stopped.wait, GUARD)
    assert plan_id in stranger.pending.plans  # the other worker never saw the cancel


async def test_a_plan_id_binds_its_caller_and_table_and_grants_nothing(planner, monkeypatch):
    owner, stranger = _service(wait_seconds=0.001), _service(wait_seconds=0.001)
    planner.blocked.add("etl")
    plan_id = (await _plan(_caller(owner, "etl")))["plan-id"]
    payload = decode(plan_id, PLAN)
    assert payload["u"] == "etl" and payload["n"]
    bob = _caller(stranger, "bob")
    for who, token, table in ((bob, plan_id, "t"), (_caller(stranger, "etl"), plan_id, "u"),
                              (bob, encode({**payload, "x": time.time() - 1}), "t"), (bob, "not-a-plan", "t")):
        for operation, call in (("fetchPlanningResult", scan_plans.fetch_planning_result),
                                ("cancelPlanning", scan_plans.cancel_planning)):
            with pytest.raises(errors.NoSuchPlanId):
                await call(who, RouteMatch(operation, "db", table, plan_id=token), None, None)
    assert stranger.pending.plans == {} and planner.threads == ["iceberg-plan_0"]
    # bob's own copy of the token is judged as bob: refused where bob may not read the table
    mine = encode({**payload, "u": "bob"})

    async def refused(catalog, db, name):
        raise errors.Forbidden(f"{catalog.user} may not read {db}.{name}")
    monkeypatch.setattr(scan_plans, "readable", refused)
    with pytest.raises(errors.Forbidden):
        await _fetch(bob, mine)
    assert stranger.pending.plans == {} and len(planner.threads) == 1


async def test_two_identical_plans_are_two_ids_and_a_cancel_takes_one(planner):
    service = _service(wait_seconds=0.001)
    etl = _caller(service, "etl")
    planner.blocked.add("etl")
    first, second = (await _plan(etl))["plan-id"], (await _plan(etl))["plan-id"]
    assert first != second and set(service.pending.plans) == {first, second}
    assert len(planner.threads) == 1 and len(service.flights) == 1  # one planning for both
    assert await _cancel(etl, first) == 204
    assert set(service.pending.plans) == {second}
    assert await _fetch(etl, second) == {"status": "submitted", "plan-id": second}
    assert not planner.stopped.is_set()  # the other still waits for it: it goes on
    assert await _cancel(etl, second) == 204
    assert await asyncio.to_thread(planner.stopped.wait, GUARD)  # the last one let go: stopped
    assert len(service.flights) == 0


async def test_identical_plans_at_once_are_planned_once_and_each_answered(planner):
    service = _service(wait_seconds=30, max_pending_per_user=17)
    etl = _caller(service, "etl")
    planner.blocked.add("etl")
    plans = [asyncio.ensure_future(_plan(etl)) for _ in range(16)]
    other = asyncio.ensure_future(_plan(etl, _other(1)))  # not identical: planned on its own
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(service.flights) == 2 and service.planner.running == 2
    planner.release.set()
    answers = await asyncio.wait_for(asyncio.gather(*plans, other), GUARD)
    assert [a["status"] for a in answers] == ["completed"] * 17
    assert len({a["plan-id"] for a in answers}) == 17  # each its own id
    assert all(a["file-scan-tasks"] == [{"data-file": {"file-path": "file:///warehouse/db/t/etl"}}] for a in answers)
    assert len(planner.threads) == 2 and len(service.flights) == 0 and service.pending.plans == {}
    again = await _plan(etl)  # ended: forgotten (the plan cache is off here), planned again
    assert again["status"] == "completed" and len(planner.threads) == 3


async def test_a_failed_planning_fails_every_identical_plan_and_is_forgotten(planner, monkeypatch):
    service = _service(wait_seconds=30)
    etl = _caller(service, "etl")
    started = []

    def broken(catalog, db, name, found, request, stop=None):
        started.append(1)
        raise OSError("the store is down")
    monkeypatch.setattr(scan_plans, "_first", broken)
    outcomes = await asyncio.gather(_plan(etl), _plan(etl), return_exceptions=True)
    assert all(isinstance(o, errors.ServiceFailure) for o in outcomes) and len(started) == 1
    with pytest.raises(errors.ServiceFailure):
        await _plan(etl)
    assert len(started) == 2 and len(service.flights) == 0


def test_cancelled_ids_are_remembered_until_they_expire_and_within_a_bound(monkeypatch):
    plans = PendingPlans()
    plans.cancel("gone", time.time() - 1)
    plans.cancel("live", time.time() + 60)
    assert not plans.was_cancelled("gone") and plans.was_cancelled("live") and not plans.was_cancelled("other")
    monkeypatch.setattr(plan_store, "MAX_CANCELLED", 3)
    for n in range(5):
        plans.cancel(f"more{n}", time.time() + 60)
    assert len(plans.cancelled) == 3 and not plans.was_cancelled("live") and plans.was_cancelled("more4")


async def test_identical_plan_tasks_at_once_are_planned_once(planner, monkeypatch):
    service = _service()
    etl = _caller(service, "etl")
    etl.files = SimpleNamespace(properties={})
    planned, release = [], threading.Event()

    def slow_plan(found, io, chosen, deletes, residuals, stop):
        planned.append(threading.current_thread().name)
        release.wait(GUARD)
        return Planned(file_scan_tasks=[{"data-file": {"file-path": "file:///warehouse/db/t/a"}}])
    monkeypatch.setattr(scan_plans, "file_io", lambda properties, location: None)
    monkeypatch.setattr(scan_plans, "manifests", lambda found, io, cache: (["m0", "m1"], []))
    monkeypatch.setattr(scan_plans, "plan", slow_plan)
    monkeypatch.setattr(scan_plans, "parts", lambda data, group: data[group.start:group.end])
    monkeypatch.setattr(scan_plans, "_again", lambda table, ask, missing: SimpleNamespace(**vars(SCOPE), metadata=TABLE.metadata))
    route = RouteMatch("fetchScanTasks", "db", "t")

    async def fetch(token: str) -> dict:
        return _values(await scan_plans.fetch_scan_tasks(etl, route, None, FetchScanTasksRequest(**{"plan-task": token})))
    first, second = (scan_plans._token(etl, "db", "t", {}, TASK, m=[i, i + 1]) for i in (0, 1))
    fetches = [asyncio.ensure_future(fetch(t)) for t in (first, first, first, second)]
    deadline = time.monotonic() + GUARD
    while len(planned) < 2 and time.monotonic() < deadline:  # the two distinct tasks started
        await asyncio.sleep(0.01)
    assert len(service.flights) == 2
    release.set()
    answers = await asyncio.wait_for(asyncio.gather(*fetches), GUARD)
    assert len(planned) == 2 and len(service.flights) == 0
    assert all(a["file-scan-tasks"] == answers[0]["file-scan-tasks"] for a in answers)
