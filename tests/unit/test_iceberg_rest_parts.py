"""The iceberg-rest pieces without servers: routes, the error model, request parsing, the policy
mapping (404 versus 403), and the commit protocol against a fake HMS client (real PyIceberg
metadata files in a temporary directory)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import Capability
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import commit, errors
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.service_state import ServiceState
from gateway.upstream.locks import Schedule
from gateway.iceberg.files import MetadataFiles, next_metadata_location
from gateway.iceberg.hive_tables import new_table
from gateway.iceberg.bodies import commit_request, page_params
from gateway.iceberg.routes import ENDPOINTS, RouteMatch, answer, match
from gateway.policy.view import CatalogView
from gateway.thrift.schema import load_schema
from gateway.upstream.errors import UpstreamConnectFailed, UpstreamTimeout, UpstreamUnavailable
from gateway.upstream.metastore import idl_module

IDL = idl_module(load_schema())

#: The table the commits below name.
_T = RouteMatch("updateTable", "db", "t")


# --- routes -------------------------------------------------------------------------------------

def test_endpoints_are_pyiceberg_s_capabilities_spelled_alike():
    capabilities = {str(v) for k, v in vars(Capability).items() if k.startswith("V1_")}
    # PyIceberg sends no metrics reports, multi-table commits, view replaces or renames, so
    # names no capability for them (nor for create view, which it sends unchecked); it does not
    # poll nor cancel scan plans; PyIceberg 0.12 predates the spec's signRequest (it signs where
    # s3.signer.endpoint says: the same path)
    theirs = {"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
              "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
              "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
              "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
              "POST /v1/{prefix}/transactions/commit",
              "POST /v1/{prefix}/namespaces/{namespace}/views",
              "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
              "POST /v1/{prefix}/views/rename"}
    assert set(ENDPOINTS) - theirs <= capabilities
    assert theirs <= set(ENDPOINTS)
    assert len(ENDPOINTS) == 30


@pytest.mark.parametrize("method, path, operation, namespace, table", [
    ("GET", "/v1/config", "getConfig", None, None),
    ("GET", "/v1/namespaces", "listNamespaces", None, None),
    ("HEAD", "/v1/namespaces/sales", "namespaceExists", "sales", None),
    ("POST", "/v1/namespaces/sales/properties", "updateProperties", "sales", None),
    ("POST", "/v1/namespaces/sales/tables/orders", "updateTable", "sales", "orders"),
    ("DELETE", "/v1/namespaces/s%61les/tables/orders", "dropTable", "sales", "orders"),
    ("POST", "/v1/tables/rename", "renameTable", None, None),
    ("POST", "/v1/oauth/tokens", "getToken", None, None),
    ("POST", "/v1/namespaces/sales/register", "registerTable", "sales", None),
    ("POST", "/v1/namespaces/sales/tables/orders/metrics", "reportMetrics", "sales", "orders"),
    ("POST", "/v1/transactions/commit", "commitTransaction", None, None),
    ("GET", "/v1/namespaces/sales/views", "listViews", "sales", None),
    ("HEAD", "/v1/namespaces/sales/views/v", "viewExists", "sales", "v"),
    ("POST", "/v1/views/rename", "renameView", None, None),
])
def test_routes_pick_the_spec_operation(method, path, operation, namespace, table):
    route = match(method, path)
    assert (route.operation, route.namespace, route.table) == (operation, namespace, table)


@pytest.mark.parametrize("path, status, words", [
    ("/v1/namespaces/a%1Fb", 404, "one namespace level"),
    ("/v1/namespaces/bad-name", 400, "letters, digits"),
    ("/v1/namespaces/sales/tables/a%2Fb", 400, "letters, digits"),
    ("/v1/namespaces/%FF", 400, "UTF-8"),
    ("/v1/namespaces/" + "a" * 129, 400, "128"),
    ("/v1/namespaces/", 400, "empty"),
    ("/v1/namespaces/sales/views/a-b", 400, "invalid view name"),
    ("/v1/namespaces/sales/registered", 404, "no such Iceberg REST endpoint"),
    ("/v2/config", 404, "no such"),
    ("", 404, "no such"),
])
def test_bad_paths_are_refused_before_anything_is_called(path, status, words):
    with pytest.raises(errors.IcebergError) as caught:
        match("GET", path)
    assert caught.value.status == status and words in caught.value.message


def test_a_method_the_path_lacks_is_405_with_allow():
    with pytest.raises(errors.MethodNotAllowed) as caught:
        match("PUT", "/v1/namespaces/sales/tables/t")
    assert caught.value.headers == [("Allow", "DELETE, GET, HEAD, POST")]


# --- error model --------------------------------------------------------------------------------

def test_the_error_model_shape_and_head_without_body():
    error = errors.NamespaceNotEmpty("Namespace sales is not empty")
    assert error.body() == {"error": {"message": "Namespace sales is not empty",
                                      "type": "NamespaceNotEmptyException", "code": 409}}
    response = error.response()
    assert response.status == 409 and json.loads(response.body) == error.body()
    assert errors.NoSuchTable("x").response(head=True).body is None
    assert errors.CommitStateUnknown("lost", 504).body()["error"]["code"] == 504


# --- request parsing ----------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    b"", b"{", b"[]", b"[" * 50000,
    json.dumps({"updates": [{"action": "no-such"}]}).encode(),
    json.dumps({"requirements": [{"type": "assert-current-schema-id"}]}).encode(),
    json.dumps({"identifier": {"namespace": "x"}}).encode(),
])
def test_a_commit_body_that_does_not_parse_is_400(body):
    with pytest.raises(errors.BadRequest):
        commit_request(body)


def test_a_commit_body_without_identifier_parses_into_pyiceberg_objects():
    request = commit_request(json.dumps({
        "requirements": [{"type": "assert-table-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"}],
        "updates": [{"action": "set-properties", "updates": {"a": "b"}}],
    }).encode())
    assert request.identifier is None
    assert type(request.requirements[0]).__name__ == "AssertTableUUID"
    assert type(request.updates[0]).__name__ == "SetPropertiesUpdate"


@pytest.mark.parametrize("query, expected", [
    ({}, (None, None)), ({"pageToken": ""}, ("", None)), ({"pageSize": "5"}, (None, 5)),
    ({"pageSize": "999999"}, (None, 1000)),
])
def test_page_parameters(query, expected):
    assert page_params(query) == expected


@pytest.mark.parametrize("size", ["0", "-1", "x", "1e3", "9999999999"])
def test_a_bad_page_size_is_400(size):
    with pytest.raises(errors.BadRequest):
        page_params({"pageSize": size})


# --- a fake HMS ---------------------------------------------------------------------------------

class FakeView:
    """Visible: ``seen``; allowed accesses: ``allowed``."""

    def __init__(self, seen=("db",), allowed=("select", "update", "alter", "create", "drop")):
        self.seen, self.allowed = set(seen), set(allowed)

    def visible(self, database, table=None):
        return database in self.seen

    def may(self, access, database, table=None):
        return access in self.allowed

    def all_columns(self, database, table):
        return True

    def restrictions(self, database, table, columns=None, column_types=None):
        from gateway.policy.restrictions import TableRestrictions

        return TableRestrictions()  # no row filter, no mask


class FakeHMS:
    """The MetastoreClient calls the commit protocol makes, recorded in ``calls``."""

    def __init__(self, table, lock_states=("ACQUIRED",)):
        self.idl = IDL
        self.table = table
        self.lock_states = [getattr(IDL.LockState, s) for s in lock_states]
        self.calls: list[tuple] = []
        self.alter_error: Exception | None = None
        self.alter_lands = True
        self.get_errors: list[Exception] = []
        self.alter_seconds = 0.0

    async def get_table(self, db, name):
        self.calls.append(("get_table",))
        if self.get_errors:
            raise self.get_errors.pop(0)
        return _copy(self.table)

    async def get_database(self, db):  # the namespace beside the table, for the location checks
        return IDL.Database(name=db, locationUri=self.table.sd.location.rsplit("/", 1)[0])

    async def call(self, method, **arguments):
        if method == "get_all_tables":  # the storage identity's siblings: the table alone
            return [self.table.tableName]
        assert method == "get_config_value"  # HMS's warehouse: the namespace's parent
        return self.table.sd.location.rsplit("/", 2)[0]

    async def lock(self, request):
        self.calls.append(("lock", request.component[0].type, request.component[0].level))
        return IDL.LockResponse(lockid=7, state=self.lock_states.pop(0))

    async def check_lock(self, lockid):
        self.calls.append(("check_lock", lockid))
        return IDL.LockResponse(lockid=lockid, state=self.lock_states.pop(0) if self.lock_states
                                else IDL.LockState.WAITING)

    async def unlock(self, lockid):
        self.calls.append(("unlock", lockid))

    async def heartbeat(self, lockid=None, txnid=None):
        self.calls.append(("heartbeat", lockid))

    async def alter_table(self, db, name, table, properties=None):
        self.calls.append(("alter", dict(properties or {})))
        await asyncio.sleep(self.alter_seconds)
        if self.alter_lands:
            self.table = _copy(table)
        if self.alter_error is not None:
            raise self.alter_error


def _copy(table):
    return IDL.Table(**{name: getattr(table, name) for _, name, *_ in table.thrift_spec.values()})


SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


@pytest.fixture
def world(tmp_path: Path):
    """A table ``db.t`` with one metadata file, a fake HMS holding it, and a catalog."""
    files = MetadataFiles()
    location = (tmp_path / "db.db" / "t").as_uri()
    metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location)
    first = next_metadata_location(metadata, None)
    asyncio.run(files.write(metadata, first))
    hms = FakeHMS(new_table(IDL, "db", "t", "etl", metadata, first, True))

    def catalog(view=None, **lock) -> Catalog:
        return Catalog(hms, view or FakeView(), files,
                       ServiceState(lock=Schedule(**{"check_min": 0.001, "check_max": 0.002, "heartbeat": 240.0,
                                                       **lock})), "etl")
    return hms, catalog, first, tmp_path


def _set_property(value: str = "v") -> bytes:
    return json.dumps({"updates": [{"action": "set-properties", "updates": {"k": value}}]}).encode()


def _metadata_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "db.db" / "t" / "metadata").iterdir())


async def test_a_commit_waits_for_the_lock_then_alters_with_the_hivecatalog_parameters(world):
    hms, catalog, first, tmp_path = world
    hms.lock_states = [IDL.LockState.WAITING, IDL.LockState.WAITING, IDL.LockState.ACQUIRED]
    reply = await answer(catalog(), _T, None, _set_property())
    body = json.loads(reply.body)
    assert body["metadata"]["properties"]["k"] == "v"
    assert body["metadata-location"].rsplit("/", 1)[1].startswith("00001-")
    kinds = [c[0] for c in hms.calls]
    assert kinds == ["get_table", "lock", "check_lock", "check_lock", "get_table", "alter", "unlock"]
    assert hms.calls[1][1:] == (IDL.LockType.EXCLUSIVE, IDL.LockLevel.TABLE)
    assert hms.calls[5][1] == {"DO_NOT_UPDATE_STATS": "true"}
    params = hms.table.parameters
    assert params["metadata_location"] == body["metadata-location"]
    assert params["previous_metadata_location"] == first
    assert params["table_type"] == "ICEBERG" and params["EXTERNAL"] == "TRUE" and params["k"] == "v"


async def test_a_failed_requirement_is_409_and_writes_nothing(world):
    hms, catalog, first, tmp_path = world
    body = json.dumps({"requirements": [{"type": "assert-table-uuid",
                                         "uuid": "00000000-0000-0000-0000-000000000000"}]}).encode()
    with pytest.raises(errors.CommitFailed):
        await answer(catalog(), _T, None, body)
    called = [c[0] for c in hms.calls]
    assert "lock" not in called and "alter" not in called  # refused before the lock
    assert len(_metadata_files(tmp_path)) == 1


def _another_writer_lands_while_we_wait(hms, tmp_path: Path, **change):
    """While the commit waits for the lock (its first check_lock), another writer's commit
    lands: a new metadata file with ``change`` (``properties`` or ``table_uuid``)."""
    files = MetadataFiles()
    waiting = hms.check_lock

    async def check_lock(lockid):
        if ("check_lock", lockid) not in hms.calls:
            base_location = hms.table.parameters["metadata_location"]
            base = await files.read(base_location)
            moved = base.model_copy(update=change)
            location = next_metadata_location(moved, base_location)
            await files.write(moved, location)
            hms.table.parameters = {**hms.table.parameters, "metadata_location": location,
                                    "previous_metadata_location": base_location}
        return await waiting(lockid)
    hms.check_lock = check_lock
    hms.lock_states = [IDL.LockState.WAITING, IDL.LockState.ACQUIRED]


async def test_a_base_that_moved_during_the_lock_wait_is_read_again(world):
    """The pre-lock work is reused only when the base did not move: else the other writer's
    change would be lost (the commit is applied to the base read under the lock)."""
    hms, catalog, first, tmp_path = world
    _another_writer_lands_while_we_wait(hms, tmp_path, properties={"other": "1"})
    reply = await answer(catalog(), _T, None, _set_property())
    properties = json.loads(reply.body)["metadata"]["properties"]
    assert properties == {"other": "1", "k": "v"}
    assert hms.table.parameters["previous_metadata_location"] != first  # built on the other commit


async def test_a_requirement_that_fails_only_under_the_lock_is_409_and_released(world):
    hms, catalog, first, tmp_path = world
    uuid = str((await MetadataFiles().read(first)).table_uuid)
    _another_writer_lands_while_we_wait(hms, tmp_path, table_uuid="11111111-1111-1111-1111-111111111111")
    body = json.dumps({"requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
                       "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}).encode()
    with pytest.raises(errors.CommitFailed):
        await answer(catalog(), _T, None, body)
    called = [c[0] for c in hms.calls]
    assert "lock" in called and "alter" not in called and called[-1] == "unlock"
    assert len(_metadata_files(tmp_path)) == 2  # the other writer's; ours never written


async def test_a_lock_never_granted_is_409_and_released(world):
    hms, catalog, first, tmp_path = world
    hms.lock_states = [IDL.LockState.WAITING]
    with pytest.raises(errors.CommitFailed, match="waiting for the lock"):
        await answer(catalog(wait=0.01), _T, None, _set_property())
    assert hms.calls[-1] == ("unlock", 7) and "alter" not in [c[0] for c in hms.calls]


async def test_an_alter_that_timed_out_but_landed_is_a_success(world):
    hms, catalog, first, tmp_path = world
    hms.alter_error = UpstreamTimeout("HMS did not answer in 60 s")
    reply = await answer(catalog(), _T, None, _set_property())
    assert json.loads(reply.body)["metadata-location"] == hms.table.parameters["metadata_location"]
    assert hms.calls[-1][0] == "unlock"


async def test_an_alter_never_sent_is_503_and_its_file_deleted(world):
    hms, catalog, first, tmp_path = world
    hms.alter_error, hms.alter_lands = UpstreamConnectFailed("connection refused"), False
    with pytest.raises(errors.ServiceUnavailable):
        await answer(catalog(), _T, None, _set_property())
    assert hms.table.parameters["metadata_location"] == first
    assert _metadata_files(tmp_path) == [first.rsplit("/", 1)[1]]


@pytest.mark.parametrize("error", [UpstreamUnavailable("connection reset"), UpstreamTimeout("no answer in 60 s")])
async def test_an_alter_sent_and_not_yet_visible_is_unknown_and_keeps_its_file(world, error):
    # HMS may still apply a call it received after the re-read: deleting the file then would
    # leave the table pointing at nothing.
    hms, catalog, first, tmp_path = world
    hms.alter_error, hms.alter_lands = error, False
    with pytest.raises(errors.CommitStateUnknown):
        await answer(catalog(), _T, None, _set_property())
    assert hms.table.parameters["metadata_location"] == first
    assert len(_metadata_files(tmp_path)) == 2


async def test_an_unknown_outcome_is_commit_state_unknown_and_keeps_the_file(world):
    hms, catalog, first, tmp_path = world
    hms.alter_error = UpstreamTimeout("HMS did not answer in 60 s")
    original_get = hms.get_table
    reads = {"n": 0}

    async def get_table(db, name):
        reads["n"] += 1
        if reads["n"] > 2:  # the lookup before the lock and the read under it succeed
            raise UpstreamUnavailable("connection refused")
        return await original_get(db, name)
    hms.get_table = get_table
    with pytest.raises(errors.CommitStateUnknown) as caught:
        await answer(catalog(), _T, None, _set_property())
    assert caught.value.status == 504 and caught.value.type == "CommitStateUnknownException"
    assert len(_metadata_files(tmp_path)) == 2  # the new file is kept: HMS may point at it
    assert hms.calls[-1][0] == "unlock"


async def test_heartbeats_keep_the_lock_while_the_commit_holds_it_and_stop_after(world):
    hms, catalog, first, tmp_path = world
    hms.alter_seconds = 0.05
    await answer(catalog(heartbeat=0.005), _T, None, _set_property())
    kinds = [c[0] for c in hms.calls]
    assert "heartbeat" in kinds[kinds.index("lock"):kinds.index("unlock")]
    await asyncio.sleep(0.03)
    assert [c[0] for c in hms.calls][-1] == "unlock"  # none after the unlock
    assert ("heartbeat", 7) in hms.calls


@pytest.mark.parametrize("updates, needed", [
    ([{"action": "set-properties", "updates": {"a": "b"}}], ["alter"]),
    ([{"action": "remove-snapshots", "snapshot-ids": [1]}], ["update"]),
    ([{"action": "remove-snapshots", "snapshot-ids": [1]}, {"action": "set-location", "location": "x"}],
     ["update", "alter"]),
])
def test_accesses_of_a_commit(updates, needed):
    assert commit.accesses(commit_request(json.dumps({"updates": updates}).encode()).updates) == needed


async def test_invisible_is_404_and_visible_but_denied_is_403(world):
    hms, catalog, first, tmp_path = world
    with pytest.raises(errors.NoSuchTable):
        await answer(catalog(FakeView(seen=())), _T, None, _set_property())
    with pytest.raises(errors.Forbidden, match="etl may not alter db.t"):
        await answer(catalog(FakeView(allowed=("select",))), _T, None, _set_property())
    assert hms.calls == []


def test_catalog_view_without_policy_allows_everything():
    view = CatalogView(None, "etl")
    assert view.visible("db", "t") and view.may("alter", "db", "t")


def test_the_router_hands_a_subpath_kind_the_paths_below_it_and_no_other_kind():
    from types import SimpleNamespace

    from gateway.topology import Router, Topology
    thrift = SimpleNamespace(handler=SimpleNamespace())
    iceberg = SimpleNamespace(handler=SimpleNamespace(serves_subpaths=True))
    router = Router({"t": Topology("t", {"hms/api": thrift, "iceberg": iceberg})})
    assert router.resolve("t", "iceberg/v1/namespaces/a")[1] is iceberg
    assert router.resolve("t", "iceberg")[1] is iceberg
    assert router.resolve("t", "hms/api")[1] is thrift
    assert router.resolve("t", "hms/api/") is None and router.resolve("t", "hms/api/x") is None
    assert router.resolve("t", "icebergs/v1") is None and router.resolve("other", "iceberg/v1") is None


# --- the kind: refusals and upstream trouble in the error model ----------------------------------

class _Chain:
    def __init__(self, refusal=None):
        self.refusal = refusal

    async def on_request(self, exchange):
        if self.refusal is not None:
            raise self.refusal
        from gateway.providers.identity import Identity
        exchange.identity = Identity("etl", None)


class _Upstream:
    """Every call fails with ``error``."""

    label = "HMS"

    def __init__(self, error):
        self.error = error

    async def call(self, *args, **kwargs):
        raise self.error


async def _serve(path: str, *, error=None, refusal=None, method="GET"):
    from aiohttp.test_utils import make_mocked_request

    from gateway.config import Limits
    from gateway.observability.audit import AuditEvent
    from gateway.pipeline.exchange import Exchange
    from gateway.iceberg.kind import IcebergRestOptions, IcebergRestService
    service = IcebergRestService("t", "ice", _Upstream(error), _Chain(refusal), load_schema(), None,
                                 Limits(), IcebergRestOptions())
    request = make_mocked_request(method, "/gateway/t/ice" + path)
    request.content.feed_eof()
    event = AuditEvent(request_id="r1", client=None)
    response, label = await service.handle(Exchange(request=request, event=event))
    return response, label, event


@pytest.mark.parametrize("error, status, kind, label", [
    (UpstreamUnavailable("connection refused"), 503, "ServiceUnavailableException", "upstream_unavailable"),
    (UpstreamTimeout("no answer in 60 s"), 503, "ServiceUnavailableException", "upstream_unavailable"),
])
async def test_hms_trouble_outside_a_commit_is_503_never_500(error, status, kind, label):
    response, outcome, event = await _serve("/v1/namespaces", error=error)
    assert response.status == status and json.loads(response.body)["error"]["type"] == kind
    assert outcome == label and event.method == "listNamespaces"


async def test_an_hms_application_exception_is_502_service_failure():
    from thriftpy2.thrift import TApplicationException
    response, outcome, _ = await _serve("/v1/namespaces/db", error=TApplicationException(6, "Internal error"))
    assert response.status == 502
    assert json.loads(response.body)["error"]["type"] == "ServiceFailureException"


async def test_refusals_of_the_chain_are_in_the_error_model():
    from gateway.pipeline.outcomes import Forbidden, Unauthenticated
    response, outcome, _ = await _serve("/v1/config", refusal=Unauthenticated(
        "no credentials", [("WWW-Authenticate", 'Basic realm="HMS Gateway"'), ("WWW-Authenticate", "Negotiate")]))
    assert response.status == 401 and outcome == "unauthenticated"
    assert response.headers.getall("WWW-Authenticate") == ['Basic realm="HMS Gateway"', "Negotiate"]
    assert json.loads(response.body)["error"]["type"] == "NotAuthorizedException"
    response, outcome, _ = await _serve("/v1/config", refusal=Forbidden("not in the ACL"))
    assert response.status == 403 and json.loads(response.body)["error"]["message"] == "not in the ACL"


async def test_head_answers_carry_no_body():
    response, _, _ = await _serve("/v1/namespaces/db", error=UpstreamUnavailable("down"), method="HEAD")
    assert response.status == 503 and response.body is None
