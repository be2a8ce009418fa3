"""One user's view of the catalog (``CatalogView``): access types, visibility, listings, kept
columns and the counts of what it hid; and the Thrift policy step decoding a call's arguments
once per request, whichever of its hooks need them."""

from __future__ import annotations

import asyncio

import pytest

from gateway.observability.audit import AuditEvent
from gateway.thrift import objects as thrift_objects
from gateway.hms_thrift import exchange as exchange_module
from gateway.hms_thrift.exchange import ThriftExchange, call_args
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.steps import catalog_policy
from gateway.policy import CatalogView, PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import TType, encode_binary_call, read_message_header
from tests.unit.test_policy_partition_columns import SCHEMA, T, partition


def res(*values: str) -> ResourceSpec:
    return ResourceSpec(tuple(values))


ENGINE = PolicyEngine([
    Policy(1, "sales read", (res("sales"), res("*"), res("*")),
           allow=(PolicyItem(expand_accesses(["select"]), groups=frozenset({"analysts"})),)),
    Policy(2, "sales owners", (res("sales"), res("orders")),
           allow=(PolicyItem(expand_accesses(["alter", "drop"]), frozenset({"ann"})),)),
    Policy(3, "no ssn", (res("sales"), res("customers"), res("ssn")),
           deny=(PolicyItem(frozenset({"select"}), groups=frozenset({"analysts"})),)),
    Policy(4, "db", (res("db"), res("*"), res("*")),
           allow=(PolicyItem(frozenset({"select"}), frozenset({"ann"})),)),
    Policy(5, "db no ssn", (res("db"), res("t"), res("ssn")),
           deny=(PolicyItem(frozenset({"select"}), frozenset({"ann"})),)),
])


def test_may_answers_ranger_access_types_and_any():
    ann = CatalogView(ENGINE, "ann", ["analysts"])
    assert ann.may("", "sales") and ann.may("", "SALES", "Orders")  # _any, case-insensitive
    assert ann.may("alter", "sales", "orders") and ann.may("drop", "sales", "orders")
    assert not ann.may("create", "sales", "orders") and not ann.may("update", "sales", "orders")
    assert not ann.may("", "hr") and not ann.may("select", "hr", "pay")
    bob = CatalogView(ENGINE, "bob")
    assert not bob.may("", "sales") and not bob.may("alter", "sales", "orders")
    with pytest.raises(ValueError):
        ann.may("peek", "sales", "orders")


def test_listings_keep_visible_names_in_order_and_count_the_rest():
    view = CatalogView(ENGINE, "ann", frozenset({"analysts"}))
    assert view.visible_databases(["hr", "sales", "db", "tmp"]) == ["sales", "db"]
    assert view.visible_tables("sales", ["orders", "customers"]) == ["orders", "customers"]
    assert view.hidden == 2
    assert view.listing_verdict("hr") is False  # no name of hr's tables can show
    assert view.listing_verdict("sales") is None  # policy 2 names one table: it depends


def test_columns_keep_what_the_user_may_select_and_count_distinct_hidden_columns():
    view = CatalogView(ENGINE, "ann", ["analysts"])
    assert view.keep("sales", "orders") is None and view.all_columns("sales", "orders")
    assert view.columns("Sales", "Customers", ["name", "SSN", "since"]) == ["name", "since"]
    assert view.columns("sales", "customers", ["ssn"]) == []  # the same column again
    assert not view.all_columns("sales", "customers")
    assert view.hidden_columns == {("sales", "customers", "ssn")}
    assert CatalogView(ENGINE, "bob").columns("sales", "orders", ["a"]) == []


def test_without_a_policy_everything_is_visible_and_nothing_hidden():
    view = CatalogView(None, "anyone")
    assert view.may("", "hr") and view.may("drop", "hr", "pay") and view.decide("select", "hr") is None
    assert view.visible_databases(["hr"]) == ["hr"] and view.listing_verdict() is True
    assert view.keep("hr", "pay") is None and view.columns("hr", "pay", ["ssn"]) == ["ssn"]
    assert view.hidden == 0 and not view.hidden_columns


# --- a call's arguments, decoded once per request ---------------------------------------------

STEP = catalog_policy.CatalogPolicy("topo", "svc", ENGINE, SCHEMA)
ANN = Identity("ann", Principal("ann", "basic"))


def _request(name: str, fields: list, result) -> tuple[ThriftExchange, ThriftReply]:
    call = encode_binary_call(name, 7, fields)
    exchange = ThriftExchange(None, AuditEvent("r", None),  # type: ignore[arg-type]
                        identity=ANN, header=read_message_header(call)[0], call=call)
    reply = ThriftReply(thrift_objects.encode_reply(name, 7, result), SCHEMA)
    return exchange, reply


async def _through_the_step(exchange: ThriftExchange, reply: ThriftReply) -> None:
    """The step's hooks in the order the Thrift service calls them."""
    await STEP.on_call(exchange)
    if exchange.header.name in STEP.reply_methods and STEP.wants_reply(exchange):  # type: ignore[union-attr]
        await STEP.on_reply(exchange, reply)


def test_each_request_decodes_its_arguments_once(monkeypatch):
    decodes: list[str] = []
    real = exchange_module.decode_args

    def counted(call, method):
        decodes.append(method.name)
        return real(call, method)
    monkeypatch.setattr(exchange_module, "decode_args", counted)
    table = T.Table("t", "db", "ann", 1, 0, 0, partition(0).sd, [], {}, tableType="MANAGED_TABLE")
    db_t = [(1, TType.STRING, "db"), (2, TType.STRING, "t")]
    requests = {
        "get_table": _request("get_table", db_t, SCHEMA.methods["get_table"].result_class(success=table)),
        "get_fields": _request("get_fields", db_t, SCHEMA.methods["get_fields"].result_class(
            success=list(partition(0).sd.cols))),
        "get_partitions": _request("get_partitions", [*db_t, (3, TType.I16, -1)],
                                   SCHEMA.methods["get_partitions"].result_class(success=[partition(0)])),
        "get_all_tables": _request("get_all_tables", [(1, TType.STRING, "db")],
                                   SCHEMA.methods["get_all_tables"].result_class(success=["t", "u"])),
    }
    for name, (exchange, reply) in requests.items():
        decodes.clear()
        asyncio.run(_through_the_step(exchange, reply))
        assert decodes == [name], f"{name} decoded its arguments {len(decodes)} times"
    # the reads' replies were filtered from those single decodes
    assert requests["get_table"][0].event.policy_columns_hidden == 1
    assert [f.name for f in requests["get_fields"][1].result.success] == ["x", "y"]


def test_a_step_that_replaces_the_call_drops_the_decoded_arguments():
    from gateway.hms_thrift.steps.ownership import OwnershipAssertion
    from gateway.providers.ownership import OwnerAssertion

    method = SCHEMA.methods["create_database"]
    message = bytearray(thrift_objects.encode_reply(
        "create_database", 2, method.args_class(database=T.Database("sales", "", "file:/w", {}))))
    message[3] = 1  # CALL
    exchange = ThriftExchange(None, AuditEvent("r", None),  # type: ignore[arg-type]
                        identity=ANN, header=read_message_header(bytes(message))[0], call=bytes(message))
    assert call_args(exchange, method).database.ownerName is None
    OwnershipAssertion(OwnerAssertion(SCHEMA)).on_call(exchange)
    assert exchange.args is None
    assert call_args(exchange, method).database.ownerName == "ann"


def test_a_foreign_key_goes_when_either_of_its_columns_is_hidden():
    """Both ends judged, whatever the table the call named: sales.orders keeps every column,
    the key's other end is the hidden sales.customers.ssn."""
    from gateway.policy.columns import filter_result

    keys = SCHEMA.methods["get_foreign_keys"].result_class.thrift_spec[0][2]
    key = T.SQLForeignKey
    shown = key(pktable_db="sales", pktable_name="orders", pkcolumn_name="id",
                fktable_db="sales", fktable_name="customers", fkcolumn_name="order_id")
    hidden = key(pktable_db="sales", pktable_name="orders", pkcolumn_name="id",
                 fktable_db="sales", fktable_name="customers", fkcolumn_name="ssn")
    view = CatalogView(ENGINE, "ann", ["analysts"])
    response = filter_result(view, keys(foreignKeys=[shown, hidden]), ("sales", "orders"))
    assert response.foreignKeys == [shown]
    assert view.hidden_columns == {("sales", "customers", "ssn")}
