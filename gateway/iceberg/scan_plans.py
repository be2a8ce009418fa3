"""Server-side scan planning, the spec's four operations (issue 42):

- ``POST .../tables/{table}/plan`` (``planTableScan``): the table is read as a load reads it
  (:func:`gateway.iceberg.read_rules.readable`: 404, 403 for no ``select``, denied columns
  without a trusted engine; a ``select``, ``filter`` or ``stats-fields`` naming a column denied
  to a trusted engine is 403 too, and so are ``stats-fields`` naming a masked column), bound by
  the caller's read restrictions (:func:`gateway.iceberg.read_rules.bound`: the required row
  filter ANDed into pruning and stated in every task's residual; issue 49), the request is
  checked against its metadata
  (:func:`gateway.iceberg.planning.scope`: 400 for an unknown snapshot, a missing column, a
  filter that does not bind), then planned by PyIceberg on the gateway's FileIO and manifest
  cache (:mod:`gateway.iceberg.planning`). The answer is ``completed`` with ``file-scan-tasks``
  (and the ``delete-files`` they reference, residual filters), or with ``plan-tasks`` when the
  data manifests hold more than ``planning.files_per_task`` files; with vended credentials for
  the table's location when the client asks for them, as on load. A plan that takes longer than
  ``planning.wait_seconds`` is answered ``submitted``. 400 for a filter beyond the service's
  bounds (:func:`gateway.iceberg.plan_models.filter_fault`); 503 with ``Retry-After`` when the
  caller's or the worker's plans in progress are at their cap (:class:`~gateway.iceberg.plan_store.PendingPlans`).
- ``GET .../plan/{plan-id}`` (``fetchPlanningResult``): the state of a plan this worker holds
  (``submitted``, ``completed``, ``failed``; the last two let it go), else the plan planned again
  under its id, as a new plan is (any worker and any replica answers any plan id).
- ``DELETE .../plan/{plan-id}`` (``cancelPlanning``): 204; a plan this worker holds is let go at
  once and its work stops at its next manifest; this worker answers 404 for the id after.
- ``POST .../tables/{table}/tasks`` (``fetchScanTasks``): one plan task's file scan tasks (kept
  in the plan cache as a plan's first answer is, so a repeated plan fetches its tasks unplanned).

Plan ids and plan tasks are :mod:`gateway.iceberg.plan_store`'s. Every one of the four judges
the caller as a load does, each time. All planning runs on the service's own threads, shared
fairly between users (:class:`~gateway.iceberg.plan_executor.PlanExecutor`); a plan identical
to one answered before, on the same table metadata, is answered from the service's plan cache
after the same checks (:mod:`gateway.iceberg.plan_cache`), and one identical to a plan in
progress waits for that planning (:mod:`gateway.iceberg.plan_flights`). A plan whose files
reach outside the table's location (a manifest list, a manifest, a data or delete file) is
refused whole with 403 and logged with the path; a manifest that cannot be read is 502
``ServiceFailureException``, logged without its contents.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable

from aiohttp import web

from gateway.iceberg import errors
from gateway.iceberg.bodies import file_fault
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.delegation import delegated
from gateway.lakehouse.file_io import file_io
from gateway.iceberg.paths import RouteMatch
from gateway.iceberg.plan_cache import key as plan_key
from gateway.iceberg.plan_models import (
    FetchedPlanningResult, FetchScanTasksRequest, PlanCompleted, PlanFailed, PlanningResult, PlanSubmitted,
    PlanTableScanRequest, ScanTaskList, StorageCredential, filter_fault,
)
from gateway.iceberg.plan_store import PLAN, TASK, Full, Pending, decode, encode, owned
from gateway.iceberg.planning import (
    Foreign, Residuals, Scope, Slice, Stopped, first_answer, manifests, parts, plan, scope,
)
from gateway.iceberg.read_rules import Readable, bound, readable

log = logging.getLogger(__name__)

__all__ = ["cancel_planning", "fetch_planning_result", "fetch_scan_tasks", "plan_table_scan"]


async def _checked(catalog: Catalog, db: str, name: str, ask: PlanTableScanRequest) -> tuple[Readable, Scope]:
    table = await readable(catalog, db, name)
    return table, bound(catalog, db, name, table, scope(table.metadata, ask))


def _pinned(ask: PlanTableScanRequest, found: Scope) -> dict:
    """The request as a token holds it: a point-in-time scan pinned to its snapshot."""
    body = ask.model_dump(mode="json", by_alias=True, exclude_none=True)
    if found.appends is None and found.snapshot is not None:
        body["snapshot-id"] = found.snapshot.snapshot_id
    return body


def _token(catalog: Catalog, db: str, name: str, request: dict, kind: str, expires: int | None = None,
           **extra) -> str:
    if expires is None:
        expires = int(time.time() + catalog.service.planning.expiry_seconds)
    return encode({"k": kind, "u": catalog.user, "ns": db, "t": name, "x": expires, "rq": request, **extra})


def _task_fields(group: Slice) -> dict:
    """The fields of a plan task naming ``group``: ``m`` (its manifests), and ``e`` (its
    entries) for a part of one manifest."""
    if group.first is None:
        return {"m": [group.start, group.end]}
    return {"m": [group.start, group.end], "e": [group.first, group.last]}


def _slice(payload: dict) -> Slice | None:
    """The :class:`Slice` a plan task's payload names (:func:`_task_fields`), None when its
    fields are not that shape (whether it lies within the table's manifests is
    :func:`~gateway.iceberg.planning.parts`' to say)."""
    def pair(value) -> bool:
        return isinstance(value, list) and len(value) == 2 and all(type(i) is int and i >= 0 for i in value)
    span, entries = payload.get("m"), payload.get("e")
    if not pair(span) or not (entries is None and "e" not in payload or pair(entries)):
        return None
    return Slice(*span, *(entries or ()))


def _first(catalog: Catalog, db: str, name: str, found: Scope, request: dict, stop: threading.Event) -> str:
    """The first answer's tasks (blocking): file scan tasks, and plan tasks for large plans, as
    the JSON text of the spec's ``ScanTasks`` (written on the planner's thread too)."""
    service = catalog.service
    io = file_io(catalog.files.properties, found.metadata.location)
    data, deletes = manifests(found, io, service.manifests)
    answer = first_answer(found, io, data, deletes, service.planning.files_per_task,
                          lambda group: _token(catalog, db, name, request, TASK, **_task_fields(group)),
                          Residuals(found.filter, service.planning.max_residual_bytes, found.required), stop)
    return answer.text()


def _flight(catalog: Catalog, key: tuple[str, ...], work: Callable[..., str], *args) -> asyncio.Future:
    """``work(*args, stop)`` on the service's planner in the caller's turn, or the identical
    planning of ``key`` (a plan-cache key) already in progress (:mod:`gateway.iceberg.plan_flights`)."""
    service = catalog.service
    return service.flights.join(key, lambda stop: service.planner.run(catalog.user, work, *args, stop))


async def _settled(work, db: str, name: str) -> str:
    """``work``'s tasks, its failures in the error model."""
    try:
        return await work
    except errors.IcebergError:
        raise
    except RecursionError:  # bounded filters bind within the limit; this is the last guard
        raise errors.BadRequest(f"the filter of the scan plan of {db}.{name} is nested too deeply to plan") from None
    except Stopped:
        raise errors.ServiceUnavailable(f"the scan plan of {db}.{name} was stopped; plan again") from None
    except Foreign as exc:
        log.warning("scan plan of %s.%s refused: it reaches %s, outside the table's location", db, name,
                    exc.path[:1024])
        raise errors.Forbidden(f"the scan plan of {db}.{name} is refused: the table's metadata references "
                               "files outside its location") from None
    except Exception as exc:  # FileIO and PyIceberg raise many kinds; none is the client's fault
        log.warning("scan plan of %s.%s failed: %s", db, name, file_fault(exc))
        raise errors.ServiceFailure(f"cannot read the manifests of {db}.{name}") from None


async def _completed(catalog: Catalog, request: web.BaseRequest, db: str, name: str, table: Readable,
                     tasks: str, plan_id: str) -> PlanCompleted:
    """The completed answer of ``tasks`` (JSON text), with ``plan_id`` and vended credentials."""
    _, vended = await delegated(catalog, request, db, name, table.metadata.location)
    more = {"status": "completed", "plan-id": plan_id}
    if vended:
        more["storage-credentials"] = [StorageCredential(**c).model_dump(mode="json") for c in vended]
    return PlanCompleted.of(tasks, more)


def _quiet(work: asyncio.Future) -> None:
    if not work.cancelled():
        work.exception()  # retrieved: a submitted plan's failure is answered to its poller


def _refused(full: Full, catalog: Catalog, db: str, name: str) -> errors.IcebergError:
    """The 503 of a plan past a cap (the spec's answer of a busy service, which a client may
    retry after ``Retry-After`` seconds: about how long a plan is waited for)."""
    whose = f"of {catalog.user} " if full.limit == "max_pending_per_user" else ""
    log.info("scan plan of %s.%s for %s refused: planning.%s (%d) reached", db, name, catalog.user, full.limit,
             full.value)
    retry = str(max(1, math.ceil(catalog.service.planning.wait_seconds)))
    return errors.ServiceUnavailable(f"too many scan plans {whose}in progress: planning.{full.limit} is {full.value}; "
                                     f"plan again in {retry} seconds", [("Retry-After", retry)])


async def _answer(catalog: Catalog, request: web.BaseRequest, db: str, name: str, table: Readable, found: Scope,
                  body: dict, plan_id: str, expires: float, wrap) -> Reply:
    """The plan of ``body`` (the request as its token holds it) under ``plan_id``, ``wrap``ped
    (the operation's result model): ``completed`` from the plan cache, or planned on the
    service's planner and ``completed`` within ``planning.wait_seconds``, else ``submitted`` and
    held as ``plan_id`` until ``expires`` (epoch seconds). Raises what planning raises, 503
    past a cap (with ``Retry-After``)."""
    service = catalog.service
    cached = plan_key(catalog.user, db, name, table.location, body, table.restrictions)
    tasks = service.answers.get(cached)
    if tasks is None:
        held = Pending(catalog.user, db, name, expires, cached=cached)
        try:
            service.pending.add(plan_id, held, service.planning.max_pending_per_user, service.planning.max_pending)
        except Full as full:
            raise _refused(full, catalog, db, name) from None
        work = held.work = _flight(catalog, cached, _first, catalog, db, name, found, body)
        work.add_done_callback(_quiet)
        try:
            finished, _ = await asyncio.wait({work}, timeout=service.planning.wait_seconds)
        except asyncio.CancelledError:  # the client left: nobody will poll here
            service.pending.drop(plan_id)
            raise
        if not finished:
            return Reply(body=wrap(PlanSubmitted(**{"plan-id": plan_id})))
        service.pending.drop(plan_id)  # answered now: nothing is held for it
        tasks = await _settled(work, db, name)
        service.answers.put(cached, tasks)
    return Reply(body=wrap(await _completed(catalog, request, db, name, table, tasks, plan_id)))


async def plan_table_scan(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: PlanTableScanRequest) -> Reply:
    """``planTableScan`` (see the module docstring). Raises 400, 403, 404, 502, 503 (too many
    plans in progress, with ``Retry-After``)."""
    db, name = route.db_table()
    table, found = await _checked(catalog, db, name, ask)
    body = _pinned(ask, found)
    expires = int(time.time() + catalog.service.planning.expiry_seconds)
    plan_id = _token(catalog, db, name, body, PLAN, expires, n=secrets.token_urlsafe(12))
    return await _answer(catalog, request, db, name, table, found, body, plan_id, expires, PlanningResult)


def _unknown(catalog: Catalog, db: str, name: str, plan_id: str) -> errors.IcebergError:
    return errors.NoSuchPlanId(f"no plan {plan_id[:40]!r} of {db}.{name} for {catalog.user} "
                               "(unknown, expired or cancelled)")


def _known(catalog: Catalog, db: str, name: str, plan_id: str) -> dict:
    """The payload of the caller's plan id ``plan_id`` of ``db.table``, not cancelled on this
    worker. Raises 404 ``NoSuchPlanIdException`` otherwise."""
    payload = decode(plan_id, PLAN)
    if not owned(payload, catalog.user, db, name) or catalog.service.pending.was_cancelled(plan_id):
        raise _unknown(catalog, db, name, plan_id)
    assert payload is not None
    return payload


async def fetch_planning_result(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """``fetchPlanningResult``: the state of a plan this worker holds, else the plan planned
    again under its id (any worker, any replica: see :mod:`gateway.iceberg.plan_store`). Raises
    404 ``NoSuchPlanIdException`` for a plan id that is not the caller's for this table,
    expired, cancelled on this worker, or whose snapshot or columns are gone; what planning
    raises."""
    db, name = route.db_table()
    plan_id = route.plan_id or ""
    table = await readable(catalog, db, name)
    # from here to _answer's hold nothing awaits: two fetches of one id never both start it
    pending = catalog.service.pending.get(plan_id, catalog.user, db, name)
    if pending is not None:
        if not pending.finished():
            return Reply(body=FetchedPlanningResult(PlanSubmitted(**{"plan-id": plan_id})))
        catalog.service.pending.drop(plan_id)  # its outcome is answered once: nothing is held after
        try:
            tasks = await _settled(pending.work, db, name)
        except errors.IcebergError as exc:
            return Reply(body=FetchedPlanningResult(PlanFailed(error=exc.body()["error"])))
        if pending.cached is not None:
            catalog.service.answers.put(pending.cached, tasks)
        return Reply(body=FetchedPlanningResult(await _completed(catalog, request, db, name, table, tasks, plan_id)))
    payload = _known(catalog, db, name, plan_id)
    found = bound(catalog, db, name, table,
                  _again(table, _request(catalog, payload, errors.NoSuchPlanId), errors.NoSuchPlanId))
    return await _answer(catalog, request, db, name, table, found, payload["rq"], plan_id, payload["x"],
                         FetchedPlanningResult)


async def cancel_planning(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """``cancelPlanning``: 204. A plan this worker holds is let go, its work stopped at its next
    manifest; the id is 404 on this worker after (another worker or replica still answers it).
    Raises 404 ``NoSuchPlanIdException`` as :func:`fetch_planning_result` (a plan cancelled here
    already too)."""
    db, name = route.db_table()
    plan_id = route.plan_id or ""
    await readable(catalog, db, name)
    pending = catalog.service.pending
    held = pending.get(plan_id, catalog.user, db, name)
    expires = held.expires if held is not None else _known(catalog, db, name, plan_id)["x"]
    pending.cancel(plan_id, expires)
    return Reply(status=204)


async def fetch_scan_tasks(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: FetchScanTasksRequest) -> Reply:
    """``fetchScanTasks``: the file scan tasks of one plan task (a run of the plan's data
    manifests, or a range of the entries of one of them). Raises 404 ``NoSuchPlanTaskException``
    for a plan task that is not the caller's for this table, expired, whose snapshot is gone, or
    whose manifests or entries are not the plan's (edited); what planning raises."""
    db, name = route.db_table()
    table = await readable(catalog, db, name)
    payload = decode(ask.plan_task, TASK)
    group = _slice(payload) if owned(payload, catalog.user, db, name) else None
    if group is None:
        raise errors.NoSuchPlanTask(f"no plan task of {db}.{name} for {catalog.user} (unknown or expired)")
    assert payload is not None
    found = bound(catalog, db, name, table,
                  _again(table, _request(catalog, payload, errors.NoSuchPlanTask), errors.NoSuchPlanTask))

    def planned(stop: threading.Event) -> str:
        io = file_io(catalog.files.properties, found.metadata.location)
        data, deletes = manifests(found, io, catalog.service.manifests)
        chosen = parts(data, group)
        if chosen is None:  # edited, or the manifests it named are no longer this plan's
            raise errors.NoSuchPlanTask(f"no plan task of {db}.{name} for {catalog.user}: it names manifests or "
                                        "entries the plan does not have")
        residuals = Residuals(found.filter, catalog.service.planning.max_residual_bytes, found.required)
        return plan(found, io, chosen, deletes, residuals, stop).text()
    cached = plan_key(catalog.user, db, name, table.location, {"plan-task": payload["rq"], "span": _task_fields(group)},
                      table.restrictions)
    tasks = catalog.service.answers.get(cached)
    if tasks is None:  # the client leaving cancels its wait, and the planning if nobody else waits
        tasks = await _settled(_flight(catalog, cached, planned), db, name)
        catalog.service.answers.put(cached, tasks)
    return Reply(body=ScanTaskList.of(tasks))


def _request(catalog: Catalog, payload: dict, missing) -> PlanTableScanRequest:
    """The request a token holds, within the service's filter bounds."""
    request = payload.get("rq")
    try:
        if not isinstance(request, dict) or filter_fault(request.get("filter"), catalog.service.planning):
            raise ValueError("beyond the bounds")
        return PlanTableScanRequest.model_validate(request)
    except Exception:  # a token edited into something else: not a plan the gateway gave
        raise missing("the plan is not one this catalog gave") from None


def _again(table: Readable, ask: PlanTableScanRequest, missing) -> Scope:
    """The scope of a plan's request on the table now; ``missing`` (404) when its snapshot or
    columns are gone."""
    try:
        return scope(table.metadata, ask)
    except errors.BadRequest as exc:
        raise missing(f"the plan no longer applies to the table: {exc.message}") from None
