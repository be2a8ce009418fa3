"""Trusted engines on the Iceberg REST catalog (:mod:`gateway.iceberg.trusted`): a table with
columns denied to the user, a row filter or a mask loads only for a trusted engine (the ``doAs``
impersonator, else the user), with them stated as the spec's ``read-restrictions``; anyone else
gets 403 saying why."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.service_state import ServiceState
from gateway.policy import CatalogView, PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses
from gateway.providers.identity import Identity

POLICIES = [
    Policy(1, "analysts read sales", (ResourceSpec(("sales",)), ResourceSpec(("*",)), ResourceSpec(("*",))),
           allow=(PolicyItem(expand_accesses(["select"]), groups=frozenset({"analysts"})),)),
    Policy(2, "no customer names", (ResourceSpec(("sales",)), ResourceSpec(("orders",)), ResourceSpec(("name",))),
           deny=(PolicyItem(frozenset({"select"}), groups=frozenset({"analysts"})),)),
]
ENGINE = PolicyEngine(POLICIES)
METADATA = new_table_metadata(
    schema=Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False),
                  NestedField(3, "total", LongType(), required=False)),
    partition_spec=UNPARTITIONED_PARTITION_SPEC, sort_order=UNSORTED_SORT_ORDER, location="file:///w/sales/orders")


def catalog(user: str, impersonator: str | None = None, engines=("trino",)) -> Catalog:
    identity = Identity(user=user, principal=None, groups=frozenset({"analysts"}), impersonator=impersonator)
    return Catalog(SimpleNamespace(identity=identity), CatalogView(ENGINE, user, {"analysts"}), files=None,
                   service=ServiceState(trusted_engines=frozenset(engines)), user=user)


def test_a_table_without_denied_columns_is_not_restricted_for_anyone():
    assert trusted.restricted(catalog("ana"), "sales", "customers") is False


def test_the_user_herself_is_refused_with_the_reason():
    with pytest.raises(errors.Forbidden) as refused:
        trusted.restricted(catalog("ana"), "sales", "orders")
    assert refused.value.status == 403
    assert "ana may not read every column of sales.orders" in refused.value.message
    assert "only for a trusted engine" in refused.value.message and "ana is not one" in refused.value.message


def test_an_untrusted_impersonator_is_refused_naming_itself():
    with pytest.raises(errors.Forbidden, match="spark is not one"):
        trusted.restricted(catalog("ana", impersonator="spark"), "sales", "orders")


def test_a_trusted_engine_gets_the_denied_columns_as_replace_with_null():
    asking = catalog("ana", impersonator="trino")
    assert trusted.restricted(asking, "sales", "orders") is True
    assert trusted.required(asking, "sales", "orders", METADATA.schema()) == {
        "required-column-projections": [{"field-id": 2, "action": "replace-with-null"}]}
    assert trusted.required(asking, "sales", "customers", METADATA.schema()) is None


def test_a_trusted_engine_acting_as_itself_is_judged_as_itself():
    asking = catalog("trino")
    assert trusted.engine(asking) == "trino"
    assert trusted.restricted(asking, "sales", "orders") is True  # trino is in analysts here


def test_without_trusted_engines_nobody_loads_a_restricted_table():
    with pytest.raises(errors.Forbidden):
        trusted.restricted(catalog("ana", impersonator="trino", engines=()), "sales", "orders")


async def test_a_commit_to_a_table_with_denied_columns_is_refused_before_hms_for_an_untrusted_user():
    # A commit answers the whole metadata, as a load does: without this check a user allowed to
    # update the table would read its full schema from the commit's answer.
    from gateway.policy.model import expand_accesses as accesses

    engine = PolicyEngine([
        *POLICIES,
        Policy(3, "analysts update sales", (ResourceSpec(("sales",)), ResourceSpec(("*",)), ResourceSpec(("*",))),
               allow=(PolicyItem(accesses(["update", "alter"]), groups=frozenset({"analysts"})),)),
    ])
    assert await _commit_refused_before_hms(engine, "orders", "ana may not read every column of sales.orders") == []


async def _commit_refused_before_hms(engine: PolicyEngine, table: str, match: str) -> list[str]:
    """ana's commit of a property to ``sales.<table>``: 403 matching ``match``; the HMS calls made
    but the read of the table the route's rules judge (the row filter and masks read its
    columns): no lock, no file, no alter."""
    from gateway.iceberg.hive_tables import new_table
    from gateway.iceberg.paths import RouteMatch
    from gateway.iceberg.routes import answer
    from gateway.thrift.schema import load_schema
    from gateway.upstream.metastore import idl_module

    idl = idl_module(load_schema())
    calls: list[str] = []

    class Refusing:
        identity = Identity(user="ana", principal=None, groups=frozenset({"analysts"}))

        async def get_table(self, db, name):
            return new_table(idl, db, name, "etl", METADATA, f"{METADATA.location}/metadata/1.metadata.json", True)

        def __getattr__(self, name):
            calls.append(name)
            raise AssertionError(f"HMS was called: {name}")

    asking = Catalog(Refusing(), CatalogView(engine, "ana", {"analysts"}), files=None,
                     service=ServiceState(trusted_engines=frozenset({"trino"})), user="ana")
    body = b'{"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}'
    with pytest.raises(errors.Forbidden, match=match):
        await answer(asking, RouteMatch("updateTable", "sales", table), None, body)
    return calls


# --- row filters and masks (issue 39) --------------------------------------------------------

from gateway.policy.model import DataMaskItem, POLICY_DATAMASK, POLICY_ROWFILTER, RowFilterItem  # noqa: E402

ANALYSTS = PolicyItem(frozenset({"select"}), groups=frozenset({"analysts"}))
FILTERED_POLICIES = [
    *POLICIES,
    Policy(4, "EU rows", (ResourceSpec(("sales",)), ResourceSpec(("eu",))), policy_type=POLICY_ROWFILTER,
           row_filter=(RowFilterItem(ANALYSTS, "region = 'EU'"),)),
    Policy(5, "names hashed", (ResourceSpec(("sales",)), ResourceSpec(("eu",)), ResourceSpec(("name",))),
           policy_type=POLICY_DATAMASK, data_mask=(DataMaskItem(ANALYSTS, "MASK_HASH"),)),
    Policy(6, "shuffled", (ResourceSpec(("sales",)), ResourceSpec(("odd",)), ResourceSpec(("name",))),
           policy_type=POLICY_DATAMASK, data_mask=(DataMaskItem(ANALYSTS, "SHUFFLE"),)),
]
FILTERED = PolicyEngine(FILTERED_POLICIES)


def filtered_catalog(user: str, impersonator: str | None = None) -> Catalog:
    identity = Identity(user=user, principal=None, groups=frozenset({"analysts"}), impersonator=impersonator)
    return Catalog(SimpleNamespace(identity=identity), CatalogView(FILTERED, user, {"analysts"}), files=None,
                   service=ServiceState(trusted_engines=frozenset({"trino"})), user=user)


def test_a_filtered_table_is_refused_to_an_untrusted_caller_saying_why():
    with pytest.raises(errors.Forbidden) as refused:
        trusted.filtered(filtered_catalog("ana"), "sales", "eu")
    message = refused.value.message
    assert "row filter \"region = 'EU'\" (policy 4)" in message and "mask MASK_HASH on name (policy 5)" in message
    assert "trusted engine" in message and "ana is not one" in message
    assert not trusted.filtered(filtered_catalog("ana"), "sales", "orders").applies


def test_a_trusted_engine_gets_the_filter_and_masks_as_read_restrictions():
    from gateway.iceberg.objects import TABLE
    from tests.support.iceberg.spec import check_read_restrictions

    asking = filtered_catalog("ana", impersonator="trino")
    assert trusted.filtered(asking, "sales", "eu").applies
    metadata = METADATA.model_copy(update={"schemas": [Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False),
        NestedField(3, "region", StringType(), required=False))]})
    answer = trusted.stated(asking, "sales", "eu", TABLE.result("m.json", metadata, {"k": "v"}))
    ref = {"type": "reference", "id": 3}
    assert answer.read_restrictions == {
        "required-row-filter": {"type": "and", "left": {"type": "not-null", "child": ref},
                                "right": {"type": "eq", "left": ref, "right": {"type": "literal", "value": "EU"}}},
        "required-column-projections": [{"field-id": 2, "action": "sha-256-global"}]}
    check_read_restrictions(answer.read_restrictions)
    assert answer.config == {"k": "v", "scan-planning-mode": "server"}
    assert asking.view.restricting == {4, 5}  # for the audit line
    written = json.loads(answer.model_dump_json(by_alias=True))
    assert written["read-restrictions"] == answer.read_restrictions and "storage-credentials" not in written
    plain = TABLE.result("m.json", metadata)
    assert trusted.stated(asking, "sales", "customers", plain) is plain
    assert "read-restrictions" not in json.loads(plain.model_dump_json(by_alias=True))


def test_a_filter_that_cannot_be_stated_refuses_a_load_and_binds_a_changes_answer_to_no_rows():
    from gateway.iceberg.objects import TABLE

    asking = filtered_catalog("ana", impersonator="trino")
    without_region = TABLE.result("m.json", METADATA)  # the filter's column is not in the schema
    with pytest.raises(errors.Forbidden, match=r"policy 4: 'region' cannot be stated.*current schema has no such column"):
        trusted.stated(asking, "sales", "eu", without_region)
    assert trusted.stated(asking, "sales", "eu", without_region, written=True).read_restrictions == {
        "required-row-filter": False}


def test_the_etag_fingerprint_changes_with_the_policy():
    from gateway.iceberg.hive_tables import new_table
    from gateway.thrift.schema import load_schema
    from gateway.upstream.metastore import idl_module

    hive = new_table(idl_module(load_schema()), "sales", "eu", "etl", METADATA, "m.json", True)
    filtered = trusted.fingerprint(filtered_catalog("ana", impersonator="trino"), "sales", "eu", hive)
    assert filtered and trusted.fingerprint(catalog("ana", impersonator="trino"), "sales", "eu", hive) == ""
    assert trusted.fingerprint(catalog("ana", impersonator="trino"), "sales", "orders", hive) not in ("", filtered)


def test_a_mask_without_an_expression_fails_closed_even_for_a_trusted_engine():
    from gateway.policy.model import HIVE_MASK_TYPES, MaskType, PolicySet

    # a type of a file's own service definition without a transformer (Ranger's test service def has SHUFFLE)
    types = {**HIVE_MASK_TYPES, "SHUFFLE": MaskType("SHUFFLE", "Shuffle")}
    engine = PolicyEngine(PolicySet((*POLICIES, *[p for p in FILTERED_POLICIES if p.id == 6]), mask_types=types))
    identity = Identity(user="ana", principal=None, groups=frozenset({"analysts"}), impersonator="trino")
    asking = Catalog(SimpleNamespace(identity=identity), CatalogView(engine, "ana", {"analysts"}), files=None,
                     service=ServiceState(trusted_engines=frozenset({"trino"})), user="ana")
    with pytest.raises(errors.Forbidden, match="no expression this catalog can state"):
        trusted.filtered(asking, "sales", "odd")


async def test_a_commit_to_a_filtered_table_is_refused_before_hms_for_an_untrusted_user():
    engine = PolicyEngine([
        *[p for p in FILTERED_POLICIES if p.id == 4],
        Policy(3, "analysts change sales", (ResourceSpec(("sales",)), ResourceSpec(("*",)), ResourceSpec(("*",))),
               allow=(PolicyItem(expand_accesses(["select", "update", "alter"]), groups=frozenset({"analysts"})),)),
    ])
    assert await _commit_refused_before_hms(engine, "eu", "row filter") == []


# --- every route that hands out storage refuses what a load could not state -------------------

UNSTATABLE = PolicyEngine([
    *POLICIES,
    Policy(7, "own rows", (ResourceSpec(("sales",)), ResourceSpec(("mine",))), policy_type=POLICY_ROWFILTER,
           row_filter=(RowFilterItem(ANALYSTS, "owner = current_user()"),)),
    Policy(8, "EU rows", (ResourceSpec(("sales",)), ResourceSpec(("eu",))), policy_type=POLICY_ROWFILTER,
           row_filter=(RowFilterItem(ANALYSTS, "region = 'EU'"),)),
])


class CountingCatalog(Catalog):
    """A catalog whose metadata reads are counted (the table's schema: id, owner, region)."""

    reads = 0

    async def metadata(self, hive_table, object_type=None):
        type(self).reads += 1
        return "m.json", METADATA.model_copy(update={"schemas": [Schema(
            NestedField(1, "id", LongType(), required=False), NestedField(2, "owner", StringType(), required=False),
            NestedField(3, "region", StringType(), required=False))]})


def _hive(name: str, metadata: str = "file:///w/sales/t/metadata/1.json"):
    return SimpleNamespace(dbName="sales", tableName=name, parameters={"metadata_location": metadata},
                           sd=SimpleNamespace(cols=[SimpleNamespace(name=c, type="string") for c in ("id", "owner", "region")]))


async def test_a_trusted_engine_gets_no_storage_access_to_a_table_whose_restrictions_cannot_be_stated():
    identity = Identity(user="ana", principal=None, groups=frozenset({"analysts"}), impersonator="trino")
    asking = CountingCatalog(SimpleNamespace(identity=identity), CatalogView(UNSTATABLE, "ana", {"analysts"}),
                             files=None, service=ServiceState(trusted_engines=frozenset({"trino"})), user="ana")
    CountingCatalog.reads = 0
    for _ in range(3):  # the signer asks per request: the verdict is kept, the metadata read once
        with pytest.raises(errors.Forbidden, match="current_user"):
            await trusted.statable(asking, "sales", "mine", _hive("mine"))
    assert CountingCatalog.reads == 1
    await trusted.statable(asking, "sales", "eu", _hive("eu"))  # a filter that can be stated passes
    await trusted.statable(asking, "sales", "customers", _hive("customers"))  # nothing restricts: nothing read
    assert CountingCatalog.reads == 2
    with pytest.raises(errors.Forbidden):  # a new metadata file is judged again
        await trusted.statable(asking, "sales", "mine", _hive("mine", "file:///w/sales/t/metadata/2.json"))
    assert CountingCatalog.reads == 3
