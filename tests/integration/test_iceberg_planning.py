"""Server-side scan planning (issue 42) against the real gateway, a real HMS and a local
warehouse: PyIceberg 0.12 with ``scan-planning-mode: server`` reads exactly the rows its own
client-side planning reads, case by case (one comparison per case), over partitioned and
unpartitioned tables, position deletes, filters, projections, time travel and plan tasks; the
incremental range and equality deletes, which PyIceberg does not plan through a server, through
the REST API itself. The refusals are those of a load. Every answer is checked against the spec.
"""

from __future__ import annotations

import json
import time
from functools import partial

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.expressions import And, EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import IncrementalAppendScan
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from gateway.iceberg.plan_store import PLAN, TASK, decode, encode
from tests.support.gateway import RunningGateway, in_workdir, metric
from tests.support.iceberg.clients import ETL_ALL_POLICY, call, error_of, rest_catalog
from tests.support.iceberg.deletes import commit_deletes

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

PATH, SLOW = "iceberg", "iceberg-slow"
USER, PASSWORD = "etl", "etl-password"
POLICY = ETL_ALL_POLICY + """\
  - id: 2
    name: readers read plans
    resources: {database: [plans], table: ["*"], column: ["*"]}
    allow: [{users: [analyst, reader], accesses: [select]}]
  - id: 3
    name: nobody else reads the secret
    resources: {database: [plans], table: [guarded], column: [secret]}
    deny: [{users: [analyst, reader], accesses: [select]}]
  - id: 4
    name: readers see category a of pdel only
    resources: {database: [plans], table: [pdel]}
    row_filter: [{users: [analyst, reader], filter: "cat = 'a'"}]
  - id: 5
    name: analyst sees parts other than b
    resources: {database: [plans], table: [parts]}
    row_filter: [{users: [analyst], filter: "cat <> 'b'"}]
  - id: 6
    name: analyst sees secrets hashed
    resources: {database: [plans], table: [parts], column: [secret]}
    data_mask: [{users: [analyst], mask: MASK_HASH}]
  - id: 7
    name: analyst sees trips above 10
    resources: {database: [plans], table: [trips]}
    row_filter: [{users: [analyst], filter: "fare > 10"}]
  - id: 8
    name: analyst sees cities hashed
    resources: {database: [plans], table: [trips], column: [city]}
    data_mask: [{users: [analyst], mask: MASK_HASH}]
"""
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "cat", StringType(), required=False),
                NestedField(3, "secret", StringType(), required=False))
BY_CAT = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
TABLE = "/v1/namespaces/plans/tables"


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    """``PATH`` plans in answers of at most 2 data files (more become plan tasks), ``analyst`` a
    trusted engine; ``SLOW`` answers ``submitted`` to any plan that takes over a millisecond,
    and keeps no manifests."""
    base = {"kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]}, "policy_file": in_workdir("policy.yaml")}
    service = {**base, "path": PATH, "options": {"lock_check_min_wait_seconds": 0.02, "trusted_engines": ["analyst"],
                                                 "planning": {"files_per_task": 2}}}
    slow = {**base, "path": SLOW, "options": {"planning": {"wait_seconds": 0.001, "manifest_cache_mib": 0}}}
    users = {USER: PASSWORD, "analyst": "analyst-password", "reader": "reader-password"}
    return module_gateway_factory(services=[service, slow], files={"policy.yaml": POLICY}, users=users)


def _catalog(gw: RunningGateway, mode: str, user: str = USER) -> RestCatalog:
    catalog = rest_catalog(gw, user=user, password=f"{user}-password" if user != USER else PASSWORD,
                           name=f"{mode}-{user}", **{"scan-planning-mode": mode})
    catalog.paths = []  # the paths this catalog's requests went to
    catalog._session.hooks["response"].append(lambda r, *a, **k: catalog.paths.append(r.request.path_url))
    return catalog


@pytest.fixture(scope="module")
def client(gw) -> RestCatalog:
    return _catalog(gw, "client")


@pytest.fixture(scope="module")
def server(gw) -> RestCatalog:
    catalog = _catalog(gw, "server")
    assert catalog.supports_server_side_planning()  # the config's endpoints list planTableScan
    return catalog


_call = partial(call, auth=(USER, PASSWORD))


def _rows(start: int, n: int, cat: str) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "cat": pa.array([cat] * n, pa.string()),
                     "secret": pa.array([f"s{i}" for i in range(start, start + n)], pa.string())})


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: tuple(str(v) for v in row.values()))


@pytest.fixture(scope="module")
def tables(client) -> dict[str, list[int]]:
    """``plans.flat`` (unpartitioned, 3 appends), ``plans.parts`` (by ``cat``, 3 appends),
    ``plans.pdel`` (one file, then position deletes of rows 1 and 3), ``plans.guarded``; the
    snapshot ids of the first two."""
    client.create_namespace("plans")
    flat = client.create_table("plans.flat", schema=SCHEMA)
    parts = client.create_table("plans.parts", schema=SCHEMA, partition_spec=BY_CAT)
    for start, cat in ((0, "a"), (10, "b"), (20, "c")):
        flat.append(_rows(start, 10, cat))
        parts.append(pa.concat_tables([_rows(start, 5, cat), _rows(start + 5, 5, "a")]))
    pdel = client.create_table("plans.pdel", schema=SCHEMA)
    pdel.append(_rows(0, 10, "a"))
    data_file = next(iter(pdel.scan().plan_files())).file.file_path
    commit_deletes(pdel, pa.table({"file_path": [data_file, data_file], "pos": pa.array([1, 3], pa.int64())}))
    client.create_table("plans.guarded", schema=SCHEMA).append(_rows(0, 4, "a"))
    return {name: [s.snapshot_id for s in client.load_table(f"plans.{name}").snapshots()] for name in ("flat", "parts")}


def _same(client: RestCatalog, server: RestCatalog, name: str, **scan) -> list[dict]:
    """The rows both catalogs read with ``scan`` (checked equal), server planning checked used."""
    before = len(server.paths)
    local = _sorted(client.load_table(f"plans.{name}").scan(**scan).to_arrow())
    remote = _sorted(server.load_table(f"plans.{name}").scan(**scan).to_arrow())
    assert any(p.endswith(f"/tables/{name}/plan") for p in server.paths[before:])
    assert not any(p.endswith("/plan") or "/plan/" in p or p.endswith("/tasks") for p in client.paths)
    assert remote == local
    return remote


@pytest.mark.parametrize("name", ["flat", "parts"])
@pytest.mark.parametrize("case", ["all", "filter", "partition filter", "projection", "time travel", "nothing"])
def test_server_planning_reads_exactly_what_client_planning_reads(client, server, tables, name, case):
    scan = {"all": {}, "filter": {"row_filter": And(GreaterThanOrEqual("id", 3), LessThan("id", 23))},
            "partition filter": {"row_filter": EqualTo("cat", "b")},
            "projection": {"selected_fields": ("id",), "row_filter": In("cat", {"a", "c"})},
            "time travel": {"snapshot_id": tables[name][1]},
            "nothing": {"row_filter": GreaterThan("id", 1000)}}[case]
    rows = _same(client, server, name, **scan)
    expected = {"all": 30, "filter": 20, "partition filter": 5 if name == "parts" else 10,
                "projection": 20 if name == "flat" else 25, "time travel": 20, "nothing": 0}[case]
    assert len(rows) == expected


def test_position_deletes_are_planned_with_their_data_file(gw, client, server, tables):
    rows = _same(client, server, "pdel")
    assert sorted(r["id"] for r in rows) == [0, 2, 4, 5, 6, 7, 8, 9]
    answer = _call(gw, "POST", f"{TABLE}/pdel/plan", {})
    body = answer.json()
    assert body["status"] == "completed" and len(body["file-scan-tasks"]) == 1
    assert [d["content"] for d in body["delete-files"]] == ["position-deletes"]
    assert body["file-scan-tasks"][0]["delete-file-references"] == [0]


def test_large_plans_come_with_plan_tasks_fetched_through_tasks(gw, client, server, tables):
    before = len(server.paths)
    # three manifests of one file each, two files per answer: the first answers two files and
    # leaves the third manifest as a plan task
    _same(client, server, "flat")
    assert sum(p.endswith("/tables/flat/tasks") for p in server.paths[before:]) == 1
    first = _call(gw, "POST", f"{TABLE}/flat/plan", {}).json()
    assert first["status"] == "completed" and len(first["plan-tasks"]) == 1 and len(first["file-scan-tasks"]) == 2
    files = [t["data-file"]["file-path"] for t in first["file-scan-tasks"]]
    for task in first["plan-tasks"]:
        fetched = _call(gw, "POST", f"{TABLE}/flat/tasks", {"plan-task": task})
        assert fetched.status_code == 200, fetched.text
        files += [t["data-file"]["file-path"] for t in fetched.json()["file-scan-tasks"]]
        hits = metric(gw, "hms_gateway_iceberg_plan_cache_lookups_total", result="hit", service=PATH)
        again = _call(gw, "POST", f"{TABLE}/flat/tasks", {"plan-task": task})  # a repeated plan's task: kept
        assert again.json() == fetched.json()
        assert metric(gw, "hms_gateway_iceberg_plan_cache_lookups_total", result="hit", service=PATH) == hits + 1
    assert len(files) == len(set(files)) == 3


def test_a_manifest_over_files_per_task_is_fetched_in_parts_of_its_entries(gw, client, server, tables):
    """Issue 50: one manifest of five files at two files per answer (it was one plan task of all
    five): the first answer holds two, two plan tasks name entries 2–4 and 4–5; PyIceberg reads
    through them what its own planning reads; a plan task edited past the manifest is 404."""
    import pyarrow.parquet as pq

    table = client.create_table("plans.onemanifest", schema=SCHEMA)
    paths = [f"{table.location()}/data/part-{n}.parquet" for n in range(5)]
    for n, path in enumerate(paths):
        with table.io.new_output(path).create() as stream:
            pq.write_table(_rows(10 * n, 3, "a"), stream)
    table.add_files(paths)
    before = len(server.paths)
    assert len(_same(client, server, "onemanifest")) == 15
    assert sum(p.endswith("/tables/onemanifest/tasks") for p in server.paths[before:]) == 2
    first = _call(gw, "POST", f"{TABLE}/onemanifest/plan", {}).json()
    assert len(first["file-scan-tasks"]) == 2
    assert [decode(t, TASK)["e"] for t in first["plan-tasks"]] == [[2, 4], [4, 5]]
    files = [t["data-file"]["file-path"] for t in first["file-scan-tasks"]]
    for task in first["plan-tasks"]:
        fetched = _call(gw, "POST", f"{TABLE}/onemanifest/tasks", {"plan-task": task}).json()["file-scan-tasks"]
        assert len(fetched) <= 2
        files += [t["data-file"]["file-path"] for t in fetched]
    assert sorted(files) == paths
    edited = encode({**decode(first["plan-tasks"][1], TASK), "e": [4, 6]})
    error_of(_call(gw, "POST", f"{TABLE}/onemanifest/tasks", {"plan-task": edited}), 404, "NoSuchPlanTaskException")


def test_incremental_range_plans_the_appends_pyiceberg_plans(client, server, tables):
    first, second, third = tables["flat"]
    identifier = ("plans", "flat")
    table = client.load_table("plans.flat")
    for start, end, rows in ((first, third, 20), (second, third, 10), (first, second, 10)):
        local = IncrementalAppendScan(table.metadata, table.io, from_snapshot_id=start, to_snapshot_id=end)
        tasks = server.plan_scan(identifier, PlanTableScanRequest(start_snapshot_id=start, end_snapshot_id=end))
        remote = ArrowScan(table.metadata, table.io, table.schema(), local.row_filter, True).to_table(tasks)
        assert _sorted(remote) == _sorted(local.to_arrow()) and remote.num_rows == rows


def test_equality_deletes_apply_to_older_data_files_of_their_partition(client, server, gw):
    """PyIceberg plans no equality deletes (both modes refuse to read them); the plan names the
    delete file for the data file it was written after, not for the one appended later."""
    table = client.create_table("plans.eqdel", schema=SCHEMA)
    table.append(_rows(0, 5, "a"))
    table = commit_deletes(table, pa.table({"id": pa.array([2], pa.int64())}), equality_ids=[1])
    table.append(_rows(10, 5, "a"))
    body = _call(gw, "POST", f"{TABLE}/eqdel/plan", {}).json()
    assert body["status"] == "completed", body
    deletes = body["delete-files"]
    assert [(d["content"], d["equality-ids"]) for d in deletes] == [("equality-deletes", [1])]
    refs = {t["data-file"]["file-path"]: t.get("delete-file-references") for t in body["file-scan-tasks"]}
    assert sorted(map(str, refs.values())) == ["None", "[0]"]
    older = next(path for path, ref in refs.items() if ref == [0])
    # the older file holds ids 0..4: planned alone by a filter, with the statistics asked for
    stats = _call(gw, "POST", f"{TABLE}/eqdel/plan", {"stats-fields": ["id"], "filter": {
        "type": "lt", "term": "id", "value": 5}}).json()
    (task,) = stats["file-scan-tasks"]
    assert task["data-file"]["file-path"] == older and task["delete-file-references"] == [0]
    assert task["data-file"]["lower-bounds"] == {"keys": [1], "values": [0]}
    assert task["data-file"]["upper-bounds"] == {"keys": [1], "values": [4]}
    assert "lower-bounds" not in body["file-scan-tasks"][0]["data-file"]  # none unless asked
    with pytest.raises(ValueError, match="equality deletes"):
        client.load_table("plans.eqdel").scan().to_arrow()
    with pytest.raises(NotImplementedError, match="equality deletes"):
        server.load_table("plans.eqdel").scan().to_arrow()


def _submitted(gw: RunningGateway, name: str) -> str:
    """A plan of the whole of ``plans.{name}`` answered ``submitted`` by ``SLOW``; its path."""
    body = call(gw, "POST", f"{TABLE}/{name}/plan", {}, service=SLOW, auth=(USER, PASSWORD)).json()
    assert body["status"] == "submitted", body
    return f"{TABLE}/{name}/plan/{body['plan-id']}"


def _polled(gw: RunningGateway, plan: str) -> dict:
    for _ in range(200):
        polled = call(gw, "GET", plan, service=SLOW, auth=(USER, PASSWORD)).json()
        if polled["status"] != "submitted":
            return polled
        time.sleep(0.05)
    raise AssertionError(f"{plan} still submitted")


def test_submitted_plans_are_polled_and_let_go_once_answered(gw, tables):
    plan = _submitted(gw, "flat")
    error_of(call(gw, "GET", plan, service=SLOW, auth=("reader", "reader-password")), 404, "NoSuchPlanIdException")
    error_of(call(gw, "GET", plan.replace("/flat/", "/parts/"), service=SLOW, auth=(USER, PASSWORD)), 404,
             "NoSuchPlanIdException")
    polled = _polled(gw, plan)
    assert polled["status"] == "completed" and len(polled["plan-tasks"]) == 0 and len(polled["file-scan-tasks"]) == 3
    # issue 50: nothing is held for it after, but the id still names the plan: planned again
    again = _polled(gw, plan)
    assert again["status"] == "completed" and again["file-scan-tasks"] == polled["file-scan-tasks"]


def test_a_cancelled_plan_is_let_go_and_the_next_plan_is_exact(gw, client, tables):
    plan = _submitted(gw, "pdel")
    assert call(gw, "DELETE", plan, service=SLOW, auth=(USER, PASSWORD)).status_code == 204
    for method in ("GET", "DELETE"):
        error_of(call(gw, method, plan, service=SLOW, auth=(USER, PASSWORD)), 404, "NoSuchPlanIdException")
    # planned again after the cancel: the files and deletes client-side planning reads
    polled = _polled(gw, _submitted(gw, "pdel"))
    assert polled["status"] == "completed"
    local = [(t.file.file_path, sorted(d.file_path for d in t.delete_files))
             for t in client.load_table("plans.pdel").scan().plan_files()]
    remote = [(t["data-file"]["file-path"], sorted(polled["delete-files"][i]["file-path"]
                                                   for i in t.get("delete-file-references", [])))
              for t in polled["file-scan-tasks"]]
    assert remote == local and local[0][1]


def test_completed_plan_ids_answer_their_caller_for_their_table_until_they_expire(gw, tables):
    # one manifest's partitions range over "c" (a to c): answered whole, not as plan tasks
    plan_id = _call(gw, "POST", f"{TABLE}/parts/plan", {"filter": {"type": "eq", "term": "cat", "value": "c"}}).json()[
        "plan-id"]
    again = _call(gw, "GET", f"{TABLE}/parts/plan/{plan_id}")
    assert again.status_code == 200 and again.json()["status"] == "completed"
    assert [t["data-file"]["partition"] for t in again.json()["file-scan-tasks"]] == [["c"]]
    assert _call(gw, "DELETE", f"{TABLE}/parts/plan/{plan_id}").status_code == 204
    payload = decode(plan_id, PLAN)
    expired = encode({**payload, "x": int(time.time()) - 1})
    for who, path, token in ((("reader", "reader-password"), "parts", plan_id), ((USER, PASSWORD), "flat", plan_id),
                             ((USER, PASSWORD), "parts", expired), ((USER, PASSWORD), "parts", "not-a-plan")):
        for method in ("GET", "DELETE"):
            error_of(call(gw, method, f"{TABLE}/{path}/plan/{token}", auth=who), 404, "NoSuchPlanIdException")
    task = _call(gw, "POST", f"{TABLE}/flat/plan", {}).json()["plan-tasks"][0]
    error_of(_call(gw, "POST", f"{TABLE}/parts/tasks", {"plan-task": task}), 404, "NoSuchPlanTaskException")
    error_of(call(gw, "POST", f"{TABLE}/flat/tasks", {"plan-task": task}, auth=("reader", "reader-password")), 404,
             "NoSuchPlanTaskException")


@pytest.mark.parametrize("body, says", [
    ({"snapshot-id": 12345}, "snapshot-id 12345 is not a snapshot"),
    ({"start-snapshot-id": 1, "end-snapshot-id": 12345}, "end-snapshot-id 12345 is not a snapshot"),
    ({"filter": {"type": "eq", "term": "nope", "value": 1}}, "invalid filter"),
    ({"filter": {"type": "eq", "term": "id", "value": "not a number"}}, "invalid filter"),
    ({"filter": {"type": "bogus"}}, "invalid PlanTableScanRequest"),
    ({"filter": [1, 2]}, "invalid PlanTableScanRequest"),
    ({"select": ["nope"]}, "select names 'nope'"),
    ({"stats-fields": ["nope"]}, "stats-fields names 'nope'"),
    ({"snapshot-id": 1, "start-snapshot-id": 1, "end-snapshot-id": 2}, "invalid PlanTableScanRequest"),
    ({"snapshot-id": 1, "end-snapshot-id": 2}, "not with end-snapshot-id"),
    # issue 50: the filter's bounds (the defaults), checked before PyIceberg reads it
    ({"filter": {"type": "in", "term": "id", "values": list(range(1001))}}, "planning.max_filter_literals (1000)"),
    ({"filter": {"type": "eq", "term": "cat", "value": "x" * 40_000}}, "planning.max_filter_bytes (32768)"),
    ({"filter": json.loads('{"type": "not", "child": ' * 200 + '{"type": "eq", "term": "id", "value": 1}' + "}" * 200)},
     "planning.max_filter_depth (64 levels)"),
])
def test_bad_plans_are_the_spec_s_400_and_plan_nothing(gw, tables, body, says):
    misses = metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="miss", service=PATH)
    hits = metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="hit", service=PATH)
    assert says in error_of(_call(gw, "POST", f"{TABLE}/parts/plan", body), 400, "BadRequestException")["message"]
    assert metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="miss", service=PATH) == misses
    assert metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="hit", service=PATH) == hits


def test_plans_are_refused_as_loads_are(gw, tables):
    reader = partial(call, gw, auth=("reader", "reader-password"))
    analyst = partial(call, gw, auth=("analyst", "analyst-password"))
    load = reader("GET", f"{TABLE}/guarded")
    plan = reader("POST", f"{TABLE}/guarded/plan", {})
    assert error_of(plan, 403, "ForbiddenException")["message"] == error_of(load, 403)["message"]
    assert reader("POST", f"{TABLE}/flat/plan", {}).status_code == 200  # no column denied there
    # a trusted engine plans the table, but never over a column denied to it
    assert analyst("POST", f"{TABLE}/guarded/plan", {"select": ["id", "cat"]}).status_code == 200
    for body in ({"select": ["secret"]}, {"filter": {"type": "eq", "term": "secret", "value": "s1"}},
                 {"stats-fields": ["secret"]}):
        assert "secret" in error_of(analyst("POST", f"{TABLE}/guarded/plan", body), 403, "ForbiddenException")["message"]
    nobody = call(gw, "POST", f"{TABLE}/flat/plan", {}, auth=("nobody", "x"))
    error_of(nobody, 401, "NotAuthorizedException")
    with pytest.raises(ForbiddenError):
        _catalog(gw, "server", "reader").load_table("plans.guarded")


def test_a_filtered_table_is_planned_only_for_a_trusted_engine(gw, tables):
    """Issue 39: reader has a row filter on plans.pdel: the plan is refused as the load is, with
    the same reason; analyst, a trusted engine, plans it and reads the filter from the load
    (issue 49: the spec's ``read-restrictions``)."""
    reader = partial(call, gw, auth=("reader", "reader-password"))
    analyst = partial(call, gw, auth=("analyst", "analyst-password"))
    load = error_of(reader("GET", f"{TABLE}/pdel"), 403, "ForbiddenException")
    assert "row filter \"cat = 'a'\" (policy 4)" in load["message"]
    assert error_of(reader("POST", f"{TABLE}/pdel/plan", {}), 403, "ForbiddenException")["message"] == load["message"]
    assert analyst("POST", f"{TABLE}/pdel/plan", {}).status_code == 200
    loaded = analyst("GET", f"{TABLE}/pdel").json()
    cat = {"type": "reference", "id": 2}
    assert loaded["read-restrictions"] == {"required-row-filter": {
        "type": "and", "left": {"type": "not-null", "child": cat},
        "right": {"type": "eq", "left": cat, "right": {"type": "literal", "value": "a"}}}}
    assert loaded["config"]["scan-planning-mode"] == "server"


def test_a_trusted_engine_s_plan_of_a_restricted_table_is_bound_by_its_read_restrictions(gw, tables):
    """Issue 49: analyst's required filter (``cat <> 'b'``) prunes plans.parts' b file from its
    plan, in the first answer and in its plan tasks, and every task's residual states it (a
    partition that holds it leaves the planner nothing: the required filter is written); a
    ``stats-fields`` naming the hashed ``secret`` is refused; etl, unrestricted, plans b too."""
    analyst = partial(call, gw, auth=("analyst", "analyst-password"))
    cat = {"type": "reference", "id": 2}
    loaded = analyst("GET", f"{TABLE}/parts").json()
    assert loaded["read-restrictions"]["required-row-filter"] == {
        "type": "and", "left": {"type": "not-null", "child": cat},
        "right": {"type": "not-eq", "left": cat, "right": {"type": "literal", "value": "b"}}}
    required = {"type": "and", "left": {"type": "not-null", "term": "cat"},
                "right": {"type": "not-eq", "term": "cat", "value": "b"}}
    first = analyst("POST", f"{TABLE}/parts/plan", {"filter": {"type": "gt-eq", "term": "id", "value": 0}}).json()
    tasks = list(first["file-scan-tasks"])
    for task in first.get("plan-tasks", []):
        fetched = analyst("POST", f"{TABLE}/parts/tasks", {"plan-task": task})
        assert fetched.status_code == 200, fetched.text
        tasks += fetched.json()["file-scan-tasks"]
    assert first.get("plan-tasks") and sorted(t["data-file"]["partition"][0] for t in tasks) == ["a", "a", "a", "c"]
    for task in tasks:
        residual = json.dumps(task["residual-filter"], sort_keys=True)
        assert json.dumps(required, sort_keys=True) in residual, residual
    error = error_of(analyst("POST", f"{TABLE}/parts/plan", {"stats-fields": ["secret"]}), 403, "ForbiddenException")
    assert "secret" in error["message"] and "masked" in error["message"]
    assert analyst("POST", f"{TABLE}/parts/plan", {"stats-fields": ["id"]}).status_code == 200
    everything = _call(gw, "POST", f"{TABLE}/parts/plan", {}).json()
    assert "b" in {t["data-file"]["partition"][0] for t in everything["file-scan-tasks"]} | {
        t["data-file"]["partition"][0] for p in everything.get("plan-tasks", [])
        for t in _call(gw, "POST", f"{TABLE}/parts/tasks", {"plan-task": p}).json()["file-scan-tasks"]}


def test_the_client_reader_gives_what_ranger_gives_for_the_demo_trips(gw, client):
    """Issue 49: the client distribution's reader (``hms_gateway_client.iceberg``), as analyst (a
    trusted engine) on a table of the demo's ``lakehouse.trips`` shape under a row filter
    (``fare > 10``) and ``MASK_HASH`` on ``city``, reads what Hive with Ranger gives: the rows
    the filter keeps on the raw values, then each city as Hive's ``mask_hash`` (SHA-256 hex)."""
    import hashlib

    from pyiceberg.types import DoubleType

    from demo.iceberg import BATCHES
    from hms_gateway_client.iceberg import load_table

    schema = Schema(NestedField(1, "trip_id", LongType(), required=False),
                    NestedField(2, "city", StringType(), required=False),
                    NestedField(3, "fare", DoubleType(), required=False))
    arrow = pa.schema([("trip_id", pa.int64()), ("city", pa.string()), ("fare", pa.float64())])
    trips = client.create_table("plans.trips", schema=schema)
    for batch in BATCHES:
        trips.append(pa.Table.from_pylist([dict(zip(arrow.names, row)) for row in batch], schema=arrow))
    read = load_table(_catalog(gw, "client", "analyst"), "plans.trips")
    got = sorted(read.to_arrow().to_pylist(), key=lambda row: row["trip_id"])
    hive = [{"trip_id": i, "city": hashlib.sha256(c.encode()).hexdigest(), "fare": f}
            for batch in BATCHES for i, c, f in batch if f > 10]
    assert got == hive and [row["trip_id"] for row in got] == [1, 2, 4]
    assert read.read_restrictions["required-column-projections"] == [{"field-id": 2, "action": "sha-256-global"}]


def test_a_table_whose_files_lie_outside_its_location_is_not_planned(client, server, gw, module_hms, tables):
    """``add_files`` takes a Parquet file from anywhere; a plan that would hand it out is 403
    and logged, where a client's own planning would read it."""
    elsewhere = module_hms.warehouse_dir / "elsewhere"
    elsewhere.mkdir()
    import pyarrow.parquet as pq
    pq.write_table(_rows(100, 3, "z"), elsewhere / "foreign.parquet")
    table = client.create_table("plans.foreign", schema=SCHEMA)
    table.append(_rows(0, 2, "a"))
    table.add_files([(elsewhere / "foreign.parquet").as_uri()])
    assert client.load_table("plans.foreign").scan().to_arrow().num_rows == 5
    error = error_of(_call(gw, "POST", f"{TABLE}/foreign/plan", {}), 403, "ForbiddenException")
    assert "outside its location" in error["message"] and "foreign.parquet" not in error["message"]
    assert "foreign.parquet, outside the table's location" in gw.log()
    with pytest.raises(ForbiddenError):
        server.load_table("plans.foreign").scan().to_arrow()


def test_manifests_are_read_once_and_counted(gw, tables):
    _call(gw, "POST", f"{TABLE}/parts/plan", {})  # warm
    hits = metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="hit", service=PATH)
    misses = metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="miss", service=PATH)
    # another request (an identical one is answered from the plan cache, reading no manifest)
    body = _call(gw, "POST", f"{TABLE}/parts/plan", {"select": ["id", "cat"]}).json()
    assert body["status"] == "completed"
    assert metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="miss", service=PATH) == misses
    assert metric(gw, "hms_gateway_iceberg_manifest_cache_lookups_total", result="hit", service=PATH) > hits
    assert metric(gw, "hms_gateway_iceberg_manifest_cache_bytes", service=PATH) > 0


def test_an_identical_plan_is_answered_from_the_plan_cache_and_never_across_a_commit(gw, client, server):
    """Issue 50: a repeated plan is answered from the plan cache; a commit writes new metadata,
    so the plan after it is planned again and reads exactly what client-side planning reads."""
    table = client.create_table("plans.cached", schema=SCHEMA)
    table.append(_rows(0, 3, "a"))

    def hits() -> float:
        return metric(gw, "hms_gateway_iceberg_plan_cache_lookups_total", result="hit", service=PATH)
    before = hits()
    ask = {"select": ["id"], "filter": {"type": "gt", "term": "id", "value": 0}}
    first = _call(gw, "POST", f"{TABLE}/cached/plan", ask).json()
    again = _call(gw, "POST", f"{TABLE}/cached/plan", ask).json()
    assert hits() == before + 1 and again["file-scan-tasks"] == first["file-scan-tasks"]
    assert metric(gw, "hms_gateway_iceberg_plan_cache_bytes", service=PATH) > 0
    assert len(_same(client, server, "cached", row_filter=GreaterThan("id", 0))) == 2
    table.append(_rows(3, 2, "b"))
    after = _call(gw, "POST", f"{TABLE}/cached/plan", ask).json()
    assert hits() == before + 1 and len(after["file-scan-tasks"]) == 2
    assert len(_same(client, server, "cached", row_filter=GreaterThan("id", 0))) == 4
    assert len(_same(client, server, "cached", row_filter=GreaterThan("id", 0))) == 4  # and from the cache
    assert hits() > before + 1
