"""What each Iceberg route row declares it needs (:mod:`gateway.iceberg.access`, issue 48): every
row declares it, the routes that read or hand out a table's storage carry the storage rules, no
handler asks the policy itself, what the body decides comes out right, and docs/security.md's
route table is the one these rows write."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from gateway.iceberg import access, errors, routes
from gateway.iceberg.access import DENIED_COLUMNS, ROW_FILTER_AND_MASKS, STORAGE_IDENTITY, Need, enforce, route_table
from gateway.iceberg.bodies import commit_request
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.objects import VIEW
from gateway.iceberg.paths import RouteMatch
from gateway.iceberg.routes import ROUTES, Route

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- iceberg-route-access -->"
#: The routes that read or hand out an existing table's storage (issue 48): each must apply the
#: denied-column rule, the row-filter and mask rule and the storage identity.
STORAGE_ROUTES = {"loadTable", "updateTable", "reportMetrics", "loadCredentials", "signRequest", "signS3Request",
                  "planTableScan",
                  "fetchPlanningResult", "cancelPlanning", "fetchScanTasks", "commitTransaction"}


def test_every_row_that_is_not_public_declares_its_access():
    undeclared = [row.operation for row in ROUTES if row.access is None]
    assert undeclared == []
    public = {row.operation for row in ROUTES if row.access.public}
    assert public == {"getConfig", "getToken"}
    for row in ROUTES:
        declared = row.access
        if declared.public:
            continue
        assert declared.body is not None or declared.on in ("namespace", "table", "view"), row.operation
        # the path parameters it names are the template's
        assert all(f"{{{p}}}" in row.path for p in declared.path), row.operation


async def test_a_row_without_a_declaration_is_refused_before_its_handler():
    called = []

    async def handler(*args):
        called.append(args)

    row = Route("GET", "/v1/x", "undeclared", None, None, handler)
    with pytest.raises(TypeError, match="undeclared declares no access"):
        await enforce(None, row.access, RouteMatch("undeclared"), None, None)
    assert called == []


def test_the_routes_that_read_or_hand_out_storage_carry_the_storage_rules():
    for operation in STORAGE_ROUTES:
        rules = routes.route_of(operation).access.rules
        assert {DENIED_COLUMNS, ROW_FILTER_AND_MASKS, STORAGE_IDENTITY} <= set(rules), operation
    carrying = {row.operation for row in ROUTES if row.access.rules and STORAGE_IDENTITY in row.access.rules}
    assert carrying == STORAGE_ROUTES


def test_no_handler_asks_the_policy_itself():
    """``catalog.require(`` is the enforcer's alone (docs/architecture.md, "Access in the route row")."""
    calls = {path.name: len(re.findall(r"catalog\.require\(", path.read_text()))
             for path in (ROOT / "gateway" / "iceberg").glob("*.py")}
    assert {name: n for name, n in calls.items() if n} == {"access.py": 1}


def _needs(operation: str, route: RouteMatch, ask, query=None) -> list[Need]:
    request = SimpleNamespace(query=query or {})
    return routes.route_of(operation).access.needs(route, request, ask)


def test_a_commit_needs_update_for_data_and_alter_for_the_rest():
    route = RouteMatch("updateTable", "sales", "orders")
    snapshot = commit_request(b'{"updates": [{"action": "remove-snapshots", "snapshot-ids": [1]}]}')
    assert [(n.access, n.name) for n in _needs("updateTable", route, snapshot)] == [("update", "orders")]
    both = commit_request(b'{"updates": [{"action": "remove-snapshots", "snapshot-ids": [1]},'
                          b' {"action": "set-properties", "updates": {"k": "v"}}]}')
    needs = _needs("updateTable", route, both)
    assert [n.access for n in needs] == ["update", "alter"]
    assert set(access.STORAGE) <= set(needs[0].rules) and needs[0].keys == ("k",)
    staged = commit_request(b'{"requirements": [{"type": "assert-create"}], "updates": []}')
    assert [(n.access, n.db, n.name, n.existing) for n in _needs("updateTable", route, staged)] == [
        ("create", "sales", None, True), (None, "sales", "orders", False)]


def test_a_transaction_needs_each_tables_commit_access_and_storage_rules():
    from gateway.iceberg.transactions import CommitTransactionRequest

    body = (b'{"table-changes": [{"identifier": {"namespace": ["a"], "name": "t"}, "updates": '
            b'[{"action": "set-properties", "updates": {"k": "v"}}]}, {"identifier": {"namespace": ["b"], '
            b'"name": "u"}, "updates": [{"action": "remove-snapshots", "snapshot-ids": [1]}]}]}')
    needs = _needs("commitTransaction", RouteMatch("commitTransaction"), CommitTransactionRequest.from_request(None, None, body))
    assert [(n.access, n.db, n.name) for n in needs] == [("alter", "a", "t"), ("update", "b", "u")]
    assert all(STORAGE_IDENTITY in n.rules for n in needs)


def test_the_signer_needs_select_to_read_update_to_write_and_never_signs_other_methods():
    from gateway.iceberg.signer import SignRequest

    route = RouteMatch("signS3Request", "sales", "orders")
    for method, wanted in (("GET", "select"), ("head", "select"), ("PUT", "update"), ("DELETE", "update")):
        ask = SignRequest(region="r", uri="http://s3/b/k", method=method)
        needs = _needs("signS3Request", route, ask)
        assert [(n.access, n.name) for n in needs] == [(wanted, "orders")]
        assert set(access.STORAGE) <= set(needs[0].rules)
    with pytest.raises(errors.Forbidden, match="never signed"):
        _needs("signS3Request", route, SignRequest(region="r", uri="http://s3/b/k", method="PATCH"))


def test_renames_creates_and_listings_name_their_objects():
    from gateway.iceberg.bodies import RenameTable

    rename = RenameTable.model_validate({"source": {"namespace": ["a"], "name": "t"},
                                         "destination": {"namespace": ["b"], "name": "u"}})
    assert [(n.access, n.db, n.name, n.object_type) for n in _needs("renameView", RouteMatch("renameView"), rename)] == [
        ("alter", "a", "t", VIEW), ("create", "b", None, access.TABLE)]
    bad = RenameTable.model_validate({"source": {"namespace": ["a"], "name": "t-"},
                                      "destination": {"namespace": ["b"], "name": "u"}})
    with pytest.raises(errors.BadRequest):
        _needs("renameTable", RouteMatch("renameTable"), bad)
    create = SimpleNamespace(name="t", properties={"py-io-impl": "x"})
    needs = _needs("createTable", RouteMatch("createTable", "a"), create)
    assert [(n.access, n.name, n.existing) for n in needs] == [("create", None, True), (None, "t", False)]
    assert needs[1].keys == ("py-io-impl",) and ROW_FILTER_AND_MASKS in needs[1].rules
    namespace = SimpleNamespace(namespace=["n"], properties={})
    assert [(n.access, n.db, n.existing) for n in _needs("createNamespace", RouteMatch("createNamespace"), namespace)] == [
        ("create", "n", False)]
    assert _needs("listNamespaces", RouteMatch("listNamespaces"), None) == []
    assert [(n.access, n.db) for n in _needs("listNamespaces", RouteMatch("listNamespaces"), None, {"parent": "p"})] == [
        ("", "p")]


async def test_reserved_properties_are_refused_before_the_policy_is_asked():
    class View:
        def visible(self, *a):
            raise AssertionError("the policy was asked")

        may = visible

    catalog = Catalog(None, View(), None, None, "ana")
    create = SimpleNamespace(name="t", properties={"py-io-impl": "subprocess.Popen"})
    with pytest.raises(errors.BadRequest, match="table a.t: property 'py-io-impl' names an implementation"):
        await enforce(catalog, routes.route_of("createTable").access, RouteMatch("createTable", "a"), None, create)


def test_docs_security_has_the_route_table_these_rows_write():
    text = (ROOT / "docs" / "security.md").read_text()
    assert MARKER in text
    documented = text[text.index(MARKER) + len(MARKER):].lstrip("\n")
    documented = documented[:documented.index("\n\n") + 1]
    expected = route_table(ROUTES)
    assert documented == expected, f"docs/security.md's table after {MARKER} should read:\n{expected}"
