"""Trusted engines on the Iceberg REST catalog (:mod:`gateway.iceberg.trusted`): a table with
columns denied to the user loads only for a trusted engine (the ``doAs`` impersonator, else the
user), with the authorized columns in ``config``; anyone else gets 403 saying why."""

from __future__ import annotations

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


def test_a_trusted_engine_gets_the_authorized_columns_in_schema_order():
    asking = catalog("ana", impersonator="trino")
    assert trusted.restricted(asking, "sales", "orders") is True
    assert trusted.authorized_columns(asking, "sales", "orders", METADATA) == {"authorized-columns": "id,total"}


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


def test_a_trusted_engine_gets_the_filter_and_masks_in_config():
    asking = filtered_catalog("ana", impersonator="trino")
    found = trusted.filtered(asking, "sales", "eu")
    assert trusted.restrictions_config(found) == {
        "row-filter": "region = 'EU'", "row-filter-policy-id": "4",
        "column-masks": '{"name":{"expression":"mask_hash(name)","mask-type":"MASK_HASH","policy-id":5}}'}
    assert asking.view.restricting == {4, 5}  # for the audit line


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
