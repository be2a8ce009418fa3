"""The ``iceberg-rest`` service under attack (issue 31): a seeded battery of hostile requests over
every route and every table update and requirement (``tests/support/iceberg/hostile.py``), and
the existence oracles across the policy, against the real gateway and a real HMS (with locks).

Policy, Ranger-style: alice may do everything in namespace ``sec_a``, bob in ``sec_b``. The
battery runs as alice; bob's namespace holds a table and a view. The HMS warehouse sits inside a
canary tree (files beside the warehouse, in bob's folders, a folder next to it, the gateway's
working directory): the battery fails on any file created, changed or removed outside alice's
namespace folder, any child process of the gateway, any 5xx (every request is the client's
doing and the HMS is healthy), any error answer outside the spec's error model or quoting Java,
and any answer slower than 5 s (a stall: HMS holding a request it will refuse).
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from tests.support.gateway import RunningGateway, in_workdir
from tests.support.hms import start_hms
from tests.support.iceberg.clients import call, error_of
from tests.support.iceberg.hostile import Children, Tree, World, hostile_requests, run, violations

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

PATH = "iceberg"
USERS = {"alice": "alice-password", "bob": "bob-password"}
POLICY = """
policies:
  - id: 1
    name: alice owns sec_a
    resources: {database: [sec_a], table: ["*"], column: ["*"]}
    allow: [{users: [alice], accesses: [all]}]
  - id: 2
    name: bob owns sec_b
    resources: {database: [sec_b], table: ["*"], column: ["*"]}
    allow: [{users: [bob], accesses: [all]}]
"""
#: The battery: its seed and size. 3,000 requests take about 50 s here (2 cores, 4 at a time).
SEED, COUNT = 31, 3000
#: An answer slower than this is a stall (a correctness bound: HMS holding what it will refuse).
MAX_SECONDS = 5.0

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "name", "type": "string", "required": False}]}


def view_body(name: str, ns: str) -> dict:
    return {"name": name, "schema": SCHEMA, "view-version": {
        "version-id": 1, "timestamp-ms": 1700000000000, "schema-id": 0, "summary": {"engine-name": "spark"},
        "default-namespace": [ns], "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}]}}


@pytest.fixture(scope="module")
def module_hms(tmp_path_factory):
    """An empty HMS (with locks) whose Derby looks for a deadlock as soon as a lock waits (PostgreSQL
    after 1 s, MySQL at once) and gives up a lock wait after 2 s, not after 20 and 60 s, and whose
    handler retries the loser after 0.1 s, not 2 s: a listing's read and a drop of the same table
    at once block each other in Derby's row locks (``TBLS``/``SDS``), and HMS's own stall would
    otherwise fake (or hide) one of the gateway."""
    workdir = tmp_path_factory.mktemp("hms-hostile")
    running = start_hms(workdir, site={"hive.hmshandler.retry.interval": "100ms"},
                        derby={"derby.locks.deadlockTimeout": "0", "derby.locks.waitTimeout": "2"})
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture(scope="module")
def canary(module_hms, tmp_path_factory):
    """The canary tree: the HMS warehouse, a folder beside it, the gateway's working directory."""
    beside = module_hms.warehouse_dir.parent / "canary-beside"
    (beside / "keep").mkdir(parents=True, exist_ok=True)
    (beside / "keep" / "secret.txt").write_text("do not touch")
    module_hms.warehouse_dir.mkdir(parents=True, exist_ok=True)
    (module_hms.warehouse_dir / "canary.txt").write_text("do not touch")
    cwd = tmp_path_factory.mktemp("gateway-cwd")
    (cwd / "canary.txt").write_text("do not touch")
    return beside, cwd


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory, canary) -> RunningGateway:
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "policy_file": in_workdir("policy.yaml"),
               "options": {"lock_check_min_wait_seconds": 0.02, "lock_wait_seconds": 2}}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(canary[1])  # the gateway's working directory: relative paths land in the canary tree
        return module_gateway_factory(services=[service], files={"policy.yaml": POLICY}, users=USERS)


def _as(user: str):
    return (user, USERS[user])


@pytest.fixture(scope="module")
def world(gw, module_hms, canary) -> World:
    """bob's namespace with a table and a view; alice's with four tables and two views."""
    def ok(answer):
        assert answer.status_code in (200, 204), answer.text
        return answer

    for user, ns, tables, views in (("bob", "sec_b", ["bt"], ["bv"]), ("alice", "sec_a", ["a0", "a1", "a2", "a3"],
                                                                        ["av0", "av1"])):
        ok(call(gw, "POST", "/v1/namespaces", {"namespace": [ns]}, auth=_as(user), validate=False))
        for table in tables:
            ok(call(gw, "POST", f"/v1/namespaces/{ns}/tables", {"name": table, "schema": SCHEMA}, auth=_as(user),
                    validate=False))
        for view in views:
            ok(call(gw, "POST", f"/v1/namespaces/{ns}/views", view_body(view, ns), auth=_as(user), validate=False))
    _warm_up(gw, ok)
    bobs = ok(call(gw, "GET", "/v1/namespaces/sec_b/tables/bt", auth=_as("bob"), validate=False)).json()
    warehouse, beside, cwd = module_hms.warehouse_dir, canary[0], canary[1]
    return World(
        own="sec_a", tables=("a0", "a1", "a2", "a3"), views=("av0", "av1"), foreign="sec_b", foreign_tables=("bt",),
        missing="nope", inside=(warehouse / "sec_a.db").as_uri(),
        outside=((warehouse / "sec_b.db" / "bt").as_uri(), (warehouse / "sec_b.db").as_uri(), warehouse.as_uri(),
                 (beside / "keep").as_uri(), str(beside / "new"), f"{(warehouse / 'sec_a.db').as_uri()}/../escape",
                 str(cwd / "here"), "relative/path"),
        metadata_files=(bobs["metadata-location"],),
    )


def _warm_up(gw: RunningGateway, ok) -> None:
    """Every kind of HMS write once, before the battery: the test HMS runs its JVM with C1 only,
    and a first drop (class loading, the notification listener) takes seconds that are not a
    stall of the gateway."""
    def alice(method, path, body=None):
        return ok(call(gw, method, path, body, auth=_as("alice"), validate=False))

    ns = "/v1/namespaces/sec_a"
    alice("POST", f"{ns}/tables", {"name": "warm", "schema": SCHEMA})
    alice("POST", f"{ns}/tables/warm", {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
    alice("POST", "/v1/transactions/commit", {"table-changes": [
        {"identifier": {"namespace": ["sec_a"], "name": "warm"},
         "updates": [{"action": "set-properties", "updates": {"k": "w"}}]}]})
    alice("POST", "/v1/tables/rename", {"source": {"namespace": ["sec_a"], "name": "warm"},
                                        "destination": {"namespace": ["sec_a"], "name": "warm2"}})
    alice("DELETE", f"{ns}/tables/warm2?purgeRequested=true")
    alice("POST", f"{ns}/views", view_body("warmv", "sec_a"))
    alice("POST", f"{ns}/views/warmv", {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
    alice("DELETE", f"{ns}/views/warmv")
    alice("GET", f"{ns}/tables")
    alice("GET", f"{ns}/views")


def test_hostile_battery(gw, world, module_hms, canary):
    requests = list(hostile_requests(SEED, COUNT, world))
    roots = (module_hms.warehouse_dir, canary[0], canary[1])
    before = Tree.take(*roots)
    children = Children(gw.process.pid).start()
    started = time.monotonic()
    answers = asyncio.run(run(gw.url(path=PATH), gw.ssl_context(), requests, user="alice",
                              password=USERS["alice"], concurrency=4))
    took = time.monotonic() - started
    spawned = children.stop()
    outside = before.changes_outside(Tree.take(*roots), [module_hms.warehouse_dir / "sec_a.db"])
    found = violations(answers, max_seconds=MAX_SECONDS)
    counts: dict[int, int] = {}
    for a in answers:
        counts[a.status] = counts.get(a.status, 0) + 1
    summary = (f"{len(answers)} requests in {took:.0f} s, statuses {dict(sorted(counts.items()))}, "
               f"slowest {max(a.elapsed for a in answers):.2f} s")
    print(summary)
    assert len(answers) == COUNT
    assert found == [], f"{len(found)} violations ({summary}):\n" + "\n".join(found[:40]) + _log_of(gw, found[:40])
    assert outside == [], f"files changed outside sec_a.db ({summary}):\n" + "\n".join(outside[:40])
    assert spawned == set(), f"the gateway ran child processes: {sorted(spawned)[:10]}"
    # every crash cause issue 31 lists is refused as the client's fault
    accepted = [f"{a.request.label}: {a.status}" for a in answers
                if a.request.label.startswith("defect:") and not 400 <= a.status < 500]
    assert accepted == [], accepted
    # the battery reached both sides: refusals, and requests that did what they asked
    assert counts.get(400, 0) > COUNT // 4 and sum(n for s, n in counts.items() if s < 300) > COUNT // 20, summary


def _log_of(gw: RunningGateway, found: list[str]) -> str:
    """The gateway's log lines of the requests named in ``found`` (``ib-<n> ...``)."""
    ids = {line.split()[0] for line in found}
    lines = [line for line in gw.log().splitlines() if any(f'"{rid}"' in line for rid in ids)]
    return "\n--- the gateway's log of those requests:\n" + "\n".join(line[:600] for line in lines[:60])


# --- existence oracles ---------------------------------------------------------------------------

def _oracle_requests(ns: str, name: str) -> list[tuple[str, str, str, dict | None]]:
    """(label, method, path, body) of every route naming ``ns`` and its table or view ``name``."""
    table, view = f"/v1/namespaces/{ns}/tables/{name}", f"/v1/namespaces/{ns}/views/{name}"
    staged = {"requirements": [{"type": "assert-create"}],
              "updates": [{"action": "add-schema", "schema": SCHEMA}, {"action": "set-current-schema", "schema-id": -1},
                          {"action": "set-location", "location": "file:///tmp/never"}]}
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    ident = {"namespace": [ns], "name": name}
    other = {"namespace": ["sec_a"], "name": "zz_target"}
    return [
        ("load namespace", "GET", f"/v1/namespaces/{ns}", None),
        ("namespace exists", "HEAD", f"/v1/namespaces/{ns}", None),
        ("drop namespace", "DELETE", f"/v1/namespaces/{ns}", None),
        ("namespace properties", "POST", f"/v1/namespaces/{ns}/properties", {"updates": {"k": "v"}}),
        ("list tables", "GET", f"/v1/namespaces/{ns}/tables", None),
        ("list views", "GET", f"/v1/namespaces/{ns}/views", None),
        ("list children", "GET", f"/v1/namespaces?parent={ns}", None),
        ("create namespace", "POST", "/v1/namespaces", {"namespace": [ns]}),
        ("create table", "POST", f"/v1/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}),
        ("stage-create", "POST", f"/v1/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA, "stage-create": True}),
        ("register", "POST", f"/v1/namespaces/{ns}/register", {"name": name, "metadata-location": "file:///tmp/x.json"}),
        ("load table", "GET", table, None),
        ("table exists", "HEAD", table, None),
        ("drop table", "DELETE", table, None),
        ("purge table", "DELETE", table + "?purgeRequested=true", None),
        ("commit", "POST", table, commit),
        ("staged-create commit", "POST", table, staged),
        ("credentials", "GET", table + "/credentials", None),
        ("metrics", "POST", table + "/metrics", {"report-type": "commit-report", "table-name": name, "snapshot-id": 1,
                                                "sequence-number": 1, "operation": "append", "metrics": {}}),
        ("rename table", "POST", "/v1/tables/rename", {"source": ident, "destination": other}),
        ("rename into", "POST", "/v1/tables/rename", {"source": {"namespace": ["sec_a"], "name": "a0"},
                                                      "destination": ident}),
        ("transaction", "POST", "/v1/transactions/commit", {"table-changes": [{**commit, "identifier": ident}]}),
        ("staged transaction", "POST", "/v1/transactions/commit", {"table-changes": [{**staged, "identifier": ident}]}),
        ("load view", "GET", view, None),
        ("view exists", "HEAD", view, None),
        ("drop view", "DELETE", view, None),
        ("replace view", "POST", view, {"requirements": [], "updates": [{"action": "set-properties",
                                                                           "updates": {"k": "v"}}]}),
        ("create view", "POST", f"/v1/namespaces/{ns}/views", view_body(name, ns)),
        ("rename view", "POST", "/v1/views/rename", {"source": ident, "destination": other}),
        ("register view", "POST", f"/v1/namespaces/{ns}/register-view",
         {"name": name, "metadata-location": "file:///tmp/x.json"}),
    ]


def _seen(answer, ns: str, name: str) -> tuple:
    """What the caller learns from an answer, with the names it asked about left out."""
    if not answer.content:
        return answer.status_code, None, None
    error = error_of(answer)
    message = re.sub(rf"\b{re.escape(ns)}\b", "<ns>", error["message"])
    return answer.status_code, error["type"], re.sub(rf"\b{re.escape(name)}\b", "<name>", message)


def test_a_user_learns_nothing_of_what_the_policy_hides(gw, world):
    # alice may not see sec_b: every route answers her the same whether bob's table or view
    # exists, and whether the namespace exists at all
    cases = {("sec_b", "bt"): "bob's table", ("sec_b", "bv"): "bob's view", ("sec_b", "zz_none"): "a missing name",
             ("zz_missing", "bt"): "a missing namespace"}
    differences = []
    for (label, *_), *answers in zip(_oracle_requests("sec_b", "bt"), *(
            [call(gw, method, path, body, auth=_as("alice"), validate=False)
             for _, method, path, body in _oracle_requests(ns, name)] for ns, name in cases)):
        seen = {what: _seen(answer, ns, name) for (ns, name), what, answer in zip(cases, cases.values(), answers)}
        assert all(s[0] < 500 for s in seen.values()), (label, seen)
        if len(set(seen.values())) != 1:
            differences.append(f"{label}: {seen}")
    assert differences == [], "\n".join(differences)
    # nothing of bob's changed
    assert call(gw, "GET", "/v1/namespaces/sec_b/tables/bt", auth=_as("bob"), validate=False).status_code == 200
    assert call(gw, "GET", "/v1/namespaces/sec_b/views/bv", auth=_as("bob"), validate=False).status_code == 200


def test_the_one_collision_a_creator_learns(gw, world):
    # docs/security.md, "Existence and the policy": a user who may create in a namespace learns
    # that a name is taken there (409), as in Hive, whether or not the policy shows the object
    for expected in (200, 409):
        answer = call(gw, "POST", "/v1/namespaces/sec_a/tables", {"name": "collide", "schema": SCHEMA},
                      auth=_as("alice"), validate=False)
        assert answer.status_code == expected, answer.text
    error_of(answer, 409, "AlreadyExistsException")


# --- one error model -----------------------------------------------------------------------------

def test_a_compressed_body_is_refused_in_the_error_model(gw, world):
    import gzip

    body = gzip.compress(json.dumps({"namespace": ["sec_a"]}).encode())
    answer = call(gw, "POST", "/v1/namespaces", body, auth=_as("alice"), headers={"Content-Encoding": "gzip"},
                  validate=False)
    error = error_of(answer, 415, "UnsupportedMediaTypeException")
    assert "Content-Encoding" in error["message"] and answer.headers["Accept-Encoding"] == "identity"

