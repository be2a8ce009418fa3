"""``workers: 2`` against the real gateway and HMS (issue 14, item 3): metrics summed across the
workers, one failed-authentication budget for all of them, topology reload and SIGTERM drain
reaching every worker under load, and a killed worker restarted.

Each request goes over a new connection, so the kernel spreads them over both workers'
``SO_REUSEPORT`` listeners; ``hms_gateway_worker_connections_total{worker}`` shows which worker
accepted how many, and the tests check that both did.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.gateway import htpasswd_provider, metric, post, readyz, service, wait_for, write_topology

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password"}
GET_DBS = '[1,"get_all_databases",1,1,{}]'
GET_DB = '[1,"get_database",1,1,{"1":{"str":"default"}}]'


def accepted(gw) -> tuple[float, float]:
    """Connections accepted so far by worker 0 and by worker 1 (one scrape)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(gw.management_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    counts = {"0": 0.0, "1": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "hms_gateway_worker_connections_total" and sample.labels.get("worker") in counts:
                counts[sample.labels["worker"]] += sample.value
    return counts["0"], counts["1"]


def worker_pids(gw) -> list[int]:
    """The supervisor's children: its worker processes."""
    pid = gw.process.pid
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


def hms_topology(hms, **upstream) -> dict:
    return {"services": [service([f"thrift://127.0.0.1:{hms.port}"], **upstream)]}


def test_metrics_are_summed_across_workers(hms, gateway_factory):
    gw = gateway_factory({"default": hms_topology(hms)}, USERS, workers=2)
    assert len(worker_pids(gw)) == 2
    assert metric(gw, "hms_gateway_workers") == 2
    before = accepted(gw)
    statuses = [post(gw, GET_DBS)[0] for _ in range(40)]
    assert statuses == [200] * 40
    after = accepted(gw)
    served = [after[i] - before[i] for i in (0, 1)]
    assert all(n > 0 for n in served), served  # both workers took connections
    assert sum(served) == 40
    # One total, although the requests landed on two processes.
    assert metric(gw, "hms_gateway_requests_total", method="get_all_databases", outcome="ok") == 40
    assert metric(gw, "hms_gateway_upstream_requests_total") >= 40
    # Read at scrape time in each worker (Gauge.set_function), then summed: each worker
    # keeps at least one idle HMS connection.
    assert metric(gw, "hms_gateway_upstream_pool_connections", state="idle") >= 2
    assert readyz(gw) == 200


def test_failed_authentication_budget_is_shared_by_the_workers(hms, gateway_factory):
    refuse_after = 6
    topology = hms_topology(hms)
    topology["providers"] = {
        "authentication": [htpasswd_provider()],
        "failure_throttle": {"refuse_after": refuse_after, "delay_after": 1000, "window_seconds": 600},
    }
    gw = gateway_factory({"default": topology}, USERS, workers=2)
    before = accepted(gw)
    with ThreadPoolExecutor(6) as pool:  # concurrent guesses, spread over both workers
        # distinct guesses: identical concurrent ones share one check (CredentialCache.verified)
        statuses = list(pool.map(lambda i: post(gw, GET_DBS, auth=("admin", f"guess{i}"))[0], range(30)))
    after = accepted(gw)
    assert all(after[i] > before[i] for i in (0, 1)), (before, after)
    # Per-worker budgets would have allowed 2 × refuse_after checks.
    assert statuses.count(401) == refuse_after, statuses
    assert statuses.count(429) == 30 - refuse_after
    assert metric(gw, "hms_gateway_password_checks_total", outcome="failure") == refuse_after
    assert metric(gw, "hms_gateway_password_checks_total", outcome="refused") == 30 - refuse_after


def test_reload_and_drain_reach_every_worker_under_load(hms, gateway_factory):
    gw = gateway_factory({"default": hms_topology(hms)}, USERS, workers=2, reload={"interval_seconds": 0.1},
                         shutdown={"drain_delay_seconds": 5.0, "grace_seconds": 20})
    stop = threading.Event()
    results: list[tuple[int, bytes]] = []

    def client():
        while not stop.is_set():
            status, _, body = post(gw, GET_DB)
            results.append((status, body))

    try:
        with ThreadPoolExecutor(4) as pool:
            clients = [pool.submit(client) for _ in range(4)]
            for i in range(8):  # each rewrite changes the config: every worker rebuilds it
                write_topology(gw.workdir, "default", hms_topology(hms, timeout_seconds=30 + i))
                time.sleep(0.3)
            # The last change hides get_database: a Thrift exception (type 3) once reloaded.
            last = hms_topology(hms)
            last["services"][0]["options"] = {"methods": ["get_all_databases"]}
            write_topology(gw.workdir, "default", last)
            wait_for(lambda: len(results) > 20 and all(json.loads(body)[2] == 3 for _, body in results[-20:]),
                     timeout=60)
            assert metric(gw, "hms_gateway_config_reloads_total", outcome="success") >= 2
            mark = len(results)
            before = accepted(gw)
            wait_for(lambda: len(results) > mark + 40, timeout=60)
            after = accepted(gw)
            assert all(after[i] > before[i] for i in (0, 1)), (before, after)  # both workers served
            assert all(json.loads(body)[2] == 3 for _, body in results[mark:])  # both reloaded

            # SIGTERM while the clients keep calling: they stop when /readyz says unready (a
            # load balancer's part); the workers keep accepting for drain_delay_seconds.
            gw.process.send_signal(signal.SIGTERM)
            wait_for(lambda: readyz(gw) == 503, timeout=10, interval=0.05)
            stop.set()
            for c in clients:
                c.result(timeout=60)
        assert len(results) > mark + 40
        assert {status for status, _ in results} == {200}, {s for s, _ in results}
        assert gw.process.wait(60) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()
    finally:
        stop.set()


def test_a_killed_worker_is_restarted(hms, gateway_factory):
    gw = gateway_factory({"default": hms_topology(hms)}, USERS, workers=2)
    pids = worker_pids(gw)
    os.kill(pids[0], signal.SIGKILL)
    wait_for(lambda: metric(gw, "hms_gateway_worker_restarts_total") == 1, timeout=60)
    wait_for(lambda: metric(gw, "hms_gateway_workers") == 2, timeout=60)
    now = worker_pids(gw)
    assert len(now) == 2 and pids[0] not in now and pids[1] in now
    before = accepted(gw)
    assert [post(gw, GET_DBS)[0] for _ in range(30)] == [200] * 30
    after = accepted(gw)
    assert all(after[i] > before[i] for i in (0, 1)), (before, after)  # the new one serves
    assert readyz(gw) == 200


def test_sighup_reaches_every_worker(hms, gateway_factory):
    gw = gateway_factory({"default": hms_topology(hms)}, USERS, workers=2, reload={"interval_seconds": 3600})
    write_topology(gw.workdir, "late", hms_topology(hms))
    assert post(gw, GET_DBS, topology="late")[0] == 404  # the poll is an hour away
    gw.process.send_signal(signal.SIGHUP)
    wait_for(lambda: metric(gw, "hms_gateway_config_reloads_total", outcome="success") == 2, timeout=60)
    before = accepted(gw)
    assert [post(gw, GET_DBS, topology="late")[0] for _ in range(30)] == [200] * 30
    after = accepted(gw)
    assert all(after[i] > before[i] for i in (0, 1)), (before, after)


@pytest.mark.usefixtures("pyiceberg_env")
def test_a_plan_is_polled_fetched_and_cancelled_through_either_worker(hms, gateway_factory):
    """Issue 50: a plan submitted to one worker is answered by the other (which plans it again
    under its id); a cancel is recorded by the worker that takes it."""
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from tests.support.iceberg.clients import call, error_of, rest_catalog

    planning = {"wait_seconds": 0.001, "manifest_cache_mib": 0}  # "submitted" past a millisecond
    iceberg = {"kind": "iceberg-rest", "path": "iceberg", "upstream": {"urls": [hms.uri]},
               "options": {"planning": planning, "lock_check_min_wait_seconds": 0.02}}
    gw = gateway_factory({"default": {"services": [iceberg]}}, USERS, workers=2)
    table = rest_catalog(gw, user="admin", password=USERS["admin"], name="workers")
    table.create_namespace("workers_plans")
    created = table.create_table("workers_plans.t", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    for start in (0, 10):
        created.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    path = "/v1/namespaces/workers_plans/tables/t/plan"

    def on_a_worker(method: str, url: str, body: dict | None = None):
        """(the worker that took the request, its answer): each call is a new connection."""
        before = accepted(gw)
        answer = call(gw, method, url, body, auth=("admin", USERS["admin"]))
        after = accepted(gw)
        return next(i for i in (0, 1) if after[i] > before[i]), answer

    owner, submitted = on_a_worker("POST", path, {})
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted", submitted.text
    plan = f"{path}/{submitted.json()['plan-id']}"
    answers: list[tuple[int, str]] = []
    for _ in range(200):  # until the other worker has answered and the plan completed
        worker, polled = on_a_worker("GET", plan)
        assert polled.status_code == 200 and polled.json()["plan-id"] == submitted.json()["plan-id"], polled.text
        answers.append((worker, polled.json()["status"]))
        if polled.json()["status"] == "completed" and any(w != owner for w, _ in answers):
            assert len(polled.json()["file-scan-tasks"]) == 2
            break
    else:
        raise AssertionError(f"never answered by the other worker or completed: {answers}")
    cancelled_on, cancelled = on_a_worker("DELETE", plan)
    assert cancelled.status_code == 204
    seen = set()
    for _ in range(200):  # the worker that took the cancel refuses the id; the other still answers it
        worker, after = on_a_worker("GET", plan)
        if worker == cancelled_on:
            error_of(after, 404, "NoSuchPlanIdException")
        else:
            assert after.status_code == 200, after.text
        seen.add(worker)
        if seen == {0, 1}:
            break
    assert seen == {0, 1}
