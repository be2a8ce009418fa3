"""The Glue operations over a fake metastore (the IDL's own objects) and a real catalog policy:
what each caller sees, GetUnfilteredTableMetadata's trust and permission rules, pagination and
input errors. The same operations run against the real HMS in tests/integration/test_glue_api.py."""

from __future__ import annotations

import fnmatch

import pytest

from gateway.config import ConfigError, GatewayConfig, TLSConfig, load_topology_file
from gateway.glue.errors import AccessDenied, EntityNotFound, InvalidInput, PermissionTypeMismatch
from gateway.upstream.metastore import MetaException, NoSuchObjectException
from gateway.glue.operations import Caller, GlueCatalog
from gateway.policy import load_policy_file
from gateway.glue.kind import GlueService
from gateway.topology import Topology, build_topology
from tests.unit.test_glue_shapes import IDL, sample_partition, sample_table

POLICY = """
policies:
  - id: 1
    name: analysts read sales but not ssn
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{groups: [analysts], accesses: [select]}]
  - id: 2
    name: nobody but finance reads ssn
    resources: {database: [sales], table: ["*"], column: [ssn]}
    deny: [{groups: [analysts], accesses: [select]}]
  - id: 3
    name: bob owns finance
    resources: {database: [finance], table: ["*"], column: ["*"]}
    allow: [{users: [bob], accesses: [all]}]
"""


class FakeMetastore:
    """HMS's read methods over dicts of IDL objects; records each call."""

    def __init__(self):
        self.tables = {("sales", "customers"): sample_table(),
                       ("sales", "orders"): sample_table(name="orders", cols=(("id", "bigint"),)),
                       ("finance", "ledger"): sample_table("finance", "ledger")}
        for i in range(150):
            self.tables[("finance", f"t{i:03d}")] = sample_table("finance", f"t{i:03d}")
        self.partitions = [sample_partition((f"2019-03-{d:02d}",)) for d in range(1, 8)]
        self.calls: list[str] = []

    async def call(self, method: str, **args):
        self.calls.append(method)
        databases = sorted({"default", *(db for db, _ in self.tables)})
        if method == "get_all_databases":
            return databases
        if method == "get_database":
            if args["name"] not in databases:
                raise NoSuchObjectException(message=args["name"])
            return IDL.Database(name=args["name"], description=None, locationUri="file:/w", parameters={})
        if args.get("pattern") == "(":
            raise MetaException(message="Unclosed group near index 1")
        if method in ("get_all_tables", "get_tables"):
            names = [t for db, t in self.tables if db == args["db_name"]]
            return [n for n in names if fnmatch.fnmatch(n, args.get("pattern", "*"))]
        if method == "get_table_objects_by_name":
            return [self.tables[(args["dbname"], n)] for n in args["tbl_names"] if (args["dbname"], n) in self.tables]
        if method == "get_table":
            found = self.tables.get((args["dbname"], args["tbl_name"]))
            if found is None:
                raise NoSuchObjectException(message="table not found")
            return found
        if method in ("get_partitions", "get_partitions_by_filter"):
            if args.get("filter") == "bad filter":
                raise MetaException(message="Error parsing partition filter")
            return list(self.partitions)
        raise AssertionError(method)


ALICE = Caller("alice", frozenset({"analysts"}), "alice")
BOB = Caller("bob", frozenset(), "bob")
CAROL = Caller("carol", frozenset(), "carol")


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(POLICY)
    return load_policy_file(path)


def catalog(caller, policy, metastore=None, trusted=("trino",)):
    return GlueCatalog(metastore or FakeMetastore(), caller, policy, "123456789012", frozenset(trusted))


async def test_each_caller_lists_only_the_databases_and_tables_a_policy_grants(policy):
    names = lambda out: [d["Name"] for d in out["DatabaseList"]]  # noqa: E731
    assert names(await catalog(ALICE, policy).get_databases({})) == ["sales"]
    assert names(await catalog(BOB, policy).get_databases({})) == ["finance"]
    assert names(await catalog(CAROL, policy).get_databases({})) == []
    assert names(await catalog(CAROL, None).get_databases({})) == ["default", "finance", "sales"]
    tables = await catalog(ALICE, policy).get_tables({"DatabaseName": "sales"})
    assert [t["Name"] for t in tables["TableList"]] == ["customers", "orders"]


async def test_a_hidden_object_is_entity_not_found_as_a_missing_one_is(policy):
    for request in ({"DatabaseName": "finance", "Name": "ledger"}, {"DatabaseName": "finance", "Name": "nope"}):
        with pytest.raises(EntityNotFound, match=f"Table {request['Name']} not found."):
            await catalog(ALICE, policy).get_table(request)
    with pytest.raises(EntityNotFound, match="Database finance not found."):
        await catalog(ALICE, policy).get_tables({"DatabaseName": "finance"})
    with pytest.raises(EntityNotFound, match="Database finance not found."):
        await catalog(ALICE, policy).get_database({"Name": "finance"})
    metastore = FakeMetastore()
    with pytest.raises(EntityNotFound):
        await catalog(ALICE, policy, metastore).get_partitions({"DatabaseName": "finance", "TableName": "ledger"})
    assert metastore.calls == []  # a hidden object is refused before HMS is asked


async def test_get_table_shows_only_the_columns_the_caller_may_select(policy):
    table = (await catalog(ALICE, policy).get_table({"DatabaseName": "sales", "Name": "customers"}))["Table"]
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == ["customer", "country"]
    assert table["IsRegisteredWithLakeFormation"] is True
    parts = await catalog(ALICE, policy).get_partitions({"DatabaseName": "sales", "TableName": "customers"})
    assert all([c["Name"] for c in p["StorageDescriptor"]["Columns"]] == ["customer", "country"]
               for p in parts["Partitions"])
    unfiltered = (await catalog(CAROL, None).get_table({"DatabaseName": "sales", "Name": "customers"}))["Table"]
    assert len(unfiltered["StorageDescriptor"]["Columns"]) == 3
    assert unfiltered["IsRegisteredWithLakeFormation"] is False


async def test_unfiltered_metadata_gives_the_whole_table_and_the_authorized_columns(policy):
    trino_for_alice = Caller("alice", frozenset({"analysts"}), "trino")
    out = await catalog(trino_for_alice, policy).get_unfiltered_table_metadata({
        "CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers",
        "SupportedPermissionTypes": ["COLUMN_PERMISSION"],
        "QuerySessionContext": {"QueryId": "q1", "QueryAuthorizationId": "auth-1"},
        "AuditContext": {"AdditionalAuditContext": "x"}, "SupportedDialect": {"Dialect": "TRINO"}})
    assert [c["Name"] for c in out["Table"]["StorageDescriptor"]["Columns"]] == ["customer", "ssn", "country"]
    assert out["AuthorizedColumns"] == ["customer", "country", "since"]
    assert out["CellFilters"] == [{"ColumnName": c, "RowFilterExpression": "TRUE"} for c in out["AuthorizedColumns"]]
    assert out["IsRegisteredWithLakeFormation"] is True and out["Permissions"] == ["SELECT"]
    assert out["QueryAuthorizationId"] == "auth-1"


async def test_unfiltered_metadata_is_for_trusted_engines_only(policy):
    request = {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers",
               "SupportedPermissionTypes": ["COLUMN_PERMISSION"]}
    with pytest.raises(AccessDenied, match="alice is not a trusted engine"):
        await catalog(ALICE, policy).get_unfiltered_table_metadata(request)


async def test_grants_the_engine_cannot_express_are_a_permission_type_mismatch(policy):
    trino = Caller("alice", frozenset({"analysts"}), "trino")
    request = {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers",
               "SupportedPermissionTypes": ["ROW_ONLY_PERMISSION"]}
    with pytest.raises(PermissionTypeMismatch):
        await catalog(trino, policy).get_unfiltered_table_metadata(request)
    # the same engine may read a table on which alice's grants are whole
    request["Name"] = "orders"
    assert (await catalog(trino, policy).get_unfiltered_table_metadata(request))["AuthorizedColumns"] == ["id", "since"]


@pytest.mark.parametrize("supported,mismatch", [
    (["COLUMN_PERMISSION"], True),
    (["COLUMN_PERMISSION", "CELL_FILTER_PERMISSION"], False),
    (["NESTED_PERMISSION"], False),  # each type includes the ones before it (the seed)
    (["NESTED_CELL_PERMISSION"], False),
])
async def test_a_row_filter_needs_cell_filter_permission_and_a_mask_leaves_its_column_out(tmp_path, supported,
                                                                                        mismatch):
    path = tmp_path / "catalog.yaml"
    path.write_text(POLICY + """  - id: 4
    name: analysts see EU orders
    resources: {database: [sales], table: [orders]}
    row_filter: [{groups: [analysts], filter: "region = 'EU'"}]
  - id: 5
    name: order ids nulled
    resources: {database: [sales], table: [orders], column: [id]}
    data_mask: [{groups: [analysts], mask: MASK_NULL}]
""")
    glue = catalog(Caller("alice", frozenset({"analysts"}), "trino"), load_policy_file(path))
    request = {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "orders",
               "SupportedPermissionTypes": supported}
    if mismatch:
        with pytest.raises(PermissionTypeMismatch, match=r"row filter \(policy 4\)"):
            await glue.get_unfiltered_table_metadata(request)
        return
    out = await glue.get_unfiltered_table_metadata(request)
    assert out["AuthorizedColumns"] == ["since"]  # id is masked: left out, fail closed
    assert out["CellFilters"] == [{"ColumnName": "since", "RowFilterExpression": "region = 'EU'"}]
    assert glue.view.restricting == {4, 5}


async def test_requested_permissions_the_caller_lacks_are_access_denied(policy):
    trino = Caller("alice", frozenset({"analysts"}), "trino")
    request = {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers",
               "SupportedPermissionTypes": ["COLUMN_PERMISSION"], "Permissions": ["SELECT", "DROP"]}
    with pytest.raises(AccessDenied, match="DROP"):
        await catalog(trino, policy).get_unfiltered_table_metadata(request)
    bob = Caller("bob", frozenset(), "trino")
    out = await catalog(bob, policy).get_unfiltered_table_metadata(
        {**request, "DatabaseName": "finance", "Name": "ledger"})
    assert out["Permissions"] == ["ALL", "SELECT", "ALTER", "DROP", "INSERT", "DELETE"]


async def test_get_tables_pages_with_next_token(policy):
    seen, token, pages = [], None, 0
    while True:
        request = {"DatabaseName": "finance", "MaxResults": 40, **({"NextToken": token} if token else {})}
        out = await catalog(BOB, policy).get_tables(request)
        seen += [t["Name"] for t in out["TableList"]]
        pages += 1
        token = out.get("NextToken")
        if token is None:
            break
    assert pages == 4 and seen == sorted(["ledger", *(f"t{i:03d}" for i in range(150))])


async def test_get_partitions_pages_segments_and_filters(policy):
    alice = catalog(ALICE, policy)
    first = await alice.get_partitions({"DatabaseName": "sales", "TableName": "customers", "MaxResults": 5})
    rest = await alice.get_partitions({"DatabaseName": "sales", "TableName": "customers",
                                       "NextToken": first["NextToken"]})
    assert [p["Values"][0][-2:] for p in first["Partitions"] + rest["Partitions"]] == \
        ["01", "02", "03", "04", "05", "06", "07"] and "NextToken" not in rest
    segment = await alice.get_partitions({"DatabaseName": "sales", "TableName": "customers",
                                          "Segment": {"SegmentNumber": 1, "TotalSegments": 3}})
    assert [p["Values"][0][-2:] for p in segment["Partitions"]] == ["02", "05"]
    with pytest.raises(InvalidInput, match="Invalid Expression"):
        await alice.get_partitions({"DatabaseName": "sales", "TableName": "customers", "Expression": "bad filter"})
    with pytest.raises(InvalidInput, match="Invalid Expression"):
        await alice.get_tables({"DatabaseName": "sales", "Expression": "("})


@pytest.mark.parametrize("operation, request_", [
    ("get_tables", {}),
    ("get_tables", {"DatabaseName": ""}),
    ("get_tables", {"DatabaseName": "sales", "MaxResults": 0}),
    ("get_tables", {"DatabaseName": "sales", "MaxResults": 101}),
    ("get_databases", {"NextToken": "not a token"}),
    ("get_table", {"DatabaseName": "sales", "Name": 5}),
    ("get_partitions", {"DatabaseName": "sales", "TableName": "customers", "MaxResults": 1001}),
    ("get_partitions", {"DatabaseName": "sales", "TableName": "customers", "Segment": {"SegmentNumber": 3,
                                                                                      "TotalSegments": 3}}),
    ("get_unfiltered_table_metadata", {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers"}),
    ("get_unfiltered_table_metadata", {"CatalogId": "123456789012", "DatabaseName": "sales", "Name": "customers",
                                       "SupportedPermissionTypes": ["COLUMN_PERMISSION"], "AuditContext": []}),
])
async def test_bad_input_is_invalid_input(policy, operation, request_):
    with pytest.raises(InvalidInput):
        await getattr(catalog(Caller("alice", frozenset({"analysts"}), "trino"), policy), operation)(request_)


async def test_another_catalog_id_is_not_found(policy):
    with pytest.raises(EntityNotFound, match="Catalog 999 not found"):
        await catalog(ALICE, policy).get_databases({"CatalogId": "999"})


def test_operations_are_named_as_glue_names_them(policy):
    glue = catalog(ALICE, policy)
    assert glue.operation("GetTables") == glue.get_tables
    assert glue.operation("CreateTable") is None and glue.operation("__init__") is None


def _topology(tmp_path, secrets: str, options: str) -> Topology:
    """Build a topology of one glue service behind the sigv4 provider."""
    (tmp_path / "keys").write_text(secrets)
    path = tmp_path / "glue.yaml"
    path.write_text(f"""
providers:
  authentication:
    - type: sigv4
      access_keys: {{AKIATRINO000000001: trino}}
      secret_keys: "file:{tmp_path / 'keys'}"
services:
  - {{kind: glue, path: glue, upstream: {{urls: ['thrift://hms:9083']}}, options: {options}}}
""")
    gateway = GatewayConfig(tls=TLSConfig(certificate=tmp_path / "c", private_key=tmp_path / "k"))
    return build_topology(load_topology_file(path), gateway)


KEYS = "[trino]\naws_access_key_id = AKIATRINO000000001\naws_secret_access_key = s3cr3t-value\n"


def test_a_glue_service_builds_with_its_options(tmp_path):
    handler = _topology(tmp_path, KEYS, "{catalog_id: '42', trusted_engines: [trino]}").services["glue"].handler
    assert isinstance(handler, GlueService)
    assert (handler.catalog_id, handler.trusted_engines) == ("42", frozenset({"trino"}))


def test_config_errors_name_the_file_and_key_and_never_the_secret(tmp_path):
    with pytest.raises(ConfigError) as info:
        _topology(tmp_path, KEYS, "{colour: blue}")
    assert info.value.key == "services[0].options.colour"
    with pytest.raises(ConfigError) as info:
        _topology(tmp_path, "[trino]\naws_access_key_id = AKIAOTHER000000001\naws_secret_access_key = s3cr3t-value\n",
                  "{}")
    assert info.value.key.startswith("providers.authentication[0]")
    assert "AKIATRINO000000001" in info.value.reason and "s3cr3t-value" not in str(info.value)


def test_no_glue_error_is_a_500():
    # The gateway's rule: nothing answers 500; an HMS answer it cannot map is an upstream failure.
    from gateway.glue import errors as glue_errors

    classes = [v for v in vars(glue_errors).values()
               if isinstance(v, type) and issubclass(v, glue_errors.GlueError)]
    assert len(classes) > 10
    assert [c.__name__ for c in classes if c.status == 500] == []
    assert glue_errors.InternalService.status == 502


async def test_the_audit_counts_what_the_policy_hid_as_the_thrift_api_does(policy):
    """``hidden``: listed objects; ``columns_hidden``: distinct (table, column) removed from
    the response, the count of the Thrift API's audit lines."""
    metastore = FakeMetastore()
    metastore.tables[("sales", "accounts")] = sample_table(name="accounts")  # ssn as customers has
    listing = catalog(ALICE, policy, metastore)
    await listing.get_tables({"DatabaseName": "sales"})
    assert (listing.decision, listing.hidden, listing.columns_hidden) == ("allowed", 0, 2)
    databases = catalog(ALICE, policy)
    await databases.get_databases({})
    assert (databases.decision, databases.hidden, databases.columns_hidden) == ("allowed", 2, 0)
    assert catalog(CAROL, None).decision is None
